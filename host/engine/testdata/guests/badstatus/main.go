//go:build wasip1

// Command badstatus is a test guest whose flowhost_process and
// flowhost_init always answer the negative status -2.
package main

import _ "github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"

func main() {}

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 { return -2 }

//go:wasmexport flowhost_init
func initialize(ptr, n int32) int64 { return -2 }
