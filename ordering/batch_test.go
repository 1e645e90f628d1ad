package ordering

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func rtBatcher(t testing.TB, l BatchLimits) *Batcher {
	t.Helper()
	b, err := NewBatcher(l)
	require.NoError(t, err)
	return b
}

// rtKM is a message with a key and a payload of n bytes; its id carries
// seq so that failures read well.
func rtKM(key string, seq uint64, n int) *Message {
	return &Message{ID: SourceID("in", 0, seq), Key: key, Payload: make([]byte, n)}
}

func rtTimer(key string, trigger int64, seq uint64) Timer {
	return Timer{Key: key, Trigger: trigger, ID: TransformID("timers", 0, seq)}
}

// rtShape renders a batch as "key[timer triggers|message seqs]" for
// readable comparisons.
func rtShape(b Batch) []string {
	var out []string
	for _, k := range b.Keys {
		s := k.Key + "["
		for i, t := range k.Timers {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprintf("t%d.%d", t.Trigger, t.ID.Root().Seq)
		}
		s += "|"
		for i, m := range k.Messages {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprint(m.ID.Root().Seq)
		}
		out = append(out, s+"]")
	}
	return out
}

func TestBatchLimits(t *testing.T) {
	require.Equal(t, BatchLimits{MaxRows: 1000, MaxBytes: 10 << 20, MaxAge: 1e9}, DefaultBatchLimits)
	b := rtBatcher(t, BatchLimits{MaxRows: 5})
	require.Equal(t, BatchLimits{MaxRows: 5, MaxBytes: 10 << 20, MaxAge: 1e9}, b.Limits(), "zero fields take the defaults")

	for _, tt := range []struct {
		l    BatchLimits
		want string
	}{
		{BatchLimits{MaxRows: -1}, "max_rows -1 is negative"},
		{BatchLimits{MaxBytes: -2}, "max_bytes -2 is negative"},
		{BatchLimits{MaxAge: -3}, "max_age -3ns is negative"},
	} {
		_, err := NewBatcher(tt.l)
		require.ErrorContains(t, err, tt.want)
	}
}

func TestBatcherFullAndReady(t *testing.T) {
	t.Run("rows", func(t *testing.T) {
		b := rtBatcher(t, BatchLimits{MaxRows: 3, MaxAge: 100})
		require.False(t, b.Add(rtKM("k", 0, 0), 10))
		require.False(t, b.Add(rtKM("k", 1, 0), 11))
		require.False(t, b.Ready(50))
		require.True(t, b.Add(rtKM("k", 2, 0), 12))
		require.True(t, b.Ready(12))
		require.Equal(t, 3, b.Cut(nil).Rows())
		require.Zero(t, b.Len())
		require.False(t, b.Ready(1000), "nothing pending is never ready")
	})
	t.Run("age", func(t *testing.T) {
		b := rtBatcher(t, BatchLimits{MaxRows: 100, MaxAge: 100})
		_, ok := b.Oldest()
		require.False(t, ok)
		b.Add(rtKM("k", 0, 0), 10)
		b.Add(rtKM("k", 1, 0), 60)
		at, ok := b.Oldest()
		require.True(t, ok)
		require.Equal(t, int64(10), at)
		require.False(t, b.Ready(109))
		require.True(t, b.Ready(110), "the first message waited MaxAge")
	})
	t.Run("bytes", func(t *testing.T) {
		// Sizes count MessageOverhead (64) plus the payload.
		b := rtBatcher(t, BatchLimits{MaxRows: 100, MaxBytes: 300})
		require.False(t, b.Add(rtKM("a", 0, 36), 0)) // 100
		require.False(t, b.Add(rtKM("b", 1, 36), 0)) // 200
		require.True(t, b.Add(rtKM("a", 2, 86), 0))  // 350 > 300: full
		require.Equal(t, int64(350), b.Bytes())
		require.Equal(t, []string{"a[|0]", "b[|1]"}, rtShape(b.Cut(nil)), "the overflowing message waits")
		require.Equal(t, 1, b.Len())
		require.Equal(t, int64(150), b.Bytes())
		require.Equal(t, []string{"a[|2]"}, rtShape(b.Cut(nil)))
	})
	t.Run("exactly MaxBytes is full and fits", func(t *testing.T) {
		b := rtBatcher(t, BatchLimits{MaxRows: 100, MaxBytes: 200})
		require.False(t, b.Add(rtKM("a", 0, 36), 0))
		require.True(t, b.Add(rtKM("a", 1, 36), 0))
		require.Equal(t, 2, b.Cut(nil).Rows())
	})
	t.Run("a message larger than MaxBytes forms a batch alone", func(t *testing.T) {
		b := rtBatcher(t, BatchLimits{MaxRows: 100, MaxBytes: 100})
		require.True(t, b.Add(rtKM("big", 0, 1000), 0))
		b.Add(rtKM("small", 1, 0), 0)
		require.Equal(t, []string{"big[|0]"}, rtShape(b.Cut(nil)))
		b.Add(rtKM("big", 2, 1000), 0)
		require.Equal(t, []string{"small[|1]"}, rtShape(b.Cut(nil)), "a large message does not join a batch")
		require.Equal(t, []string{"big[|2]"}, rtShape(b.Cut(nil)))
	})
	t.Run("age of the remainder after a partial cut", func(t *testing.T) {
		b := rtBatcher(t, BatchLimits{MaxRows: 2, MaxAge: 100})
		b.Add(rtKM("k", 0, 0), 0)
		b.Add(rtKM("k", 1, 0), 10)
		b.Add(rtKM("k", 2, 0), 50)
		b.Cut(nil)
		at, _ := b.Oldest()
		require.Equal(t, int64(50), at)
		require.False(t, b.Ready(149))
		require.True(t, b.Ready(150))
	})
}

