package ordering

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// rtFmix64 is MurmurHash3's 64-bit finalizer, written from its reference
// (Appleby, MurmurHash3.cpp) for checking PartitionOf independently.
func rtFmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// rtPartitionRef is PartitionOf's documented rule computed with the
// standard library's FNV-1a and 128-bit arithmetic done differently.
func rtPartitionRef(key string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := rtFmix64(h.Sum64())
	// floor(x * n / 2^64) via two 32-bit halves.
	hi, lo := x>>32, x&0xffffffff
	a := hi * uint64(n)
	b := lo * uint64(n)
	return int((a + b>>32) >> 32)
}

func TestPartitionOf(t *testing.T) {
	t.Run("matches the documented hash and range rule", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			key := rapid.String().Draw(t, "key")
			n := rapid.IntRange(1, 1<<20).Draw(t, "partitions")
			got := PartitionOf(key, n)
			if want := rtPartitionRef(key, n); got != want {
				t.Fatalf("PartitionOf(%q, %d) = %d, want %d", key, n, got, want)
			}
			if got < 0 || got >= n {
				t.Fatalf("PartitionOf(%q, %d) = %d out of range", key, n, got)
			}
		})
	})
	t.Run("doubling the partitions splits each range", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			key := rapid.String().Draw(t, "key")
			n := rapid.IntRange(1, 1<<20).Draw(t, "partitions")
			if got, want := PartitionOf(key, 2*n)/2, PartitionOf(key, n); got != want {
				t.Fatalf("key %q: partition %d of %d, but %d of %d", key, PartitionOf(key, 2*n), 2*n, want, n)
			}
		})
	})
	t.Run("stable across versions", func(t *testing.T) {
		// Keyed state is stored by these values: a change here breaks
		// every stored pipeline. FNV-1a 64 of "" and "a" are the
		// published test vectors.
		require.Equal(t, uint64(0xcbf29ce484222325), rtFnv("")) // vectors guard the reference
		require.Equal(t, uint64(0xaf63dc4c8601ec8c), rtFnv("a"))
		require.Equal(t, rtFmix64(0xcbf29ce484222325), keyHash(""))
		require.Equal(t, rtFmix64(0xaf63dc4c8601ec8c), keyHash("a"))
		golden := []struct {
			key  string
			n    int
			want int
		}{
			{"", 1, 0}, {"", 16, 14}, {"a", 16, 8}, {"user-42", 7, 4}, {`["eu","2024"]`, 12, 9},
		}
		for _, g := range golden {
			require.Equal(t, g.want, PartitionOf(g.key, g.n), "PartitionOf(%q, %d)", g.key, g.n)
		}
	})
	t.Run("spreads short similar keys", func(t *testing.T) {
		const n, keys = 8, 8000
		var counts [n]int
		for i := range keys {
			counts[PartitionOf(fmt.Sprintf("k%d", i), n)]++
		}
		for p, c := range counts {
			require.InDelta(t, keys/n, c, keys/n*0.1, "partition %d holds %d of %d keys: %v", p, c, keys, counts)
		}
	})
	t.Run("panics without partitions", func(t *testing.T) {
		require.Panics(t, func() { PartitionOf("k", 0) })
	})
}

