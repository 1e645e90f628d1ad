package ordering

import (
	"cmp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// wmTimer builds a timer whose id is timers/p0:seq.
func wmTimer(key string, trigger, event int64, seq uint64) Timer {
	return Timer{Key: key, Trigger: trigger, Event: event, ID: TransformID("timers", 0, seq)}
}

// wmTimerNames renders timers as key@trigger#seq for readable failures.
func wmTimerNames(ts []Timer) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Key+"@"+strconv.FormatInt(t.Trigger, 10)+"#"+strconv.FormatUint(t.ID.Root().Seq, 10))
	}
	return out
}

func TestTimerStoreRules(t *testing.T) {
	cases := []struct {
		name      string
		set       []Timer
		cancel    [][2]any // key, trigger
		watermark int64
		wantDue   []string
		wantLeft  []string // what All yields afterwards
	}{
		{
			name:      "fires at Trigger == watermark",
			set:       []Timer{wmTimer("a", 100, 0, 1)},
			watermark: 100,
			wantDue:   []string{"a@100#1"},
			wantLeft:  []string{},
		},
		{
			name:      "does not fire at watermark-1",
			set:       []Timer{wmTimer("a", 100, 0, 1)},
			watermark: 99,
			wantDue:   []string{},
			wantLeft:  []string{"a@100#1"},
		},
		{
			name:      "one key fires in Trigger order",
			set:       []Timer{wmTimer("a", 30, 0, 1), wmTimer("a", 10, 0, 2), wmTimer("a", 20, 0, 3), wmTimer("a", 40, 0, 4)},
			watermark: 30,
			wantDue:   []string{"a@10#2", "a@20#3", "a@30#1"},
			wantLeft:  []string{"a@40#4"},
		},
		{
			name:      "across keys: Trigger, then id, then key",
			set:       []Timer{wmTimer("b", 10, 0, 5), wmTimer("a", 10, 0, 7), wmTimer("c", 5, 0, 9), wmTimer("d", 10, 0, 5)},
			watermark: 10,
			wantDue:   []string{"c@5#9", "b@10#5", "d@10#5", "a@10#7"},
			wantLeft:  []string{},
		},
		{
			name:      "ids compare as values: :10 after :9",
			set:       []Timer{wmTimer("a", 10, 0, 10), wmTimer("b", 10, 0, 9)},
			watermark: 10,
			wantDue:   []string{"b@10#9", "a@10#10"},
			wantLeft:  []string{},
		},
		{
			name:      "equal triggers dedup keeping the smallest Event (smaller set last)",
			set:       []Timer{wmTimer("a", 10, 500, 1), wmTimer("a", 10, 300, 2)},
			watermark: 10,
			wantDue:   []string{"a@10#2"},
			wantLeft:  []string{},
		},
		{
			name:      "equal triggers dedup keeping the smallest Event (smaller set first)",
			set:       []Timer{wmTimer("a", 10, 300, 2), wmTimer("a", 10, 500, 1)},
			watermark: 10,
			wantDue:   []string{"a@10#2"},
			wantLeft:  []string{},
		},
		{
			name:      "equal triggers and events keep the smaller id",
			set:       []Timer{wmTimer("a", 10, 300, 8), wmTimer("a", 10, 300, 3), wmTimer("a", 10, 300, 5)},
			watermark: 10,
			wantDue:   []string{"a@10#3"},
			wantLeft:  []string{},
		},
		{
			name:      "equal triggers of different keys are not deduplicated",
			set:       []Timer{wmTimer("a", 10, 0, 1), wmTimer("b", 10, 0, 2)},
			watermark: 10,
			wantDue:   []string{"a@10#1", "b@10#2"},
			wantLeft:  []string{},
		},
		{
			name:      "a cancelled timer never fires",
			set:       []Timer{wmTimer("a", 10, 0, 1), wmTimer("a", 20, 0, 2)},
			cancel:    [][2]any{{"a", int64(10)}},
			watermark: 100,
			wantDue:   []string{"a@20#2"},
			wantLeft:  []string{},
		},
		{
			name:      "cancel names key and trigger exactly",
			set:       []Timer{wmTimer("a", 10, 0, 1), wmTimer("b", 20, 0, 2)},
			cancel:    [][2]any{{"b", int64(10)}, {"a", int64(20)}},
			watermark: 15,
			wantDue:   []string{"a@10#1"},
			wantLeft:  []string{"b@20#2"},
		},
		{
			name:      "a replaced survivor moves in the firing order",
			set:       []Timer{wmTimer("a", 10, 9, 50), wmTimer("b", 10, 0, 20), wmTimer("a", 10, 1, 5)},
			watermark: 10,
			wantDue:   []string{"a@10#5", "b@10#20"},
			wantLeft:  []string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s TimerStore
			for _, tm := range tc.set {
				s.Set(tm)
			}
			for _, c := range tc.cancel {
				s.Cancel(c[0].(string), c[1].(int64))
			}
			require.Equal(t, tc.wantDue, wmTimerNames(s.PopDue(tc.watermark)))
			require.Equal(t, tc.wantLeft, wmTimerNames(slices.Collect(s.All())))
			require.Equal(t, len(tc.wantLeft), s.Len())
		})
	}
}

