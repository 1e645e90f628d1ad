// Package ordering implements flowhost's message order: the rules of
// YTsaurus Flow's ordering model (shared/spec/seed-ordering.md) as pure data
// structures with no I/O, no goroutines and no dependency beyond the standard
// library. The host wires them together; everything here is deterministic,
// so the same inputs give the same order whatever order they arrived in.
//
// The pieces, in the order a message meets them:
//
//   - [MessageID] names a message. It is structured (source root, then one
//     segment per derivation) and totally ordered by value, not by text.
//   - [SourceClock], [TransformOutput], [MapOutput] and [MultiParentOutput]
//     assign the timestamps of a message; [Timestamps] holds them.
//   - [PartitionMerge] reads one source stream's partitions earliest
//     WriteTimestamp first.
//   - [Router] is FIFO per (sending partition, destination computation,
//     destination key): the derived-message guarantee.
//   - [StreamBuffer] yields one stream's messages by
//     (AlignmentTimestamp, MessageID); [Bias] keeps the running average of
//     EventTimestamp - AlignmentTimestamp over what a stream has queued.
//   - [Merge] is the cross-stream merging priority queue on
//     (AlignmentTimestamp + bias + stream delay, TaskID).
//   - [Batcher] cuts batches by rows, bytes and age and groups them per key,
//     due timers first.
//   - [SourceWatermark], [StreamWatermark] and [TimerStore] carry event time
//     forward and fire timers at TriggerTimestamp <= watermark.
//
// All timestamps are int64 nanoseconds since the Unix epoch.
package ordering
