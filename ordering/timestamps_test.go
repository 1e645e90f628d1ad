package ordering

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestSourceClock(t *testing.T) {
	tests := []struct {
		name   string
		resume int64
		writes []int64
		want   []int64
	}{
		{"increasing writes are kept", 0, []int64{10, 20, 30}, []int64{10, 20, 30}},
		{"equal writes stay equal", 0, []int64{10, 10, 10}, []int64{10, 10, 10}},
		{"a clock step back is raised to the last", 0, []int64{10, 30, 20, 25, 40}, []int64{10, 30, 30, 30, 40}},
		{"resume after a restart", 50, []int64{40, 50, 60}, []int64{50, 50, 60}},
		{"negative times before the epoch", -100, []int64{-200, -50}, []int64{-100, -50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewSourceClock(tt.resume)
			var got []int64
			for _, w := range tt.writes {
				got = append(got, c.Align(w))
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.want[len(tt.want)-1], c.Last())
		})
	}
}

func TestSourceRecord(t *testing.T) {
	var c SourceClock // the zero clock is ready to use
	require.Equal(t, Timestamps{Event: 5, System: 100, Write: 100, Alignment: 100}, c.SourceRecord(5, 100))
	// The queue's clock stepped back: Write and System keep the truth,
	// only Alignment is raised.
	require.Equal(t, Timestamps{Event: 7, System: 90, Write: 90, Alignment: 100}, c.SourceRecord(7, 90))
	require.Equal(t, int64(100), c.Last())
}

func TestTransformOutput(t *testing.T) {
	parents := []Timestamps{
		{Event: 30, System: 300, Write: 300, Alignment: 300},
		{Event: 10, System: 100, Alignment: 100},
		{Event: 20, System: 900, Alignment: 50},
	}
	tests := []struct {
		name     string
		now      int64
		parents  []Timestamps
		event    int64
		eventSet bool
		want     Timestamps
	}{
		{"event is the min over parents", 1000, parents, 0, false,
			Timestamps{Event: 10, System: 1000, Alignment: 1000}},
		{"a single parent's event", 1000, parents[:1], 0, false,
			Timestamps{Event: 30, System: 1000, Alignment: 1000}},
		{"the computation's event wins", 1000, parents, 77, true,
			Timestamps{Event: 77, System: 1000, Alignment: 1000}},
		{"an explicit zero event is kept", 1000, parents, 0, true,
			Timestamps{Event: 0, System: 1000, Alignment: 1000}},
		{"no parents and no event: now", 1000, nil, 0, false,
			Timestamps{Event: 1000, System: 1000, Alignment: 1000}},
		{"alignment is now even when parents are later", 10, parents, 0, false,
			Timestamps{Event: 10, System: 10, Alignment: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TransformOutput(tt.now, tt.parents, tt.event, tt.eventSet)
			require.Equal(t, tt.want, got)
			require.Zero(t, got.Write, "only source records have a WriteTimestamp")
		})
	}
}

func TestMapOutput(t *testing.T) {
	parent := Timestamps{Event: 1, System: 2, Write: 3, Alignment: 4}
	require.Equal(t, Timestamps{Event: 1, System: 2, Alignment: 4}, MapOutput(parent))
	require.Equal(t, Timestamps{Event: 1, System: 2, Write: 3, Alignment: 4}, parent, "parent untouched")
}

func TestMultiParentOutput(t *testing.T) {
	tests := []struct {
		name    string
		parents []Timestamps
		want    Timestamps
	}{
		{"one parent is a map", []Timestamps{{Event: 1, System: 2, Write: 3, Alignment: 4}},
			Timestamps{Event: 1, System: 2, Alignment: 4}},
		{"min alignment, min event, max system", []Timestamps{
			{Event: 50, System: 10, Alignment: 40},
			{Event: 20, System: 30, Write: 99, Alignment: 60},
			{Event: 70, System: 20, Alignment: 5},
		}, Timestamps{Event: 20, System: 30, Alignment: 5}},
		{"extremes come from different parents in any position", []Timestamps{
			{Event: 1, System: 1, Alignment: 9},
			{Event: 9, System: 9, Alignment: 1},
		}, Timestamps{Event: 1, System: 9, Alignment: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, MultiParentOutput(tt.parents))
		})
	}
	require.Panics(t, func() { MultiParentOutput(nil) })
}

