package flowhost_test

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// windowInput is one input record of the window and join tests.
type windowInput struct {
	key    string
	ts     int64
	value  int64
	stream string // "" is "in"
	empty  bool   // the payload is empty (a tombstone), not the value
}

// countSum aggregates "count,sum" as text, so state and results are easy to read.
var countSum = flowhost.Aggregator{
	Init: func() []byte { return []byte("0,0") },
	Add: func(acc []byte, m flowhost.Message) []byte {
		c, s := parseCountSum(acc)
		v, _ := strconv.ParseInt(string(m.Payload), 10, 64)
		return fmt.Appendf(nil, "%d,%d", c+1, s+v)
	},
	Merge: func(a, b []byte) []byte {
		ca, sa := parseCountSum(a)
		cb, sb := parseCountSum(b)
		return fmt.Appendf(nil, "%d,%d", ca+cb, sa+sb)
	},
	Result: func(w flowhost.Window, acc []byte) []byte {
		return fmt.Appendf(nil, "%s [%d,%d) %s", w.Key, w.Start, w.End, acc)
	},
}

func parseCountSum(b []byte) (int64, int64) {
	c, s, _ := strings.Cut(string(b), ",")
	ci, _ := strconv.ParseInt(c, 10, 64)
	si, _ := strconv.ParseInt(s, 10, 64)
	return ci, si
}

// watermarkAt is the watermark at position l (just before input l): the
// newest event time before it minus bound, the end of time after the last.
func watermarkAt(in []windowInput, l int, bound int64) int64 {
	if l >= len(in) {
		return math.MaxInt64
	}
	wm := int64(math.MinInt64)
	for _, r := range in[:l] {
		wm = max(wm, r.ts-bound)
	}
	return wm
}

type spec struct {
	name     string
	kind     string
	size     int64
	advance  int64
	gap      int64
	lateness int64
}

// modelWindows computes the expected outputs per key straight from the
// input, with no batches or ABI: at each position the key's windows whose
// end plus lateness the watermark has reached close; a record is late when
// all its windows end (plus lateness) at or before the key's largest closed
// trigger.
func modelWindows(sp spec, in []windowInput, bound int64) (results, late map[string][]string) {
	type win struct {
		start, end, count, sum int64
	}
	open := map[string][]win{}
	fired := map[string]int64{}
	results, late = map[string][]string{}, map[string][]string{}
	closeDue := func(wm int64) {
		for key, ws := range open {
			slices.SortFunc(ws, func(a, b win) int { return int(a.end - b.end) })
			var kept []win
			for _, w := range ws {
				if w.end+sp.lateness <= wm {
					results[key] = append(results[key], fmt.Sprintf("%s [%d,%d) %d,%d", key, w.start, w.end, w.count, w.sum))
					if f, ok := fired[key]; !ok || w.end+sp.lateness > f {
						fired[key] = w.end + sp.lateness
					}
				} else {
					kept = append(kept, w)
				}
			}
			open[key] = kept
		}
	}
	closed := func(key string, end int64) bool {
		f, ok := fired[key]
		return ok && end+sp.lateness <= f
	}
	for l, r := range in {
		closeDue(watermarkAt(in, l, bound))
		var accepted bool
		switch sp.kind {
		case "session":
			if closed(r.key, r.ts+sp.gap) {
				break
			}
			accepted = true
			n := win{r.ts, r.ts + sp.gap, 1, r.value}
			var kept []win
			for _, w := range open[r.key] {
				if w.start < n.end && n.start < w.end {
					n = win{min(n.start, w.start), max(n.end, w.end), n.count + w.count, n.sum + w.sum}
				} else {
					kept = append(kept, w)
				}
			}
			open[r.key] = append(kept, n)
		default:
			size, adv := sp.size, sp.advance
			if sp.kind == "tumbling" {
				adv = size
			}
			for start := (r.ts / adv) * adv; start > r.ts-size; start -= adv {
				if closed(r.key, start+size) {
					continue
				}
				accepted = true
				i := slices.IndexFunc(open[r.key], func(w win) bool { return w.start == start })
				if i < 0 {
					open[r.key] = append(open[r.key], win{start: start, end: start + size})
					i = len(open[r.key]) - 1
				}
				open[r.key][i].count++
				open[r.key][i].sum += r.value
			}
		}
		if !accepted {
			late[r.key] = append(late[r.key], strconv.FormatInt(r.value, 10))
		}
	}
	closeDue(math.MaxInt64)
	return results, late
}