func rtFnv(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func TestNewRouterErrors(t *testing.T) {
	tests := []struct {
		cfg  RouterConfig
		want string
	}{
		{RouterConfig{Partitions: map[string]int{"a": 0}}, `destination "a": 0 partitions`},
		{RouterConfig{Partitions: map[string]int{"a b": 1}}, `name "a b"`},
		{RouterConfig{Partitions: map[string]int{"a": 1}, Cap: -1}, "cap -1 is negative"},
	}
	for _, tt := range tests {
		_, err := NewRouter(tt.cfg)
		require.ErrorIs(t, err, ErrRouterConfig)
		require.ErrorContains(t, err, tt.want)
	}
}

// rtRouter returns a router with destination "dst" of n partitions.
func rtRouter(t testing.TB, n int, capBytes int64) *Router {
	t.Helper()
	r, err := NewRouter(RouterConfig{Partitions: map[string]int{"dst": n}, Cap: capBytes})
	require.NoError(t, err)
	return r
}

// rtMsg returns a message with the given key and alignment, its id naming
// the sender and sequence for readable failures.
func rtMsg(key string, align int64, seq uint64) *Message {
	return &Message{ID: SourceID("in", 0, seq), Key: key, Time: Timestamps{Alignment: align}}
}

func TestRouterSendAssignsTaskIDsPerSender(t *testing.T) {
	r := rtRouter(t, 2, 0)
	s1, s2 := Sender{"src", 0}, Sender{"src", 1}
	var got []TaskID
	for i, from := range []Sender{s1, s1, s2, s1, s2} {
		m := rtMsg("k", 0, uint64(i))
		require.NoError(t, r.Send(from, "dst", m))
		got = append(got, m.Task)
	}
	require.Equal(t, []TaskID{1, 2, 1, 3, 2}, got)
	require.Equal(t, TaskID(3), r.LastTask(s1))
	require.Equal(t, TaskID(2), r.LastTask(s2))
	require.Equal(t, TaskID(0), r.LastTask(Sender{"other", 0}))

	r.ResumeTasks(Sender{"restarted", 4}, 41)
	m := rtMsg("k", 0, 9)
	require.NoError(t, r.Send(Sender{"restarted", 4}, "dst", m))
	require.Equal(t, TaskID(42), m.Task)
}

func TestRouterLaneOrder(t *testing.T) {
	// One destination partition so that every key meets in it.
	r := rtRouter(t, 1, 0)
	a, b := Sender{"a", 0}, Sender{"b", 0}
	send := func(from Sender, key string, align int64) *Message {
		m := rtMsg(key, align, 0)
		require.NoError(t, r.Send(from, "dst", m))
		return m
	}
	// Lane (a, x) carries a late-aligned message first: FIFO keeps the
	// early one of that lane behind it, while other lanes may pass.
	ax1 := send(a, "x", 50)              // task a1
	ax2 := send(a, "x", 10)              // task a2
	ay1 := send(a, "y", 20)              // task a3
	bx1 := send(b, "x", 20)              // task b1: ties ay1 on alignment, wins on TaskID
	bx2 := send(b, "x", 5)               // task b2
	bz1 := send(b, "z", 50)              // task b3
	az1 := send(a, "z", 50)              // task a4
	cz1 := send(Sender{"a", 1}, "z", 50) // task 1: ties ax1 on everything but the sender

	var got []*Message
	require.Equal(t, 8, r.Drain("dst", 0, func(m *Message) bool { got = append(got, m); return true }))
	require.Equal(t, []*Message{bx1, bx2, ay1, ax1, ax2, cz1, bz1, az1}, got)
	require.Nil(t, r.Next("dst", 0))
	require.Zero(t, r.Len("dst", 0))
	require.Zero(t, r.Bytes("dst", 0))
}

func TestRouterDrainRefusalKeepsMessage(t *testing.T) {
	r := rtRouter(t, 1, 0)
	from := Sender{"s", 0}
	ms := []*Message{rtMsg("k", 1, 0), rtMsg("k", 2, 1), rtMsg("k", 3, 2)}
	for _, m := range ms {
		require.NoError(t, r.Send(from, "dst", m))
	}
	seen := 0
	n := r.Drain("dst", 0, func(m *Message) bool { seen++; return seen < 2 })
	require.Equal(t, 1, n)
	require.Same(t, ms[1], r.Peek("dst", 0), "refused message stays at the head")
	require.Equal(t, 2, r.Len("dst", 0))
	require.Same(t, ms[1], r.Next("dst", 0))
	require.Same(t, ms[2], r.Next("dst", 0))
	require.Nil(t, r.Peek("dst", 0))
}

func TestRouterCap(t *testing.T) {
	// Each message counts its footprint: the Message, its key and payload,
	// and BufferedOverhead.
	one := (&Message{Key: "k"}).Footprint()
	require.Equal(t, messageBytes+1+BufferedOverhead, one)
	r := rtRouter(t, 1, 3*one+one/2)
	from := Sender{"s", 0}
	big := &Message{Key: "k", Payload: make([]byte, 10000)}
	require.NoError(t, r.Send(from, "dst", big), "an empty partition takes a message larger than its cap")
	small := &Message{Key: "k"}
	require.ErrorIs(t, r.Send(from, "dst", small), ErrFull)
	require.Zero(t, small.Task, "a refused message gets no TaskID")
	require.Equal(t, TaskID(1), r.LastTask(from), "a refusal does not use up a TaskID")
	require.Same(t, big, r.Next("dst", 0))

	for range 3 {
		require.NoError(t, r.Send(from, "dst", &Message{Key: "k"}))
	}
	require.Equal(t, 3*one, r.Bytes("dst", 0))
	require.ErrorIs(t, r.Send(from, "dst", &Message{Key: "k"}), ErrFull, "a fourth would exceed the cap")
	// Another destination partition has its own bound.
	k0, k1 := rtKeyIn(0, 2), rtKeyIn(1, 2)
	r2 := rtRouter(t, 2, (&Message{Key: k0}).Footprint()+50)
	require.NoError(t, r2.Send(from, "dst", &Message{Key: k0, Payload: make([]byte, 50)}))
	require.ErrorIs(t, r2.Send(from, "dst", &Message{Key: k0}), ErrFull)
	require.NoError(t, r2.Send(from, "dst", &Message{Key: k1}))
	r.Next("dst", 0)
	require.NoError(t, r.Send(from, "dst", &Message{Key: "k"}), "draining makes room")
}

// TestFootprint: what a message holds, table-driven.
func TestFootprint(t *testing.T) {
	base := messageBytes + BufferedOverhead
	derived := SourceID("in", 0, 1).Derive("out", 2)
	require.NotEmpty(t, derived.more, "a derived id has segments of its own")
	for _, tt := range []struct {
		name string
		m    Message
		want int64
	}{
		{"empty", Message{}, base},
		{"payload and key", Message{Key: "abc", Payload: make([]byte, 100, 4096)}, base + 103},
		{"a derived id", Message{ID: derived}, base + int64(len(derived.more))*segmentBytes},
		{"parents", Message{Parents: make([]MessageID, 2, 3)}, base + 3*idBytes},
		{"a derived parent", Message{Parents: []MessageID{derived}}, base + idBytes + int64(len(derived.more))*segmentBytes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.m.Footprint())
			require.GreaterOrEqual(t, tt.m.Footprint(), tt.m.Size()-MessageOverhead, "a footprint is never below the payload")
		})
	}
}

