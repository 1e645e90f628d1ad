package ordering

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestStepBefore(t *testing.T) {
	for _, tc := range []struct {
		name        string
		trigger     int64
		hasTimer    bool
		input, held int64
		settle      bool
		want        TimerStep
		why         string
	}{
		{"no timer", 0, false, 100, 100, true, TakeMessage, "nothing can fall before it"},
		{"due", 50, true, 100, 60, true, FireFirst, "trigger <= min(input, held)"},
		{"due at equality", 60, true, 60, 60, true, FireFirst, "timers fire at trigger <= watermark"},
		{"held input below the trigger", 70, true, 100, 60, true, TakeMessage, "a held message at 60 comes first"},
		{"undetermined", 70, true, 50, 80, true, AwaitWatermark, "input not seen yet decides"},
		{"undetermined at the held bound", 80, true, 50, 80, true, AwaitWatermark, "trigger == held: due if no earlier input comes"},
		{"undetermined, no waiting", 70, true, 50, 80, false, TakeMessage, "the lower bound decides"},
		{"beyond the held input", 90, true, 50, 80, true, TakeMessage, "the held message at 80 comes before it"},
		{"no watermark yet", 10, true, NoWatermark, 5, true, TakeMessage, "the held message at 5 comes first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, StepBefore(tc.trigger, tc.hasTimer, tc.input, tc.held, tc.settle), tc.why)
		})
	}
}

func TestTimerCut(t *testing.T) {
	bounds := []int64{10, 10, 20, 30, 30, 40}
	for _, tc := range []struct {
		name    string
		after   int
		trigger int64
		want    int
		ok      bool
	}{
		{"falls at the first bound it reaches", 0, 25, 3, true},
		{"never before the message after the setter", 3, 5, 4, true},
		{"a due timer's key may cut before message 0", -1, 10, 0, true},
		{"equality counts", 1, 20, 2, true},
		{"beyond the batch", 0, 41, 0, false},
		{"set by the last message", 5, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TimerCut(bounds, tc.after, tc.trigger)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

// TestTimerCutIsTheFirstReachingBound checks TimerCut against a scan.
func TestTimerCutIsTheFirstReachingBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		steps := rapid.SliceOf(rapid.Int64Range(0, 5)).Draw(t, "steps")
		bounds := make([]int64, len(steps))
		var at int64
		for i, s := range steps {
			at += s
			bounds[i] = at
		}
		after := rapid.IntRange(-1, len(bounds)).Draw(t, "after")
		trigger := rapid.Int64Range(-1, at+1).Draw(t, "trigger")
		want, wantOK := 0, false
		for i := after + 1; i < len(bounds); i++ {
			if i >= 0 && trigger <= bounds[i] {
				want, wantOK = i, true
				break
			}
		}
		got, ok := TimerCut(bounds, after, trigger)
		require.Equal(t, wantOK, ok)
		if ok {
			require.Equal(t, want, got)
		}
	})
}

func TestOutputWatermark(t *testing.T) {
	w := NewOutputWatermark(30 * time.Second)
	require.Equal(t, NoWatermark, w.Value(), "nothing emitted: no watermark")
	w.Emitted(int64(100 * time.Second))
	require.Equal(t, int64(70*time.Second), w.Value())
	w.Emitted(int64(90 * time.Second))
	require.Equal(t, int64(70*time.Second), w.Value(), "an older output does not lower it")
	w.Emitted(int64(200 * time.Second))
	require.Equal(t, int64(170*time.Second), w.Value())

	z := NewOutputWatermark(0)
	z.Emitted(NoWatermark)
	require.Equal(t, NoWatermark, z.Value())
}
