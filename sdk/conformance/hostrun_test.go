package conformance_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
)

// The pieces the real-host tests share (TestWindowsThroughHost,
// TestJoinsThroughHost): building a guest into a plugin directory, the
// host's timer rule over input handed over in steps, and naming each
// output's key from the host's trace.

// guestPlugin builds a language's guest once into a plugin directory of
// its own under dir (the module and a plugin.yaml naming it plugin,
// version 1.0.0) and returns the directory. Under the race detector the
// module is compiled into cache first, in a process without it.
func guestPlugin(t *testing.T, plugin, lang string, build func(string) (string, error), dir, cache string) string {
	out := filepath.Join(dir, lang)
	require.NoError(t, os.MkdirAll(out, 0o755))
	wasm, err := build(out)
	require.NoError(t, err, "building the %s %s", lang, plugin)
	data, err := os.ReadFile(wasm)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	manifest := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: 1\nkinds: [transform]\nwasm: %s\nsha256: %s\n", plugin, filepath.Base(wasm), hex.EncodeToString(sum[:]))
	require.NoError(t, os.WriteFile(filepath.Join(out, "plugin.yaml"), []byte(manifest), 0o644))
	if raceEnabled {
		// Compiled under the race detector, the guest would take ten
		// times longer, in each of the parallel runs at once.
		precompile(cache, []string{wasm})
	}
	return out
}

// timed is an input record as the timer rule sees it: the source stream
// it comes from and its event time.
type timed struct {
	stream string
	ts     int64
}

// behindSource reports whether in[j] comes below the watermark its
// source published before it: the newest event time of its stream before
// it less bound (ordering.SourceWatermark, one partition per source).
func behindSource(in []timed, j int, bound int64) bool {
	newest, seen := int64(math.MinInt64), false
	for _, r := range in[:j] {
		if r.stream == in[j].stream {
			newest, seen = max(newest, r.ts), true
		}
	}
	return seen && in[j].ts < newest-bound
}

// cutSteps cuts in before every record behind its source (behind), so
// that each step holds at most one such record, its first. See
// stepTimerWatermarks for why this makes the timers' positions
// computable.
func cutSteps[T any](in []T, behind func(j int) bool) [][]T {
	var out [][]T
	start := 0
	for j := 1; j < len(in); j++ {
		if behind(j) {
			out = append(out, in[start:j])
			start = j
		}
	}
	return append(out, in[start:])
}

// stepTimerWatermarks returns, for each position l of the input in merge
// order (just before record l; l = the number of records is after the
// last one), the timer watermark the host reaches there
// (host/spec/README.md, "When a timer fires": the input event watermark,
// the smallest of its source streams' (streams), lowered to the smallest
// event time of the messages held at l or later; the partition waits for
// it while a pending timer could still fall before the record at l). A
// source's watermark is the newest event time of its stream less bound,
// none (the start of time) before its first record.
//
// The input arrives in steps. Within a step every record but the first is
// on time for its source (at or above the watermark published before it,
// hence at or above the input watermark), so the timer watermark at l only
// grows as more of the step arrives, and its final value does not depend
// on when the sources handed records over: min(the input watermark after
// the step, the smallest event time from l to the step's end). After the
// last step the inputs finish (the end of time) when finishes. A record
// behind its source is the first of its step, which begins only after the
// earlier steps were processed to the end: without that cut, whether a
// timer fires before it depends on whether it had reached the partition,
// which the input does not decide.
func stepTimerWatermarks(stepsIn [][]timed, streams []string, bound int64, finishes bool) []int64 {
	var wm []int64
	newest := map[string]int64{}
	for s, step := range stepsIn {
		for _, r := range step {
			if n, ok := newest[r.stream]; !ok || r.ts > n {
				newest[r.stream] = r.ts
			}
		}
		end := int64(math.MaxInt64) // the input watermark after this step
		for _, name := range streams {
			n, ok := newest[name]
			if !ok {
				end = math.MinInt64
				break
			}
			end = min(end, n-bound)
		}
		if finishes && s == len(stepsIn)-1 {
			end = math.MaxInt64
		}
		mins := make([]int64, len(step))
		low := int64(math.MaxInt64)
		for i := len(step) - 1; i >= 0; i-- {
			low = min(low, step[i].ts)
			mins[i] = low
		}
		for i := range step {
			wm = append(wm, min(end, mins[i]))
		}
	}
	return append(wm, math.MaxInt64)
}

// outputsByKey groups the output records of streams by the model's key
// name (names maps the host's key text to it). The SDKs' window and join
// helpers emit without a record key, so an output's key is the key of
// its first parent's delivery, which the host's trace names: a message
// or the timer that fired.
func outputsByKey(t *testing.T, recs map[string][]connect.SinkRecord, streams []string, trace *syncBuffer, names map[string]string) map[string][]winOut {
	delivered := map[string]string{} // message or timer id -> key text
	trace.mu.Lock()
	lines := trace.buf.String()
	trace.mu.Unlock()
	for line := range strings.Lines(lines) {
		var tr runtime.TraceRecord
		require.NoError(t, json.Unmarshal([]byte(line), &tr), "trace line %q", line)
		if k, ok := delivered[tr.MessageID]; ok {
			require.Equal(t, k, tr.Key, "trace: %s delivered under two keys", tr.MessageID)
		}
		delivered[tr.MessageID] = tr.Key
	}
	got := map[string][]winOut{}
	for _, stream := range streams {
		for _, r := range recs[stream] {
			key := r.Key
			if key == "" {
				require.NotEmpty(t, r.Parents, "stream %s: output %s has no parent", stream, r.MessageID)
				var ok bool
				key, ok = delivered[r.Parents[0]]
				require.True(t, ok, "stream %s: output %s: its parent %s is in no delivery of the trace", stream, r.MessageID, r.Parents[0])
				for _, p := range r.Parents[1:] {
					require.Equal(t, key, delivered[p], "stream %s: output %s: parents of two keys", stream, r.MessageID)
				}
			}
			name, ok := names[key]
			require.True(t, ok, "stream %s: an output under key %q, which no input has", stream, key)
			payload, err := r.PayloadBytes()
			require.NoError(t, err, "stream %s: output %s", stream, r.MessageID)
			got[name] = append(got[name], winOut{stream, string(payload), r.EventTS})
		}
	}
	return got
}
