package conformance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/flowtest"
	"github.com/flowhost/flowhost/host/keys"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// The windows of the matrix, in nanoseconds: the hop's advance does not
// divide its size, and the bound lets records come up to 2 s out of order
// without being late for the source.
const (
	winSize     = int64(10 * time.Second)
	winAdvance  = int64(4 * time.Second)
	winGap      = int64(3 * time.Second)
	winLateness = int64(4 * time.Second)
	winBound    = int64(2 * time.Second)
	winEpoch    = int64(1_767_225_600_000_000_000) // 2026-01-01T00:00:00Z
)

// winKind is one window computation of the matrix.
type winKind struct {
	name                    string
	kind                    string
	size, advance, gap, ltn int64
}

var winKinds = []winKind{
	{name: "tumbling", kind: "tumbling", size: winSize},
	{name: "tumbling+lateness", kind: "tumbling", size: winSize, ltn: winLateness},
	{name: "hopping", kind: "hopping", size: winSize, advance: winAdvance},
	{name: "session", kind: "session", gap: winGap},
	{name: "session+lateness", kind: "session", gap: winGap, ltn: winLateness},
}

// winRecord is one input record: its key, event time and payload.
type winRecord struct {
	key     string
	ts      int64
	payload []byte
}

// windowInput is seeded random input: a few keys, event times that move
// forward by up to 1.5 s with jitter below the source's bound, and, when
// withLate, about one record in twelve from 12 to 30 s in the past: below
// the source's watermark, and late for the windows when its windows have
// fired for its key.
func windowInput(seed uint64, n int, withLate bool) []winRecord {
	r := rand.New(rand.NewPCG(seed, 15))
	clock := winEpoch
	out := make([]winRecord, 0, n)
	for i := range n {
		clock += r.Int64N(int64(1500 * time.Millisecond))
		ts := clock - r.Int64N(winBound)
		if withLate && i > 20 && r.IntN(12) == 0 {
			ts = clock - int64(12*time.Second) - r.Int64N(int64(18*time.Second))
		}
		key := []string{"a", "b", "c", "d"}[r.IntN(4)]
		out = append(out, winRecord{key: key, ts: ts, payload: fmt.Appendf(nil, `{"k":%q,"ts":%d,"i":%d}`, key, ts, i)})
	}
	return out
}

// sourceLate reports whether in[j] comes below the source watermark
// published before it: the newest event time before it less the bound
// (ordering.SourceWatermark, one partition).
func sourceLate(in []winRecord, j int) bool {
	return behindSource(winTimed(in), j, winBound)
}

// steps cuts in before every record that is late for the source, so that
// each step holds at most one such record, its first. See windowModel for
// why this makes the timers' positions computable.
func steps(in []winRecord) [][]winRecord {
	ts := winTimed(in)
	return cutSteps(in, func(j int) bool { return behindSource(ts, j, winBound) })
}

// winTimed is in as the timer rule sees it: one source stream.
func winTimed(in []winRecord) []timed {
	out := make([]timed, len(in))
	for i, r := range in {
		out[i] = timed{"records", r.ts}
	}
	return out
}

// winOut is one output record as compared: its stream, payload and event
// time.
type winOut struct {
	stream  string
	payload string
	ts      int64
}

func (o winOut) String() string { return fmt.Sprintf("%s %d %s", o.stream, o.ts, o.payload) }

// timerWatermarks returns, for each position l (just before in[l]; l =
// len(in) is after the last record), the timer watermark the host reaches
// there: stepTimerWatermarks for the one source stream.
func timerWatermarks(stepsIn [][]winRecord, finishes bool) []int64 {
	st := make([][]timed, len(stepsIn))
	for i, step := range stepsIn {
		st[i] = winTimed(step)
	}
	return stepTimerWatermarks(st, []string{"records"}, winBound, finishes)
}

