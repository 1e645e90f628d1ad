//go:build race

package conformance_test

// raceEnabled: the test binary runs under the race detector, which makes
// wazero compile guests ten times slower.
const raceEnabled = true
