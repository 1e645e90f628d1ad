package ordering

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// mrgBigClamp returns x clamped to the int64 range.
func mrgBigClamp(x *big.Int) int64 {
	switch {
	case x.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case x.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return x.Int64()
}

// mrgBigAverage is the reference bias: the exact average of Event-Alignment
// over ts, truncated toward zero (big.Int.Quo truncates), then clamped.
func mrgBigAverage(ts []Timestamps) int64 {
	sum := new(big.Int)
	for _, t := range ts {
		d := new(big.Int).Sub(big.NewInt(t.Event), big.NewInt(t.Alignment))
		sum.Add(sum, d)
	}
	return mrgBigClamp(sum.Quo(sum, big.NewInt(int64(len(ts)))))
}

// mrgBigSum3 is the reference priority: a+b+c exactly, then clamped.
func mrgBigSum3(a, b, c int64) int64 {
	s := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
	return mrgBigClamp(s.Add(s, big.NewInt(c)))
}

func TestBiasTable(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	ts := func(event, alignment int64) Timestamps { return Timestamps{Event: event, Alignment: alignment} }
	tests := []struct {
		name   string
		add    []Timestamps
		remove []Timestamps
		want   int64
	}{
		{name: "before any traffic the bias is 0", want: 0},
		{
			// "bias is the average difference between EventTimestamp and
			// AlignmentTimestamp within a stream"
			name: "average of Event-Alignment",
			add:  []Timestamps{ts(110, 100), ts(220, 200)},
			want: 15,
		},
		{name: "negative bias: events older than alignment", add: []Timestamps{ts(50, 100), ts(170, 200)}, want: -40},
		{name: "positive halves truncate toward zero", add: []Timestamps{ts(3, 0), ts(0, 0)}, want: 1},
		{name: "negative halves truncate toward zero", add: []Timestamps{ts(-3, 0), ts(0, 0)}, want: -1},
		{
			// "calculated based on the messages in the stream that are
			// currently being processed"
			name:   "a removed message no longer counts",
			add:    []Timestamps{ts(1000, 0), ts(10, 0)},
			remove: []Timestamps{ts(1000, 0)},
			want:   10,
		},
		{
			// flow-reference: "An empty stream keeps its last non-empty bias"
			name:   "emptied keeps the bias of its last message",
			add:    []Timestamps{ts(1000, 0), ts(10, 0)},
			remove: []Timestamps{ts(10, 0), ts(1000, 0)},
			want:   1000,
		},
		{name: "largest difference clamps", add: []Timestamps{ts(maxI, minI)}, want: maxI},
		{name: "smallest difference clamps", add: []Timestamps{ts(minI, maxI)}, want: minI},
		{name: "extremes cancel exactly", add: []Timestamps{ts(maxI, minI), ts(minI, maxI)}, want: 0},
		{
			// Diffs 2^64-1, 2^64-1 and four times -2^63 sum to -2: the
			// partial sums pass 2^64, which an int64 sum would wrap.
			name: "sum beyond int64, average inside",
			add:  []Timestamps{ts(maxI, minI), ts(maxI, minI), ts(minI, 0), ts(minI, 0), ts(minI, 0), ts(minI, 0)},
			want: 0,
		},
		{
			// Diff 2^63+2 and 0 sum beyond int64: the average 2^62+1 comes
			// out of the 128-bit division.
			name: "128-bit division, positive",
			add:  []Timestamps{ts(maxI, -3), ts(0, 0)},
			want: 1<<62 + 1,
		},
		{
			// -(2^63+3)/2 = -(2^62+1.5), truncated toward zero.
			name: "128-bit division, negative, truncated",
			add:  []Timestamps{ts(minI, 3), ts(0, 0)},
			want: -(1<<62 + 1),
		},
		{name: "minimum average is exact", add: []Timestamps{ts(minI, 0), ts(minI, 0)}, want: minI},
		{name: "maximum average is exact", add: []Timestamps{ts(maxI, 0), ts(maxI, 0), ts(maxI, 0)}, want: maxI},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bias
			for _, x := range tt.add {
				b.Add(x)
			}
			for _, x := range tt.remove {
				b.Remove(x)
			}
			require.Equal(t, tt.want, b.Value())
			require.EqualValues(t, len(tt.add)-len(tt.remove), b.Count())
			require.Equal(t, mrgBigSum3(500, tt.want, 0), b.Stabilized(500))
		})
	}
}

func TestBiasStabilizedClamps(t *testing.T) {
	var b Bias
	b.Add(Timestamps{Event: math.MaxInt64, Alignment: 0})
	require.Equal(t, int64(math.MaxInt64), b.Stabilized(1))
	require.Equal(t, int64(math.MaxInt64-1), b.Stabilized(-1))
	b.Remove(Timestamps{Event: math.MaxInt64, Alignment: 0})
	b.Add(Timestamps{Event: math.MinInt64, Alignment: 0})
	require.Equal(t, int64(math.MinInt64), b.Stabilized(-1))
	require.Equal(t, int64(math.MinInt64+1), b.Stabilized(1))
}

func TestBiasRemoveWithoutAddPanics(t *testing.T) {
	var b Bias
	require.Panics(t, func() { b.Remove(Timestamps{}) })
}

// mrgTimestampGen draws int64 timestamps, often near the ends of the range.
func mrgTimestampGen() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64(),
		rapid.Int64Range(-100, 100),
		rapid.SampledFrom([]int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}),
	)
}

func TestBiasMatchesBigIntReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b Bias
		var counted []Timestamps
		last := int64(0)
		for range rapid.IntRange(0, 100).Draw(t, "ops") {
			if len(counted) > 0 && rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				i := rapid.IntRange(0, len(counted)-1).Draw(t, "victim")
				b.Remove(counted[i])
				counted = append(counted[:i], counted[i+1:]...)
			} else {
				x := Timestamps{Event: mrgTimestampGen().Draw(t, "event"), Alignment: mrgTimestampGen().Draw(t, "alignment")}
				b.Add(x)
				counted = append(counted, x)
			}
			want := last
			if len(counted) > 0 {
				want = mrgBigAverage(counted)
				last = want
			}
			require.Equal(t, want, b.Value())
			require.EqualValues(t, len(counted), b.Count())
			alignment := mrgTimestampGen().Draw(t, "stabilize")
			require.Equal(t, mrgBigSum3(alignment, want, 0), b.Stabilized(alignment))
		}
	})
}

func TestClampSum3MatchesBigInt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := mrgTimestampGen().Draw(t, "a"), mrgTimestampGen().Draw(t, "b"), mrgTimestampGen().Draw(t, "c")
		require.Equal(t, mrgBigSum3(a, b, c), clampSum3(a, b, c))
	})
}

func TestBiasResumeIsTheEmptyValue(t *testing.T) {
	var b Bias
	b.Resume(-42)
	if b.Value() != -42 {
		t.Fatalf("Value = %d, want the resumed -42", b.Value())
	}
	b.Add(Timestamps{Event: 10, Alignment: 0})
	if b.Value() != 10 {
		t.Fatalf("Value with one message = %d, want 10", b.Value())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Resume with messages counted did not panic")
		}
	}()
	b.Resume(0)
}
