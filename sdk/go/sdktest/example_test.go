package sdktest_test

import (
	"fmt"
	"strconv"

	flowhost "github.com/flowhost/flowhost/sdk/go"
	"github.com/flowhost/flowhost/sdk/go/sdktest"
)

// counter counts each key's messages in its state and emits the count;
// a timer's firing emits "flush" with the count and deletes the state.
var counter = flowhost.Computation{Process: func(b *flowhost.Batch) error {
	for k := range b.Keys() {
		n := 0
		if s, ok := k.State(); ok {
			n, _ = strconv.Atoi(string(s))
		}
		for t := range k.Timers() {
			k.Emit("out", fmt.Appendf(nil, "flush %s=%d", k.Key(), n), flowhost.WithParents(t.Input))
			n = 0
		}
		for m := range k.Messages() {
			n++
			k.Emit("out", fmt.Appendf(nil, "%s=%d", k.Key(), n), flowhost.WithParents(m.Input))
			k.SetTimer(100)
		}
		if n == 0 {
			k.DeleteState()
		} else {
			k.SetState([]byte(strconv.Itoa(n)))
		}
	}
	return nil
}}

// ExampleProcess passes one batch through a computation and reads what
// it emitted and the state it left.
func ExampleProcess() {
	b := sdktest.NewBatch().
		State("a", []byte("4")).
		Message("a", "in", 10, []byte(`x`)).
		Message("b", "in", 11, []byte(`y`))
	resp, err := sdktest.Process(counter, sdktest.Init{}, b)
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Emitted("out"))
	fmt.Println(string(resp.Key("a").State), resp.Key("a").TimersSet[0].TriggerTimestamp)
	// Output:
	// [a=5 b=1]
	// 5 100
}

// ExampleSession carries state and timers from batch to batch: the timer
// fires once the watermark reaches it.
func ExampleSession() {
	s := sdktest.NewSession(counter, sdktest.Init{})
	for _, wm := range []int64{50, 99, 100} {
		b := sdktest.NewBatch().Watermarks(wm, wm)
		if wm < 100 {
			b.Message("a", "in", wm, nil)
		}
		resp, err := s.Process(b)
		if err != nil {
			panic(err)
		}
		st, _ := s.State("a")
		fmt.Printf("watermark %d: %v, state %q, timers %v\n", wm, resp.Emitted("out"), st, s.Timers("a"))
	}
	// Output:
	// watermark 50: [a=1], state "1", timers [100]
	// watermark 99: [a=2], state "2", timers [100]
	// watermark 100: [flush a=2], state "", timers []
}
