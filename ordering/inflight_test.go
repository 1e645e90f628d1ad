package ordering

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestInFlightRules(t *testing.T) {
	type op struct {
		kind string // "add", "remove"
		ts   int64
		ok   bool // for remove: the expected result
	}
	cases := []struct {
		name    string
		ops     []op
		wantMin int64
		wantOK  bool
		wantLen int
	}{
		{"empty has no minimum", nil, 0, false, 0},
		{"minimum of what was added", []op{{"add", 30, true}, {"add", 10, true}, {"add", 20, true}}, 10, true, 3},
		{"copies count separately", []op{{"add", 10, true}, {"add", 10, true}, {"remove", 10, true}}, 10, true, 1},
		{"removing the minimum exposes the next", []op{{"add", 10, true}, {"add", 20, true}, {"remove", 10, true}}, 20, true, 1},
		{"removing an absent value changes nothing", []op{{"add", 10, true}, {"remove", 11, false}}, 10, true, 1},
		{"removing more copies than added fails", []op{{"add", 10, true}, {"remove", 10, true}, {"remove", 10, false}}, 0, false, 0},
		{"re-adding a removed value", []op{{"add", 5, true}, {"add", 10, true}, {"remove", 10, true}, {"add", 10, true}, {"remove", 5, true}}, 10, true, 1},
		{"negative and extreme values", []op{{"add", NoWatermark, true}, {"add", -1, true}}, NoWatermark, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f InFlight
			for i, o := range tc.ops {
				if o.kind == "add" {
					f.Add(o.ts)
				} else {
					require.Equal(t, o.ok, f.Remove(o.ts), "op %d", i)
				}
			}
			m, ok := f.Min()
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.wantMin, m)
			require.Equal(t, tc.wantLen, f.Len())
		})
	}
}

// TestInFlightStaleEntriesStayBounded removes many values above a minimum
// that never leaves, the case lazy deletion would let grow without end.
func TestInFlightStaleEntriesStayBounded(t *testing.T) {
	var f InFlight
	f.Add(0)
	for i := int64(1); i <= 10_000; i++ {
		f.Add(i)
		require.True(t, f.Remove(i))
		require.LessOrEqual(t, len(f.heap), 2*f.Len()+65, "after removing %d", i)
		require.LessOrEqual(t, len(f.run), 4*f.Len()+200, "after removing %d", i)
	}
	m, ok := f.Min()
	require.True(t, ok)
	require.Equal(t, int64(0), m)
	require.Equal(t, 1, f.Len())
}

func TestInFlightMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f InFlight
		ref := map[int64]int{}
		n := 0
		// A narrow domain makes copies and re-adds common; a wide one makes
		// stale entries pile up until compaction.
		hi := rapid.SampledFrom([]int64{3, 50, 1000}).Draw(t, "domain")
		// Time order: values mostly grow, as a buffer fills, so that
		// both the run and the heap are exercised, and removals mostly
		// take the oldest.
		timeOrder := rapid.Bool().Draw(t, "timeOrder")
		var clock int64
		for step := range rapid.IntRange(0, 400).Draw(t, "steps") {
			ts := rapid.Int64Range(0, hi).Draw(t, "ts")
			if timeOrder {
				clock += rapid.Int64Range(0, 3).Draw(t, "tick")
				ts = clock - rapid.SampledFrom([]int64{0, 0, 0, 1, 5}).Draw(t, "lag")
				if len(ref) > 0 && rapid.Bool().Draw(t, "oldest") {
					ts = slices.Min(slices.Collect(maps.Keys(ref)))
				}
			}
			if rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				f.Add(ts)
				ref[ts]++
				n++
			} else {
				want := ref[ts] > 0
				require.Equal(t, want, f.Remove(ts), "step %d remove %d", step, ts)
				if want {
					ref[ts]--
					n--
					if ref[ts] == 0 {
						delete(ref, ts)
					}
				}
			}
			require.Equal(t, n, f.Len())
			require.Equal(t, ref[ts], f.Count(ts))
			m, ok := f.Min()
			require.Equal(t, n > 0, ok)
			if ok {
				require.Equal(t, slices.Min(slices.Collect(maps.Keys(ref))), m, "step %d", step)
			}
			require.LessOrEqual(t, len(f.heap), 2*len(ref)+65, "stale entries bounded")
			require.LessOrEqual(t, len(f.run)-f.head, 2*len(ref)+65, "dead run entries bounded")
			require.LessOrEqual(t, len(f.run), 4*len(ref)+200, "the run's consumed head bounded")
			stale := 0
			for _, v := range f.heap {
				if f.count[v] == 0 {
					stale++
				}
			}
			require.Equal(t, stale, f.stale, "stale entries counted")
		}
	})
}
