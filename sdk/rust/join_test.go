package rust_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// The payload functions of testdata/join-guest, written again for the Go
// helpers: every field of every record, so that equal bytes mean the two
// SDKs passed the same records.
func joinRecordText(r flowhost.JoinRecord) string {
	return fmt.Sprintf("%s|%s|%d|%s|%d", r.ID, r.Stream, r.EventTimestamp, r.Payload, r.Input)
}

func goPair(p flowhost.JoinPair) []byte {
	return []byte(p.Key + "|" + joinRecordText(p.Left) + "/" + joinRecordText(p.Right))
}

func goExpired(r flowhost.JoinRecord) []byte { return []byte("x|" + joinRecordText(r)) }

func goEnrich(m flowhost.Message, v flowhost.JoinRecord) []byte {
	return fmt.Appendf(nil, "%s|%s|%d|%s|%d/%s", m.ID, m.Stream, m.EventTimestamp, m.Payload, m.Input, joinRecordText(v))
}

// joinCase is one drawn run: the guest's parameters and the input records.
type joinCase struct {
	params  map[string]any
	goComp  flowhost.Computation
	in      []joinInput
	bound   int64    // how far out of order the watermark allows
	outputs []string // the guest's output streams; nil: joinOutputs
}

type joinInput struct {
	key, stream string
	ts          int64
	payload     []byte
}

// extremeTimes are event times near the ends of int64, where expiry
// triggers clamp and differences overflow.
var extremeTimes = []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64}

func drawJoinInputs(rt *rapid.T, streams ...string) []joinInput {
	n := rapid.IntRange(0, 40).Draw(rt, "n")
	in := make([]joinInput, n)
	for i := range in {
		ts := int64(i) + rapid.Int64Range(-15, 3).Draw(rt, "jitter") + 100
		if rapid.IntRange(0, 30).Draw(rt, "extreme") == 0 {
			ts = rapid.SampledFrom(extremeTimes).Draw(rt, "extreme ts")
		}
		stream := rapid.SampledFrom(streams).Draw(rt, "stream")
		if rapid.IntRange(0, 60).Draw(rt, "other") == 0 {
			stream = "Z" // neither stream: fails the key
		}
		in[i] = joinInput{
			key:     rapid.SampledFrom([]string{`["a"]`, `["b"]`, `["c"]`}).Draw(rt, "key"),
			stream:  stream,
			ts:      ts,
			payload: rapid.SliceOfN(rapid.SampledFrom([]byte("xy|\x00")), 0, 3).Draw(rt, "payload"),
		}
	}
	return in
}

func drawIntervalCase(rt *rapid.T) joinCase {
	lower := rapid.Int64Range(-8, 8).Draw(rt, "lower")
	upper := lower + rapid.Int64Range(0, 10).Draw(rt, "width")
	if rapid.IntRange(0, 10).Draw(rt, "wide") == 0 {
		lower, upper = math.MinInt64+1, math.MaxInt64
	}
	withExpired := rapid.Bool().Draw(rt, "with_expired")
	var opts []flowhost.JoinOption
	if withExpired {
		opts = append(opts, flowhost.WithExpired(goExpired))
	}
	j := flowhost.NewIntervalJoin("L", "R", time.Duration(lower), time.Duration(upper), goPair, "out", "expired", opts...)
	return joinCase{
		params: map[string]any{"mode": "interval", "lower": lower, "upper": upper, "with_expired": withExpired},
		goComp: flowhost.Computation{Process: func(b *flowhost.Batch) error {
			for k := range b.Keys() {
				_ = j.Process(k)
			}
			return nil
		}},
		in:    drawJoinInputs(rt, "L", "R"),
		bound: rapid.Int64Range(0, 8).Draw(rt, "bound"),
	}
}

func drawEnrichCase(rt *rapid.T) joinCase {
	e := flowhost.NewEnrichJoin("T", "E", goEnrich, "out", "unmatched")
	return joinCase{
		params: map[string]any{"mode": "enrich"},
		goComp: flowhost.Computation{Process: func(b *flowhost.Batch) error {
			for k := range b.Keys() {
				_ = e.Process(k)
			}
			return nil
		}},
		in:    drawJoinInputs(rt, "T", "E"),
		bound: rapid.Int64Range(0, 8).Draw(rt, "bound"),
	}
}

var joinOutputs = []string{"out", "expired", "unmatched"}

func (c joinCase) outputsOrDefault() []string {
	if c.outputs == nil {
		return joinOutputs
	}
	return c.outputs
}

