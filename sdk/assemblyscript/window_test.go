package assemblyscript_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// winSpec is one window configuration of the window guest.
type winSpec struct {
	name                         string
	kind                         string
	size, advance, gap, lateness int64
}

var winSpecs = []winSpec{
	{name: "tumbling", kind: "tumbling", size: 10},
	{name: "tumbling-lateness", kind: "tumbling", size: 10, lateness: 5},
	{name: "hopping", kind: "hopping", size: 10, advance: 5},
	{name: "hopping-uneven", kind: "hopping", size: 10, advance: 3, lateness: 2},
	{name: "session", kind: "session", gap: 4},
	{name: "session-lateness", kind: "session", gap: 4, lateness: 3},
}

// params are the window guest's Init parameters for sp.
func (sp winSpec) params() map[string]any {
	p := map[string]any{"kind": sp.kind, "lateness_ns": sp.lateness}
	switch sp.kind {
	case "tumbling":
		p["size_ns"] = sp.size
	case "hopping":
		p["size_ns"], p["advance_ns"] = sp.size, sp.advance
	default:
		p["gap_ns"] = sp.gap
	}
	return p
}

// goCount is the window guest's aggregator written with the Go SDK
// (sdk/WINDOWS.md's window guest): a uvarint count, the result as JSON.
var goCount = flowhost.Aggregator{
	Add: func(acc []byte, _ flowhost.Message) []byte {
		n, _ := binary.Uvarint(acc)
		return binary.AppendUvarint(nil, n+1)
	},
	Merge: func(a, b []byte) []byte {
		x, _ := binary.Uvarint(a)
		y, _ := binary.Uvarint(b)
		return binary.AppendUvarint(nil, x+y)
	},
	Result: func(w flowhost.Window, acc []byte) []byte {
		n, _ := binary.Uvarint(acc)
		return fmt.Appendf(nil, `{"start":%d,"end":%d,"count":%d}`, w.Start, w.End, n)
	},
}

// goWindows is the Go helper configured as the window guest for sp.
func goWindows(sp winSpec) flowhost.Computation {
	return flowhost.Computation{Process: func(b *flowhost.Batch) error {
		var ws flowhost.WindowSpec
		switch sp.kind {
		case "tumbling":
			ws = flowhost.Tumbling(time.Duration(sp.size))
		case "hopping":
			ws = flowhost.Hopping(time.Duration(sp.size), time.Duration(sp.advance))
		default:
			ws = flowhost.Session(time.Duration(sp.gap))
		}
		w := flowhost.NewWindows(ws, goCount, "windows", "late", flowhost.WithAllowedLateness(time.Duration(sp.lateness)))
		for k := range b.Keys() {
			_ = w.Process(k)
		}
		return nil
	}}
}

type winRecord struct {
	key   string
	ts    int64
	value int64
	// stream is the record's stream, "in" when empty; empty sends an
	// empty payload instead of the value (a tombstone of a table).
	stream string
	empty  bool
}

// winWatermark is the watermark just before record l: the newest event
// time before it minus bound; the end of time after the last record.
func winWatermark(in []winRecord, l int, bound int64) int64 {
	if l >= len(in) {
		return math.MaxInt64
	}
	wm := int64(math.MinInt64)
	for _, r := range in[:l] {
		wm = max(wm, r.ts-bound)
	}
	return wm
}

func result(start, end, count int64) string {
	return fmt.Sprintf(`{"start":%d,"end":%d,"count":%d}`, start, end, count)
}

