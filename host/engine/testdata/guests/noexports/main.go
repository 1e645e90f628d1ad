//go:build wasip1

// Command noexports is a test guest that declares ABI v1 and exports
// flowhost_alloc and memory but not flowhost_process.
package main

import _ "github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"

func main() {}