func TestBatcherCutGrouping(t *testing.T) {
	tests := []struct {
		name   string
		keys   []string // message keys in merge order; message i has seq i
		timers []Timer
		want   []string
	}{
		{
			name: "keys in order of first message, messages in merge order",
			keys: []string{"b", "a", "b", "c", "a", "b"},
			want: []string{"b[|0 2 5]", "a[|1 4]", "c[|3]"},
		},
		{
			name:   "due timers before the key's messages, in (Trigger, ID) order",
			keys:   []string{"b", "a", "b"},
			timers: []Timer{rtTimer("a", 30, 1), rtTimer("b", 20, 9), rtTimer("a", 10, 5), rtTimer("a", 30, 0)},
			want:   []string{"b[t20.9|0 2]", "a[t10.5 t30.0 t30.1|1]"},
		},
		{
			name:   "timer-only keys after, by (earliest Trigger, Key)",
			keys:   []string{"m"},
			timers: []Timer{rtTimer("z", 5, 0), rtTimer("y", 7, 1), rtTimer("x", 7, 2), rtTimer("z", 1, 3), rtTimer("m", 9, 4)},
			want:   []string{"m[t9.4|0]", "z[t1.3 t5.0|]", "x[t7.2|]", "y[t7.1|]"},
		},
		{
			name:   "timers alone",
			timers: []Timer{rtTimer("k", 3, 0)},
			want:   []string{"k[t3.0|]"},
		},
		{
			name: "the unkeyed key is a key like any other",
			keys: []string{"", "a", ""},
			want: []string{"[|0 2]", "a[|1]"},
		},
		{name: "nothing", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := rtBatcher(t, DefaultBatchLimits)
			for i, k := range tt.keys {
				b.Add(rtKM(k, uint64(i), 0), 0)
			}
			due := slices.Clone(tt.timers)
			require.Equal(t, tt.want, rtShape(b.Cut(due)))
			require.Equal(t, tt.timers, due, "Cut leaves the caller's timers alone")
			require.Zero(t, b.Len())
			require.Zero(t, b.Bytes())
		})
	}
}