// windowModel computes every key's expected outputs from the input alone,
// with no batches: at each position the key's windows whose end plus the
// lateness the timer watermark has reached emit, in (end, start) order; a
// record is late when every window it belongs to ends, plus the lateness,
// at or before the largest trigger that closed a window of its key
// (sdk/WINDOWS.md, "The determinism rule"); a session's own window is
// [t, t+gap). It also returns, per key, which records were counted.
func windowModel(k winKind, in []winRecord, wm []int64) (map[string][]winOut, map[string]int) {
	type win struct{ start, end, count int64 }
	open := map[string][]win{}
	fired := map[string]int64{}
	out := map[string][]winOut{}
	counted := map[string]int{}
	closeDue := func(w int64) {
		for key, ws := range open {
			slices.SortFunc(ws, func(a, b win) int {
				if a.end != b.end {
					return compare(a.end, b.end)
				}
				return compare(a.start, b.start)
			})
			var kept []win
			for _, o := range ws {
				if o.end+k.ltn <= w {
					out[key] = append(out[key], winOut{"windows", fmt.Sprintf(`{"start":%d,"end":%d,"count":%d}`, o.start, o.end, o.count), o.end - 1})
					if f, ok := fired[key]; !ok || o.end+k.ltn > f {
						fired[key] = o.end + k.ltn
					}
				} else {
					kept = append(kept, o)
				}
			}
			open[key] = kept
		}
	}
	closed := func(key string, end int64) bool {
		f, ok := fired[key]
		return ok && end+k.ltn <= f
	}
	for l, r := range in {
		closeDue(wm[l])
		accepted := false
		if k.kind == "session" {
			if !closed(r.key, r.ts+k.gap) {
				accepted = true
				n := win{r.ts, r.ts + k.gap, 1}
				var kept []win
				for _, o := range open[r.key] {
					if o.start < n.end && n.start < o.end {
						n = win{min(n.start, o.start), max(n.end, o.end), n.count + o.count}
					} else {
						kept = append(kept, o)
					}
				}
				open[r.key] = append(kept, n)
			}
		} else {
			adv := k.advance
			if k.kind == "tumbling" {
				adv = k.size
			}
			for start := floorDiv(r.ts, adv) * adv; start > r.ts-k.size; start -= adv {
				if closed(r.key, start+k.size) {
					continue
				}
				accepted = true
				i := slices.IndexFunc(open[r.key], func(o win) bool { return o.start == start })
				if i < 0 {
					open[r.key] = append(open[r.key], win{start: start, end: start + k.size})
					i = len(open[r.key]) - 1
				}
				open[r.key][i].count++
			}
		}
		if accepted {
			counted[r.key]++
		} else {
			out[r.key] = append(out[r.key], winOut{"late", string(r.payload), r.ts})
		}
	}
	closeDue(wm[len(in)])
	return out, counted
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func floorDiv(t, d int64) int64 {
	q := t / d
	if t%d != 0 && (t < 0) != (d < 0) {
		q--
	}
	return q
}

// windowPipeline is the matrix's pipeline: a one-partition source of JSON
// records with the event time in field ts, the window guest grouped by k,
// and a sink of both its streams.
func windowPipeline(t *testing.T, k winKind, input string, maxRows int, linger time.Duration) *spec.Pipeline {
	params := fmt.Sprintf("{kind: %s, lateness_ns: %d", k.kind, k.ltn)
	switch k.kind {
	case "tumbling":
		params += fmt.Sprintf(", size_ns: %d}", k.size)
	case "hopping":
		params += fmt.Sprintf(", size_ns: %d, advance_ns: %d}", k.size, k.advance)
	case "session":
		params += fmt.Sprintf(", gap_ns: %d}", k.gap)
	}
	y := fmt.Sprintf(`
name: windows
sources:
  - name: in
    type: file
    stream: records
    format: json
    event_time: {field: ts, format: unix_ns}
    file: {path: %q}
    watermark: {out_of_orderness_bound: %dns}
computations:
  - name: win
    plugin: window-guest
    kind: transform
    group_by: [k]
    input_streams: [records]
    output_streams: [windows, late]
    batch: {max_rows: %d, max_duration: %dns}
    parameters: %s
sinks:
  - {name: out, type: stdout, streams: [windows, late]}
`, input, winBound, maxRows, linger.Nanoseconds(), params)
	dir := t.TempDir()
	path := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(path, []byte(y), 0o644))
	p, err := spec.Parse(path, []byte(y))
	require.NoError(t, err, "pipeline:\n%s", y)
	return p
}

