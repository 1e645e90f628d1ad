package ordering

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// mrgReference is the slow, obviously correct merge: it keeps each stream's
// queued messages in a plain slice and, at every Pop, recomputes every
// stream's bias from scratch with big.Int and scans all heads linearly.
type mrgReference struct {
	delays []int64
	noBias bool
	queued [][]*Message
	// last is each stream's bias when it last had messages.
	last []int64
}

func newMrgReference(streams int, delays []int64, noBias bool) *mrgReference {
	return &mrgReference{delays: delays, noBias: noBias, queued: make([][]*Message, streams), last: make([]int64, streams)}
}

func (r *mrgReference) push(stream int, m *Message) { r.queued[stream] = append(r.queued[stream], m) }

func (r *mrgReference) bias(stream int) int64 {
	switch {
	case r.noBias:
		return 0
	case len(r.queued[stream]) == 0:
		return r.last[stream]
	}
	var ts []Timestamps
	for _, m := range r.queued[stream] {
		ts = append(ts, m.Time)
	}
	return mrgBigAverage(ts)
}

// head returns the index in r.queued[stream] of the stream's next message.
func (r *mrgReference) head(stream int) int {
	best := 0
	for i, m := range r.queued[stream] {
		if inStreamLess(m, r.queued[stream][best]) {
			best = i
		}
	}
	return best
}

func (r *mrgReference) peek() (*Message, Priority, int) {
	var (
		best  *Message
		bestP Priority
		bestI int
	)
	for s, q := range r.queued {
		if len(q) == 0 {
			continue
		}
		i := r.head(s)
		m := q[i]
		b := r.bias(s)
		p := Priority{Stream: s, Bias: b, Delay: r.delays[s], Timestamp: mrgBigSum3(m.Time.Alignment, b, r.delays[s]), Task: m.Task}
		if best == nil || p.Timestamp < bestP.Timestamp || p.Timestamp == bestP.Timestamp && p.Task < bestP.Task {
			best, bestP, bestI = m, p, i
		}
	}
	return best, bestP, bestI
}

func (r *mrgReference) pop() (*Message, Priority) {
	m, p, i := r.peek()
	if m == nil {
		return nil, p
	}
	q := r.queued[p.Stream]
	r.queued[p.Stream] = append(q[:i:i], q[i+1:]...)
	if len(r.queued[p.Stream]) == 0 {
		r.last[p.Stream] = p.Bias
	}
	return m, p
}

func (r *mrgReference) len() (n int, bytes int64) {
	for _, q := range r.queued {
		for _, m := range q {
			n++
			bytes += m.Footprint()
		}
	}
	return n, bytes
}

// mrgOp is one step of a merge script: a Pop, or a Push of a message built
// from the fields.
type mrgOp struct {
	Pop              bool
	Stream           int
	Alignment, Event int64
	Task             TaskID
	// IDRank is the high part of the message's offset, so that equal
	// alignments are broken by ids that do not follow arrival order.
	IDRank  uint64
	Payload int
}

// mrgScript is a merge configuration and a sequence of operations.
type mrgScript struct {
	Streams int
	Delays  map[int]int64
	NoBias  bool
	Ops     []mrgOp
}