func TestSystemClock(t *testing.T) {
	wall := []int64{100, 90, 120, 120, 50, 200}
	i := 0
	c := NewSystemClock(func() int64 { v := wall[i]; i++; return v }, 95)
	var got []int64
	for range wall {
		got = append(got, c.Now())
	}
	require.Equal(t, []int64{100, 100, 120, 120, 120, 200}, got)
}

func rtGenTimestamps() *rapid.Generator[Timestamps] {
	ts := rapid.Int64Range(-1000, 1000)
	return rapid.Custom(func(t *rapid.T) Timestamps {
		return Timestamps{
			Event:     ts.Draw(t, "event"),
			System:    ts.Draw(t, "system"),
			Write:     ts.Draw(t, "write"),
			Alignment: ts.Draw(t, "alignment"),
		}
	})
}

func TestTimestampRuleProperties(t *testing.T) {
	t.Run("source alignment is the running max of writes", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			resume := rapid.Int64Range(-1000, 1000).Draw(t, "resume")
			writes := rapid.SliceOf(rapid.Int64Range(-1000, 1000)).Draw(t, "writes")
			c := NewSourceClock(resume)
			prev := resume
			for i, w := range writes {
				ts := c.SourceRecord(0, w)
				if ts.Alignment < prev || ts.Alignment < w {
					t.Fatalf("record %d: alignment %d below last %d or write %d", i, ts.Alignment, prev, w)
				}
				if ts.Alignment != w && ts.Alignment != prev {
					t.Fatalf("record %d: alignment %d is neither write %d nor last %d", i, ts.Alignment, w, prev)
				}
				if ts.Write != w {
					t.Fatalf("record %d: write %d rewritten to %d", i, w, ts.Write)
				}
				prev = ts.Alignment
			}
		})
	})
	t.Run("system clock never goes back", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			wall := rapid.SliceOfN(rapid.Int64Range(-1000, 1000), 1, 50).Draw(t, "wall")
			i := 0
			c := NewSystemClock(func() int64 { v := wall[i]; i++; return v }, 0)
			prev := int64(0)
			for range wall {
				now := c.Now()
				if now < prev || now < wall[i-1] {
					t.Fatalf("Now %d below previous %d or wall %d", now, prev, wall[i-1])
				}
				prev = now
			}
		})
	})
	t.Run("transform output", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			parents := rapid.SliceOf(rtGenTimestamps()).Draw(t, "parents")
			now := rapid.Int64Range(-1000, 1000).Draw(t, "now")
			got := TransformOutput(now, parents, 0, false)
			if got.Alignment != now || got.System != now || got.Write != 0 {
				t.Fatalf("got %+v at now %d", got, now)
			}
			if len(parents) == 0 {
				if got.Event != now {
					t.Fatalf("no parents: event %d, want now %d", got.Event, now)
				}
				return
			}
			events := rtMap(parents, func(p Timestamps) int64 { return p.Event })
			if got.Event != slices.Min(events) {
				t.Fatalf("event %d, want min of %v", got.Event, events)
			}
			shuffled := rapid.Permutation(parents).Draw(t, "shuffled")
			if again := TransformOutput(now, shuffled, 0, false); again != got {
				t.Fatalf("depends on parent order: %+v vs %+v", got, again)
			}
			event := rapid.Int64().Draw(t, "event")
			if set := TransformOutput(now, parents, event, true); set.Event != event {
				t.Fatalf("set event %d became %d", event, set.Event)
			}
		})
	})
	t.Run("derived from several parents", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			parents := rapid.SliceOfN(rtGenTimestamps(), 1, 8).Draw(t, "parents")
			got := MultiParentOutput(parents)
			want := Timestamps{
				Event:     slices.Min(rtMap(parents, func(p Timestamps) int64 { return p.Event })),
				System:    slices.Max(rtMap(parents, func(p Timestamps) int64 { return p.System })),
				Alignment: slices.Min(rtMap(parents, func(p Timestamps) int64 { return p.Alignment })),
			}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			if len(parents) == 1 && got != MapOutput(parents[0]) {
				t.Fatalf("one parent: %+v differs from MapOutput %+v", got, MapOutput(parents[0]))
			}
			if again := MultiParentOutput(rapid.Permutation(parents).Draw(t, "shuffled")); again != got {
				t.Fatalf("depends on parent order: %+v vs %+v", got, again)
			}
		})
	})
}

func rtMap[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
