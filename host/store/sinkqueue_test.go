package store

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/ordering"
)

// TestSinkQueueKeepsWhatWasNotTaken: whatever the senders queue for a sink
// (runs within a batch, runs broken by other senders' messages and by
// TaskIds that do not follow on, source references among them) and
// however far the sink takes each sender's queue (through the middle of a
// run too), the queue holds exactly the messages not taken, in TaskId
// order per sender, after a reopen as well; inspect counts them, and a
// reset of a sender forgets what the sink took of it.
func TestSinkQueueKeepsWhatWasNotTaken(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fs := vfs.NewMem()
		s, err := Open("/d", Options{FS: fs})
		require.NoError(t, err)
		defer func() { _ = s.Close() }()
		sink := Dest{Sink: true, Name: "out"}
		senders := []ordering.Sender{{Computation: "c", Partition: 0}, {Computation: "c", Partition: 1}, {Computation: "source:in", Partition: 0}}
		last := map[ordering.Sender]ordering.TaskID{}     // last TaskId queued
		taken := map[ordering.Sender]ordering.TaskID{}    // last TaskId taken
		queued := map[ordering.Sender][]ordering.TaskID{} // every TaskId queued
		model := func() map[ordering.Sender][]ordering.TaskID {
			want := map[ordering.Sender][]ordering.TaskID{}
			for _, from := range senders {
				for _, task := range queued[from] {
					if task > taken[from] {
						want[from] = append(want[from], task)
					}
				}
			}
			return want
		}
		check := func(what string) {
			got := map[ordering.Sender][]ordering.TaskID{}
			require.NoError(t, s.Queue(sink, func(from ordering.Sender, m *ordering.Message) error {
				require.Equal(t, fmt.Sprintf("%s task %d", from, m.Task), string(m.Payload), what)
				got[from] = append(got[from], m.Task)
				return nil
			}))
			want := model()
			require.Equal(t, want, got, what)
			rep, err := s.Inspect()
			require.NoError(t, err)
			n := 0
			for _, q := range rep.Queues {
				n += q.Messages
			}
			total := 0
			for _, ts := range want {
				total += len(ts)
			}
			require.Equal(t, total, n, "%s: inspect's count", what)
		}
		for step := range rapid.IntRange(1, 12).Draw(t, "batches") {
			b := s.NewBatch()
			for range rapid.IntRange(1, 8).Draw(t, "writes") {
				from := rapid.SampledFrom(senders).Draw(t, "sender")
				switch rapid.IntRange(0, 2).Draw(t, "op") {
				case 0, 1: // queue a message, sometimes after a gap in the TaskIds
					task := last[from] + 1 + ordering.TaskID(rapid.IntRange(0, 1).Draw(t, "gap"))
					var m *ordering.Message
					if from.Computation == "source:in" {
						m = &ordering.Message{ID: ordering.SourceID("in", 0, uint64(task)), Stream: "in"}
						b.AppendSource("in", 0, uint64(task), &ordering.Message{ID: m.ID, Stream: "in", Payload: fmt.Appendf(nil, "%s task %d", from, task)})
					} else {
						m = &ordering.Message{ID: ordering.SourceID("in", 0, 0).Derive("out", uint64(task)), Stream: "out", Payload: fmt.Appendf(nil, "%s task %d", from, task)}
					}
					b.Enqueue(sink, from, task, m)
					last[from] = task
					queued[from] = append(queued[from], task)
				case 2: // take the sender's queue through some task
					if last[from] == taken[from] {
						continue
					}
					through := taken[from] + ordering.TaskID(rapid.IntRange(1, int(last[from]-taken[from])).Draw(t, "take"))
					b.TakeThrough(sink, from, through)
					taken[from] = through
				}
			}
			require.NoError(t, b.Commit())
			check(fmt.Sprintf("after batch %d", step))
		}
		require.NoError(t, s.Close())
		s, err = Open("/d", Options{FS: fs})
		require.NoError(t, err)
		check("after a reopen")

		reset := rapid.SampledFrom(senders).Draw(t, "reset")
		require.NoError(t, s.Reset(ResetPlan{Sinks: []Dest{sink}, Reset: func(from ordering.Sender) bool { return from == reset }}))
		last[reset], taken[reset], queued[reset] = 0, 0, nil
		check("after a reset")
		b := s.NewBatch() // the reset sender numbers from 1 again
		b.Enqueue(sink, reset, 1, &ordering.Message{ID: ordering.SourceID("in", 0, 0).Derive("out", 1), Stream: "out", Payload: fmt.Appendf(nil, "%s task %d", reset, 1)})
		if reset.Computation == "source:in" {
			b.Discard()
			return
		}
		require.NoError(t, b.Commit())
		last[reset], queued[reset] = 1, []ordering.TaskID{1}
		check("after the reset sender queued again")
	})
}