// runJoinCase feeds the case's input to the Rust guest (through the host's
// engine) and to the Go helper (natively, flowhost.Run) in batches of
// size, both fed the same requests, and requires the same response bytes
// for every batch. It plays the host: it keeps state and timers from the
// responses (a failed key changes nothing), fires the timers the
// watermark has reached, and flushes every timer at the end.
func runJoinCase(t *testing.T, rt *rapid.T, m engine.Module, c joinCase, size int, seen map[string]bool) {
	ctx := context.Background()
	outputs := c.outputsOrDefault()
	init := &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Parameters: c.params, OutputStreams: outputs}
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(t, err)
	defer inst.Close(ctx)
	initBytes, err := abi.EncodeInit(init)
	require.NoError(t, err)
	res, err := inst.Init(ctx, initBytes)
	require.NoError(t, err)
	require.Nil(t, res, "the join guest should start")

	state := map[string][]byte{}
	timers := map[string]map[int64]abi.Timer{}
	seq := 0
	wm := int64(math.MinInt64)
	for start := 0; start <= len(c.in); start += size {
		end := min(start+size, len(c.in))
		last := start == len(c.in) || end == len(c.in)
		if last {
			wm = math.MaxInt64
		}
		byKey := map[string]*abi.RequestKey{}
		get := func(k string) *abi.RequestKey {
			if byKey[k] == nil {
				byKey[k] = &abi.RequestKey{Key: k, State: state[k]}
			}
			return byKey[k]
		}
		for k, ts := range timers {
			for _, tr := range slices.Sorted(maps.Keys(ts)) {
				if tr <= wm {
					tm := ts[tr]
					ev := tr
					if tm.EventTimestamp != nil {
						ev = *tm.EventTimestamp
					}
					rk := get(k)
					rk.Timers = append(rk.Timers, abi.DueTimer{ID: fmt.Sprintf("t-%s-%d", k, tr), TriggerTimestamp: tr, EventTimestamp: ev, Payload: tm.Payload})
				}
			}
		}
		for _, r := range c.in[start:end] {
			seq++
			rk := get(r.key)
			rk.Messages = append(rk.Messages, abi.Message{ID: fmt.Sprintf("m%d", seq), Stream: r.stream,
				EventTimestamp: r.ts, SystemTimestamp: r.ts, AlignmentTimestamp: r.ts, Payload: r.payload})
		}
		if len(byKey) == 0 {
			if last {
				break
			}
			continue
		}
		req := &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: uint64(seq),
			Watermarks: abi.Watermarks{Event: wm, System: wm}}
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			req.Keys = append(req.Keys, *byKey[k])
		}
		reqBytes, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		rustOut, err := inst.Process(ctx, reqBytes)
		require.NoError(t, err)
		goResp, err := flowhost.Run(c.goComp, init, req)
		require.NoError(t, err)
		goOut, err := abi.EncodeResponse(goResp)
		require.NoError(t, err)
		if !bytes.Equal(goOut, rustOut) {
			rustResp, err := abi.DecodeResponse(rustOut, abi.ResponseLimits{})
			require.NoError(t, err)
			rt.Fatalf("batch size %d, batch at %d: the Rust and Go joins disagree\nrequest %+v\nrust %+v\ngo   %+v", size, start, req, rustResp, goResp)
		}
		require.NoError(t, abi.ValidateResponse(goResp, req, outputs))
		// Commit as the host does: fired timers go, then each key's
		// cancels and sets (one timer per trigger, the smallest event_ts).
		for _, rk := range req.Keys {
			for _, tm := range rk.Timers {
				delete(timers[rk.Key], tm.TriggerTimestamp)
			}
		}
		for _, rk := range goResp.Keys {
			for _, e := range rk.Emits {
				seen[e.Stream] = true
			}
			seen["cancel"] = seen["cancel"] || len(rk.TimersCancel) > 0
			if rk.Error != "" {
				seen["error"] = true
				continue
			}
			switch rk.StateOp {
			case abi.StateReplace:
				state[rk.Key] = bytes.Clone(rk.State)
			case abi.StateDelete:
				delete(state, rk.Key)
			}
			if timers[rk.Key] == nil {
				timers[rk.Key] = map[int64]abi.Timer{}
			}
			for _, tr := range rk.TimersCancel {
				delete(timers[rk.Key], tr)
			}
			for _, tm := range rk.TimersSet {
				old, ok := timers[rk.Key][tm.TriggerTimestamp]
				if ok && eventOf(old) <= eventOf(tm) {
					continue
				}
				timers[rk.Key][tm.TriggerTimestamp] = tm
			}
		}
		if start < len(c.in) {
			for _, r := range c.in[start:end] {
				wm = max(wm, satSub(r.ts, c.bound))
			}
		}
	}
}

