//go:build wasip1

// Package guest is the raw ABI v1 plumbing the test guests share: the
// version marker, flowhost_alloc and the helpers to read a request and
// pack a response. It deliberately is not an SDK.
package guest

import "unsafe"

// request keeps the region handed out by flowhost_alloc reachable until the
// next call, as the ABI requires. It is reused while large enough, so the
// host's benchmarks do not measure the guest's garbage collector.
var request []byte

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

// Bytes views n bytes of guest memory at ptr.
func Bytes(ptr, n int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), n)
}

// Pack returns b as ptr<<32|len. The caller must keep b reachable until the
// host has read it.
func Pack(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	return int64(uintptr(unsafe.Pointer(&b[0])))<<32 | int64(len(b))
}
