//go:build wasip1

// Command sock is a test guest that imports the WASI function
// sock_accept, which no capability grants.
package main

import "github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"

func main() {}

//go:wasmimport wasi_snapshot_preview1 sock_accept
func sockAccept(fd, flags, resultFD int32) int32

var accepted = make([]byte, 4)

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	if sockAccept(3, 0, 0) != 0 {
		return -1
	}
	return guest.Pack(accepted)
}