func eventOf(t abi.Timer) int64 {
	if t.EventTimestamp != nil {
		return *t.EventTimestamp
	}
	return t.TriggerTimestamp
}

func satSub(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// TestIntervalJoinMatchesGo runs the Rust interval join (testdata/join-guest)
// and the Go one side by side on random input, bounds and event times near
// the ends of int64, in batches of 1, 7 and 1000, and requires the same
// response bytes for every batch: emits, parents, event times, state bytes,
// timers and error texts.
func TestIntervalJoinMatchesGo(t *testing.T) {
	m := compiledModule(t, "join")
	seen := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		c := drawIntervalCase(rt)
		for _, size := range []int{1, 7, 1000} {
			runJoinCase(t, rt, m, c, size, seen)
		}
	})
	for _, what := range []string{"out", "expired", "cancel", "error"} {
		require.True(t, seen[what], "no run had %s", what)
	}
}

// TestEnrichJoinMatchesGo is TestIntervalJoinMatchesGo for the enrichment
// join, tombstones (empty table payloads) included.
func TestEnrichJoinMatchesGo(t *testing.T) {
	m := compiledModule(t, "join")
	seen := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		c := drawEnrichCase(rt)
		for _, size := range []int{1, 7, 1000} {
			runJoinCase(t, rt, m, c, size, seen)
		}
	})
	for _, what := range []string{"out", "unmatched", "error"} {
		require.True(t, seen[what], "no run had %s", what)
	}
}

// TestJoinStatesMatchGo gives both joins random states, mostly almost
// valid (a right header, small counts and lengths, varint continuation
// bytes), and requires the Rust response bytes to equal the Go ones: the
// same records decoded, or the same error text naming the same field and
// byte. The one difference allowed is a message_id that is not UTF-8,
// which Go keeps and Rust, whose strings are UTF-8, refuses.
func TestJoinStatesMatchGo(t *testing.T) {
	m := compiledModule(t, "join")
	seen := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		var c joinCase
		header := []byte{1, 'I'}
		streams := []string{"L", "R"}
		if rapid.Bool().Draw(rt, "enrich") {
			c, header, streams = drawEnrichCase(rt), []byte{1, 'E'}, []string{"T", "E"}
		} else {
			c = drawIntervalCase(rt)
		}
		body := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 1, 2, 3, 'I', 'E', 'x', 0x7f, 0x80, 0xff}), 0, 24).Draw(rt, "body")
		if rapid.IntRange(0, 3).Draw(rt, "valid body") == 0 {
			// A well-formed body (one held record, or a table value), so
			// that every run decodes some states, not only refuses them.
			valid := map[byte][]byte{'I': {1, 0, 0, 4, 1, 'x', 1, 'x'}, 'E': {4, 1, 'x', 1, 'x'}}[header[1]]
			body = append(slices.Clone(valid), body[:rapid.IntRange(0, min(2, len(body))).Draw(rt, "trailing")]...)
		}
		state := append(slices.Clone(header[:rapid.IntRange(0, 2).Draw(rt, "header")]), body...)
		if rapid.IntRange(0, 4).Draw(rt, "full header") > 0 {
			state = append(slices.Clone(header), body...)
		}
		key := abi.RequestKey{Key: `["k"]`, State: state}
		if rapid.Bool().Draw(rt, "timer") {
			tr := rapid.Int64Range(-3, 3).Draw(rt, "trigger")
			key.Timers = []abi.DueTimer{{ID: "t", TriggerTimestamp: tr, EventTimestamp: tr}}
		}
		for i := range rapid.IntRange(0, 3).Draw(rt, "messages") {
			ts := rapid.Int64Range(-3, 3).Draw(rt, "ts")
			key.Messages = append(key.Messages, abi.Message{ID: fmt.Sprintf("m%d", i), Stream: rapid.SampledFrom(streams).Draw(rt, "stream"),
				EventTimestamp: ts, SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: []byte("p")})
		}
		if len(key.Timers)+len(key.Messages) == 0 {
			key.Messages = []abi.Message{{ID: "m", Stream: streams[0], Payload: []byte("p")}}
		}
		rustResp, goResp, same := joinOnce(t, m, c, key)
		if same {
			switch {
			case len(goResp.Keys) == 1 && goResp.Keys[0].Error != "":
				seen["error"] = true
			default:
				seen["decoded"] = true
			}
			return
		}
		if len(rustResp.Keys) == 1 && strings.Contains(rustResp.Keys[0].Error, "message_id not UTF-8") {
			seen["utf8"] = true
			return
		}
		rt.Fatalf("state %q: the Rust and Go joins disagree\nrust %+v\ngo   %+v", state, rustResp, goResp)
	})
	for _, what := range []string{"error", "decoded"} { // "utf8" is rare here; tests/join.rs has it
		require.True(t, seen[what], "no run had %s", what)
	}
}

