//go:build wasip1

// Command clock is a test guest that answers the guest's wall clock,
// time.Now().UnixNano(), as 8 little-endian bytes.
package main

import (
	"encoding/binary"
	"time"

	"github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"
)

func main() {}

var now = make([]byte, 8)

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	binary.LittleEndian.PutUint64(now, uint64(time.Now().UnixNano()))
	return guest.Pack(now)
}
