//go:build !unix

package extismbench_test

import "time"

// cpuTime cannot read the process's CPU time on this platform.
func cpuTime() (time.Duration, bool) { return 0, false }
