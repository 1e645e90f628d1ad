package tracestat_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/examples/internal/tracestat"
	"github.com/flowhost/flowhost/host/runtime"
)

func msg(part int, stream string, event int64) runtime.TraceRecord {
	return runtime.TraceRecord{Computation: "join", Partition: part, Kind: runtime.TraceMessage, Stream: stream, EventTS: event}
}

func TestEventInversions(t *testing.T) {
	s := int64(time.Second)
	for _, tc := range []struct {
		name string
		recs []runtime.TraceRecord
		want tracestat.Inversions
	}{
		{"empty", nil, tracestat.Inversions{}},
		{"in order", []runtime.TraceRecord{msg(0, "a", 1*s), msg(0, "b", 1*s), msg(0, "a", 2*s)},
			tracestat.Inversions{Deliveries: 3, Pairs: 2, Partitions: 1}},
		{"one step back", []runtime.TraceRecord{msg(0, "a", 5*s), msg(0, "b", 2*s), msg(0, "a", 3*s)},
			tracestat.Inversions{Deliveries: 3, Pairs: 2, Count: 1, Total: 3 * time.Second, Max: 3 * time.Second, Partitions: 1}},
		{"partitions are separate sequences", []runtime.TraceRecord{msg(0, "a", 5*s), msg(1, "a", 1*s), msg(0, "a", 6*s), msg(1, "a", 0)},
			tracestat.Inversions{Deliveries: 4, Pairs: 2, Count: 1, Total: time.Second, Max: time.Second, Partitions: 2}},
		{"timers and other computations are left out", []runtime.TraceRecord{
			msg(0, "a", 5*s),
			{Computation: "join", Kind: runtime.TraceTimer, EventTS: 0},
			{Computation: "other", Kind: runtime.TraceMessage, EventTS: 0},
			msg(0, "a", 4*s), msg(0, "a", 1*s),
		}, tracestat.Inversions{Deliveries: 3, Pairs: 2, Count: 2, Total: 4 * time.Second, Max: 3 * time.Second, Partitions: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tracestat.EventInversions(tc.recs, "join"))
		})
	}
}

func TestMeanBias(t *testing.T) {
	recs := []runtime.TraceRecord{msg(0, "a", 0), msg(0, "a", 0), msg(0, "b", 0)}
	recs[0].Bias, recs[1].Bias, recs[2].Bias = -4, -2, 7
	require.Equal(t, map[string]time.Duration{"a": -3, "b": 7}, tracestat.MeanBias(recs, "join"))
}

func TestReadNamesTheBadLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"computation":"join","event_ts":1}`+"\n{oops\n"), 0o644))
	_, err := tracestat.Read(path)
	require.ErrorContains(t, err, path+":2:")

	require.NoError(t, os.WriteFile(path, []byte(`{"computation":"join","kind":"message","event_ts":1}`+"\n"), 0o644))
	recs, err := tracestat.Read(path)
	require.NoError(t, err)
	require.Equal(t, []runtime.TraceRecord{{Computation: "join", Kind: "message", EventTS: 1}}, recs)
}

// A partition received messages at event times 10s, 4s and 12s: one
// inversion, six seconds back.
func ExampleEventInversions() {
	var recs []runtime.TraceRecord
	for _, ev := range []int64{10, 4, 12} {
		recs = append(recs, runtime.TraceRecord{Computation: "join", Kind: runtime.TraceMessage, EventTS: ev * int64(time.Second)})
	}
	v := tracestat.EventInversions(recs, "join")
	fmt.Println(v.Count, v.Total, v.Mean())
	// Output: 1 6s 6s
}
