//go:build wasip1

package flowhost

import (
	"unsafe"

	"github.com/flowhost/flowhost/abi"
)

// This file is the only one that exists only in WebAssembly: the exported
// and imported functions of ABI v1, each a thin shim over guest.go, so that
// everything else runs in plain go test.

//go:wasmimport flowhost log
func importedLog(level int32, ptr unsafe.Pointer, size int32)

func hostLog(level Level, msg string) {
	importedLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), int32(len(msg)))
}

//go:wasmexport flowhost_abi_v1
func flowhostABIv1() {}

//go:wasmexport flowhost_alloc
func flowhostAlloc(size int32) int32 {
	b := instance.alloc(size)
	if b == nil {
		return 0
	}
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

//go:wasmexport flowhost_process
func flowhostProcess(ptr, size int32) int64 {
	return packResult(instance.processAt(uintptr(uint32(ptr)), size))
}

//go:wasmexport flowhost_init
func flowhostInit(ptr, size int32) int64 {
	return packResult(instance.initAt(uintptr(uint32(ptr)), size))
}

func packResult(out []byte, status abi.Status) int64 {
	if status != 0 {
		return int64(status)
	}
	if len(out) == 0 {
		return 0
	}
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}
