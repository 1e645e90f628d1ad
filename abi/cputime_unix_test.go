//go:build unix

package abi

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, user and system:
// on a machine shared with other work it measures the cost of a benchmark
// where wall time also counts the time spent waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
