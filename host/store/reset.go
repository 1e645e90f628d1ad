package store

import (
	"fmt"

	"github.com/flowhost/flowhost/ordering"
)

// ResetPlan is what `flowhost run --reset-state` empties before a replay,
// so that the replayed computations start as on a first run instead of
// counting the replayed records a second time.
type ResetPlan struct {
	// Partitions are the computation partitions to reset: their keyed
	// state, pending timers and metadata (epoch, id counters, clock,
	// watermarks, biases, TaskIds) are deleted, so they start empty and
	// number their outputs from the start again.
	Partitions []Dest
	// Sinks are the sinks whose queues lose what the Reset senders queued
	// for them and they have not written yet: the replay queues it again.
	Sinks []Dest
	// Reset reports whether a sender's queued messages are deleted: the
	// replayed source partitions and the reset computation partitions,
	// whose messages the replay derives again. Messages of other senders
	// stay queued.
	Reset func(ordering.Sender) bool
	// Replayed are the replayed source streams, each with the offset of
	// every partition it is replayed from: the read position is set there
	// (so that a crash during the replay resumes the replay, not what
	// came after it), with no TaskIds, and the stream's watermarks are
	// deleted, so that they start again from the replayed records.
	Replayed map[string][]uint64
}

// Reset applies p in one transaction: after a crash either all of it or
// none of it happened.
func (s *Store) Reset(p ResetPlan) error {
	b := s.NewBatch()
	for _, d := range p.Partitions {
		if d.Sink {
			b.Discard()
			return fmt.Errorf("store: reset: %s is a sink, not a computation partition", d)
		}
		for _, prefix := range []keyBuf{
			newKey(tableState).str(d.Name).u32(d.Partition),
			newKey(tableTimer).str(d.Name).u32(d.Partition),
		} {
			if b.err == nil {
				b.err = b.b.DeleteRange(prefix, prefixEnd(prefix), nil)
			}
		}
		b.del(newKey(tablePartition).str(d.Name).u32(d.Partition))
	}
	for _, d := range append(append([]Dest(nil), p.Partitions...), p.Sinks...) {
		if err := s.dropQueued(b, d, p.Reset); err != nil {
			b.Discard()
			return err
		}
	}
	for stream, from := range p.Replayed {
		for part, off := range from {
			b.SetRead(stream, part, ReadPosition{Next: off})
		}
		b.del(newKey(tableSourceWM).str(stream))
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("resetting the replayed computations: %w", err)
	}
	return nil
}

// dropQueued deletes, in b, the messages of d's queue whose sender reset
// reports. Each is deleted by its own key: a queue key is written again
// when its sender's TaskIds start over, and is then single-deleted when
// consumed, which needs a plain delete before it.
func (s *Store) dropQueued(b *Batch, d Dest, reset func(ordering.Sender) bool) error {
	prefix := queuePrefix(d)
	what := "queue of " + d.String()
	err := s.scan(prefix, nil, what, func(rest, _ []byte) error {
		r := keyReader{b: rest}
		from := ordering.Sender{Computation: r.str("sender"), Partition: r.u32("sender partition")}
		r.u64("task")
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		if reset(from) {
			b.del(append(append(keyBuf{}, prefix...), rest...))
		}
		return nil
	})
	if err != nil || !d.Sink {
		return err
	}
	// The sender numbers its tasks from the start again: what the sink
	// took of its old ones says nothing about the new.
	taken, err := s.taken(d)
	for from := range taken {
		if reset(from) {
			b.del(takenKey(d, from))
		}
	}
	return err
}
