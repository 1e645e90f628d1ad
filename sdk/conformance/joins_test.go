package conformance_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
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

// The interval join's bounds, asymmetric: a right record matches a left
// one from 3 s before it to 5 s after it.
const (
	joinLower = -int64(3 * time.Second)
	joinUpper = int64(5 * time.Second)
)

// joinKind is one join computation of the matrix: its parameters, its two
// input streams (each from a source of its own) and its two output
// streams.
type joinKind struct {
	name    string
	params  string
	inputs  [2]string
	outputs [2]string
}

var (
	intervalJoin = joinKind{"interval", fmt.Sprintf("{join: interval, lower_ns: %d, upper_ns: %d}", joinLower, joinUpper),
		[2]string{"left", "right"}, [2]string{"joined", "expired"}}
	enrichJoin = joinKind{"enrich", "{join: enrich}", [2]string{"table", "events"}, [2]string{"enriched", "unmatched"}}
)

// joinRecord is one input record: the stream (and so the source) it goes
// to, its key, event time, write time and payload.
type joinRecord struct {
	stream  string
	key     string
	ts      int64
	write   int64
	payload []byte
}

// joinInput is seeded random input for k: records of a few keys spread
// over the two input streams (one in three on the table for the
// enrichment), event times that move forward by up to 1.5 s with jitter
// below the sources' bound and, when withLate, about one record in twelve
// from 12 to 30 s in the past, behind its source's watermark. Write times
// grow by 1 ms a record, except that about one record in three that
// follows a record of its own stream repeats its write time: the host
// merges the two streams by AlignmentTimestamp (time_type: alignment),
// which is the write time, and within a stream breaks ties by message id,
// the order pushed, so the merge order is the order of the slice. Two
// records of different streams never share a write time: the tie rule
// across streams (TaskId, then the stream's index) orders only messages
// that are in the partition's merge together, and the sources' gate lets
// records of equal priority through at once, so which arrives first
// would be timing. With tombstones, one table record in four has an empty
// payload.
func joinInput(k joinKind, seed uint64, n int, withLate, tombstones bool) []joinRecord {
	r := rand.New(rand.NewPCG(seed, 16))
	clock := winEpoch
	out := make([]joinRecord, 0, n)
	for i := range n {
		clock += r.Int64N(int64(1500 * time.Millisecond))
		ts := clock - r.Int64N(winBound)
		if withLate && i > 20 && r.IntN(12) == 0 {
			ts = clock - int64(12*time.Second) - r.Int64N(int64(18*time.Second))
		}
		key := []string{"a", "b", "c"}[r.IntN(3)]
		stream := k.inputs[r.IntN(2)]
		if k == enrichJoin {
			stream = k.inputs[min(1, r.IntN(3))]
		}
		payload := fmt.Appendf(nil, `{"k":%q,"ts":%d,"i":%d,"s":%q}`, key, ts, i, stream)
		if tombstones && stream == "table" && r.IntN(4) == 0 {
			payload = []byte{}
		}
		write := winEpoch + int64(i+1)*int64(time.Millisecond)
		if i > 0 && out[i-1].stream == stream && r.IntN(3) == 0 {
			write = out[i-1].write // a tie within the stream: message id order, the order pushed
		}
		out = append(out, joinRecord{stream: stream, key: key, ts: ts, write: write, payload: payload})
	}
	return out
}

func joinTimed(in []joinRecord) []timed {
	out := make([]timed, len(in))
	for i, r := range in {
		out[i] = timed{r.stream, r.ts}
	}
	return out
}

