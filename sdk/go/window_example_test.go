package flowhost_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// A windowed count: records go into 10-second tumbling windows, the
// window's timer closes it, and a record for a window already closed goes
// to the late stream.
func ExampleWindows() {
	counts := flowhost.NewWindows(flowhost.Tumbling(10*time.Second), flowhost.Aggregator{
		Init: func() []byte { return []byte("0") },
		Add: func(acc []byte, _ flowhost.Message) []byte {
			n, _ := strconv.Atoi(string(acc))
			return strconv.AppendInt(nil, int64(n+1), 10)
		},
		Result: func(w flowhost.Window, acc []byte) []byte {
			return fmt.Appendf(nil, "%s [%ds,%ds) count=%s", w.Key, w.Start/1e9, w.End/1e9, acc)
		},
	}, "counts", "late-records")
	c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			if err := counts.Process(k); err != nil {
				return nil // the key is failed: its inputs go to dead letters
			}
		}
		return nil
	}}
	run := func(k abi.RequestKey) abi.ResponseKey {
		resp, err := flowhost.Run(c, nil, &abi.Request{ABI: abi.Version, Kind: abi.KindTransform, Keys: []abi.RequestKey{k}})
		if err != nil {
			panic(err)
		}
		return resp.Keys[0]
	}
	// Two records in [0s, 10s): the window's timer is set for its end.
	first := run(abi.RequestKey{Key: "sensor-1", Messages: []abi.Message{
		{ID: "a", Stream: "in", EventTimestamp: 1e9, Payload: []byte("x")},
		{ID: "b", Stream: "in", EventTimestamp: 4e9, Payload: []byte("y")},
	}})
	fmt.Println("timer at", first.TimersSet[0].TriggerTimestamp/1e9, "s")
	// The host fires the timer, then a record of the closed window arrives.
	second := run(abi.RequestKey{Key: "sensor-1", State: first.State,
		Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: 10e9, EventTimestamp: 10e9}},
		Messages: []abi.Message{{ID: "c", Stream: "in", EventTimestamp: 9e9, Payload: []byte("too late")}},
	})
	for _, e := range second.Emits {
		fmt.Printf("%s: %s\n", e.Stream, e.Payload)
	}
	// Output:
	// timer at 10 s
	// counts: sensor-1 [0s,10s) count=2
	// late-records: too late
}
