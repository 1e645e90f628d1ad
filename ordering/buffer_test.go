package ordering

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// mrgMustID parses a MessageID or fails the test.
func mrgMustID(t require.TestingT, s string) MessageID {
	id, err := ParseMessageID(s)
	require.NoError(t, err)
	return id
}

// mrgIDGen draws ids from a small space, so that equal prefixes, numeric
// versus textual order and derived ids all come up.
func mrgIDGen() *rapid.Generator[MessageID] {
	return rapid.Custom(func(t *rapid.T) MessageID {
		id := SourceID(
			rapid.SampledFrom([]string{"a", "b", "a.b", "a-b"}).Draw(t, "root"),
			rapid.Int32Range(0, 11).Draw(t, "partition"),
			rapid.Uint64Range(0, 11).Draw(t, "offset"),
		)
		for range rapid.IntRange(0, 2).Draw(t, "depth") {
			id = id.Derive(rapid.SampledFrom([]string{"x", "y"}).Draw(t, "stream"), rapid.Uint64Range(0, 10).Draw(t, "index"))
		}
		return id
	})
}

// mrgBufferMessages draws messages whose (Alignment, ID) are distinct,
// with alignments from a small range so that ties are common.
func mrgBufferMessages(t *rapid.T) []*Message {
	n := rapid.IntRange(0, 60).Draw(t, "n")
	var msgs []*Message
	seen := map[string]bool{}
	for range n {
		m := &Message{
			ID:      mrgIDGen().Draw(t, "id"),
			Time:    Timestamps{Alignment: rapid.Int64Range(-2, 3).Draw(t, "alignment")},
			Payload: make([]byte, rapid.IntRange(0, 5).Draw(t, "payload")),
		}
		k := fmt.Sprint(m.Time.Alignment, "|", m.ID)
		if seen[k] {
			continue
		}
		seen[k] = true
		msgs = append(msgs, m)
	}
	return msgs
}

func mrgDrain(b *StreamBuffer) []*Message {
	var out []*Message
	for b.Len() > 0 {
		peeked := b.Peek()
		m := b.Pop()
		if m != peeked {
			panic("Pop returned another message than Peek")
		}
		out = append(out, m)
	}
	return out
}

