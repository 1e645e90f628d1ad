//go:build wasip1

// Command garbage is a guest that answers every batch with bytes that are
// not a CBOR response: the host must refuse them, name the plugin and the
// problem, and dead-letter the batch.
package main

import "unsafe"

var request []byte

var answer = []byte("this is not CBOR")

//go:wasmexport flowhost_abi_v1
func abiV1() {}

//go:wasmexport flowhost_alloc
func alloc(size int32) int32 {
	if cap(request) < int(size) {
		request = make([]byte, size)
	}
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(request))))
}

//go:wasmexport flowhost_process
func process(ptr, size int32) int64 {
	return int64(uintptr(unsafe.Pointer(&answer[0])))<<32 | int64(len(answer))
}

func main() {}