// intervalModel computes every key's expected outputs of the interval join
// from the input alone (sdk/JOINS.md), in merge order with the host's
// timer positions wm (stepTimerWatermarks): at each position the key's
// expiry timers at or below the watermark fire in trigger order, each
// removing the held records whose expiry is at or below it in held order
// and emitting those that never matched on expired, at their own time;
// then the record matches every held record of the other side in range,
// in held order (`left|right`, at the later time), is held, and sets its
// expiry timer (ts+upper+1 on the left, ts-lower+1 on the right).
func intervalModel(in []joinRecord, wm []int64) map[string][]winOut {
	type held struct {
		right, matched bool
		ts             int64
		payload        []byte
	}
	expiry := func(h held) int64 {
		if h.right {
			return h.ts - joinLower + 1
		}
		return h.ts + joinUpper + 1
	}
	heldOf := map[string][]held{}
	pending := map[string][]int64{}
	out := map[string][]winOut{}
	fire := func(w int64) {
		for key, triggers := range pending {
			slices.Sort(triggers)
			var kept []int64
			for _, tr := range triggers {
				if tr > w {
					kept = append(kept, tr)
					continue
				}
				var still []held
				for _, h := range heldOf[key] {
					switch {
					case expiry(h) > tr:
						still = append(still, h)
					case !h.matched:
						out[key] = append(out[key], winOut{"expired", string(h.payload), h.ts})
					}
				}
				heldOf[key] = still
			}
			pending[key] = kept
		}
	}
	for l, r := range in {
		fire(wm[l])
		n := held{right: r.stream == "right", ts: r.ts, payload: r.payload}
		hs := heldOf[r.key]
		for i := range hs {
			h := &hs[i]
			if h.right == n.right {
				continue
			}
			lt, rt, lp, rp := h.ts, n.ts, h.payload, n.payload
			if !n.right {
				lt, rt, lp, rp = n.ts, h.ts, n.payload, h.payload
			}
			if d := rt - lt; joinLower <= d && d <= joinUpper {
				out[r.key] = append(out[r.key], winOut{"joined", string(lp) + "|" + string(rp), max(lt, rt)})
				h.matched, n.matched = true, true
			}
		}
		heldOf[r.key] = append(hs, n)
		if e := expiry(n); !slices.Contains(pending[r.key], e) {
			pending[r.key] = append(pending[r.key], e)
		}
	}
	fire(wm[len(in)])
	return out
}

// enrichModel computes every key's expected outputs of the enrichment join
// from the input alone, in merge order (sdk/JOINS.md): a table record sets
// the key's value, an empty one deletes it; an event with a value is
// enriched (`event|value`), one without goes to unmatched, both at the
// event's time. No timers: the watermarks play no part.
func enrichModel(in []joinRecord) map[string][]winOut {
	value := map[string][]byte{}
	out := map[string][]winOut{}
	for _, r := range in {
		switch {
		case r.stream == "table" && len(r.payload) == 0:
			delete(value, r.key)
		case r.stream == "table":
			value[r.key] = r.payload
		case value[r.key] != nil:
			out[r.key] = append(out[r.key], winOut{"enriched", string(r.payload) + "|" + string(value[r.key]), r.ts})
		default:
			out[r.key] = append(out[r.key], winOut{"unmatched", string(r.payload), r.ts})
		}
	}
	return out
}

// joinPipeline is the matrix's pipeline: a one-partition source per input
// stream (envelope files in memory: write_ts, event_ts and a JSON payload),
// both with a 2 s out-of-orderness bound and no idle detection (a source
// with nothing in a step must hold the watermark, not time out on the
// wall clock), the join guest merging them by AlignmentTimestamp, and a
// sink of both its outputs. keyed is group_by [k]; without it the join is
// keyed by the records' own keys, which is how a tombstone (an empty
// payload, which has no field k) reaches its key.
func joinPipeline(t *testing.T, k joinKind, files [2]string, keyed bool, maxRows int, linger time.Duration) *spec.Pipeline {
	groupBy := "\n    group_by: [k]"
	if !keyed {
		groupBy = ""
	}
	y := fmt.Sprintf(`
name: joins
sources:
  - name: %[1]s-in
    type: file
    stream: %[1]s
    format: envelope
    file: {path: %[3]q}
    watermark: {out_of_orderness_bound: %[5]dns, idle_partitions: {duration: 0s}}
  - name: %[2]s-in
    type: file
    stream: %[2]s
    format: envelope
    file: {path: %[4]q}
    watermark: {out_of_orderness_bound: %[5]dns, idle_partitions: {duration: 0s}}
computations:
  - name: join
    plugin: join-guest
    kind: transform%[6]s
    input_streams: [%[1]s, %[2]s]
    output_streams: [%[7]s, %[8]s]
    input_ordering: {time_type: alignment}
    batch: {max_rows: %[9]d, max_duration: %[10]dns}
    parameters: %[11]s
sinks:
  - {name: out, type: stdout, streams: [%[7]s, %[8]s]}
`, k.inputs[0], k.inputs[1], files[0], files[1], winBound, groupBy, k.outputs[0], k.outputs[1], maxRows, linger.Nanoseconds(), k.params)
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(path, []byte(y), 0o644))
	p, err := spec.Parse(path, []byte(y))
	require.NoError(t, err, "pipeline:\n%s", y)
	return p
}

