// Package benthosbench measures Benthos v4 (github.com/redpanda-data/benthos/v4,
// MIT licence) on the input of flowhost's own benchmarks: a no-op batch
// processor, and a wazero function called once per message. It is a
// separate module so that flowhost itself never depends on Benthos; it has
// no API, only a test and benchmarks (see README.md).
package benthosbench