// windowPlugin builds the language's window guest once into a plugin
// directory (the module and a plugin.yaml naming it window-guest).
func windowPlugin(t *testing.T, g string, build func(string) (string, error), dir string) string {
	return guestPlugin(t, "window-guest", g, build, dir, windowCacheDir)
}

// windowCacheDir keeps the compiled window guests between runs, as
// cacheDir does for the script guests.
var windowCacheDir = filepath.Join(os.TempDir(), "flowhost-conformance-windows-cache")

// byKey groups output records by the model's key (the key text the host
// gives payload field k). The window helper emits without a record key,
// so an output's key is the key of its parent's delivery, which the
// host's trace names: a result's parent is the timer that fired it, a
// late record's is itself.
func byKey(t *testing.T, recs map[string][]connect.SinkRecord, trace *syncBuffer, names map[string]string) map[string][]winOut {
	return outputsByKey(t, recs, []string{"windows", "late"}, trace, names)
}

// TestWindowsThroughHost runs every registered window guest through the
// real runtime (host/runtime via host/flowtest, the wazero engine, a JSON
// source with event times from a payload field, group_by, sinks) for every
// window kind, batch.max_rows 1, 7 and 1000, a linger of 1 ns (the
// smallest the spec allows: "0") and 50 ms, and three ways: one
// flowtest.Run in memory on the whole input file ("run"), and a
// flowtest.Driver stepped through records late for the source in memory
// ("memory") and on a pebble store in t.TempDir() ("store"); it compares
// each key's outputs, in order and exactly, with windowModel.
func TestWindowsThroughHost(t *testing.T) {
	plugins := t.TempDir()
	for _, g := range windowGuests {
		t.Run(g.Name, func(t *testing.T) {
			dir := windowPlugin(t, g.Name, g.Build, plugins)
			for ki, k := range winKinds {
				for _, rows := range []int{1, 7, 1000} {
					for _, linger := range []time.Duration{time.Nanosecond, 50 * time.Millisecond} {
						for _, where := range []string{"run", "memory", "store"} {
							name := fmt.Sprintf("%s/rows=%d/linger=%s/%s", k.name, rows, linger, where)
							t.Run(name, func(t *testing.T) {
								t.Parallel()
								seed := uint64(100 + ki)
								if where == "run" {
									runInMemory(t, dir, k, windowInput(seed, 240, false), rows, linger)
								} else {
									runInSteps(t, dir, k, windowInput(seed, 240, true), rows, linger, where == "store")
								}
							})
						}
					}
				}
			}
		})
	}
}

// keyNames maps the host's key text of every input key to its name.
func keyNames(t *testing.T, in []winRecord) map[string]string {
	e, err := keys.NewExtractor([]string{"k"})
	require.NoError(t, err)
	names := map[string]string{}
	for _, r := range in {
		text, err := e.Key(r.payload)
		require.NoError(t, err)
		names[text] = r.key
	}
	return names
}

// driverOptions configure a conformance Driver: the plugin, the compile
// cache, the trace and, onStore, a pebble store in t.TempDir().
func driverOptions(t *testing.T, plugin, cacheDir string, onStore bool, trace *syncBuffer) []flowtest.Option {
	opts := []flowtest.Option{flowtest.WithPlugins(plugin), flowtest.WithCacheDir(cacheDir), flowtest.WithRuntimeOptions(runtime.WithTrace(trace))}
	if onStore {
		opts = append(opts, flowtest.WithDataDir(t.TempDir()))
	}
	return opts
}

