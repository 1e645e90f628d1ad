//go:build wasip1

// Command oob is a test guest whose flowhost_process answers a packed
// pointer at 2 GiB - 64 KiB, far beyond the memory a test engine lets it
// grow to.
package main

import _ "github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"

func main() {}

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 { return 0x7fff0000<<32 | 16 }