// mrgRunScript plays sc on a Merge and on the reference and fails at the
// first difference in what they pop, peek, count or report as bias.
func mrgRunScript(t require.TestingT, sc mrgScript) {
	names := make([]string, sc.Streams)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	delays := make([]int64, sc.Streams)
	byName := map[string]int64{}
	for s, d := range sc.Delays {
		delays[s] = d
		byName[names[s]] = d
	}
	opts := []MergeOption{WithStreamDelays(byName)}
	if sc.NoBias {
		opts = append(opts, WithoutBias())
	}
	mg, err := NewMerge(names, opts...)
	require.NoError(t, err)
	ref := newMrgReference(sc.Streams, delays, sc.NoBias)

	for step, op := range sc.Ops {
		if op.Pop {
			wantM, wantP := ref.pop()
			peekM, peekP := mg.Peek()
			gotM, gotP := mg.Pop()
			require.True(t, wantM == gotM, "step %d: popped %v, reference pops %v", step, gotM, wantM)
			require.True(t, peekM == gotM, "step %d: peeked %v, popped %v", step, peekM, gotM)
			require.Equal(t, wantP, gotP, "step %d", step)
			require.Equal(t, gotP, peekP, "step %d", step)
		} else {
			m := &Message{
				ID:      SourceID(names[op.Stream], 0, op.IDRank<<32|uint64(step)),
				Time:    Timestamps{Alignment: op.Alignment, Event: op.Event},
				Task:    op.Task,
				Payload: make([]byte, op.Payload),
			}
			mg.Push(op.Stream, m)
			ref.push(op.Stream, m)
		}
		n, bytes := ref.len()
		require.Equal(t, n, mg.Len(), "step %d", step)
		require.Equal(t, bytes, mg.Bytes(), "step %d", step)
		for s := range sc.Streams {
			require.Equal(t, len(ref.queued[s]), mg.StreamLen(s), "step %d stream %d", step, s)
			require.Equal(t, ref.bias(s), mg.Bias(s), "step %d stream %d", step, s)
		}
	}
}

// mrgTimeGen draws timestamps from a small range (so that priorities tie)
// with the ends of int64 now and then (so that sums clamp).
func mrgTimeGen() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(-10, 30),
		rapid.Int64Range(-10, 30),
		rapid.Int64Range(-10, 30),
		rapid.SampledFrom([]int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64}),
	)
}

func mrgScriptGen() *rapid.Generator[mrgScript] {
	return rapid.Custom(func(t *rapid.T) mrgScript {
		sc := mrgScript{
			Streams: rapid.IntRange(1, 6).Draw(t, "streams"),
			NoBias:  rapid.Bool().Draw(t, "noBias"),
			Delays:  map[int]int64{},
		}
		for s := range sc.Streams {
			if rapid.Bool().Draw(t, "delayed") {
				sc.Delays[s] = rapid.OneOf(rapid.Int64Range(-20, 20), mrgTimeGen()).Draw(t, "delay")
			}
		}
		for range rapid.IntRange(0, 150).Draw(t, "ops") {
			if rapid.IntRange(0, 2).Draw(t, "kind") == 0 {
				sc.Ops = append(sc.Ops, mrgOp{Pop: true})
				continue
			}
			sc.Ops = append(sc.Ops, mrgOp{
				Stream:    rapid.IntRange(0, sc.Streams-1).Draw(t, "stream"),
				Alignment: mrgTimeGen().Draw(t, "alignment"),
				Event:     mrgTimeGen().Draw(t, "event"),
				Task:      TaskID(rapid.Uint64Range(0, 3).Draw(t, "task")),
				IDRank:    rapid.Uint64Range(0, 3).Draw(t, "idRank"),
				Payload:   rapid.IntRange(0, 3).Draw(t, "payload"),
			})
		}
		return sc
	})
}

func TestMergeMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mrgRunScript(t, mrgScriptGen().Draw(t, "script"))
	})
}

// mrgMessage builds a message for the table tests; the id is the text form.
func mrgMessage(t *testing.T, id string, alignment, event int64, task TaskID) *Message {
	return &Message{ID: mrgMustID(t, id), Time: Timestamps{Alignment: alignment, Event: event}, Task: task}
}

