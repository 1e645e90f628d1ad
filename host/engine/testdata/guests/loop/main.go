//go:build wasip1

// Command loop is a test guest whose flowhost_process never returns, so
// only the host's deadline can stop it.
package main

import _ "github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"

func main() {}

var spins uint64

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	for {
		spins++
	}
}
