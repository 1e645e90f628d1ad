package flowtest_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/flowtest"
)

// minuteCount is a native computation: it counts each key's messages in
// one-minute windows of event time, in its state, and emits the count
// when a timer at the window's end fires.
func minuteCount(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		n, _ := strconv.Atoi(string(k.State))
		rk := abi.ResponseKey{Key: k.Key}
		for _, t := range k.Timers {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "counts",
				Payload: fmt.Appendf(nil, `{"window_end":%q,"count":%d}`, time.Unix(0, t.TriggerTimestamp).UTC().Format(time.TimeOnly), n)})
			n = 0
		}
		for _, m := range k.Messages {
			n++
			end := (m.EventTimestamp/int64(time.Minute) + 1) * int64(time.Minute)
			rk.TimersSet = append(rk.TimersSet, abi.Timer{TriggerTimestamp: end})
		}
		if n == 0 {
			rk.StateOp = abi.StateDelete
		} else {
			rk.StateOp, rk.State = abi.StateReplace, []byte(strconv.Itoa(n))
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
}

const pipeline = `
name: clicks
sources:
  - {name: clicks-in, type: file, stream: clicks, file: {path: unused.jsonl}, watermark: {out_of_orderness_bound: 0s}}
computations:
  - {name: per-user, plugin: minute-count, kind: transform, group_by: [user], input_streams: [clicks], output_streams: [counts]}
`

// at is 10:00 and s seconds on a test day, in Unix nanoseconds.
func at(s int) int64 {
	return time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(s) * time.Second).UnixNano()
}

// ExampleDriver pushes records, reads a key's state and the pending
// timers, and advances the watermark to fire them.
func ExampleDriver() {
	ctx := context.Background()
	d, err := flowtest.NewFromYAML(ctx, pipeline, flowtest.WithComputation("per-user", compute.Native(minuteCount)))
	if err != nil {
		panic(err)
	}
	defer d.Close()

	for _, s := range []int{1, 5, 20} {
		if err := d.Push("clicks-in", flowtest.Record{Event: at(s), Payload: []byte(`{"user":"ann"}`)}); err != nil {
			panic(err)
		}
	}
	if err := d.Settle(ctx); err != nil {
		panic(err)
	}
	key, _ := d.KeyOf("per-user", []byte(`{"user":"ann"}`))
	state, _, _ := d.State("per-user", key)
	timers, _ := d.Timers("per-user")
	fmt.Printf("state %s, %d pending timer at %s, %d outputs\n", state, len(timers),
		time.Unix(0, timers[0].Trigger).UTC().Format(time.TimeOnly), len(d.Outputs("counts")))

	// The watermark passes the window's end: its timer fires.
	if err := d.AdvanceWatermark(ctx, "clicks-in", at(60)); err != nil {
		panic(err)
	}
	timers, _ = d.Timers("per-user")
	_, found, _ := d.State("per-user", key)
	fmt.Println(d.Payloads("counts"), len(timers), "timers, state kept:", found)
	// Output:
	// state 3, 1 pending timer at 10:01:00, 0 outputs
	// [{"window_end":"10:01:00","count":3}] 0 timers, state kept: false
}

// ExampleDriver_Finish ends the inputs: every pending timer fires, as at
// the end of a file source.
func ExampleDriver_Finish() {
	ctx := context.Background()
	d, err := flowtest.NewFromYAML(ctx, pipeline, flowtest.WithComputation("per-user", compute.Native(minuteCount)))
	if err != nil {
		panic(err)
	}
	defer d.Close()
	_ = d.Push("clicks-in",
		flowtest.Record{Event: at(1), Payload: []byte(`{"user":"ann"}`)},
		flowtest.Record{Event: at(70), Payload: []byte(`{"user":"bob"}`)},
		flowtest.Record{Event: at(75), Payload: []byte(`{"user":"ann"}`)})
	if err := d.Finish(ctx); err != nil {
		panic(err)
	}
	for _, p := range d.Payloads("counts") {
		fmt.Println(p)
	}
	// Output:
	// {"window_end":"10:01:00","count":1}
	// {"window_end":"10:02:00","count":1}
	// {"window_end":"10:02:00","count":1}
}