// joinOnce passes one key to a fresh instance of the Rust guest and to the
// Go helper, and reports whether the response bytes are equal.
func joinOnce(t testing.TB, m engine.Module, c joinCase, key abi.RequestKey) (rustResp, goResp *abi.Response, same bool) {
	ctx := context.Background()
	outputs := c.outputsOrDefault()
	init := &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Parameters: c.params, OutputStreams: outputs}
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(t, err)
	defer inst.Close(ctx)
	initBytes, err := abi.EncodeInit(init)
	require.NoError(t, err)
	res, err := inst.Init(ctx, initBytes)
	require.NoError(t, err)
	require.Nil(t, res)
	req := &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1, Keys: []abi.RequestKey{key}}
	reqBytes, err := abi.EncodeRequest(req)
	require.NoError(t, err)
	rustOut, err := inst.Process(ctx, reqBytes)
	require.NoError(t, err)
	goResp, err = flowhost.Run(c.goComp, init, req)
	require.NoError(t, err)
	goOut, err := abi.EncodeResponse(goResp)
	require.NoError(t, err)
	rustResp, err = abi.DecodeResponse(rustOut, abi.ResponseLimits{})
	require.NoError(t, err)
	return rustResp, goResp, bytes.Equal(goOut, rustOut)
}

// FuzzJoinStateMatchesGo feeds arbitrary state bytes to the Rust join
// decoders (through the guest) and to the Go ones: the responses must be
// the same bytes, except that Rust refuses a message_id that is not UTF-8.
func FuzzJoinStateMatchesGo(f *testing.F) {
	f.Add([]byte{1, 'I', 1, 0, 0, 4, 1, 'a', 1, 'p'}, false, int64(2), int64(0))
	f.Add([]byte{1, 'I', 2, 1, 1, 0x80, 0, 0, 0}, false, int64(-1), int64(5))
	f.Add([]byte{1, 'E', 6, 1, 'a', 2, 'v', 'v'}, true, int64(0), int64(0))
	f.Add([]byte{1, 'E', 0, 0, 0}, true, int64(1), int64(0))
	f.Add([]byte{}, false, int64(0), int64(0))
	f.Add([]byte{2, 'X'}, true, int64(0), int64(0))
	f.Add([]byte{1, 'I', 1, 0, 0, 0, 1, 0xff, 0}, false, int64(0), int64(0))
	m := compiledModule(f, "join")
	interval := flowhost.NewIntervalJoin("L", "R", -3, 3, goPair, "out", "expired")
	enrich := flowhost.NewEnrichJoin("T", "E", goEnrich, "out", "unmatched")
	f.Fuzz(func(t *testing.T, state []byte, isEnrich bool, ts, trigger int64) {
		c := joinCase{params: map[string]any{"mode": "interval", "lower": int64(-3), "upper": int64(3), "with_expired": false},
			goComp: flowhost.Computation{Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					_ = interval.Process(k)
				}
				return nil
			}}}
		stream := "R"
		if isEnrich {
			stream = "E"
			c.params = map[string]any{"mode": "enrich"}
			c.goComp = flowhost.Computation{Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					_ = enrich.Process(k)
				}
				return nil
			}}
		}
		key := abi.RequestKey{Key: `["k"]`, State: state,
			Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: trigger, EventTimestamp: trigger}},
			Messages: []abi.Message{{ID: "m", Stream: stream, EventTimestamp: ts, SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: []byte("p")}}}
		rustResp, goResp, same := joinOnce(t, m, c, key)
		if !same && !(len(rustResp.Keys) == 1 && strings.Contains(rustResp.Keys[0].Error, "message_id not UTF-8")) {
			t.Fatalf("state %q: the Rust and Go joins disagree\nrust %+v\ngo   %+v", state, rustResp, goResp)
		}
	})
}