// joinSlots bounds how many runs of the matrix run at once, to about the
// cores there are. Two sources are read in AlignmentTimestamp order
// because the runtime's source gate holds the one that is ahead until the
// other has offered its first record, but for at most a grace (200 ms)
// from the sources' start (host/runtime/gate.go): on a starved CPU, a
// source that takes longer than that to read its first record lets the
// other pass alone, and its records can overtake the other's first. The
// stepped runs avoid it by their steps (joinInSteps); the single runs,
// one start each, are kept clear of it by not starving the CPU themselves.
var joinSlots = make(chan struct{}, goruntime.GOMAXPROCS(0))

// joinCacheDir keeps the compiled join guests between runs, as
// windowCacheDir does for the window guests.
var joinCacheDir = filepath.Join(os.TempDir(), "flowhost-conformance-joins-cache")

// TestJoinsThroughHost runs every registered join guest through the real
// runtime (host/runtime via host/flowtest, the wazero engine, two sources
// merged by AlignmentTimestamp, keys, sinks) for the interval join
// (bounds -3 s, +5 s) and the enrichment join, batch.max_rows 1, 7 and
// 1000, a linger of 1 ns and 50 ms, three ways (one flowtest.Run in
// memory, "run"; a flowtest.Driver in steps in memory, "memory", and on a
// pebble store in t.TempDir(), "store"), and compares each key's
// outputs, per stream, in order and exactly, with intervalModel and
// enrichModel; every record of the interval join must have matched or
// expired once, every event been enriched or unmatched once.
func TestJoinsThroughHost(t *testing.T) {
	plugins := t.TempDir()
	for _, g := range joinGuests {
		t.Run(g.Name, func(t *testing.T) {
			dir := guestPlugin(t, "join-guest", g.Name, g.Build, plugins, joinCacheDir)
			for ki, k := range []joinKind{intervalJoin, enrichJoin} {
				for _, rows := range []int{1, 7, 1000} {
					for _, linger := range []time.Duration{time.Nanosecond, 50 * time.Millisecond} {
						for _, where := range []string{"run", "memory", "store"} {
							t.Run(fmt.Sprintf("%s/rows=%d/linger=%s/%s", k.name, rows, linger, where), func(t *testing.T) {
								t.Parallel()
								joinSlots <- struct{}{}
								defer func() { <-joinSlots }()
								seed := uint64(200 + ki)
								if where == "run" {
									joinInMemory(t, dir, k, joinInput(k, seed, 240, false, false), rows, linger)
								} else {
									joinInSteps(t, dir, k, joinInput(k, seed, 240, true, true), rows, linger, where == "store")
								}
							})
						}
					}
				}
			}
		})
	}
}

// joinKeyNames maps the host's key text of every input key (the group_by
// key of payload {"k": name}, which is also the record key the store runs
// give) to its name.
func joinKeyNames(t *testing.T, in []joinRecord) map[string]string {
	names := map[string]string{}
	for _, r := range in {
		names[joinKeyText(t, r.key)] = r.key
	}
	return names
}

