// Package enginebench measures the two candidate embedded stores for
// flowhost's durable state, Pebble and bbolt, on the write pattern of an
// exactly-once epoch commit, so that the choice between them rests on
// figures anyone can reproduce on the project's machines. It has no API and
// is imported by nothing: it holds only a benchmark and the test that both
// engines do the same work in it (engines_bench_test.go).
package enginebench
