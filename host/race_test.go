//go:build race

package host_test

// raceEnabled reports that the race detector is on: it slows the host's
// Go code several times over, so a suite that measures throughput runs
// without it (the Makefile's unit step).
const raceEnabled = true