// driveWindows runs the computation through flowhost.Run in batches of at
// most batchSize inputs, placing timers the way host/spec/README.md ("When
// a timer fires") says the host does: due timers fire at a position before
// its message, a batch ends before a message a pending timer precedes, and
// a batch whose own new timers would precede one of its later messages is
// processed again, shorter.
func driveWindows(t *testing.T, c flowhost.Computation, in []windowInput, bound int64, batchSize int) (results, late map[string][]string) {
	t.Helper()
	out := driveHost(t, c, in, bound, batchSize)
	return orEmpty(out["out"]), orEmpty(out["late"])
}

func orEmpty(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

// driveHost is the driver of driveWindows for any computation; it returns
// the payloads emitted per output stream and key, in emit order.
func driveHost(t *testing.T, c flowhost.Computation, in []windowInput, bound int64, batchSize int) map[string]map[string][]string {
	t.Helper()
	state := map[string][]byte{}
	timers := map[string][]int64{}
	out := map[string]map[string][]string{}
	dueAt := func(tm map[string][]int64, wm int64) bool {
		for _, ts := range tm {
			for _, tr := range ts {
				if tr <= wm {
					return true
				}
			}
		}
		return false
	}
	l := 0
	for l <= len(in) {
		wm := watermarkAt(in, l, bound)
		end := l + 1
		for end < len(in) && end-l < batchSize && !dueAt(timers, watermarkAt(in, end, bound)) {
			end++
		}
		end = min(end, len(in))
		if l == len(in) && !dueAt(timers, wm) {
			break
		}
		for {
			req := buildRequest(in[l:end], l, state, timers, wm)
			resp, err := flowhost.Run(c, nil, req)
			if err != nil || resp.Error != "" {
				t.Fatalf("batch at %d: %v %s", l, err, resp.Error)
			}
			// A timer set here that would fire before a later message of the
			// batch makes the host cut the batch there and process it again.
			cut := end
			for _, k := range resp.Keys {
				for _, st := range k.TimersSet {
					for j := l + 1; j < cut; j++ {
						if st.TriggerTimestamp <= watermarkAt(in, j, bound) {
							cut = j
						}
					}
				}
			}
			if cut < end {
				end = cut
				continue
			}
			for _, k := range resp.Keys {
				if k.Error != "" {
					t.Fatalf("key %q failed: %s", k.Key, k.Error)
				}
				for _, e := range k.Emits {
					if out[e.Stream] == nil {
						out[e.Stream] = map[string][]string{}
					}
					out[e.Stream][k.Key] = append(out[e.Stream][k.Key], string(e.Payload))
				}
				switch k.StateOp {
				case abi.StateReplace:
					state[k.Key] = k.State
				case abi.StateDelete:
					delete(state, k.Key)
				}
				timers[k.Key] = slices.DeleteFunc(timers[k.Key], func(tr int64) bool { return slices.Contains(k.TimersCancel, tr) })
				for _, st := range k.TimersSet {
					if !slices.Contains(timers[k.Key], st.TriggerTimestamp) {
						timers[k.Key] = append(timers[k.Key], st.TriggerTimestamp)
					}
				}
			}
			break
		}
		if l == len(in) {
			continue // the end of time: fire until no timer is left
		}
		l = end
	}
	return out
}

// buildRequest makes the request of one batch starting at input first:
// per key, the timers due at the batch's first position (removed from
// pending), then its messages, whose ids do not depend on the batching.
func buildRequest(batch []windowInput, first int, state map[string][]byte, timers map[string][]int64, wm int64) *abi.Request {
	var order []string
	keys := map[string]*abi.RequestKey{}
	get := func(key string) *abi.RequestKey {
		if k, ok := keys[key]; ok {
			return k
		}
		k := &abi.RequestKey{Key: key, State: state[key]}
		keys[key] = k
		order = append(order, key)
		return k
	}
	var names []string
	for key := range timers {
		names = append(names, key)
	}
	slices.Sort(names)
	for _, key := range names {
		ts := slices.Clone(timers[key])
		slices.Sort(ts)
		for _, tr := range ts {
			if tr <= wm {
				k := get(key)
				k.Timers = append(k.Timers, abi.DueTimer{ID: fmt.Sprintf("t-%s-%d", key, tr), TriggerTimestamp: tr, EventTimestamp: tr})
				timers[key] = slices.DeleteFunc(timers[key], func(x int64) bool { return x == tr })
			}
		}
	}
	for i, r := range batch {
		k := get(r.key)
		stream := r.stream
		if stream == "" {
			stream = "in"
		}
		payload := []byte(strconv.FormatInt(r.value, 10))
		if r.empty {
			payload = nil
		}
		k.Messages = append(k.Messages, abi.Message{ID: fmt.Sprintf("m%d", first+i), Stream: stream, EventTimestamp: r.ts, Payload: payload})
	}
	req := &abi.Request{ABI: 1, Computation: "win", Kind: abi.KindTransform}
	for _, key := range order {
		req.Keys = append(req.Keys, *keys[key])
	}
	return req
}

func windowsFor(sp spec) *flowhost.Windows {
	var ws flowhost.WindowSpec
	switch sp.kind {
	case "tumbling":
		ws = flowhost.Tumbling(time.Duration(sp.size))
	case "hopping":
		ws = flowhost.Hopping(time.Duration(sp.size), time.Duration(sp.advance))
	default:
		ws = flowhost.Session(time.Duration(sp.gap))
	}
	return flowhost.NewWindows(ws, countSum, "out", "late", flowhost.WithAllowedLateness(time.Duration(sp.lateness)))
}

var windowSpecs = []spec{
	{name: "tumbling", kind: "tumbling", size: 10},
	{name: "tumbling-lateness", kind: "tumbling", size: 10, lateness: 5},
	{name: "hopping", kind: "hopping", size: 10, advance: 5},
	{name: "hopping-uneven", kind: "hopping", size: 10, advance: 3, lateness: 2},
	{name: "session", kind: "session", gap: 4},
	{name: "session-lateness", kind: "session", gap: 4, lateness: 3},
}

// TestWindowsMatchModel checks every window kind against the model for
// batch sizes 1, 7 and 1000 on random out-of-order input with late records.
func TestWindowsMatchModel(t *testing.T) {
	for _, sp := range windowSpecs {
		t.Run(sp.name, func(t *testing.T) {
			var sawLate, sawResult bool
			rapid.Check(t, func(rt *rapid.T) {
				n := rapid.IntRange(0, 60).Draw(rt, "n")
				bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
				in := make([]windowInput, n)
				for i := range in {
					in[i] = windowInput{
						key:   rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key"),
						ts:    int64(i) + rapid.Int64Range(-15, 3).Draw(rt, "jitter") + 100,
						value: int64(i + 1),
					}
				}
				wantRes, wantLate := modelWindows(sp, in, bound)
				sawLate = sawLate || len(wantLate) > 0
				sawResult = sawResult || len(wantRes) > 0
				c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
					w := windowsFor(sp)
					for k := range b.Keys() {
						_ = w.Process(k)
					}
					return nil
				}}
				for _, size := range []int{1, 7, 1000} {
					gotRes, gotLate := driveWindows(t, c, in, bound, size)
					if !equalPerKey(gotRes, wantRes) || !equalPerKey(gotLate, wantLate) {
						rt.Fatalf("batch size %d:\n results %v\n want    %v\n late %v\n want %v", size, gotRes, wantRes, gotLate, wantLate)
					}
				}
			})
			// The generator must reach both paths, or the check proves little.
			if !sawLate || !sawResult {
				t.Fatalf("no input had late records (%v) or window results (%v)", sawLate, sawResult)
			}
		})
	}
}

func equalPerKey(a, b map[string][]string) bool {
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	for k, v := range b {
		if !slices.Equal(v, a[k]) {
			return false
		}
	}
	return true
}
