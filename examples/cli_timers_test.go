package examples_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/runtime"
)

// minuteTick is one output of examples/plugins/minute-ticker.
type minuteTick struct {
	Key   string `json:"key"`
	Tick  int64  `json:"tick"`
	Count int    `json:"count"`
	Seen  int    `json:"seen"`
}

const tickerSpec = `name: ticks
sources:
  - name: in
    type: file
    stream: events
    file: {path: %s}
    watermark: {out_of_orderness_bound: 30s}
computations:
  - name: ticker
    plugin: minute-ticker
    kind: transform
    group_by: [user]
    input_streams: [events]
    output_streams: [ticks]
    batch: {max_rows: %d}
sinks:
  - {name: out, type: stdout, format: text, streams: [ticks]}
dead_letter: {type: file, file: {path: dead.jsonl}}
`

// runTrace runs spec with the built binary and returns what it printed on
// stdout and its --trace records.
func runTrace(t *testing.T, dir, name, spec string) ([]byte, []runtime.TraceRecord) {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	stdout, stderr, err := flowhostRun(t, "run", "-f", path, "--plugins", env.plugins, "--trace", trace,
		"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", t.TempDir())
	require.NoError(t, err, "stderr:\n%s", stderr)
	f, err := os.Open(trace)
	require.NoError(t, err)
	defer f.Close()
	var recs []runtime.TraceRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r runtime.TraceRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		recs = append(recs, r)
	}
	require.NoError(t, sc.Err())
	return []byte(stdout), recs
}

// tickerReplay is five minutes of clicks of three users, one every two
// seconds, written in order and out of event-time order by up to 10s (less
// than the source's 30s bound, so none is late), some exactly on a minute.
func tickerReplay() []recordLine {
	rng := rand.New(rand.NewPCG(11, 6))
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	users := []string{"ann", "bob", "cy"}
	var recs []recordLine
	for i := range 150 {
		at := start + int64(i)*int64(2*time.Second)
		event := at - rng.Int64N(int64(10*time.Second))
		if i%30 == 0 {
			event = at // on a minute
		}
		recs = append(recs, recordLine{Write: at + int64(time.Second), Event: event, Payload: map[string]string{"user": users[rng.IntN(len(users))]}})
	}
	return recs
}

// expectedTicks applies the rule of host/spec/README.md ("When a timer
// fires") to the ticker by hand: before each record (merge order is write
// order here), every timer whose trigger is <= the smallest event time
// from that record on fires, timers that fired timers set included; a
// timer a record sets can fire from the next record on; after the last
// record the watermark is the end of time and everything fires.
func expectedTicks(recs []recordLine) []minuteTick {
	type keyState struct {
		count, seen int
		armed       int64
	}
	minute := int64(time.Minute)
	keys := map[string]*keyState{}
	var ticks []minuteTick
	fire := func(wm int64) {
		for _, name := range slices.Sorted(maps.Keys(keys)) {
			k := keys[name]
			for k.armed != 0 && k.armed <= wm {
				ticks = append(ticks, minuteTick{Key: name, Tick: k.armed, Count: k.count, Seen: k.seen})
				if k.count > 0 {
					k.armed += minute
				} else {
					k.armed = 0
				}
				k.count = 0
			}
		}
	}
	for i, r := range recs {
		wm := int64(math.MaxInt64)
		for _, later := range recs[i:] {
			wm = min(wm, later.Event)
		}
		fire(wm)
		name := keyOf(r.Payload.(map[string]string)["user"])
		k := keys[name]
		if k == nil {
			k = &keyState{}
			keys[name] = k
		}
		k.count++
		k.seen++
		if k.armed == 0 {
			k.armed = (r.Event/minute + 1) * minute
		}
	}
	fire(math.MaxInt64)
	sortMinuteTicks(ticks)
	return ticks
}

func sortMinuteTicks(ticks []minuteTick) {
	slices.SortFunc(ticks, func(a, b minuteTick) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Tick, b.Tick), cmp.Compare(a.Count, b.Count), cmp.Compare(a.Seen, b.Seen))
	})
}

// requireNoMessageAfterItsTimers checks a trace: once a timer of
// computation fired, no message of the same partition with an older event
// time is processed (in that epoch, after the timers, or later): the timer
// fell where the watermark had passed it.
func requireNoMessageAfterItsTimers(t *testing.T, trace []runtime.TraceRecord, computation string) {
	t.Helper()
	type fired struct {
		epoch   uint64
		trigger int64
		id      string
	}
	latest := map[int]fired{} // per partition, the latest trigger fired so far
	timers := 0
	for _, r := range trace {
		if r.Computation != computation {
			continue
		}
		switch r.Kind {
		case runtime.TraceTimer:
			timers++
			if f, ok := latest[r.Partition]; !ok || r.TriggerTS > f.trigger {
				latest[r.Partition] = fired{r.Epoch, r.TriggerTS, r.MessageID}
			}
		case runtime.TraceMessage:
			if f, ok := latest[r.Partition]; ok {
				require.GreaterOrEqual(t, r.EventTS, f.trigger,
					"message %s (event %d, epoch %d) came after timer %s (trigger %d, epoch %d)", r.MessageID, r.EventTS, r.Epoch, f.id, f.trigger, f.epoch)
			}
		}
	}
	require.Positive(t, timers, "no timer of %s fired", computation)
}