// rtKeyIn returns a key that PartitionOf puts in partition p of n.
func rtKeyIn(p, n int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("key%d", i); PartitionOf(k, n) == p {
			return k
		}
	}
}

func TestRouterUnknownDestination(t *testing.T) {
	r := rtRouter(t, 2, 0)
	m := rtMsg("k", 0, 7)
	err := r.Send(Sender{"s", 3}, "nowhere", m)
	require.ErrorIs(t, err, ErrUnknownDestination)
	require.ErrorContains(t, err, `"nowhere"`)
	require.ErrorContains(t, err, "in/p0:7")
	require.ErrorContains(t, err, "s/p3")
	require.Zero(t, r.Partitions("nowhere"))
	require.Equal(t, 2, r.Partitions("dst"))
	require.PanicsWithValue(t, `ordering: Router: unknown destination computation "nowhere"`, func() { r.Next("nowhere", 0) })
	require.PanicsWithValue(t, `ordering: Router: destination "dst" has 2 partitions, not 2`, func() { r.Len("dst", 2) })
	require.Panics(t, func() { r.Drain("dst", -1, nil) })
}

// rtLaneModel is the router's contract written as plainly as possible:
// FIFO lanes, and the next message is the least head by (Alignment, TaskID,
// sender, key).
type rtLaneModel struct {
	lanes map[string][]*Message // by partition/sender/key
	from  map[*Message]Sender
}

