package conformance

// WithoutRace lets the tests start the precompiler as BuildGoGuest starts
// the go tool.
var WithoutRace = withoutRace
