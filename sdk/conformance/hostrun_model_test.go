package conformance_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStepTimerWatermarks pins the timer rule the real-host models use:
// the input watermark is the smallest of the sources' (none before a
// source's first record), lowered at each position to the smallest event
// time from there to the step's end; finished inputs reach the end of
// time.
func TestStepTimerWatermarks(t *testing.T) {
	const none, end = math.MinInt64, math.MaxInt64
	for _, tc := range []struct {
		name     string
		streams  []string
		steps    [][]timed
		finishes bool
		want     []int64
	}{
		{"one stream, finished", []string{"a"}, [][]timed{{{"a", 10}, {"a", 7}, {"a", 12}}}, true, []int64{7, 7, 12, end}},
		{"one stream, not finished", []string{"a"}, [][]timed{{{"a", 10}, {"a", 7}, {"a", 12}}}, false, []int64{7, 7, 10, end}},
		{"a stream without records holds it", []string{"a", "b"}, [][]timed{{{"a", 10}, {"a", 20}}}, false, []int64{none, none, end}},
		{"the smaller source's", []string{"a", "b"}, [][]timed{{{"a", 10}, {"b", 30}, {"a", 40}}}, false, []int64{10, 28, 28, end}},
		{"a step resumes from the last", []string{"a", "b"}, [][]timed{{{"a", 10}, {"b", 30}}, {{"a", 5}, {"b", 31}}}, false, []int64{8, 8, 5, 8, end}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, stepTimerWatermarks(tc.steps, tc.streams, 2, tc.finishes))
		})
	}
}

// TestBehindSource: a record is behind its source when it is older than
// its own stream's newest earlier event time less the bound; the other
// stream does not count.
func TestBehindSource(t *testing.T) {
	in := []timed{{"a", 100}, {"b", 10}, {"a", 98}, {"a", 97}, {"b", 9}, {"b", 7}}
	var got []bool
	for j := range in {
		got = append(got, behindSource(in, j, 2))
	}
	require.Equal(t, []bool{false, false, false, true, false, true}, got)
	steps := cutSteps(in, func(j int) bool { return behindSource(in, j, 2) })
	require.Equal(t, [][]timed{in[:3], in[3:5], in[5:]}, steps)
}
