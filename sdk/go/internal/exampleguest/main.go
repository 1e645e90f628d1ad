// Command exampleguest is a small flowhost computation used to test that
// guests build, and by host tests as a real module: it counts each key's
// messages, emits the running count on "counts", and when the key's window
// (parameter "window", a duration) has passed since its first message,
// emits the total on "totals" and forgets the key.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter.wasm ./sdk/go/internal/exampleguest
package main

import (
	"strconv"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var window time.Duration

func init() {
	flowhost.Register(flowhost.Computation{
		Init: func(p flowhost.Params) error {
			d, err := p.Duration("window")
			if err != nil {
				return err
			}
			window = d
			flowhost.Logf(flowhost.LevelDebug, "counting over windows of %s", d)
			return nil
		},
		Process: process,
	})
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		n := 0
		if s, ok := k.State(); ok {
			var err error
			if n, err = strconv.Atoi(string(s)); err != nil {
				k.Fail(err)
				continue
			}
		}
		for range k.Timers() {
			k.Emit("totals", []byte(strconv.Itoa(n)))
			k.DeleteState()
			n = 0
		}
		for m := range k.Messages() {
			if n == 0 {
				k.SetTimer(m.EventTimestamp + int64(window))
			}
			n++
			k.Emit("counts", []byte(strconv.Itoa(n)))
		}
		if n > 0 {
			k.SetState([]byte(strconv.Itoa(n)))
		}
	}
	return nil
}

func main() {}
