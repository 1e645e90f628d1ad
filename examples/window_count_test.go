package examples_test

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/runtime"
)

// TestWindowCount runs examples/pipelines/window-count.yaml (one-minute
// windows, a 30s out-of-orderness bound) on clicks written up to 20s after
// they happen, so out of order but never late, and requires exactly the
// per-user, per-window counts the test computes from the input: each window
// once, emitted by its timer, with the window's last instant as event time.
func TestWindowCount(t *testing.T) {
	t.Parallel()
	const window = int64(time.Minute)
	type win struct {
		user  string
		start int64
	}
	rng := rand.New(rand.NewPCG(21, 22))
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	users := []string{"ann", "bob", "cy", "dee", "ed"}
	want := map[win]int64{}
	var recs []recordLine
	for range 600 {
		user := users[rng.IntN(len(users))]
		event := start + rng.Int64N(int64(20*time.Minute))
		write := event + rng.Int64N(int64(20*time.Second))
		recs = append(recs, recordLine{Write: write, Event: event, Payload: map[string]string{"user": user, "page": "/"}})
		want[win{user, event / window * window}]++
	}
	slices.SortFunc(recs, func(a, b recordLine) int { return cmp.Compare(a.Write, b.Write) })

	r := runPipeline(t, "window-count", map[string][]byte{"data/clicks.jsonl": jsonLines(t, recs)})

	timers := map[string]runtime.TraceRecord{}
	for _, tr := range r.trace {
		if tr.Kind == runtime.TraceTimer {
			timers[tr.MessageID] = tr
		}
	}
	got := map[win]int64{}
	for _, rec := range r.stream("counts") {
		var p struct {
			Key         string `json:"key"`
			WindowStart int64  `json:"window_start"`
			WindowEnd   int64  `json:"window_end"`
			Count       int64  `json:"count"`
		}
		require.NoError(t, json.Unmarshal(rec.Payload, &p))
		w := win{p.Key, p.WindowStart}
		_, dup := got[w]
		require.False(t, dup, "window %v emitted twice", w)
		got[w] = p.Count
		require.Equal(t, p.WindowStart+window, p.WindowEnd)
		require.Equal(t, p.WindowEnd-1, rec.EventTS, "a count's event time is its window's last instant")
		require.Len(t, rec.Parents, 1)
		timer, ok := timers[rec.Parents[0]]
		require.True(t, ok, "parent %s of %v is not a fired timer", rec.Parents[0], w)
		require.Equal(t, p.WindowEnd, timer.TriggerTS)
		require.Equal(t, keyOf(p.Key), timer.Key)
	}
	require.Equal(t, want, got)
	require.Empty(t, r.dead)
}