// runInMemory runs in once through flowtest.Run, whose runtime keeps state
// in memory. The input has no record late for the source (see
// timerWatermarks: such a record's place after a timer is decided by
// timing in a single run), so nothing is late for the windows either.
func runInMemory(t *testing.T, plugin string, k winKind, in []winRecord, rows int, linger time.Duration) {
	for j := range in {
		require.False(t, sourceLate(in, j), "record %d", j)
	}
	var lines strings.Builder
	for _, r := range in {
		lines.Write(r.payload)
		lines.WriteByte('\n')
	}
	file := filepath.Join(t.TempDir(), "in.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(lines.String()), 0o644))
	p := windowPipeline(t, k, file, rows, linger)
	var trace syncBuffer
	res, err := flowtest.Run(context.Background(), flowtest.Config{Pipeline: p, PluginDirs: []string{plugin}, CacheDir: windowCacheDir,
		Options: []runtime.Option{runtime.WithTrace(&trace)}})
	require.NoError(t, err)
	require.Empty(t, res.DeadLetters)
	checkWindows(t, k, in, [][]winRecord{in}, true, byKey(t, res.Outputs, &trace, keyNames(t, in)))
}

// runInSteps pushes in through a flowtest.Driver, in memory or on a
// pebble store (onStore), one step per record late for the source
// (steps), each settled before the next; Finish then ends the inputs.
func runInSteps(t *testing.T, plugin string, k winKind, in []winRecord, rows int, linger time.Duration, onStore bool) {
	ctx := context.Background()
	p := windowPipeline(t, k, "unused.jsonl", rows, linger)
	var trace syncBuffer
	d, err := flowtest.New(ctx, p, driverOptions(t, plugin, windowCacheDir, onStore, &trace)...)
	require.NoError(t, err)
	defer d.Close()
	st := steps(in)
	require.Greater(t, len(st), 3, "the input has records late for the source")
	for _, step := range st {
		recs := make([]flowtest.Record, len(step))
		for i, r := range step {
			recs[i] = flowtest.Record{Event: r.ts, Payload: r.payload}
		}
		require.NoError(t, d.Push("in", recs...))
		require.NoError(t, d.Settle(ctx))
	}
	require.NoError(t, d.Finish(ctx))
	require.Empty(t, d.DeadLetters())
	outs := map[string][]connect.SinkRecord{"windows": d.Outputs("windows"), "late": d.Outputs("late")}
	checkWindows(t, k, in, st, false, byKey(t, outs, &trace, keyNames(t, in)))
}

// checkWindows compares got with the model, key by key, and checks that
// every record is counted or late, exactly once.
func checkWindows(t *testing.T, k winKind, in []winRecord, st [][]winRecord, finishes bool, got map[string][]winOut) {
	want, counted := windowModel(k, in, timerWatermarks(st, finishes))
	names := map[string]bool{}
	for key := range want {
		names[key] = true
	}
	for key := range got {
		names[key] = true
	}
	// Within a key each stream is in order; how a key's results and its
	// late records interleave is not defined (they are two streams).
	for key := range names {
		for _, stream := range []string{"windows", "late"} {
			require.Equal(t, strs(want[key], stream), strs(got[key], stream), "key %q, stream %s", key, stream)
		}
	}
	// Every record is in exactly one of: counted in a window, late; the
	// late stream holds each late record once (its payload names it).
	perKey := map[string]int{}
	for _, r := range in {
		perKey[r.key]++
	}
	lateSeen := map[string]int{}
	for key, outs := range got {
		var sum int
		for _, o := range outs {
			if o.stream == "late" {
				lateSeen[o.payload]++
				sum++
			}
		}
		require.Equal(t, perKey[key], counted[key]+sum, "key %q: records counted plus late", key)
	}
	for p, n := range lateSeen {
		require.Equal(t, 1, n, "late record %s", p)
	}
	if !finishes {
		require.NotEmpty(t, lateSeen, "the input has records late for the windows")
	}
}

// strs renders the outputs of one stream, in order.
func strs(outs []winOut, stream string) []string {
	var s []string
	for _, o := range outs {
		if o.stream == stream {
			s = append(s, o.String())
		}
	}
	return s
}
