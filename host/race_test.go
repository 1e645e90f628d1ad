//go:build race

package host_test

// raceEnabled reports that the race detector is on: it slows every run
// several times over, so the suites that measure scale their input down.
const raceEnabled = true
