package opview_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
)

func ptr(v int64) *int64 { return &v }

func TestETA(t *testing.T) {
	for _, tc := range []struct {
		name        string
		done, total int64
		rate        float64
		want        *int64
	}{
		{"half way at 10/s", 50, 100, 10, ptr(int64(5 * time.Second))},
		{"a fraction of a nanosecond rounds up", 0, 1, 3e9, ptr(1)},
		{"zero rate: unknown", 10, 100, 0, nil},
		{"negative rate: unknown", 10, 100, -5, nil},
		{"NaN rate: unknown", 10, 100, math.NaN(), nil},
		{"a wait past int64: unknown", 0, math.MaxInt64, 1e-9, nil},
		{"finished", 100, 100, 0, ptr(0)},
		{"finished, still moving", 100, 100, 50, ptr(0)},
		{"done past total counts as finished", 120, 100, 0, ptr(0)},
		{"nothing to do is finished", 0, 0, 0, ptr(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, opview.ETA(tc.done, tc.total, tc.rate))
		})
	}
}

// The ETA is the rest at the rate: unknown only when it overflows, never
// negative, zero exactly when finished, and a faster rate never makes it
// later.
func TestETAProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		total := rapid.Int64Range(0, 1<<40).Draw(t, "total")
		done := rapid.Int64Range(0, 1<<41).Draw(t, "done")
		rate := rapid.Float64Range(1e-3, 1e9).Draw(t, "rate")
		eta := opview.ETA(done, total, rate)
		if eta == nil {
			require.GreaterOrEqual(t, float64(total-done)/rate*1e9, float64(math.MaxInt64))
			return
		}
		require.GreaterOrEqual(t, *eta, int64(0))
		require.Equal(t, done >= total, *eta == 0)
		faster := opview.ETA(done, total, rate*2)
		require.LessOrEqual(t, *faster, *eta)
	})
}

// A replay's progress, as the runtime's gauges give it, appears in the
// snapshot with its rate over the samples and the ETA at that rate; a
// finished backlog shows as done.
func TestProgressInSnapshot(t *testing.T) {
	f, pipe := newFakeRun(t)
	f.ptotal.WithLabelValues(runtime.WorkReplay, "orders").Set(1000)
	f.pdone.WithLabelValues(runtime.WorkReplay, "orders").Set(0)
	f.ptotal.WithLabelValues(runtime.WorkBacklog, "clicks").Set(7)
	f.pdone.WithLabelValues(runtime.WorkBacklog, "clicks").Set(7)
	s, hs := newServer(t, f, pipe, func(c *opview.Config) { c.HostID = "h1:42" })

	f.advance(10 * time.Second)
	f.pdone.WithLabelValues(runtime.WorkReplay, "orders").Set(250)
	s.Sample()

	var snap opview.Snapshot
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/snapshot", &snap))
	require.Equal(t, []opview.Progress{
		{Kind: runtime.WorkBacklog, Name: "clicks", Done: 7, Total: 7, ETANanos: ptr(0), Finished: true},
		{Kind: runtime.WorkReplay, Name: "orders", Done: 250, Total: 1000, Rate: 25, ETANanos: ptr(int64(30 * time.Second))},
	}, snap.Progress)
	var progress []opview.Progress
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/progress", &progress))
	require.Equal(t, snap.Progress, progress)
	require.NotEmpty(t, snap.Partitions)
	for _, p := range snap.Partitions {
		require.Equal(t, "h1:42", p.Owner, "%s/p%d", p.Computation, p.Partition)
	}

	var b strings.Builder
	require.NoError(t, opview.Format(&b, snap))
	out := b.String()
	require.Regexp(t, `(?m)^progress\s+done\s+total\s+percent\s+rate/s\s+eta$`, out)
	require.Regexp(t, `(?m)^  replay orders\s+250\s+1000\s+25\.0%\s+25\.0\s+30s$`, out)
	require.Regexp(t, `(?m)^  backlog clicks\s+7\s+7\s+100\.0%\s+0\.0\s+done$`, out)
	require.Regexp(t, `(?m)^  parse/p0\s+h1:42\s+7\s`, out)
}

// Without long work the snapshot's progress is an empty list, and status
// prints no progress table; the owner defaults to HOSTNAME:PID.
func TestNoProgress(t *testing.T) {
	f, pipe := newFakeRun(t)
	s, _ := newServer(t, f, pipe, nil)
	snap := s.Latest()
	require.NotNil(t, snap.Progress)
	require.Empty(t, snap.Progress)
	require.Equal(t, opview.DefaultHostID(), snap.Partitions[0].Owner)
	require.Regexp(t, `^.+:\d+$`, opview.DefaultHostID())
	var b strings.Builder
	require.NoError(t, opview.Format(&b, snap))
	require.NotContains(t, b.String(), "\nprogress")
}
