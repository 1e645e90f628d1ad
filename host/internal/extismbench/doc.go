// Package extismbench compares flowhost's per-message host overhead with a
// per-message call through Extism's Go SDK, on the same guest logic
// (identity on 100-byte payloads) in the same benchmark run. It is a
// separate module so that flowhost itself never depends on Extism; it has
// no API, only benchmarks (see README.md).
package extismbench
