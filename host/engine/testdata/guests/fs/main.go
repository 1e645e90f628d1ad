//go:build wasip1

// Command fs is a test guest that touches the file system: request
// "read:<path>" answers the file's content, "write:<path>" creates the
// file; either answers "error: ..." when the guest's file system refuses.
package main

import (
	"os"
	"strings"

	"github.com/flowhost/flowhost/host/engine/testdata/guests/internal/guest"
)

func main() {}

var out []byte

//go:wasmexport flowhost_process
func process(ptr, n int32) int64 {
	req := string(guest.Bytes(ptr, n))
	var err error
	switch {
	case strings.HasPrefix(req, "read:"):
		out, err = os.ReadFile(strings.TrimPrefix(req, "read:"))
	case strings.HasPrefix(req, "write:"):
		err = os.WriteFile(strings.TrimPrefix(req, "write:"), []byte("x"), 0o644)
		out = []byte("written")
	}
	if err != nil {
		out = []byte("error: " + err.Error())
	}
	return guest.Pack(out)
}