func joinKeyText(t *testing.T, name string) string {
	e, err := keys.NewExtractor([]string{"k"})
	require.NoError(t, err)
	text, err := e.Key(fmt.Appendf(nil, `{"k":%q}`, name))
	require.NoError(t, err)
	return text
}

// joinInMemory runs in once through flowtest.Run, whose runtime keeps
// state in memory, with each input stream in an envelope file and the
// join keyed by group_by. The input has no record behind its source's
// watermark (see stepTimerWatermarks), and no tombstone: an envelope line
// carries a JSON payload and no record key, and an empty payload has no
// group_by field, so a file source cannot deliver a tombstone to a key
// (the store runs give the records keys instead).
func joinInMemory(t *testing.T, plugin string, k joinKind, in []joinRecord, rows int, linger time.Duration) {
	ts := joinTimed(in)
	var lines [2]bytes.Buffer
	for j, r := range in {
		require.False(t, behindSource(ts, j, winBound), "record %d", j)
		require.NotEmpty(t, r.payload, "record %d", j)
		fmt.Fprintf(&lines[slices.Index(k.inputs[:], r.stream)], "{\"write_ts\":%d,\"event_ts\":%d,\"payload\":%s}\n", r.write, r.ts, r.payload)
	}
	var files [2]string
	for i := range files {
		files[i] = filepath.Join(t.TempDir(), k.inputs[i]+".jsonl")
		require.NoError(t, os.WriteFile(files[i], lines[i].Bytes(), 0o644))
	}
	p := joinPipeline(t, k, files, true, rows, linger)
	var trace syncBuffer
	res, err := flowtest.Run(context.Background(), flowtest.Config{Pipeline: p, PluginDirs: []string{plugin}, CacheDir: joinCacheDir,
		Options: []runtime.Option{runtime.WithTrace(&trace)}})
	require.NoError(t, err)
	require.Empty(t, res.DeadLetters)
	checkJoin(t, k, in, [][]joinRecord{in}, true, outputsByKey(t, res.Outputs, k.outputs[:], &trace, joinKeyNames(t, in)))
}

// joinInSteps pushes in through a flowtest.Driver, in memory or on a
// pebble store (onStore), in steps, each settled before the next; Finish then ends the inputs. A new
// step begins at every record behind its source's watermark (as in the
// window test) and wherever the stream changes, so that a step feeds one
// source only: at a step's start the runtime's source gate may let the
// first source to offer pass alone (joinSlots says why), and a step of
// one stream leaves it nothing to reorder. The two streams still meet in
// the join's merge and its input watermark (the smaller of the two
// sources', which each step resumes from the storage). The enrichment join
// is keyed by the records' own keys (no group_by), so that its
// tombstones, empty payloads, reach their key; the interval join by
// group_by.
func joinInSteps(t *testing.T, plugin string, k joinKind, in []joinRecord, rows int, linger time.Duration, onStore bool) {
	ctx := context.Background()
	keyed := k != enrichJoin
	p := joinPipeline(t, k, [2]string{"unused-0.jsonl", "unused-1.jsonl"}, keyed, rows, linger)
	var trace syncBuffer
	d, err := flowtest.New(ctx, p, driverOptions(t, plugin, joinCacheDir, onStore, &trace)...)
	require.NoError(t, err)
	defer d.Close()
	ts := joinTimed(in)
	st := cutSteps(in, func(j int) bool { return behindSource(ts, j, winBound) || in[j].stream != in[j-1].stream })
	var behind int
	for j := range in {
		if behindSource(ts, j, winBound) {
			behind++
		}
	}
	require.Greater(t, behind, 3, "the input has records behind their source's watermark")
	for _, step := range st {
		for _, r := range step {
			rec := flowtest.Record{Event: r.ts, Write: r.write, Payload: r.payload}
			if !keyed {
				rec.Key = joinKeyText(t, r.key)
			}
			require.NoError(t, d.Push(r.stream+"-in", rec))
		}
		require.NoError(t, d.Settle(ctx))
	}
	require.NoError(t, d.Finish(ctx))
	require.Empty(t, d.DeadLetters())
	outs := map[string][]connect.SinkRecord{}
	for _, s := range k.outputs {
		outs[s] = d.Outputs(s)
	}
	got := outputsByKey(t, outs, k.outputs[:], &trace, joinKeyNames(t, in))
	checkJoin(t, k, in, st, false, got)
	// What the stepped runs add: records behind their source's watermark
	// (interval: one that meets no held record comes out expired at once)
	// and tombstones (enrich: an event after one finds no value).
	var behindExpired, afterTombstone int
	value := map[string]bool{}
	deleted := map[string]bool{}
	for j, r := range in {
		if behindSource(ts, j, winBound) && slices.ContainsFunc(got[r.key], func(o winOut) bool { return o.stream == "expired" && o.payload == string(r.payload) }) {
			behindExpired++
		}
		switch {
		case r.stream == "table":
			deleted[r.key] = len(r.payload) == 0 && value[r.key]
			value[r.key] = len(r.payload) > 0
		case r.stream == "events" && deleted[r.key]:
			afterTombstone++
		}
	}
	t.Logf("%d steps, %d records behind their source expired, %d events after a tombstone that deleted a value", len(st), behindExpired, afterTombstone)
	if k == intervalJoin {
		require.NotZero(t, behindExpired, "no record behind its source's watermark came out expired")
	} else {
		require.NotZero(t, afterTombstone, "no tombstone deleted a value before an event")
	}
}

