package flowhost_test

import (
	"fmt"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// A running total per key and the last three payloads, kept in typed
// state cells and saved once per key.
func ExampleValue() {
	process := func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			total := flowhost.Value[int](k, "total", flowhost.JSON)
			recent := flowhost.List[string](k, "recent", flowhost.JSON)
			n, _, err := total.Get()
			if err != nil {
				k.Fail(err) // names the cell, e.g. `state cell "total": is a list, used as a value`
				continue
			}
			for m := range k.Messages() {
				n++
				if err := recent.Append(string(m.Payload)); err != nil {
					k.Fail(err)
				}
			}
			if err := total.Set(n); err != nil {
				k.Fail(err)
			}
			if err := flowhost.SaveState(k); err != nil {
				k.Fail(err) // a *QuotaError: the state stays as it was
				continue
			}
			k.Emit("out", fmt.Appendf(nil, "%s=%d", k.Key(), n))
		}
		return nil
	}
	req := &abi.Request{ABI: abi.Version, Computation: "totals", Kind: abi.KindTransform, Keys: []abi.RequestKey{
		{Key: `["a"]`, Messages: []abi.Message{{ID: "1", Stream: "in", Payload: []byte("x")}, {ID: "2", Stream: "in", Payload: []byte("y")}}}}}
	init := &abi.Init{ABI: abi.Version, Computation: "totals", Kind: abi.KindTransform, OutputStreams: []string{"out"}}
	resp, err := flowhost.Run(flowhost.Computation{Process: process}, init, req)
	if err != nil {
		panic(err)
	}
	cells, _ := flowhost.DecodeTypedState(resp.Keys[0].State)
	fmt.Println(string(resp.Keys[0].Emits[0].Payload))
	fmt.Printf("total=%s recent=%q\n", cells["total"], cells["recent"])
	// Output:
	// ["a"]=2
	// total=2 recent=["\"x\"" "\"y\""]
}

// Map cells keep entries by text key; Keys returns them sorted.
func ExampleMap() {
	process := func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			seen := flowhost.Map[int](k, "seen", flowhost.JSON)
			for m := range k.Messages() {
				c, _, _ := seen.Get(string(m.Payload))
				_ = seen.Put(string(m.Payload), c+1)
			}
			keys, _ := seen.Keys()
			for _, key := range keys {
				c, _, _ := seen.Get(key)
				k.Emit("out", fmt.Appendf(nil, "%s:%d", key, c))
			}
		}
		return nil // unsaved changes are saved when Process returns
	}
	req := &abi.Request{ABI: abi.Version, Computation: "seen", Kind: abi.KindTransform, Keys: []abi.RequestKey{
		{Key: "k", Messages: []abi.Message{{ID: "1", Stream: "in", Payload: []byte("b")}, {ID: "2", Stream: "in", Payload: []byte("a")}, {ID: "3", Stream: "in", Payload: []byte("b")}}}}}
	init := &abi.Init{ABI: abi.Version, Computation: "seen", Kind: abi.KindTransform, OutputStreams: []string{"out"}}
	resp, _ := flowhost.Run(flowhost.Computation{Process: process}, init, req)
	for _, e := range resp.Keys[0].Emits {
		fmt.Println(string(e.Payload))
	}
	// Output:
	// a:1
	// b:2
}
