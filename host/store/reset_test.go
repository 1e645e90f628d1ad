package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/ordering"
)

// TestResetEmptiesOnlyWhatTheReplayDerivesAgain resets computation
// "count" (fed by replayed source stream "orders" and by source stream
// "other", which is not replayed) and keeps computation "keep".
func TestResetEmptiesOnlyWhatTheReplayDerivesAgain(t *testing.T) {
	s := openT(t, t.TempDir())
	replayed := ordering.Sender{Computation: "source:orders", Partition: 0}
	other := ordering.Sender{Computation: "source:other", Partition: 0}
	counter := ordering.Sender{Computation: "count", Partition: 1}
	count := Dest{Name: "count", Partition: 1}
	keep := Dest{Name: "keep", Partition: 0}
	sink := Dest{Sink: true, Name: "out"}

	b := s.NewBatch()
	for _, d := range []Dest{count, keep} {
		b.SetState(d.Name, d.Partition, "k", []byte("state"))
		b.SetTimer(d.Name, d.Partition, ordering.Timer{Key: "k", Trigger: 5, ID: ordering.TransformID(d.Name+".timers", 0, 0)})
		b.SetPartition(d.Name, d.Partition, PartitionMeta{Epoch: 9, OutSeq: 40})
	}
	enqueue := func(d Dest, from ordering.Sender, task ordering.TaskID) {
		m := msg(ordering.SourceID("s", int32(from.Partition), uint64(task)), "s", "k", 1, "p")
		// A source reader's queued records refer to the source log.
		b.AppendSource("s", from.Partition, uint64(task), m)
		b.Enqueue(d, from, task, m)
	}
	enqueue(count, replayed, 1)
	enqueue(count, other, 1)
	enqueue(count, other, 2)
	enqueue(keep, other, 3)
	enqueue(sink, counter, 1)
	enqueue(sink, ordering.Sender{Computation: "keep", Partition: 0}, 1)
	b.SetRead("orders", 0, ReadPosition{Next: 50, Tasks: map[string]uint64{"count/p1": 50}})
	b.SetSourceWatermarks("orders", Watermarks{Event: 7, System: 8})
	b.SetSourceWatermarks("other", Watermarks{Event: 7, System: 8})
	require.NoError(t, b.Commit())

	require.NoError(t, s.Reset(ResetPlan{
		Partitions: []Dest{count},
		Sinks:      []Dest{sink},
		Reset: func(from ordering.Sender) bool {
			return from.Computation == "source:orders" || from.Computation == "count"
		},
		Replayed: map[string][]uint64{"orders": {10}},
	}))

	senders := func(d Dest) []ordering.Sender {
		var out []ordering.Sender
		require.NoError(t, s.Queue(d, func(from ordering.Sender, _ *ordering.Message) error {
			out = append(out, from)
			return nil
		}))
		return out
	}
	require.Equal(t, []ordering.Sender{other, other}, senders(count), "what a source that is not replayed queued stays")
	require.Equal(t, []ordering.Sender{other}, senders(keep))
	require.Equal(t, []ordering.Sender{{Computation: "keep", Partition: 0}}, senders(sink))

	_, ok, err := s.State("count", 1, "k")
	require.NoError(t, err)
	require.False(t, ok)
	timers, err := s.Timers("count", 1)
	require.NoError(t, err)
	require.Empty(t, timers)
	_, ok, err = s.Partition("count", 1)
	require.NoError(t, err)
	require.False(t, ok)

	_, ok, err = s.State("keep", 0, "k")
	require.NoError(t, err)
	require.True(t, ok)
	timers, err = s.Timers("keep", 0)
	require.NoError(t, err)
	require.Len(t, timers, 1)
	meta, ok, err := s.Partition("keep", 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(40), meta.OutSeq)

	read, _, err := s.Read("orders", 0)
	require.NoError(t, err)
	require.Equal(t, ReadPosition{Next: 10}, read)
	_, ok, err = s.SourceWatermarks("orders")
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = s.SourceWatermarks("other")
	require.NoError(t, err)
	require.True(t, ok)

	// A queue key deleted by the reset can be written and consumed again.
	b = s.NewBatch()
	enqueue(count, replayed, 1)
	require.NoError(t, b.Commit())
	require.Equal(t, []ordering.Sender{other, other, replayed}, senders(count), "senders in key order (length-prefixed names)")
	b = s.NewBatch()
	b.Dequeue(count, replayed, 1)
	require.NoError(t, b.Commit())
	require.NoError(t, s.Compact())
	require.Equal(t, []ordering.Sender{other, other}, senders(count))
}

func TestResetRefusesASinkAsAPartition(t *testing.T) {
	s := openT(t, t.TempDir())
	err := s.Reset(ResetPlan{Partitions: []Dest{{Sink: true, Name: "out"}}, Reset: func(ordering.Sender) bool { return false }})
	require.ErrorContains(t, err, "sink:out is a sink")
}
