//go:build wasip1

// Command poison-tally is the computation of flowhost's poison-record
// test (examples/cli_poison_test.go): a transform that shows whether one
// bad record costs more than itself.
//
// Its input payloads are {"user":"u7","seq":42}, grouped by user. Per key
// it keeps the number of messages counted so far in its state, and emits
// for each message
//
//	{"user":"u7","seq":42,"n":5}
//
// n being the count including this message: an output shows the state
// its message saw, so a message lost, doubled or applied out of order
// shows as a wrong n.
//
// Two payloads misbehave on purpose. "trap": true executes the wasm
// unreachable instruction: the call traps, whatever the other records of
// the batch (what a bug in a guest does). "fail_key": true fails the key
// with an error (Key.Fail), the way a guest refuses a record it cannot
// handle: the host drops what the batch did for the key.
package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

func init() {
	flowhost.Register(flowhost.Computation{Init: initialize, Process: process})
}

func main() {}

// unreachable executes the wasm unreachable instruction (trap_wasm.s).
func unreachable()

var output string

func initialize(p flowhost.Params) error {
	outs := p.OutputStreams()
	if len(outs) != 1 {
		return fmt.Errorf("poison-tally writes exactly one output stream; the pipeline declares %d", len(outs))
	}
	output = outs[0]
	return nil
}

type input struct {
	User    json.RawMessage `json:"user"`
	Seq     *int64          `json:"seq"`
	Trap    bool            `json:"trap"`
	FailKey bool            `json:"fail_key"`
}

type record struct {
	User json.RawMessage `json:"user"`
	Seq  int64           `json:"seq"`
	N    int64           `json:"n"`
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		var n int64
		if raw, ok := k.State(); ok {
			var err error
			if n, err = strconv.ParseInt(string(raw), 10, 64); err != nil {
				k.Fail(fmt.Errorf("state of key %s: %w", k.Key(), err))
				continue
			}
		}
		for m := range k.Messages() {
			var in input
			if err := json.Unmarshal(m.Payload, &in); err != nil || in.Seq == nil {
				k.Fail(fmt.Errorf("message %s: want {\"user\":...,\"seq\":N}, got %s", m.ID, m.Payload))
				break
			}
			if in.Trap {
				unreachable()
			}
			if in.FailKey {
				k.Fail(fmt.Errorf("seq %d: refused on purpose (fail_key)", *in.Seq))
				break
			}
			n++
			out, err := json.Marshal(record{User: in.User, Seq: *in.Seq, N: n})
			if err != nil {
				return err
			}
			k.Emit(output, out)
		}
		k.SetState(strconv.AppendInt(nil, n, 10))
	}
	return nil
}