func TestStreamBufferOrder(t *testing.T) {
	// The seed: "Within a single stream: messages are processed in the
	// order (AlignmentTimestamp, message_id)". Each case pushes in the
	// given order and expects the ids in the wanted order.
	type msg struct {
		alignment int64
		id        string
	}
	tests := []struct {
		name string
		push []msg
		want []string
	}{
		{
			name: "lower alignment first, whatever the id",
			push: []msg{{20, "a/p0:1"}, {10, "z/p9:9"}, {30, "a/p0:0"}},
			want: []string{"z/p9:9", "a/p0:1", "a/p0:0"},
		},
		{
			name: "equal alignment: id breaks the tie",
			push: []msg{{5, "s/p0:2"}, {5, "s/p0:1"}, {5, "r/p0:3"}},
			want: []string{"r/p0:3", "s/p0:1", "s/p0:2"},
		},
		{
			name: "ids compare offsets as numbers, not text",
			push: []msg{{5, "s/p0:10"}, {5, "s/p0:9"}},
			want: []string{"s/p0:9", "s/p0:10"},
		},
		{
			name: "ids compare partitions as numbers, not text",
			push: []msg{{5, "s/p10:0"}, {5, "s/p9:0"}},
			want: []string{"s/p9:0", "s/p10:0"},
		},
		{
			name: "a derived id sorts after its parent and before the parent's next sibling",
			push: []msg{{5, "s/p0:2"}, {5, "s/p0:1>m:0"}, {5, "s/p0:1"}},
			want: []string{"s/p0:1", "s/p0:1>m:0", "s/p0:2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewStreamBuffer("s")
			for _, m := range tt.push {
				b.Push(&Message{ID: mrgMustID(t, m.id), Time: Timestamps{Alignment: m.alignment}})
			}
			var got []string
			for _, m := range mrgDrain(b) {
				got = append(got, m.ID.String())
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestStreamBufferEmpty(t *testing.T) {
	b := NewStreamBuffer("orders")
	require.Equal(t, "orders", b.Stream())
	require.Nil(t, b.Peek())
	require.Nil(t, b.Pop())
	require.Zero(t, b.Len())
	require.Zero(t, b.Bytes())

	b.Push(&Message{Payload: []byte("abc")})
	require.Equal(t, 1, b.Len())
	require.EqualValues(t, messageBytes+3+BufferedOverhead, b.Bytes(), "a buffer counts footprints")
	require.NotNil(t, b.Pop())
	require.Nil(t, b.Pop())
	require.Zero(t, b.Bytes())
}

func TestStreamBufferMatchesSort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := mrgBufferMessages(t)
		arrival := rapid.Permutation(msgs).Draw(t, "arrival")
		b := NewStreamBuffer("s")
		var bytes int64
		for _, m := range arrival {
			b.Push(m)
			bytes += m.Footprint()
			require.Equal(t, bytes, b.Bytes())
		}
		require.Equal(t, len(msgs), b.Len())

		want := slices.Clone(msgs)
		slices.SortFunc(want, func(x, y *Message) int {
			return cmp.Or(cmp.Compare(x.Time.Alignment, y.Time.Alignment), x.ID.Compare(y.ID))
		})
		require.Equal(t, want, mrgDrain(b))
		require.Zero(t, b.Bytes())
	})
}

func TestStreamBufferDeterministic(t *testing.T) {
	// The same messages arriving in batches, with pops between batches:
	// shuffling the arrival order within each batch must not change a
	// single pop, since each pop sees the same multiset either way.
	rapid.Check(t, func(t *rapid.T) {
		msgs := mrgBufferMessages(t)
		var batches [][]*Message
		var pops []int
		for rest := msgs; len(rest) > 0; {
			n := rapid.IntRange(1, len(rest)).Draw(t, "batch")
			batches = append(batches, rest[:n])
			pops = append(pops, rapid.IntRange(0, n).Draw(t, "pops"))
			rest = rest[n:]
		}
		run := func(label string) []*Message {
			b := NewStreamBuffer("s")
			var out []*Message
			for i, batch := range batches {
				for _, m := range rapid.Permutation(batch).Draw(t, label) {
					b.Push(m)
				}
				for range pops[i] {
					out = append(out, b.Pop())
				}
			}
			return append(out, mrgDrain(b)...)
		}
		first := run("first")
		require.Equal(t, first, run("second"))
		require.ElementsMatch(t, msgs, first)
	})
}

func TestStreamBufferMatchesModel(t *testing.T) {
	// Pushes and pops interleaved, with alignments that mostly grow (as
	// real streams do, so that the in-order run, its ring wrap-around and
	// growth all get exercised) and sometimes step back (into the heap).
	// The model is a plain slice whose least element is found by a scan.
	rapid.Check(t, func(t *rapid.T) {
		b := NewStreamBuffer("s")
		var model []*Message
		clock := int64(0)
		for step := range rapid.IntRange(0, 300).Draw(t, "ops") {
			if len(model) > 0 && rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				best := 0
				for i, m := range model {
					if inStreamLess(m, model[best]) {
						best = i
					}
				}
				want := model[best]
				model = append(model[:best], model[best+1:]...)
				require.Same(t, want, b.Peek(), "step %d", step)
				require.Same(t, want, b.Pop(), "step %d", step)
			} else {
				clock += rapid.Int64Range(-3, 4).Draw(t, "tick")
				m := &Message{
					ID:   SourceID(rapid.SampledFrom([]string{"a", "b"}).Draw(t, "root"), 0, uint64(step)),
					Time: Timestamps{Alignment: clock},
				}
				b.Push(m)
				model = append(model, m)
			}
			require.Equal(t, len(model), b.Len())
		}
		for range model {
			require.NotNil(t, b.Pop())
		}
		require.Nil(t, b.Pop())
		require.Zero(t, b.Bytes())
	})
}

func TestStreamBufferForgetsPoppedMessages(t *testing.T) {
	b := NewStreamBuffer("s")
	for i := range 20 {
		// In order, then one out of order, so both parts hold messages.
		b.Push(&Message{ID: SourceID("s", 0, uint64(i)), Time: Timestamps{Alignment: int64(i)}})
	}
	b.Push(&Message{ID: SourceID("s", 0, 99), Time: Timestamps{Alignment: 5}})
	for b.Len() > 0 {
		b.Pop()
	}
	for _, e := range b.run {
		require.Nil(t, e.m, "a popped message must not stay reachable from the run")
	}
	for _, it := range b.heap.items[:cap(b.heap.items)] {
		require.Nil(t, it.val, "a popped message must not stay reachable from the heap")
	}
}