// winModel computes the expected results and late records per key from
// the input alone, with no batches, ABI or state encoding: at each
// position the windows whose end plus lateness the watermark has reached
// close; a record is late when each of its windows ends, plus lateness, at
// or before the key's largest closed trigger (sdk/WINDOWS.md).
func winModel(sp winSpec, in []winRecord, bound int64) (results, late map[string][]string) {
	type win struct{ start, end, count int64 }
	open := map[string][]win{}
	fired := map[string]int64{}
	results, late = map[string][]string{}, map[string][]string{}
	closeDue := func(wm int64) {
		for key, ws := range open {
			slices.SortFunc(ws, func(a, b win) int {
				if a.end != b.end {
					return int(a.end - b.end)
				}
				return int(a.start - b.start)
			})
			var kept []win
			for _, w := range ws {
				if w.end+sp.lateness <= wm {
					results[key] = append(results[key], result(w.start, w.end, w.count))
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
		closeDue(winWatermark(in, l, bound))
		accepted := false
		if sp.kind == "session" {
			if !closed(r.key, r.ts+sp.gap) {
				accepted = true
				n := win{r.ts, r.ts + sp.gap, 1}
				var kept []win
				for _, w := range open[r.key] {
					if w.start < n.end && n.start < w.end {
						n = win{min(n.start, w.start), max(n.end, w.end), n.count + w.count}
					} else {
						kept = append(kept, w)
					}
				}
				open[r.key] = append(kept, n)
			}
		} else {
			size, adv := sp.size, sp.advance
			if sp.kind == "tumbling" {
				adv = size
			}
			for start := floorDiv(r.ts, adv) * adv; start > r.ts-size; start -= adv {
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
			}
		}
		if !accepted {
			late[r.key] = append(late[r.key], strconv.FormatInt(r.value, 10))
		}
	}
	closeDue(math.MaxInt64)
	return results, late
}

// winDriver runs the window guest and the Go helper side by side, batch by
// batch, placing timers as host/spec/README.md ("When a timer fires")
// says the host does, and requires their responses to be the same bytes.
type winDriver struct {
	t      *testing.T
	rt     *rapid.T
	inst   engine.Instance
	goComp flowhost.Computation
	calls  int
	// outputs are the guest's output streams; nil: winOutputs.
	outputs []string
}

var winOutputs = []string{"windows", "late"}

func (d *winDriver) process(req *abi.Request) *abi.Response {
	d.calls++
	req.Epoch = uint64(d.calls)
	outputs := d.outputs
	if outputs == nil {
		outputs = winOutputs
	}
	asResp := process(d.t, d.inst, req, outputs)
	goResp, err := flowhost.Run(d.goComp, nil, req)
	require.NoError(d.t, err)
	asBytes, err := abi.EncodeResponse(asResp)
	require.NoError(d.t, err)
	goBytes, err := abi.EncodeResponse(goResp)
	require.NoError(d.t, err)
	if !bytes.Equal(asBytes, goBytes) {
		d.rt.Fatalf("call %d: the AssemblyScript response differs from the Go helper's\n as %+v\n go %+v", d.calls, asResp, goResp)
	}
	return asResp
}

// run feeds in through the driver in batches of at most batchSize
// records and returns the emitted results and late records per key.
func (d *winDriver) run(in []winRecord, bound int64, batchSize int) (results, late map[string][]string) {
	state := map[string][]byte{}
	timers := map[string][]int64{}
	results, late = map[string][]string{}, map[string][]string{}
	dueAt := func(wm int64) bool {
		for _, ts := range timers {
			for _, tr := range ts {
				if tr <= wm {
					return true
				}
			}
		}
		return false
	}
	for l := 0; l <= len(in); {
		wm := winWatermark(in, l, bound)
		end := l + 1
		for end < len(in) && end-l < batchSize && !dueAt(winWatermark(in, end, bound)) {
			end++
		}
		end = min(end, len(in))
		if l == len(in) && !dueAt(wm) {
			break
		}
		for {
			pending := map[string][]int64{}
			for k, v := range timers {
				pending[k] = slices.Clone(v)
			}
			req := winRequest(in[l:end], state, pending, wm)
			resp := d.process(req)
			// A timer set here that would fire before a later record of the
			// batch makes the host cut the batch there and process it again.
			cut := end
			for _, k := range resp.Keys {
				for _, st := range k.TimersSet {
					for j := l + 1; j < cut; j++ {
						if st.TriggerTimestamp <= winWatermark(in, j, bound) {
							cut = j
						}
					}
				}
			}
			if cut < end {
				end = cut
				continue
			}
			timers = pending
			for _, k := range resp.Keys {
				require.Empty(d.t, k.Error, "key %q failed", k.Key)
				for _, e := range k.Emits {
					if e.Stream == "late" {
						late[k.Key] = append(late[k.Key], string(e.Payload))
					} else {
						results[k.Key] = append(results[k.Key], string(e.Payload))
					}
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
		if l < len(in) {
			l = end
		}
	}
	return results, late
}

// winRequest is one batch: per key, the timers due at the batch's first
// position (taken out of timers), then its records.
func winRequest(batch []winRecord, state map[string][]byte, timers map[string][]int64, wm int64) *abi.Request {
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
	for _, key := range slices.Sorted(mapKeys(timers)) {
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
		stream, payload := "in", []byte(strconv.FormatInt(r.value, 10))
		if r.stream != "" {
			stream = r.stream
		}
		if r.empty {
			payload = nil
		}
		k.Messages = append(k.Messages, abi.Message{ID: fmt.Sprintf("m%d-%d", i, r.ts), Stream: stream, EventTimestamp: r.ts,
			SystemTimestamp: r.ts, AlignmentTimestamp: r.ts, Payload: payload})
	}
	req := &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Keys: []abi.RequestKey{},
		Watermarks: abi.Watermarks{Event: wm, System: wm}}
	for _, key := range order {
		req.Keys = append(req.Keys, *keys[key])
	}
	return req
}

func perKeyEqual(a, b map[string][]string) bool {
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

// TestWindowsMatchModel runs the AssemblyScript window guest (the SDK's
// Windows helper with a count) through the host's wazero engine on random
// out-of-order input with late records, for every window kind, in batches
// of 1, 7 and 1000 records: its results and late records must be the
// model's, and every response (emits, state bytes, timers) must be the
// bytes the Go SDK's helper answers to the same request.
func TestWindowsMatchModel(t *testing.T) {
	m, logs := guestModule(t, windowGuest)
	for _, sp := range winSpecs {
		t.Run(sp.name, func(t *testing.T) {
			inst := instantiate(t, m)
			initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform,
				Parameters: sp.params(), OutputStreams: winOutputs})
			var sawLate, sawResult bool
			rapid.Check(t, func(rt *rapid.T) {
				n := rapid.IntRange(0, 60).Draw(rt, "n")
				bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
				base := rapid.SampledFrom([]int64{100, -37}).Draw(rt, "base") // before 1970 too
				in := make([]winRecord, n)
				for i := range in {
					in[i] = winRecord{
						key:   rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key"),
						ts:    base + int64(i) + rapid.Int64Range(-15, 3).Draw(rt, "jitter"),
						value: int64(i + 1),
					}
				}
				wantRes, wantLate := winModel(sp, in, bound)
				sawLate = sawLate || len(wantLate) > 0
				sawResult = sawResult || len(wantRes) > 0
				d := &winDriver{t: t, rt: rt, inst: inst, goComp: goWindows(sp)}
				for _, size := range []int{1, 7, 1000} {
					gotRes, gotLate := d.run(in, bound, size)
					if !perKeyEqual(gotRes, wantRes) || !perKeyEqual(gotLate, wantLate) {
						rt.Fatalf("batch size %d:\n results %v\n want    %v\n late %v\n want %v\nguest log:\n%s", size, gotRes, wantRes, gotLate, wantLate, logs.text())
					}
				}
			})
			// The generator must reach both paths, or the check proves little.
			require.True(t, sawLate, "no input had late records")
			require.True(t, sawResult, "no input had window results")
		})
	}
}
