//go:build wasip1

// Command echo is a test guest that proves data crosses the boundary both
// ways: flowhost_process answers "echo:" followed by the request reversed,
// and flowhost_init answers "init:" followed by the payload (or 0 for an
// empty payload).
package main

import (
	"slices"

	"github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"
)

func main() {}

// out keeps the response reachable after the export returns; reusing it
// keeps the guest's own allocations out of the host's benchmarks.
var out []byte

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	in := guest.Bytes(ptr, n)
	out = append(out[:0], "echo:"...)
	out = slices.Grow(out, len(in))[:len("echo:")+len(in)]
	rev := out[len("echo:"):]
	for i, b := range in {
		rev[len(in)-1-i] = b
	}
	return guest.Pack(out)
}

//go:wasmexport flowhost_init
func initialize(ptr, n int32) int64 {
	if n == 0 {
		return 0
	}
	out = append(append(out[:0], "init:"...), guest.Bytes(ptr, n)...)
	return guest.Pack(out)
}
