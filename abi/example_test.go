package abi_test

import (
	"errors"
	"fmt"

	"github.com/flowhost/flowhost/abi"
)

// A host decodes a guest's response strictly, then checks it against the
// request; both report the offending field's path.
func ExampleDecodeResponse() {
	// {"keys": [{"key": "a", "emits": [{"stream": 5, "payload": h''}]}]}
	bad := []byte("\xa1\x64keys\x81\xa2\x63key\x61a\x65emits\x81\xa2\x66stream\x05\x67payload\x40")
	_, err := abi.DecodeResponse(bad, abi.ResponseLimits{})
	fmt.Println(err)

	var e *abi.Error
	if errors.As(fmt.Errorf("plugin enrich: %w", err), &e) {
		fmt.Println("field:", e.Field)
	}
	// Output:
	// keys[0].emits[0].stream: expected text string, got uint
	// field: keys[0].emits[0].stream
}

func ExampleValidateResponse() {
	req := &abi.Request{ABI: abi.Version, Computation: "c", Kind: abi.KindTransform, Keys: []abi.RequestKey{
		{Key: "a", Messages: []abi.Message{{ID: "m1", Stream: "in"}}},
	}}
	resp := &abi.Response{Keys: []abi.ResponseKey{
		{Key: "a", Emits: []abi.Emit{{Stream: "out", Payload: []byte("x"), Parents: []uint32{1}}}},
	}}
	fmt.Println(abi.ValidateResponse(resp, req, []string{"out"}))
	// Output:
	// keys[0].emits[0].parents[0]: input 1 out of range: the key has 1 inputs
}

func ExampleUnpackResult() {
	for _, r := range []int64{abi.PackResult(65536, 120), 0, int64(abi.StatusGuestFailure)} {
		ptr, size, err := abi.UnpackResult(r)
		fmt.Println(ptr, size, err)
	}
	// Output:
	// 65536 120 <nil>
	// 0 0 <nil>
	// 0 0 guest returned status -2 (guest failure)
}
