// Package flowtest tests pipelines and computations on the real flowhost
// runtime (package host/runtime), as Kafka Streams' TopologyTestDriver
// and Flink's operator test harnesses do: what a test sees is what
// flowhost run would do, ordering, keys, state, timers and watermarks
// included, because nothing of the ordering is re-implemented here.
//
// # Two ways in
//
// [Run] runs a whole pipeline in memory to the end of its inputs, with
// sources replaced by files, and returns each stream's outputs; [Check]
// compares them with expectation files. It is what `flowhost test` does:
//
//	flowhost test -f pipeline.yaml --plugins plugins \
//	    --input orders-in=orders.jsonl --expect joined=joined.expected.jsonl \
//	    [--compare exact|per-key] [--key-field F] [--update]
//
// [Driver] runs a pipeline step by step from a Go test: push records with
// their event times ([Driver.Push]), run what was pushed ([Driver.Settle]),
// raise a source's watermark ([Driver.AdvanceWatermark]) or the clock
// ([Driver.AdvanceClock]), end the inputs ([Driver.Finish]), and read the
// outputs of any stream ([Driver.Outputs]), the pending timers of a
// computation ([Driver.Timers]) and the state of a key ([Driver.State]).
// Computations are WebAssembly plugins ([WithPlugins]) or native Go
// ([WithComputation] with a compute.Factory), in any chain the spec
// describes.
//
// # Questions a user asks
//
// Which inputs does `flowhost test` replace? Each --input NAME=FILE names a
// source by its name or by the stream it writes; that source reads FILE as
// a file source in its own format (envelope unless the spec says json or
// raw), with its partitions, partition_by and watermark. A source with no
// --input must be a file source or a generator; an http or kafka source
// without one is refused, naming it, because it would never end.
//
// What is compared? Each output's key, event_ts and payload (as JSON
// values: field order and number spelling do not matter). Message ids,
// task ids and the system, alignment and write timestamps of derived
// messages depend on the wall clock and on how the host cut its batches,
// so they are not compared. An expectation file is one JSON object a
// line with those three fields, what --update writes; a file sink's json
// lines are valid expectation lines too.
//
// Exact or per key? exact wants the same lines in the same order. A keyed
// computation guarantees the order within a key, not how the keys of a
// batch interleave, which depends on batch sizes: per-key compares each
// key's lines in order and ignores the interleaving. A line's key is its
// record key, or with --key-field F the payload's top-level field F (for
// computations that put the key in the payload and emit no record key).
//
// What does a difference look like? One entry per differing line, with
// the line of the expectation file, the expected line and the one got:
//
//	FAIL stream counts: 1 differences from counts.jsonl (per-key; 6 expected, 6 got):
//	  stream counts, key "b", output 2 of the key (line 6):
//	    - expected {"key":"","event_ts":1767225606000000000,"payload":{"key":"b","count":7}}
//	    + got      {"key":"","event_ts":1767225606000000000,"payload":{"key":"b","count":2}}
//
// and `flowhost test` exits 1. Bad records are not hidden: dead letters
// are printed as "dead letter: ..." lines ([Result.DeadLetters]).
//
// How does a Driver step end, without sleeping? Each step starts the
// runtime on the driver's own storage, hands it the pushed records, and
// stops it as soon as every source has handed its records over. A stopped
// run delivers everything it accepted, and everything derived from it,
// before it returns, and leaves the watermarks where the records put them
// and the timers beyond them pending, as `flowhost run` does on SIGINT;
// the next step resumes from the storage like a restart. So every read
// between steps sees committed results, and the same pushes give the
// same results on every run.
//
// In memory or on a store? By default a Driver runs in memory, as
// `flowhost run` does without a data directory (runtime.NewMemoryStorage:
// a drained step leaves its state, timers, positions, watermarks and
// partition metadata to the next, so message ids and watermarks go on
// across steps). [WithDataDir] runs it on a pebble store in a directory,
// the durable path of `flowhost run --data-dir`, which `flowhost inspect`
// can then open. A computation should give the same results on both.
//
// Where is the watermark? A source's event watermark is, as in any run,
// the newest event time of each partition less the source's
// watermark.out_of_orderness_bound, the minimum over its partitions. A
// partition that got no record holds the watermark back (idle detection
// runs on the wall clock and is not something a test should depend on):
// push to every partition, use one partition, or raise the watermark
// with [Driver.AdvanceWatermark], which sets the stream's watermark as a
// stored one that the next step resumes from. [Driver.Finish] moves every
// watermark to the end of time: every pending timer fires.
//
// What about the record's write time? [Record.Write] defaults to the
// event time, so that tests do not depend on the wall clock; the clock
// ([WithClock], [Driver.AdvanceClock]) stamps what the host stamps itself.
//
// What does it cost? A step is one start and stop of the runtime:
// milliseconds with native computations. WebAssembly
// plugins are compiled once per Driver ([WithCacheDir] keeps them across
// drivers and runs).
//
// A Driver tests the host's behaviour around a computation. To test a
// computation's code alone, batch by batch and without WebAssembly, use
// the SDKs' native harnesses: sdk/go/sdktest for Go, flowhost::testing
// for Rust.
package flowtest
