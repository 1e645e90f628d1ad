//go:build unix

package benthosbench_test

import (
	"syscall"
	"time"
)

// cpuTime returns the user and system CPU time the process has used so
// far, or false where it cannot be read. On a loaded machine it measures
// the work of a path better than wall time, which also counts waiting for
// a core.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