// TestBatcherProperties checks, over random inputs and cuts, that batching
// loses, duplicates and reorders nothing within a key, keeps every batch
// within its limits, and puts each key once per batch with its timers
// sorted.
func TestBatcherProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limits := BatchLimits{
			MaxRows:  rapid.IntRange(1, 6).Draw(t, "max_rows"),
			MaxBytes: rapid.Int64Range(64, 400).Draw(t, "max_bytes"),
			MaxAge:   rapid.Int64Range(1, 50).Draw(t, "max_age"),
		}
		b, err := NewBatcher(limits)
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b", "c", ""}
		var added, cut []*Message
		now := int64(0)
		timerSeq := uint64(0)
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				m := rtKM(rapid.SampledFrom(keys).Draw(t, "key"), uint64(len(added)), rapid.IntRange(0, 300).Draw(t, "payload"))
				now += rapid.Int64Range(0, 20).Draw(t, "dt")
				full := b.Add(m, now)
				added = append(added, m)
				var bytes int64
				for _, p := range added[len(cut):] {
					bytes += p.Size()
				}
				if want := len(added)-len(cut) >= limits.MaxRows || bytes >= limits.MaxBytes; full != want {
					t.Fatalf("Add full = %v, want %v (%d pending, %d bytes)", full, want, len(added)-len(cut), bytes)
				}
			},
			"cut": func(t *rapid.T) {
				var due []Timer
				for range rapid.IntRange(0, 4).Draw(t, "timers") {
					due = append(due, rtTimer(rapid.SampledFrom(keys).Draw(t, "timer key"), rapid.Int64Range(0, 3).Draw(t, "trigger"), timerSeq))
					timerSeq++
				}
				batch := b.Cut(due)
				seen := map[string]bool{}
				var rows int
				var bytes int64
				var flat []*Message
				timerCount := 0
				for i, k := range batch.Keys {
					if seen[k.Key] {
						t.Fatalf("key %q twice in one batch", k.Key)
					}
					seen[k.Key] = true
					if len(k.Messages) == 0 && len(k.Timers) == 0 {
						t.Fatalf("empty key %q", k.Key)
					}
					if len(k.Messages) == 0 && i+1 < len(batch.Keys) && len(batch.Keys[i+1].Messages) > 0 {
						t.Fatalf("timer-only key %q before a key with messages", k.Key)
					}
					for j, tm := range k.Timers {
						if tm.Key != k.Key {
							t.Fatalf("timer of %q under %q", tm.Key, k.Key)
						}
						if j > 0 && timerCompare(k.Timers[j-1], tm) >= 0 {
							t.Fatalf("timers of %q out of (Trigger, ID) order", k.Key)
						}
					}
					timerCount += len(k.Timers)
					for _, m := range k.Messages {
						if m.Key != k.Key {
							t.Fatalf("message of %q under %q", m.Key, k.Key)
						}
						rows++
						bytes += m.Size()
						flat = append(flat, m)
					}
				}
				if timerCount != len(due) {
					t.Fatalf("%d timers in the batch, %d due", timerCount, len(due))
				}
				if rows > limits.MaxRows || (rows > 1 && bytes > limits.MaxBytes) {
					t.Fatalf("batch of %d rows, %d bytes exceeds %+v", rows, bytes, limits)
				}
				// The batch is exactly the next messages in added order,
				// regrouped without reordering any key.
				next := added[len(cut) : len(cut)+rows]
				for _, k := range keys {
					if !slices.Equal(rtOfKey(flat, k), rtOfKey(next, k)) {
						t.Fatalf("key %q: batch does not hold the next messages in order", k)
					}
				}
				// Maximal: one more message would break a limit.
				if len(added) > len(cut)+rows && rows < limits.MaxRows && rows > 0 &&
					bytes+added[len(cut)+rows].Size() <= limits.MaxBytes {
					t.Fatalf("cut %d rows, %d bytes; the next message would have fit", rows, bytes)
				}
				if len(added) > len(cut) && rows == 0 {
					t.Fatalf("cut nothing with %d pending", len(added)-len(cut))
				}
				cut = append(cut, next...)
			},
		})
	})
}

func rtOfKey(ms []*Message, key string) []*Message {
	var out []*Message
	for _, m := range ms {
		if m.Key == key {
			out = append(out, m)
		}
	}
	return out
}

func BenchmarkBatcher(b *testing.B) {
	for _, keys := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			bt := rtBatcher(b, DefaultBatchLimits)
			const rows = 1000
			msgs := make([]Message, rows)
			for i := range msgs {
				msgs[i] = Message{Key: fmt.Sprintf("key-%d", i%keys), Payload: make([]byte, 100)}
			}
			due := []Timer{rtTimer("key-0", 1, 0), rtTimer("other", 2, 1)}
			b.ReportAllocs()
			for b.Loop() {
				for i := range msgs {
					bt.Add(&msgs[i], 0)
				}
				if got := bt.Cut(due).Rows(); got != rows {
					b.Fatalf("cut %d rows", got)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/msg")
		})
	}
}
