//go:build wasip1

// Command foreignemit is a hostile guest that speaks ABI v1 by hand,
// bypassing the SDK's checks: it answers every batch with well-formed
// emits of every message on stream "out", which belongs to another
// computation. The host must refuse the response, name the plugin and the
// stream, and dead-letter the batch.
package main

import (
	"unsafe"

	"github.com/flowhost/flowhost/abi"
)

var request, answer []byte

//go:wasmexport flowhost_abi_v1
func abiV1() {}

//go:wasmexport flowhost_alloc
func alloc(size int32) int32 {
	if size == 0 {
		return 0
	}
	if cap(request) < int(size) {
		request = make([]byte, size)
	}
	return int32(uintptr(unsafe.Pointer(&request[0])))
}

//go:wasmexport flowhost_process
func process(ptr, size int32) int64 {
	req, err := abi.DecodeRequest(unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), size))
	if err != nil {
		return -1
	}
	resp := &abi.Response{Keys: make([]abi.ResponseKey, len(req.Keys))}
	for i, k := range req.Keys {
		resp.Keys[i].Key = k.Key
		for j, m := range k.Messages {
			resp.Keys[i].Emits = append(resp.Keys[i].Emits, abi.Emit{Stream: "out", Payload: m.Payload, Parents: []uint32{uint32(len(k.Timers) + j)}})
		}
	}
	if answer, err = abi.EncodeResponse(resp); err != nil || len(answer) == 0 {
		return -1
	}
	return int64(uintptr(unsafe.Pointer(&answer[0])))<<32 | int64(len(answer))
}

func main() {}