// TestCLITimersFireWhereTheWatermarkPassesThem is issue 11's tick test: a
// per-key minute ticker over five minutes of replayed file input gives the
// same ticks with batch.max_rows 1, 7 and 1000, on every run, and they are
// the ticks of the documented rule (each with its minute's count). Before,
// timers fired only when a batch was cut: one batch of 1000 gave one tick
// per key counting everything.
func TestCLITimersFireWhereTheWatermarkPassesThem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recs := tickerReplay()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clicks.jsonl"), jsonLines(t, recs), 0o644))
	want := expectedTicks(recs)
	require.Greater(t, len(want), 3*5, "every user ticks each minute")

	for _, run := range []struct{ maxRows, repeat int }{{1000, 0}, {1000, 1}, {7, 0}, {1, 0}} {
		stdout, trace := runTrace(t, dir, fmt.Sprintf("ticks-%d-%d", run.maxRows, run.repeat), fmt.Sprintf(tickerSpec, "clicks.jsonl", run.maxRows))
		var got []minuteTick
		for _, rec := range readTextLines(t, stdout) {
			var tk minuteTick
			require.NoError(t, json.Unmarshal(rec.Payload, &tk))
			got = append(got, tk)
		}
		sortMinuteTicks(got)
		require.Equal(t, want, got, "max_rows %d, run %d", run.maxRows, run.repeat+1)
		requireNoMessageAfterItsTimers(t, trace, "ticker")
	}
}

const restampSpec = `name: restamped
sources:
  - name: in
    type: file
    stream: clicks
    file: {path: clicks.jsonl}
    watermark: {out_of_orderness_bound: 30s}
computations:
  - name: restamp
    plugin: restamp
    kind: transform
    group_by: [user]
    input_streams: [clicks]
    output_streams: [happened]
    batch: {max_rows: 1}
    watermark_strategy: {out_of_orderness_bound: 30s}
  - name: per-user
    plugin: window-count
    kind: transform
    group_by: [user]
    input_streams: [happened]
    output_streams: [counts]
    batch: {max_rows: 1}
sinks:
  - {name: out, type: stdout, format: text, streams: [counts]}
dead_letter: {type: file, file: {path: dead.jsonl}}
`

// TestCLIWatermarkStrategyHoldsDownstreamTimers runs clicks whose event
// time is only in the payload ("happened_at", five minutes before they
// were ingested) through restamp, which stamps it on, into one-minute
// windows. restamp's watermark_strategy holds its output watermark at the
// newest restamped time minus 30s, so the windows' timers wait for every
// click: each window is emitted once, with all its clicks, and the trace
// shows no click processed after a timer it should have preceded. Without
// the strategy the output watermark followed the ingest times, five
// minutes ahead, and windows fired before their clicks arrived.
func TestCLIWatermarkStrategyHoldsDownstreamTimers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 11))
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	users := []string{"ann", "bob"}
	type win struct {
		user  string
		start int64
	}
	minute := int64(time.Minute)
	want := map[win]int64{}
	var recs []recordLine
	for i := range 240 {
		at := start.Add(time.Duration(i) * 2 * time.Second)
		happened := at.Add(-5*time.Minute - time.Duration(rng.Int64N(int64(10*time.Second))))
		user := users[rng.IntN(len(users))]
		recs = append(recs, recordLine{Write: at.UnixNano(), Event: at.UnixNano(),
			Payload: map[string]string{"user": user, "happened_at": happened.Format(time.RFC3339Nano)}})
		want[win{user, happened.UnixNano() / minute * minute}]++
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clicks.jsonl"), jsonLines(t, recs), 0o644))

	stdout, trace := runTrace(t, dir, "restamped", restampSpec)
	got := map[win]int64{}
	for _, rec := range readTextLines(t, stdout) {
		var p struct {
			Key         string `json:"key"`
			WindowStart int64  `json:"window_start"`
			Count       int64  `json:"count"`
		}
		dec := json.NewDecoder(bytes.NewReader(rec.Payload))
		require.NoError(t, dec.Decode(&p))
		w := win{p.Key, p.WindowStart}
		_, dup := got[w]
		require.False(t, dup, "window %v emitted twice: its timer fired before some of its clicks", w)
		got[w] = p.Count
	}
	require.Equal(t, want, got)
	requireNoMessageAfterItsTimers(t, trace, "per-user")
}
