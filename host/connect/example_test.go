package connect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/flowhost/flowhost/ordering"
)

func ExampleParseLine() {
	rec, err := ParseLine([]byte(`{"write_ts":1714557600000000000,"payload":{"order_id":"o-17"}}`))
	fmt.Println(rec.Write, rec.HasEvent, string(rec.Payload), err)
	_, err = ParseLine([]byte(`{"payload":1,"evnt_ts":5}`))
	fmt.Println(err)
	// Output:
	// 1714557600000000000 false {"order_id":"o-17"} <nil>
	// column 14: unknown field "evnt_ts" (want write_ts, event_ts, payload, id, parents)
}

func ExamplePartitioner() {
	p, _ := NewPartitioner(8, []string{"customer.id"})
	a, _ := p.Partition([]byte(`{"customer":{"id":42},"n":1}`))
	b, _ := p.Partition([]byte(`{"n":2,"customer":{"id":42.0}}`))
	_, err := p.Partition([]byte(`{"n":3}`))
	fmt.Println(a == b)
	fmt.Println(err)
	// Output:
	// true
	// payload lacks group_by field "customer.id"
}

func ExampleWriterSink() {
	sink, _ := NewWriterSink(os.Stdout, FormatText)
	defer sink.Close()
	id := ordering.SourceID("orders", 0, 17)
	msg := &ordering.Message{
		ID: id, Stream: "orders", Key: `["o-17"]`,
		Time:    ordering.Timestamps{Event: time.Date(2024, 5, 1, 10, 0, 0, 250e6, time.UTC).UnixNano()},
		Payload: []byte(`{"order_id": "o-17", "total": 9.5}`),
	}
	_ = sink.Write(context.Background(), []SinkRecord{NewSinkRecord(msg)})
	// Output:
	// orders  ["o-17"]  2024-05-01T10:00:00.250Z  orders/p0:17  {"order_id":"o-17","total":9.5}
}

func ExampleDeadLetter() {
	d := NewDeadLetter(os.Stdout)
	d.now = func() time.Time { return time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC) }
	_ = d.Reject(Rejection{Origin: "orders.jsonl:3:1", Stage: StageIngest, Err: errors.New("invalid JSON"), Record: []byte("oops")})
	fmt.Println(d.Count())
	// Output:
	// {"time":"2024-05-01T10:00:00Z","origin":"orders.jsonl:3:1","stage":"ingest","error":"invalid JSON","record":"oops","record_encoding":"text"}
	// 1
}

func ExampleGenerator() {
	g, _ := NewGenerator(GeneratorConfig{
		Stream: "clicks", Partitions: 2, Seed: 7, Count: 2, Keys: 3, PayloadBytes: 8,
		Start: time.Unix(0, 0), EventLag: time.Second,
	})
	_ = g.Run(context.Background(), func(r Record) error {
		fmt.Println(r.Partition, r.Write, time.Duration(r.Write-r.Event), string(r.Payload))
		return nil
	})
	// Output:
	// 0 0 623.621377ms {"key":"k1","seq":0,"filler":"qwQYXDyU"}
	// 1 1000000 833.922193ms {"key":"k2","seq":1,"filler":"aB3XpIXq"}
}
