package flowhost_test

import (
	"bytes"
	"fmt"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// upper is a computation: in a guest it would be registered from an init
// function with flowhost.Register(upper).
var upper = flowhost.Computation{Process: func(b *flowhost.Batch) error {
	for k := range b.Keys() {
		for m := range k.Messages() {
			k.Emit("upper", bytes.ToUpper(m.Payload))
		}
	}
	return nil
}}

// Run tests a computation without WebAssembly: the request goes through
// the same envelopes as in a guest.
func ExampleRun() {
	req := &abi.Request{ABI: abi.Version, Computation: "upper", Kind: abi.KindTransform, Keys: []abi.RequestKey{
		{Key: "user-1", Messages: []abi.Message{
			{ID: "1-in:0", Stream: "in", Payload: []byte("hello")},
			{ID: "1-in:1", Stream: "in", Payload: []byte("world")},
		}},
	}}
	init := &abi.Init{ABI: abi.Version, Computation: "upper", Kind: abi.KindTransform, OutputStreams: []string{"upper"}}
	resp, err := flowhost.Run(upper, init, req)
	if err != nil {
		panic(err)
	}
	for _, e := range resp.Keys[0].Emits {
		fmt.Printf("%s %s parents=%v\n", e.Stream, e.Payload, e.Parents)
	}
	// Output:
	// upper HELLO parents=[0]
	// upper WORLD parents=[1]
}

// A counter keeps its count in the key's state and reports it once per
// key and batch, derived from every input of the key.
func ExampleKey_SetState() {
	count := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			n := 0
			if s, ok := k.State(); ok {
				n = int(s[0])
			}
			for range k.Messages() {
				n++
			}
			k.SetState([]byte{byte(n)})
			k.Emit("counts", fmt.Appendf(nil, "%s=%d", k.Key(), n))
		}
		return nil
	}}
	req := &abi.Request{ABI: abi.Version, Computation: "count", Kind: abi.KindTransform, Keys: []abi.RequestKey{
		{Key: "a", State: []byte{40}, Messages: []abi.Message{{ID: "1", Stream: "in"}, {ID: "2", Stream: "in"}}},
	}}
	resp, err := flowhost.Run(count, nil, req)
	if err != nil {
		panic(err)
	}
	k := resp.Keys[0]
	fmt.Printf("%s state_op=%s state=%v parents=%v\n", k.Emits[0].Payload, k.StateOp, k.State, k.Emits[0].Parents)
	// Output:
	// a=42 state_op=replace state=[42] parents=[]
}