func TestTimerStoreSetReportsNewSlots(t *testing.T) {
	s := NewTimerStore()
	require.True(t, s.Set(wmTimer("a", 10, 5, 1)))
	require.False(t, s.Set(wmTimer("a", 10, 1, 2)), "same key and trigger: deduplicated")
	require.True(t, s.Set(wmTimer("a", 11, 5, 3)))
	require.True(t, s.Set(wmTimer("b", 10, 5, 4)))
	got, ok := s.Get("a", 10)
	require.True(t, ok)
	require.Equal(t, int64(1), got.Event)
	_, ok = s.Get("a", 12)
	require.False(t, ok)
	require.Equal(t, 3, s.Len())
	require.Equal(t, 2, s.KeyLen("a"))
	require.Equal(t, 1, s.KeyLen("b"))
	require.Equal(t, 0, s.KeyLen("z"))
}

func TestTimerStoreDedupKeepsSurvivorWhole(t *testing.T) {
	var s TimerStore
	s.Set(Timer{Key: "k", Trigger: 10, Event: 7, ID: TransformID("t", 0, 1), Payload: []byte("first")})
	s.Set(Timer{Key: "k", Trigger: 10, Event: 3, ID: TransformID("t", 0, 2), Payload: []byte("second")})
	s.Set(Timer{Key: "k", Trigger: 10, Event: 9, ID: TransformID("t", 0, 0), Payload: []byte("third")})
	got, ok := s.Get("k", 10)
	require.True(t, ok)
	require.Equal(t, Timer{Key: "k", Trigger: 10, Event: 3, ID: TransformID("t", 0, 2), Payload: []byte("second")}, got)
}

func TestTimerStoreCancel(t *testing.T) {
	var s TimerStore
	require.False(t, s.Cancel("a", 10), "empty store")
	s.Set(wmTimer("a", 10, 0, 1))
	require.True(t, s.Cancel("a", 10))
	require.False(t, s.Cancel("a", 10), "already cancelled")
	require.Equal(t, 0, s.Len())
	require.Equal(t, 0, s.KeyLen("a"))
	_, ok := s.MinTrigger()
	require.False(t, ok)
}

func TestTimerStoreMinTrigger(t *testing.T) {
	var s TimerStore
	_, ok := s.MinTrigger()
	require.False(t, ok)
	s.Set(wmTimer("a", 30, 0, 1))
	s.Set(wmTimer("b", 20, 0, 2))
	m, ok := s.MinTrigger()
	require.True(t, ok)
	require.Equal(t, int64(20), m)
	s.Cancel("b", 20)
	m, _ = s.MinTrigger()
	require.Equal(t, int64(30), m)
}

func TestTimerStorePopDueForKey(t *testing.T) {
	var s TimerStore
	s.Set(wmTimer("a", 30, 0, 1))
	s.Set(wmTimer("b", 5, 0, 2))
	s.Set(wmTimer("a", 10, 0, 3))
	s.Set(wmTimer("a", 50, 0, 4))
	require.Equal(t, []string{"a@10#3", "a@30#1"}, wmTimerNames(s.PopDueForKey("a", 40)))
	require.Nil(t, s.PopDueForKey("a", 40), "nothing more due for a")
	require.Nil(t, s.PopDueForKey("z", 40), "unknown key")
	require.Equal(t, []string{"b@5#2", "a@50#4"}, wmTimerNames(slices.Collect(s.All())))
	require.Equal(t, []string{"a@50#4"}, wmTimerNames(s.PopDueForKey("a", 50)))
	require.Equal(t, 0, s.KeyLen("a"))
	require.Equal(t, 1, s.Len())
}