// checkJoin compares got with the model, key by key and stream by stream
// in order, and checks that nothing was lost or doubled: an interval
// join's record matched at least once or expired exactly once, never
// both; an event was enriched or unmatched exactly once.
func checkJoin(t *testing.T, k joinKind, in []joinRecord, st [][]joinRecord, finishes bool, got map[string][]winOut) {
	var want map[string][]winOut
	if k == intervalJoin {
		timedSteps := make([][]timed, len(st))
		for i, step := range st {
			timedSteps[i] = joinTimed(step)
		}
		want = intervalModel(in, stepTimerWatermarks(timedSteps, k.inputs[:], winBound, finishes))
	} else {
		want = enrichModel(in)
	}
	names := map[string]bool{}
	for key := range want {
		names[key] = true
	}
	for key := range got {
		names[key] = true
	}
	for key := range names {
		for _, stream := range k.outputs {
			require.Equal(t, strs(want[key], stream), strs(got[key], stream), "key %q, stream %s", key, stream)
		}
	}
	// Each record's fate, read from the outputs alone (payloads are unique).
	first, second := map[string]int{}, map[string]int{}
	for _, outs := range got {
		for _, o := range outs {
			if o.stream == k.outputs[0] {
				a, b, ok := strings.Cut(o.payload, "|")
				require.True(t, ok, "%s", o)
				first[a]++
				if k == intervalJoin {
					first[b]++
				}
			} else {
				second[o.payload]++
			}
		}
	}
	for _, stream := range k.outputs {
		require.NotZero(t, countStream(got, stream), "the input gives no %s record", stream)
	}
	t.Logf("%d records: %d %s, %d %s", len(in), countStream(got, k.outputs[0]), k.outputs[0], countStream(got, k.outputs[1]), k.outputs[1])
	for _, r := range in {
		p := string(r.payload)
		switch {
		case k == intervalJoin:
			require.True(t, first[p] >= 1 && second[p] == 0 || first[p] == 0 && second[p] == 1,
				"record %s: in %d matches and expired %d times", p, first[p], second[p])
		case r.stream == "events":
			require.Equal(t, 1, first[p]+second[p], "event %s: enriched %d times, unmatched %d times", p, first[p], second[p])
		}
	}
}

func countStream(got map[string][]winOut, stream string) int {
	n := 0
	for _, outs := range got {
		n += len(strs(outs, stream))
	}
	return n
}
