//go:build !wasip1

package flowhost

import (
	"fmt"
	"os"
)

// hostLog stands in for the host's log outside WebAssembly, where a
// computation's own tests run.
func hostLog(level Level, msg string) { fmt.Fprintf(os.Stderr, "flowhost %s %s\n", level, msg) }