// TestTimerStoreRemovesFromTheMiddle removes timers that are neither a
// key's earliest nor the store's: both heaps must find them where they are.
func TestTimerStoreRemovesFromTheMiddle(t *testing.T) {
	var s TimerStore
	for i, trig := range []int64{50, 10, 40, 20, 30} {
		s.Set(wmTimer("a", trig, 0, uint64(i)))
		s.Set(wmTimer("b", trig+5, 0, uint64(10+i)))
	}
	require.True(t, s.Cancel("a", 30))
	require.True(t, s.Cancel("b", 25))
	require.Equal(t, []string{"a@10#1", "b@15#11", "a@20#3"}, wmTimerNames(s.PopDue(20)))
	require.Equal(t, []string{"a@40#2", "a@50#0"}, wmTimerNames(s.PopDueForKey("a", 100)))
	require.Equal(t, []string{"b@35#14", "b@45#12", "b@55#10"}, wmTimerNames(s.PopDue(100)))
	require.Equal(t, 0, s.Len())
}

// TestTimerStoreManyTimersForOneKey crosses the size where a key's timers
// are indexed instead of scanned, both ways.
func TestTimerStoreManyTimersForOneKey(t *testing.T) {
	var s TimerStore
	const n = 100
	for i := range int64(n) {
		require.True(t, s.Set(wmTimer("k", 1000-i, 50, uint64(i))))
	}
	for i := range int64(n) {
		require.False(t, s.Set(wmTimer("k", 1000-i, 10, uint64(n+i))), "dedup through the index")
	}
	for i := int64(0); i < n; i += 2 {
		require.True(t, s.Cancel("k", 1000-i))
	}
	require.False(t, s.Cancel("k", 1000))
	got, ok := s.Get("k", 999)
	require.True(t, ok)
	require.Equal(t, int64(10), got.Event)
	due := s.PopDueForKey("k", 990) // 901, 903, ..., 989 are left below it
	require.Len(t, due, 45)
	require.Equal(t, int64(901), due[0].Trigger)
	require.Equal(t, int64(989), due[44].Trigger)
	require.Equal(t, 5, s.KeyLen("k")) // 991 ... 999
	require.True(t, s.Cancel("k", 995))
	_, ok = s.Get("k", 995)
	require.False(t, ok)
	require.Equal(t, []string{"k@991#109", "k@993#107", "k@997#103", "k@999#101"}, wmTimerNames(s.PopDue(1000)))
	require.True(t, s.Set(wmTimer("k", 5, 0, 1)), "the key starts over, scanned again")
	require.Equal(t, 1, s.KeyLen("k"))
}

func TestTimerStoreTakeDueStopsWhenRefused(t *testing.T) {
	var s TimerStore
	for i := range int64(5) {
		s.Set(wmTimer("k"+strconv.FormatInt(i, 10), 10+i, 0, uint64(i)))
	}
	var got []Timer
	n := s.TakeDue(12, func(t Timer) bool {
		if len(got) == 2 {
			return false // batch full
		}
		got = append(got, t)
		return true
	})
	require.Equal(t, 2, n)
	require.Equal(t, []string{"k0@10#0", "k1@11#1"}, wmTimerNames(got))
	require.Equal(t, []string{"k2@12#2", "k3@13#3", "k4@14#4"}, wmTimerNames(slices.Collect(s.All())), "the refused timer stays")
	require.Equal(t, 1, s.TakeDue(12, func(Timer) bool { return true }), "the watermark ends the walk")
	require.Equal(t, 2, s.Len())
}

func TestTimerStoreAllAndRestore(t *testing.T) {
	var s TimerStore
	s.Set(wmTimer("b", 20, 0, 1))
	s.Set(wmTimer("a", 10, 0, 2))
	s.Set(wmTimer("a", 20, 0, 3))
	var seen []string
	for tm := range s.All() {
		seen = append(seen, wmTimerNames([]Timer{tm})...)
		if len(seen) == 2 {
			break
		}
	}
	require.Equal(t, []string{"a@10#2", "b@20#1"}, seen, "All stops when the loop does")

	var r TimerStore
	r.Set(wmTimer("old", 1, 0, 0)) // replaced by Restore
	r.Restore(s.All())
	require.Equal(t, wmTimerNames(slices.Collect(s.All())), wmTimerNames(slices.Collect(r.All())))
	require.Equal(t, 2, r.KeyLen("a"))
	require.Equal(t, 0, r.KeyLen("old"))

	// Restore deduplicates like Set.
	r.Restore(slices.Values([]Timer{wmTimer("a", 10, 5, 1), wmTimer("a", 10, 2, 9), wmTimer("a", 10, 2, 4)}))
	require.Equal(t, []string{"a@10#4"}, wmTimerNames(slices.Collect(r.All())))
	require.Equal(t, []string{"a@10#4"}, wmTimerNames(r.PopDueForKey("a", 10)))
}