func (md *rtLaneModel) next(partition int) *Message {
	var best *Message
	prefix := fmt.Sprintf("%d/", partition)
	for name, q := range md.lanes {
		if !strings.HasPrefix(name, prefix) || len(q) == 0 {
			continue
		}
		if best == nil || rtHeadLess(q[0], best, md.from) {
			best = q[0]
		}
	}
	return best
}

func rtHeadLess(a, b *Message, from map[*Message]Sender) bool {
	if c := cmp.Compare(a.Time.Alignment, b.Time.Alignment); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.Task, b.Task); c != 0 {
		return c < 0
	}
	if c := from[a].compare(from[b]); c != 0 {
		return c < 0
	}
	return a.Key < b.Key
}

func TestRouterMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.IntRange(1, 4).Draw(t, "partitions")
		capBytes := rapid.SampledFrom([]int64{0, 400 * 3, 400 * 8}).Draw(t, "cap")
		r, err := NewRouter(RouterConfig{Partitions: map[string]int{"dst": parts}, Cap: capBytes})
		if err != nil {
			t.Fatal(err)
		}
		md := &rtLaneModel{lanes: map[string][]*Message{}, from: map[*Message]Sender{}}
		senders := []Sender{{"a", 0}, {"a", 1}, {"b", 0}}
		keys := []string{"x", "y", "z", ""}
		tasks := map[Sender]TaskID{}
		queued := make([]int, parts)
		queuedBytes := make([]int64, parts)
		seq := uint64(0)
		t.Repeat(map[string]func(*rapid.T){
			"send": func(t *rapid.T) {
				from := rapid.SampledFrom(senders).Draw(t, "from")
				m := rtMsg(rapid.SampledFrom(keys).Draw(t, "key"), rapid.Int64Range(0, 5).Draw(t, "align"), seq)
				seq++
				p := PartitionOf(m.Key, parts)
				err := r.Send(from, "dst", m)
				limit := cmp.Or(capBytes, DefaultRouterCap)
				if queued[p] > 0 && queuedBytes[p]+m.Footprint() > limit {
					if !errors.Is(err, ErrFull) {
						t.Fatalf("send over the cap: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				tasks[from]++
				if m.Task != tasks[from] {
					t.Fatalf("TaskID %d, want %d", m.Task, tasks[from])
				}
				queued[p]++
				queuedBytes[p] += m.Footprint()
				lane := fmt.Sprintf("%d/%v/%s", p, from, m.Key)
				md.lanes[lane] = append(md.lanes[lane], m)
				md.from[m] = from
			},
			"drain": func(t *rapid.T) {
				p := rapid.IntRange(0, parts-1).Draw(t, "partition")
				take := rapid.IntRange(0, 5).Draw(t, "take")
				taken := r.Drain("dst", p, func(m *Message) bool {
					if take == 0 {
						return false
					}
					take--
					want := md.next(p)
					if m != want {
						t.Fatalf("partition %d: got %v (key %q align %d task %d), want %v", p, m.ID, m.Key, m.Time.Alignment, m.Task, want.ID)
					}
					lane := fmt.Sprintf("%d/%v/%s", p, md.from[m], m.Key)
					md.lanes[lane] = md.lanes[lane][1:]
					queued[p]--
					queuedBytes[p] -= m.Footprint()
					return true
				})
				_ = taken
				if got := r.Len("dst", p); got != queued[p] {
					t.Fatalf("Len %d, want %d", got, queued[p])
				}
				if got := r.Bytes("dst", p); got != queuedBytes[p] {
					t.Fatalf("Bytes %d, want %d", got, queuedBytes[p])
				}
				if want := md.next(p); r.Peek("dst", p) != want {
					t.Fatalf("Peek disagrees with the model")
				}
			},
		})
	})
}

