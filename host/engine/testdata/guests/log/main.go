//go:build wasip1

// Command log is a test guest that logs through every channel a guest has:
// flowhost.log at warn with the request as the line, flowhost.log at debug,
// and println, which the Go runtime writes to stderr. It answers "logged".
// Request "log outside memory" first logs a line outside its memory.
package main

import (
	"unsafe"

	"github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"
)

func main() {}

//go:wasmimport flowhost log
func hostLog(level, ptr, n int32)

func logLine(level int32, line []byte) {
	if len(line) == 0 {
		hostLog(level, 0, 0)
		return
	}
	hostLog(level, int32(uintptr(unsafe.Pointer(&line[0]))), int32(len(line)))
}

var logged = []byte("logged")

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	if string(guest.Bytes(ptr, n)) == "log outside memory" {
		hostLog(0, 0x7fff0000, 10)
	}
	logLine(4, guest.Bytes(ptr, n))
	logLine(-4, []byte("debug detail"))
	println("to stderr")
	return guest.Pack(logged)
}