func TestMergeOrder(t *testing.T) {
	type push struct {
		stream           string
		id               string
		alignment, event int64
		task             TaskID
	}
	tests := []struct {
		name string
		opts []MergeOption
		push []push
		// want are the ids in pop order.
		want []string
	}{
		{
			// "ordering_priority = AlignmentTimestamp +
			// avg(EventTimestamp − AlignmentTimestamp)": b's events run
			// 100 behind its alignment, so its message at alignment 150
			// stands for event time 50 and goes before a's 100.
			name: "bias turns alignment into event time",
			push: []push{{"a", "a/p0:0", 100, 100, 1}, {"b", "b/p0:0", 150, 50, 2}},
			want: []string{"b/p0:0", "a/p0:0"},
		},
		{
			name: "without bias, raw alignment decides",
			opts: []MergeOption{WithoutBias()},
			push: []push{{"a", "a/p0:0", 100, 100, 1}, {"b", "b/p0:0", 150, 50, 2}},
			want: []string{"a/p0:0", "b/p0:0"},
		},
		{
			// "with an adjustment for stream_delays"
			name: "a delay shifts its stream later",
			opts: []MergeOption{WithStreamDelays(map[string]int64{"b": 100})},
			push: []push{{"a", "a/p0:0", 100, 100, 1}, {"b", "b/p0:0", 50, 50, 2}},
			want: []string{"a/p0:0", "b/p0:0"},
		},
		{
			name: "without the delay the same messages go the other way",
			push: []push{{"a", "a/p0:0", 100, 100, 1}, {"b", "b/p0:0", 50, 50, 2}},
			want: []string{"b/p0:0", "a/p0:0"},
		},
		{
			name: "a negative delay shifts its stream earlier",
			opts: []MergeOption{WithStreamDelays(map[string]int64{"a": -60})},
			push: []push{{"a", "a/p0:0", 100, 100, 1}, {"b", "b/p0:0", 50, 50, 2}},
			want: []string{"a/p0:0", "b/p0:0"},
		},
		{
			// "if values are equal, ordering uses TaskId"
			name: "equal priority: lower TaskID first, whatever the stream",
			push: []push{{"a", "a/p0:0", 100, 100, 7}, {"b", "b/p0:0", 100, 100, 3}},
			want: []string{"b/p0:0", "a/p0:0"},
		},
		{
			name: "equal priority and TaskID: lower stream index first",
			push: []push{{"b", "b/p0:0", 100, 100, 3}, {"a", "a/p0:0", 100, 100, 3}},
			want: []string{"a/p0:0", "b/p0:0"},
		},
		{
			// "Within a single stream: (AlignmentTimestamp, message_id)",
			// even when a lower TaskID sits behind the head.
			name: "inside a stream, in-stream order and not TaskID",
			push: []push{{"a", "a/p0:2", 100, 100, 1}, {"a", "a/p0:1", 100, 100, 9}},
			want: []string{"a/p0:1", "a/p0:2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mg, err := NewMerge([]string{"a", "b"}, tt.opts...)
			require.NoError(t, err)
			for _, p := range tt.push {
				s, ok := mg.StreamIndex(p.stream)
				require.True(t, ok)
				mg.Push(s, mrgMessage(t, p.id, p.alignment, p.event, p.task))
			}
			var got []string
			for m, _ := mg.Pop(); m != nil; m, _ = mg.Pop() {
				got = append(got, m.ID.String())
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestMergeUnlistedStreamHasNoDelay(t *testing.T) {
	mg, err := NewMerge([]string{"a", "b"}, WithStreamDelays(map[string]int64{"b": 10}))
	require.NoError(t, err)
	require.Zero(t, mg.Delay(0))
	require.EqualValues(t, 10, mg.Delay(1))

	mg.Push(0, mrgMessage(t, "a/p0:0", 100, 103, 1))
	_, p := mg.Pop()
	require.Equal(t, Priority{Stream: 0, Bias: 3, Delay: 0, Timestamp: 103, Task: 1}, p)
	mg.Push(1, mrgMessage(t, "b/p0:0", 100, 103, 1))
	_, p = mg.Pop()
	require.Equal(t, Priority{Stream: 1, Bias: 3, Delay: 10, Timestamp: 113, Task: 1}, p)
}

func TestMergeLaterDelaysOverride(t *testing.T) {
	mg, err := NewMerge([]string{"a", "b"},
		WithStreamDelays(map[string]int64{"a": 1, "b": 2}),
		WithStreamDelays(map[string]int64{"b": 5}))
	require.NoError(t, err)
	require.EqualValues(t, 1, mg.Delay(0))
	require.EqualValues(t, 5, mg.Delay(1))
}

func TestMergeDelaysAreCopied(t *testing.T) {
	delays := map[string]int64{"a": 1}
	opt := WithStreamDelays(delays)
	delays["a"] = 99
	delays["ghost"] = 1
	mg, err := NewMerge([]string{"a"}, opt)
	require.NoError(t, err)
	require.EqualValues(t, 1, mg.Delay(0))
}

func TestMergeBiasChangeReordersHeads(t *testing.T) {
	// Bias moves with what is queued, and every Pop orders by the bias as
	// it stands: pushing behind a head changes its stream's bias and so
	// the head's place, though the head itself did not change.
	mg, err := NewMerge([]string{"a", "b"})
	require.NoError(t, err)
	a := mrgMessage(t, "a/p0:0", 100, 100, 1)
	b := mrgMessage(t, "b/p0:0", 90, 90, 2)
	mg.Push(0, a)
	mg.Push(1, b)
	m, p := mg.Peek()
	require.Same(t, b, m, "b's head at 90 is ahead of a's at 100")
	require.EqualValues(t, 90, p.Timestamp)

	// Behind b's head (alignment 200 > 90), with events far ahead of
	// alignment: b's bias becomes (0 + 10000) / 2 = 5000.
	mg.Push(1, mrgMessage(t, "b/p0:1", 200, 10200, 3))
	require.EqualValues(t, 5000, mg.Bias(1))
	m, p = mg.Peek()
	require.Same(t, a, m, "raising b's bias sent its head behind a's")
	require.EqualValues(t, 100, p.Timestamp)

	// Now events far behind alignment: b's bias becomes
	// (0 + 10000 - 30000) / 3 = -6666, and b's head comes back first.
	mg.Push(1, mrgMessage(t, "b/p0:2", 300, -29700, 4))
	require.EqualValues(t, -6666, mg.Bias(1))
	m, p = mg.Pop()
	require.Same(t, b, m, "lowering b's bias brought its head back ahead of a's")
	require.Equal(t, Priority{Stream: 1, Bias: -6666, Timestamp: 90 - 6666, Task: 2}, p)

	// Popping b's head uncounts it: bias (10000 - 30000) / 2 = -10000.
	require.EqualValues(t, -10000, mg.Bias(1))
	_, p = mg.Peek()
	require.Equal(t, Priority{Stream: 1, Bias: -10000, Timestamp: 200 - 10000, Task: 3}, p)
}

func TestMergeWithoutBiasIgnoresBiasChanges(t *testing.T) {
	// The same pushes under WithoutBias change nothing.
	mg, err := NewMerge([]string{"a", "b"}, WithoutBias())
	require.NoError(t, err)
	mg.Push(0, mrgMessage(t, "a/p0:0", 100, 100, 1))
	b := mrgMessage(t, "b/p0:0", 90, 90, 2)
	mg.Push(1, b)
	mg.Push(1, mrgMessage(t, "b/p0:1", 200, 10200, 3))
	require.Zero(t, mg.Bias(1))
	m, p := mg.Pop()
	require.Same(t, b, m)
	require.Equal(t, Priority{Stream: 1, Timestamp: 90, Task: 2}, p)
}

func TestMergeEmptyStreamKeepsLastBias(t *testing.T) {
	mg, err := NewMerge([]string{"a", "b"})
	require.NoError(t, err)
	require.Zero(t, mg.Bias(1), "no traffic yet")
	mg.Push(1, mrgMessage(t, "b/p0:0", 100, 150, 1))
	mg.Push(1, mrgMessage(t, "b/p0:1", 200, 210, 2))
	require.EqualValues(t, 30, mg.Bias(1))
	mg.Pop()
	require.EqualValues(t, 10, mg.Bias(1))
	mg.Pop()
	require.Zero(t, mg.StreamLen(1))
	require.EqualValues(t, 10, mg.Bias(1), "an emptied stream keeps its last bias")

	// Once traffic resumes, only what is queued counts.
	mg.Push(1, mrgMessage(t, "b/p0:2", 300, 300, 3))
	require.Zero(t, mg.Bias(1))
}

func TestMergeEmpty(t *testing.T) {
	mg, err := NewMerge([]string{"a"})
	require.NoError(t, err)
	m, p := mg.Pop()
	require.Nil(t, m)
	require.Zero(t, p)
	m, p = mg.Peek()
	require.Nil(t, m)
	require.Zero(t, p)
	require.Zero(t, mg.Len())
	require.Zero(t, mg.Bytes())

	none, err := NewMerge(nil)
	require.NoError(t, err)
	m, _ = none.Pop()
	require.Nil(t, m)
	require.Empty(t, none.Streams())
}

func TestMergeStreams(t *testing.T) {
	in := []string{"clicks", "orders", "timer.x"}
	mg, err := NewMerge(in)
	require.NoError(t, err)
	got := mg.Streams()
	require.Equal(t, in, got)
	got[0] = "changed"
	require.Equal(t, in, mg.Streams(), "Streams returns a copy")
	in[1] = "changed"
	require.Equal(t, []string{"clicks", "orders", "timer.x"}, mg.Streams(), "NewMerge copies its input")

	i, ok := mg.StreamIndex("timer.x")
	require.True(t, ok)
	require.Equal(t, 2, i)
	_, ok = mg.StreamIndex("nope")
	require.False(t, ok)
}

func TestMergeConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		streams []string
		opts    []MergeOption
		want    string
	}{
		{
			name:    "delay for a stream that is not an input",
			streams: []string{"a", "b"},
			opts:    []MergeOption{WithStreamDelays(map[string]int64{"a": 1, "zz": 5, "c": 2})},
			want:    `stream_delays names "c", which is not an input stream (inputs: a, b)`,
		},
		{
			name:    "stream listed twice",
			streams: []string{"a", "b", "a"},
			want:    `stream "a" is listed twice (at 0 and 2)`,
		},
		{
			name:    "invalid stream name",
			streams: []string{"a", "b c"},
			want:    `stream 1: name "b c": ' ' is not a letter`,
		},
		{
			name:    "empty stream name",
			streams: []string{""},
			want:    "stream 0: empty name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mg, err := NewMerge(tt.streams, tt.opts...)
			require.Nil(t, mg)
			require.ErrorIs(t, err, ErrMergeConfig)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestMergeLenAndBytes(t *testing.T) {
	mg, err := NewMerge([]string{"a", "b"})
	require.NoError(t, err)
	mg.Push(0, &Message{Payload: make([]byte, 10)})
	mg.Push(1, &Message{Payload: make([]byte, 5)})
	mg.Push(1, &Message{ID: SourceID("b", 0, 1)})
	require.Equal(t, 3, mg.Len())
	require.EqualValues(t, 15+3*(messageBytes+BufferedOverhead), mg.Bytes())
	require.Equal(t, 1, mg.StreamLen(0))
	require.Equal(t, 2, mg.StreamLen(1))
	for mg.Len() > 0 {
		mg.Pop()
	}
	require.Zero(t, mg.Bytes())
}

func TestMergePushToUnknownStreamPanics(t *testing.T) {
	mg, err := NewMerge([]string{"a"})
	require.NoError(t, err)
	require.Panics(t, func() { mg.Push(1, &Message{}) })
}

func TestMergeIsDeterministicAcrossArrivalOrders(t *testing.T) {
	// The same messages pushed in any order (all before the first Pop)
	// pop in the same order: bias, delays and ties depend only on the
	// multiset.
	rapid.Check(t, func(t *rapid.T) {
		sc := mrgScriptGen().Draw(t, "script")
		type pushed struct {
			stream int
			m      *Message
		}
		var all []pushed
		for i, op := range sc.Ops {
			if !op.Pop {
				all = append(all, pushed{op.Stream, &Message{
					ID:   SourceID("x", 0, op.IDRank<<32|uint64(i)),
					Time: Timestamps{Alignment: op.Alignment, Event: op.Event},
					Task: op.Task,
				}})
			}
		}
		names := make([]string, sc.Streams)
		byName := map[string]int64{}
		for i := range names {
			names[i] = fmt.Sprintf("s%d", i)
			if d, ok := sc.Delays[i]; ok {
				byName[names[i]] = d
			}
		}
		run := func(order []pushed) []*Message {
			mg, err := NewMerge(names, WithStreamDelays(byName))
			require.NoError(t, err)
			for _, p := range order {
				mg.Push(p.stream, p.m)
			}
			var out []*Message
			for m, _ := mg.Pop(); m != nil; m, _ = mg.Pop() {
				out = append(out, m)
			}
			return out
		}
		first := run(rapid.Permutation(all).Draw(t, "first"))
		require.True(t, slices.Equal(first, run(rapid.Permutation(all).Draw(t, "second"))))
	})
}