func BenchmarkRouterSendNext(b *testing.B) {
	for _, lanes := range []int{1, 64, 4096} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			r, err := NewRouter(RouterConfig{Partitions: map[string]int{"dst": 1}})
			require.NoError(b, err)
			keys := make([]string, lanes)
			for i := range keys {
				keys[i] = fmt.Sprintf("key-%d", i)
			}
			const window = 256
			msgs := make([]Message, window)
			from := Sender{"src", 0}
			for i := range msgs {
				msgs[i] = Message{Key: keys[i%lanes], Time: Timestamps{Alignment: int64(i)}}
				require.NoError(b, r.Send(from, "dst", &msgs[i]))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m := r.Next("dst", 0)
				m.Time.Alignment += window
				if err := r.Send(from, "dst", m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRouterDrain(b *testing.B) {
	r, err := NewRouter(RouterConfig{Partitions: map[string]int{"dst": 4}})
	require.NoError(b, err)
	const batch = 1024
	msgs := make([]Message, batch)
	for i := range msgs {
		var key [8]byte
		binary.LittleEndian.PutUint64(key[:], uint64(i%100))
		msgs[i] = Message{Key: string(key[:]), Time: Timestamps{Alignment: int64(i)}}
	}
	senders := []Sender{{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}}
	accept := func(*Message) bool { return true }
	b.ReportAllocs()
	for b.Loop() {
		for i := range msgs {
			if err := r.Send(senders[i%len(senders)], "dst", &msgs[i]); err != nil {
				b.Fatal(err)
			}
		}
		for p := range 4 {
			r.Drain("dst", p, accept)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
}

func TestSendAssignedKeepsTheSendersTaskIDs(t *testing.T) {
	r, err := NewRouter(RouterConfig{Partitions: map[string]int{"c": 1}, Cap: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	from := Sender{Computation: "src", Partition: 3}
	for _, task := range []TaskID{5, 9} {
		m := &Message{ID: SourceID("s", 3, uint64(task)), Stream: "s", Task: task}
		if err := r.SendAssigned(from, "c", m); err != nil {
			t.Fatal(err)
		}
		if m.Task != task || m.From != from {
			t.Fatalf("queued with task %d from %v, want %d from %v", m.Task, m.From, task, from)
		}
	}
	if got := r.LastTask(from); got != 9 {
		t.Fatalf("LastTask = %d, want 9", got)
	}
	if err := r.SendAssigned(from, "c", &Message{ID: SourceID("s", 3, 1), Stream: "s", Task: 9}); err == nil {
		t.Fatal("a TaskID not above the last was accepted")
	}
	var got []TaskID
	r.Drain("c", 0, func(m *Message) bool { got = append(got, m.Task); return true })
	if len(got) != 2 || got[0] != 5 || got[1] != 9 {
		t.Fatalf("drained %v, want [5 9]", got)
	}
}

func TestRestoreIgnoresTheByteBound(t *testing.T) {
	r, err := NewRouter(RouterConfig{Partitions: map[string]int{"c": 1}, Cap: 1})
	if err != nil {
		t.Fatal(err)
	}
	from := Sender{Computation: "up", Partition: 0}
	for task := TaskID(1); task <= 3; task++ {
		if err := r.Restore(from, "c", &Message{ID: TransformID("up", 0, uint64(task)), Stream: "s", Task: task}); err != nil {
			t.Fatalf("restore %d: %v", task, err)
		}
	}
	if r.Len("c", 0) != 3 {
		t.Fatalf("Len = %d, want 3", r.Len("c", 0))
	}
	if err := r.Send(from, "c", &Message{ID: TransformID("up", 0, 4), Stream: "s"}); !errors.Is(err, ErrFull) {
		t.Fatalf("Send over the bound after a restore = %v, want ErrFull", err)
	}
}