// wmRefTimers is the slow reference: a slice, sorted when asked.
type wmRefTimers []Timer

func (r *wmRefTimers) set(t Timer) {
	for i, old := range *r {
		if old.Key == t.Key && old.Trigger == t.Trigger {
			if t.Event < old.Event || t.Event == old.Event && t.ID.Compare(old.ID) < 0 {
				(*r)[i] = t
			}
			return
		}
	}
	*r = append(*r, t)
}

func wmRefOrder(a, b Timer) int {
	return cmp.Or(cmp.Compare(a.Trigger, b.Trigger), a.ID.Compare(b.ID), cmp.Compare(a.Key, b.Key))
}

func (r *wmRefTimers) cancel(key string, trigger int64) bool {
	for i, old := range *r {
		if old.Key == key && old.Trigger == trigger {
			*r = slices.Delete(*r, i, i+1)
			return true
		}
	}
	return false
}

// popDue removes the due timers (of key alone unless key is nil) and
// returns them in firing order.
func (r *wmRefTimers) popDue(watermark int64, key *string) []Timer {
	var due, rest []Timer
	for _, t := range *r {
		if t.Trigger <= watermark && (key == nil || t.Key == *key) {
			due = append(due, t)
		} else {
			rest = append(rest, t)
		}
	}
	*r = rest
	slices.SortFunc(due, wmRefOrder)
	return due
}

func TestTimerStoreMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s TimerStore
		var ref wmRefTimers
		// Few keys make deep per-key heaps, where positions matter.
		keys := []string{"a", "b", "c", "d"}[:rapid.IntRange(1, 4).Draw(t, "keys")]
		// Up to 31 timers a key are found by scanning, more by index.
		maxTrigger := rapid.SampledFrom([]int64{30, 100}).Draw(t, "maxTrigger")
		seq := uint64(0)
		for step := range rapid.IntRange(0, 300).Draw(t, "steps") {
			key := rapid.SampledFrom(keys).Draw(t, "key")
			trig := rapid.Int64Range(0, maxTrigger).Draw(t, "trigger")
			switch rapid.IntRange(0, 7).Draw(t, "op") {
			case 0, 1, 2:
				// Ids may repeat across keys: Key breaks the tie.
				tm := wmTimer(key, trig, rapid.Int64Range(0, 5).Draw(t, "event"), rapid.Uint64Range(0, seq).Draw(t, "seq"))
				seq++
				_, existed := s.Get(key, trig)
				require.Equal(t, !existed, s.Set(tm))
				ref.set(tm)
			case 3:
				want := ref.cancel(key, trig)
				require.Equal(t, want, s.Cancel(key, trig), "step %d", step)
			case 4:
				require.Equal(t, ref.popDue(trig, nil), s.PopDue(trig), "step %d", step)
			case 5:
				require.Equal(t, ref.popDue(trig, &key), s.PopDueForKey(key, trig), "step %d", step)
			case 6:
				limit := rapid.IntRange(0, 3).Draw(t, "limit")
				got := []Timer{}
				n := s.TakeDue(trig, func(t Timer) bool {
					if len(got) == limit {
						return false
					}
					got = append(got, t)
					return true
				})
				want := append([]Timer{}, ref.popDue(trig, nil)...)
				if len(want) > limit {
					for _, tm := range want[limit:] {
						ref.set(tm)
					}
					want = want[:limit]
				}
				require.Equal(t, want, got, "step %d", step)
				require.Equal(t, len(want), n)
			case 7:
				// Restore takes timers in any order, duplicates included.
				in := rapid.Permutation(append(slices.Clone(ref), ref...)).Draw(t, "restore")
				s.Restore(slices.Values(in))
			}
			all := append([]Timer{}, ref...)
			slices.SortFunc(all, wmRefOrder)
			require.Equal(t, all, append([]Timer{}, slices.Collect(s.All())...), "step %d", step)
			require.Equal(t, len(ref), s.Len())
			for _, k := range keys {
				n := 0
				for _, tm := range ref {
					if tm.Key == k {
						n++
					}
				}
				require.Equal(t, n, s.KeyLen(k))
			}
			m, ok := s.MinTrigger()
			require.Equal(t, len(ref) > 0, ok)
			if ok {
				require.Equal(t, all[0].Trigger, m)
			}
		}
	})
}
