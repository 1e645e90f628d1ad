//go:build wasip1

// Command trap is a test guest whose flowhost_process fails the hard way:
// request "panic" panics (the Go runtime prints the panic to stderr and
// executes unreachable), "exit" calls os.Exit(3), and any other request
// executes the wasm unreachable instruction directly.
package main

import (
	"os"

	"github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"
)

func main() {}

// unreachable executes the wasm unreachable instruction (trap_wasm.s).
func unreachable()

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	switch string(guest.Bytes(ptr, n)) {
	case "panic":
		panic("boom")
	case "exit":
		os.Exit(3)
	}
	unreachable()
	return 0
}
