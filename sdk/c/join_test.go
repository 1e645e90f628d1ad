package c_test

import (
	"context"
	"fmt"
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

// The join guest's streams (testdata/joinguest/main.c).
var (
	intervalOutputs = []string{"joined", "unmatched"}
	enrichOutputs   = []string{"enriched", "no-customer"}
)

// joinSpec is one interval join configuration of the tests.
type joinSpec struct {
	name         string
	lower, upper int64
	expiredFn    bool
}

var joinSpecs = []joinSpec{
	{"symmetric", -5, 5, false},
	{"after", 0, 10, true},
	{"before", -10, -2, false},
	{"exact", 3, 3, true},
}

// extremeJoinSpecs have bounds at the ends of int64, where expiries clamp
// and differences overflow.
var extremeJoinSpecs = []joinSpec{
	{"widest", math.MinInt64 + 1, math.MaxInt64, true}, // lower = MinInt64 is refused: -lower must exist
	{"far-after", math.MaxInt64 - 1, math.MaxInt64, false},
	{"far-before", math.MinInt64 + 1, math.MinInt64 + 2, false},
}

func (sp joinSpec) params() map[string]any {
	return map[string]any{"kind": "interval", "lower_ns": sp.lower, "upper_ns": sp.upper, "expired_fn": sp.expiredFn}
}

// goRec is the join guest's rendering of a record, in Go.
func goRec(tag string, r flowhost.JoinRecord) string {
	return fmt.Sprintf("%s(%s,%s,%d,%s)", tag, r.ID, r.Stream, r.EventTimestamp, r.Payload)
}

// goInterval is the join guest's interval join written with the Go SDK:
// the reference the C helper must match byte for byte.
func goInterval(sp joinSpec) flowhost.Computation {
	var opts []flowhost.JoinOption
	if sp.expiredFn {
		opts = append(opts, flowhost.WithExpired(func(r flowhost.JoinRecord) []byte {
			return fmt.Appendf(nil, "%s#%d", goRec("X", r), r.Input)
		}))
	}
	j := flowhost.NewIntervalJoin("orders", "payments", time.Duration(sp.lower), time.Duration(sp.upper),
		func(p flowhost.JoinPair) []byte {
			return fmt.Appendf(nil, "%s%s%s#%d,%d", p.Key, goRec(" L", p.Left), goRec(" R", p.Right), p.Left.Input, p.Right.Input)
		}, "joined", "unmatched", opts...)
	return flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = j.Process(k)
		}
		return nil
	}}
}

// goEnrich is the join guest's enrichment join in Go.
func goEnrich() flowhost.Computation {
	e := flowhost.NewEnrichJoin("customers", "orders", func(ev flowhost.Message, v flowhost.JoinRecord) []byte {
		ev.ID = strings.Clone(ev.ID)
		r := flowhost.JoinRecord{ID: ev.ID, Stream: ev.Stream, EventTimestamp: ev.EventTimestamp, Payload: ev.Payload}
		return fmt.Appendf(nil, "%s%s#%d,%d", goRec("E", r), goRec(" V", v), ev.Input, v.Input)
	}, "enriched", "no-customer")
	return flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = e.Process(k)
		}
		return nil
	}}
}

func joinInstance(t testing.TB, params map[string]any, outputs []string) engine.Instance {
	inst, _ := instance(t, joinGuest)
	initWith(t, inst, "join", abi.KindTransform, params, outputs...)
	return inst
}

// joinInput draws records of two keys on the streams a and b with jittered
// times, stable ids and short payloads (empty ones included: a tombstone
// for the enrichment join's table).
func joinInput(rt *rapid.T, a, b string) []winRecord {
	n := rapid.IntRange(0, 40).Draw(rt, "n")
	base := rapid.SampledFrom([]int64{100, -37}).Draw(rt, "base")
	in := make([]winRecord, n)
	for i := range in {
		in[i] = winRecord{
			key:     rapid.SampledFrom([]string{`["a"]`, `["b"]`}).Draw(rt, "key"),
			ts:      int64(i) + rapid.Int64Range(-15, 3).Draw(rt, "jitter") + base,
			stream:  rapid.SampledFrom([]string{a, b}).Draw(rt, "stream"),
			id:      fmt.Sprintf("r%d", i),
			payload: []byte(rapid.SampledFrom([]string{"", "x", fmt.Sprint(i), "é\x00"}).Draw(rt, "payload")),
		}
	}
	return in
}

// joinOutputs drives in through the C guest in batches of batchSize, every
// response required to equal the Go helper's, and returns each key's emits
// as stream, payload up to "#" (the part that does not depend on
// batching) and event time.
func joinOutputs(t winT, inst engine.Instance, goComp flowhost.Computation, in []winRecord, bound int64, batchSize int, outputs []string) map[string][]string {
	out := map[string][]string{}
	hostDrive(t, inst, goComp, in, bound, batchSize, outputs, func(key string, e abi.Emit) {
		payload, _, _ := strings.Cut(string(e.Payload), "#")
		ts := "derived"
		if e.EventTimestamp != nil {
			ts = fmt.Sprint(*e.EventTimestamp)
		}
		out[key] = append(out[key], e.Stream+" "+payload+" @"+ts)
	})
	return out
}

// TestIntervalJoinLikeGo runs random input (both sides, out of order, late
// records, equal times) through the C interval join in batches of 1, 7
// and 1000, requires every response to equal the Go helper's (emits,
// parents, event times, state bytes, timers) and the outputs to be the
// same for every batch size.
func TestIntervalJoinLikeGo(t *testing.T) {
	for _, sp := range joinSpecs {
		t.Run(sp.name, func(t *testing.T) {
			inst := joinInstance(t, sp.params(), intervalOutputs)
			goComp := goInterval(sp)
			var sawJoin, sawExpired bool
			rapid.Check(t, func(rt *rapid.T) {
				in := joinInput(rt, "orders", "payments")
				bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
				var first map[string][]string
				for _, size := range []int{1, 7, 1000} {
					got := joinOutputs(rt, inst, goComp, in, bound, size, intervalOutputs)
					if size == 1 {
						first = got
						for _, outs := range got {
							for _, o := range outs {
								sawJoin = sawJoin || strings.HasPrefix(o, "joined ")
								sawExpired = sawExpired || strings.HasPrefix(o, "unmatched ")
							}
						}
					} else if !equalPerKey(got, first) {
						rt.Fatalf("batch size %d gives\n %v\nbatch size 1 gives\n %v", size, got, first)
					}
				}
			})
			require.True(t, sawJoin && sawExpired, "no input had matches (%v) or expired records (%v)", sawJoin, sawExpired)
		})
	}
}

// TestEnrichJoinLikeGo is TestIntervalJoinLikeGo for the enrichment join:
// table values, tombstones and events in any order.
func TestEnrichJoinLikeGo(t *testing.T) {
	inst := joinInstance(t, map[string]any{"kind": "enrich"}, enrichOutputs)
	goComp := goEnrich()
	var sawEnriched, sawUnmatched bool
	rapid.Check(t, func(rt *rapid.T) {
		in := joinInput(rt, "customers", "orders")
		var first map[string][]string
		for _, size := range []int{1, 7, 1000} {
			got := joinOutputs(rt, inst, goComp, in, 0, size, enrichOutputs)
			if size == 1 {
				first = got
				for _, outs := range got {
					for _, o := range outs {
						sawEnriched = sawEnriched || strings.HasPrefix(o, "enriched ")
						sawUnmatched = sawUnmatched || strings.HasPrefix(o, "no-customer ")
					}
				}
			} else if !equalPerKey(got, first) {
				rt.Fatalf("batch size %d gives\n %v\nbatch size 1 gives\n %v", size, got, first)
			}
		}
	})
	require.True(t, sawEnriched && sawUnmatched, "no input had enriched (%v) or unmatched (%v) events", sawEnriched, sawUnmatched)
}

// joinStateRequest is one key with state, for the interval join a due
// timer at trigger, and a message of stream at ts.
func joinStateRequest(state []byte, timer bool, trigger int64, stream string, ts int64) *abi.Request {
	k := abi.RequestKey{Key: `["k"]`, State: state,
		Messages: []abi.Message{{ID: "m", Stream: stream, EventTimestamp: ts, SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: []byte("p")}}}
	if timer {
		k.Timers = []abi.DueTimer{{ID: "t", TriggerTimestamp: trigger, EventTimestamp: trigger}}
	}
	return &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1, Keys: []abi.RequestKey{k}}
}

// intervalState encodes held records as sdk/JOINS.md says: side, matched,
// ts, id, payload each.
func intervalState(recs ...[]any) []byte {
	b := []byte{1, 'I'}
	b = uv(b, uint64(len(recs)))
	for _, r := range recs {
		b = append(b, r[0].(byte), r[1].(byte))
		b = sv(b, r[2].(int64))
		b = uv(b, uint64(len(r[3].(string))))
		b = append(b, r[3].(string)...)
		b = uv(b, uint64(len(r[4].(string))))
		b = append(b, r[4].(string)...)
	}
	return b
}

// TestJoinStateRefused checks that a state that is not the join's fails
// the key (and only it) with the Go SDK's text naming the field and byte.
func TestJoinStateRefused(t *testing.T) {
	const prefix = "flowhost: the key's state is not a join state: "
	good := intervalState([]any{byte(0), byte(0), int64(1), "m", "p"})
	enrichState := []byte{1, 'E', 2, 1, 'c', 1, 'v'}
	for _, tc := range []struct {
		name, want string
		in         []byte
		enrich     bool
	}{
		{"empty", "missing version at byte 0", []byte{}, false},
		{"unknown version", "unknown version 2 at byte 0", []byte{2, 'I', 0}, false},
		{"a window state", `kind '\x00', want 'I' at byte 1`, []byte{1, 0, 0}, false},
		{"kind newline", `kind '\n', want 'I' at byte 1`, []byte{1, '\n', 0}, false},
		{"kind quote", `kind '\'', want 'I' at byte 1`, []byte{1, '\'', 0}, false},
		{"kind high", `kind '\u0080', want 'I' at byte 1`, []byte{1, 0x80, 0}, false},
		{"kind latin", `kind 'é', want 'I' at byte 1`, []byte{1, 0xe9, 0}, false},
		{"no kind", "missing kind at byte 1", []byte{1}, false},
		{"enrich state read as interval", `kind 'E', want 'I' at byte 1`, enrichState, false},
		{"truncated count", "bad record count at byte 2", []byte{1, 'I'}, false},
		{"count larger than the state", "record count larger than the state at byte 3", []byte{1, 'I', 100}, false},
		{"no side", "missing side at byte 3", []byte{1, 'I', 1}, false},
		{"bad side", "record 0: side 2, want 0 or 1 at byte 3", []byte{1, 'I', 1, 2, 0, 0, 0, 0}, false},
		{"bad matched", "record 0: matched 7, want 0 or 1 at byte 4", []byte{1, 'I', 1, 0, 7, 0, 0, 0}, false},
		{"no ts", "bad ts at byte 5", []byte{1, 'I', 1, 0, 0}, false},
		{"payload past the end", "payload length past the end at byte 8", []byte{1, 'I', 1, 0, 0, 0, 1, 'm', 9, 'x'}, false},
		{"trailing bytes", "trailing bytes at byte 10", append(slices.Clone(good), 0), false},
		{"enrich kind", `kind 'I', want 'E' at byte 1`, good, true},
		{"enrich empty payload", "empty payload (a tombstone is no state) at byte 4", []byte{1, 'E', 0, 0, 0}, true},
		{"enrich truncated id", "message_id length past the end at byte 3", []byte{1, 'E', 0, 5, 'a'}, true},
		{"enrich no payload length", "bad payload length at byte 5", []byte{1, 'E', 0, 1, 'a'}, true},
		{"enrich trailing", "trailing bytes at byte 7", append(slices.Clone(enrichState), 9), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *abi.Response
			if tc.enrich {
				inst := joinInstance(t, map[string]any{"kind": "enrich"}, enrichOutputs)
				resp = bothProcessOut(t, inst, goEnrich(), joinStateRequest(tc.in, false, 0, "orders", 3), enrichOutputs)
			} else {
				inst := joinInstance(t, joinSpecs[0].params(), intervalOutputs)
				resp = bothProcessOut(t, inst, goInterval(joinSpecs[0]), joinStateRequest(tc.in, true, 0, "orders", 3), intervalOutputs)
			}
			require.Len(t, resp.Keys, 1)
			require.Equal(t, prefix+tc.want, resp.Keys[0].Error)
			require.Empty(t, resp.Keys[0].Emits, "a failed key's effects are dropped")
		})
	}
}

// TestJoinRefusesOtherStreams checks a message of neither stream fails the
// key with the Go SDK's text, which names the message and the streams.
func TestJoinRefusesOtherStreams(t *testing.T) {
	inst := joinInstance(t, joinSpecs[0].params(), intervalOutputs)
	resp := bothProcessOut(t, inst, goInterval(joinSpecs[0]), joinStateRequest(nil, false, 0, "refunds\n", 3), intervalOutputs)
	require.Equal(t, `message m: stream "refunds\n" is neither the left stream "orders" nor the right stream "payments" of the join`, resp.Keys[0].Error)
	req := joinStateRequest(nil, false, 0, "x", 3)
	req.Keys[0].Messages[0].ID = "a\x00b"
	resp = bothProcessOut(t, inst, goInterval(joinSpecs[0]), req, intervalOutputs)
	require.Equal(t, "message a\x00b: stream \"x\" is neither the left stream \"orders\" nor the right stream \"payments\" of the join", resp.Keys[0].Error,
		"a NUL in the message_id does not cut the text")
	inst = joinInstance(t, map[string]any{"kind": "enrich"}, enrichOutputs)
	resp = bothProcessOut(t, inst, goEnrich(), joinStateRequest(nil, false, 0, "payments", 3), enrichOutputs)
	require.Equal(t, `message m: stream "payments" is neither the table stream "customers" nor the events stream "orders" of the join`, resp.Keys[0].Error)
}

// drawJoinState draws a state for the join of kind interval (or
// enrichment): well formed, damaged, or any bytes.
func drawJoinState(rt *rapid.T, interval bool) []byte {
	if !rapid.Bool().Draw(rt, "structured") {
		return rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(rt, "bytes")
	}
	times := rapid.SampledFrom([]int64{math.MinInt64, math.MinInt64 + 2, -9, -1, 0, 2, 7, math.MaxInt64 - 2, math.MaxInt64})
	var state []byte
	if interval {
		var recs [][]any
		for range rapid.IntRange(0, 4).Draw(rt, "records") {
			recs = append(recs, []any{byte(rapid.IntRange(0, 1).Draw(rt, "side")), byte(rapid.IntRange(0, 1).Draw(rt, "matched")),
				times.Draw(rt, "ts"), rapid.SampledFrom([]string{"", "id"}).Draw(rt, "id"), rapid.SampledFrom([]string{"", "v"}).Draw(rt, "payload")})
		}
		state = intervalState(recs...)
	} else {
		state = sv([]byte{1, 'E'}, times.Draw(rt, "ts"))
		state = append(uv(state, 2), "id"...)
		state = append(uv(state, 1), 'v')
	}
	if rapid.Bool().Draw(rt, "damaged") {
		i := rapid.IntRange(0, len(state)-1).Draw(rt, "at")
		state = append(slices.Clone(state[:i]), state[i+rapid.IntRange(0, 1).Draw(rt, "cut"):]...)
		state = append(state, rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(rt, "tail")...)
	}
	return state
}

// TestJoinStateDecodesLikeGo feeds random states, well formed and not, and
// extreme times to the C and Go joins and requires the same response: the
// same records expired and matched, the same state written back, the same
// refusal.
func TestJoinStateDecodesLikeGo(t *testing.T) {
	for _, sp := range append(slices.Clone(joinSpecs), extremeJoinSpecs...) {
		t.Run(sp.name, func(t *testing.T) {
			inst := joinInstance(t, sp.params(), intervalOutputs)
			goComp := goInterval(sp)
			rapid.Check(t, func(rt *rapid.T) {
				times := rapid.SampledFrom([]int64{math.MinInt64, -3, 0, 4, 9, math.MaxInt64})
				req := joinStateRequest(drawJoinState(rt, true), rapid.Bool().Draw(rt, "timer"), times.Draw(rt, "trigger"),
					rapid.SampledFrom([]string{"orders", "payments"}).Draw(rt, "stream"), times.Draw(rt, "msg ts"))
				bothProcessOut(rt, inst, goComp, req, intervalOutputs)
			})
		})
	}
	t.Run("enrich", func(t *testing.T) {
		inst := joinInstance(t, map[string]any{"kind": "enrich"}, enrichOutputs)
		goComp := goEnrich()
		rapid.Check(t, func(rt *rapid.T) {
			req := joinStateRequest(drawJoinState(rt, false), false, 0, rapid.SampledFrom([]string{"customers", "orders"}).Draw(rt, "stream"), 5)
			bothProcessOut(rt, inst, goComp, req, enrichOutputs)
		})
	})
}

// FuzzJoinState runs arbitrary state bytes through the C and Go interval
// and enrichment joins and requires the same responses.
func FuzzJoinState(f *testing.F) {
	f.Add([]byte(nil), int64(0), int64(3), false)
	f.Add([]byte{}, int64(0), int64(3), true)
	f.Add(intervalState([]any{byte(0), byte(0), int64(1), "m", "p"}, []any{byte(1), byte(1), int64(-4), "", ""}), int64(6), int64(2), true)
	f.Add([]byte{1, 'E', 2, 1, 'c', 1, 'v'}, int64(0), int64(3), false)
	f.Add([]byte{1, 'I', 1, 0, 0, 0x80, 0x80}, int64(math.MaxInt64), int64(math.MinInt64), true)
	ij := joinInstance(f, joinSpecs[0].params(), intervalOutputs)
	ej := joinInstance(f, map[string]any{"kind": "enrich"}, enrichOutputs)
	goI, goE := goInterval(joinSpecs[0]), goEnrich()
	f.Fuzz(func(t *testing.T, state []byte, trigger, ts int64, right bool) {
		stream := "orders"
		if right {
			stream = "payments"
		}
		bothProcessOut(t, ij, goI, joinStateRequest(state, true, trigger, stream, ts), intervalOutputs)
		stream = "orders"
		if right {
			stream = "customers"
		}
		bothProcessOut(t, ej, goE, joinStateRequest(state, false, 0, stream, ts), enrichOutputs)
	})
}

// TestJoinsNativeSanitizers runs random input and random states through
// the join guest built natively with AddressSanitizer and
// UndefinedBehaviorSanitizer, every response checked against the Go
// helper's: a memory error or undefined behaviour stops the harness and
// fails the test.
func TestJoinsNativeSanitizers(t *testing.T) {
	harness := buildSanitizedHarness(t, "testdata/joinguest/main.c")
	for _, sp := range append(slices.Clone(joinSpecs), extremeJoinSpecs...) {
		t.Run(sp.name, func(t *testing.T) {
			inst := startHarness(t, harness)
			initWith(t, inst, "join", abi.KindTransform, sp.params(), intervalOutputs...)
			goComp := goInterval(sp)
			rapid.Check(t, func(rt *rapid.T) {
				in := joinInput(rt, "orders", "payments")
				joinOutputs(rt, inst, goComp, in, rapid.Int64Range(0, 8).Draw(rt, "bound"), rapid.SampledFrom([]int{1, 7, 1000}).Draw(rt, "batch"), intervalOutputs)
				times := rapid.SampledFrom([]int64{math.MinInt64, -3, 0, 4, math.MaxInt64})
				bothProcessOut(rt, inst, goComp, joinStateRequest(drawJoinState(rt, true), rapid.Bool().Draw(rt, "timer"), times.Draw(rt, "trigger"),
					rapid.SampledFrom([]string{"orders", "payments", "other"}).Draw(rt, "stream"), times.Draw(rt, "msg ts")), intervalOutputs)
			})
			require.NoError(t, inst.Close(context.Background()))
		})
	}
	t.Run("enrich", func(t *testing.T) {
		inst := startHarness(t, harness)
		initWith(t, inst, "join", abi.KindTransform, map[string]any{"kind": "enrich"}, enrichOutputs...)
		goComp := goEnrich()
		rapid.Check(t, func(rt *rapid.T) {
			joinOutputs(rt, inst, goComp, joinInput(rt, "customers", "orders"), 0, rapid.SampledFrom([]int{1, 7, 1000}).Draw(rt, "batch"), enrichOutputs)
			bothProcessOut(rt, inst, goComp, joinStateRequest(drawJoinState(rt, false), false, 0,
				rapid.SampledFrom([]string{"customers", "orders", "other"}).Draw(rt, "stream"), 5), enrichOutputs)
		})
		require.NoError(t, inst.Close(context.Background()))
	})
}

// TestJoinCallbackFailureFailsTheKey checks a C callback returning
// non-zero fails only its key, with the SDK's text, and drops its effects.
func TestJoinCallbackFailureFailsTheKey(t *testing.T) {
	msg := func(id, stream string, ts int64, payload string) abi.Message {
		return abi.Message{ID: id, Stream: stream, EventTimestamp: ts, SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: []byte(payload)}
	}
	for _, tc := range []struct {
		name, want string
		params     map[string]any
		outputs    []string
		key        abi.RequestKey
	}{
		{"join", "flowhost: interval join: a callback failed or memory ran out",
			map[string]any{"kind": "interval", "lower_ns": -5, "upper_ns": 5, "expired_fn": false, "fail_payload": "FAIL"}, intervalOutputs,
			abi.RequestKey{Key: `["k"]`, Messages: []abi.Message{msg("a", "orders", 1, "ok"), msg("b", "payments", 2, "FAIL")}}},
		{"expired", "flowhost: interval join: a callback failed or memory ran out",
			map[string]any{"kind": "interval", "lower_ns": -5, "upper_ns": 5, "expired_fn": true, "fail_payload": "FAIL"}, intervalOutputs,
			abi.RequestKey{Key: `["k"]`, State: intervalState([]any{byte(0), byte(0), int64(1), "a", "FAIL"}),
				Timers: []abi.DueTimer{{ID: "t", TriggerTimestamp: 7, EventTimestamp: 7}}}},
		{"enrich", "flowhost: enrichment join: a callback failed or memory ran out",
			map[string]any{"kind": "enrich", "fail_payload": "FAIL"}, enrichOutputs,
			abi.RequestKey{Key: `["k"]`, Messages: []abi.Message{msg("a", "customers", 1, "c"), msg("b", "orders", 2, "FAIL")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := joinInstance(t, tc.params, tc.outputs)
			other := abi.RequestKey{Key: `["other"]`, Messages: []abi.Message{msg("c", "orders", 1, "fine")}}
			req := &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1, Keys: []abi.RequestKey{tc.key, other}}
			resp, err := abi.DecodeResponse(process(t, inst, req), abi.ResponseLimits{})
			require.NoError(t, err)
			require.Len(t, resp.Keys, 2)
			require.Equal(t, tc.want, resp.Keys[0].Error)
			require.Empty(t, resp.Keys[0].Emits)
			require.Empty(t, resp.Keys[0].TimersSet)
			require.Empty(t, resp.Keys[1].Error, "only the key whose callback failed fails")
		})
	}
}

// TestJoinInitRefusesBadBounds checks fh_interval_join_init refuses
// lower > upper and lower = INT64_MIN (the Go helper panics on both), so
// the guest's Init fails.
func TestJoinInitRefusesBadBounds(t *testing.T) {
	for _, tc := range []struct {
		lower, upper int64
		want         string
	}{
		{5, 4, "fh_interval_join_init needs lower <= upper"},
		{math.MinInt64, 0, "fh_interval_join_init needs lower > INT64_MIN"},
	} {
		inst, logs := instance(t, joinGuest)
		b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform,
			Parameters: map[string]any{"kind": "interval", "lower_ns": tc.lower, "upper_ns": tc.upper, "expired_fn": false}, OutputStreams: intervalOutputs})
		require.NoError(t, err)
		res, err := inst.Init(context.Background(), b)
		require.NoError(t, err)
		r, err := abi.DecodeInitResult(res)
		require.NoError(t, err)
		require.Equal(t, "setting up the interval join failed", r.Error)
		require.Contains(t, logs.text(), tc.want)
	}
}

// TestIntervalJoinScenario spells out one batch and the timer after it:
// a match with both parents and the later event time, one expiry timer
// per record, holding nothing back since both matched, the state as sdk/JOINS.md encodes it;
// then the timers fire and remove both records without an expired emit
// (both matched), deleting the state.
func TestIntervalJoinScenario(t *testing.T) {
	sp := joinSpecs[0] // -5..5
	inst := joinInstance(t, sp.params(), intervalOutputs)
	goComp := goInterval(sp)
	msg := func(id, stream string, ts int64, payload string) abi.Message {
		return abi.Message{ID: id, Stream: stream, EventTimestamp: ts, SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: []byte(payload)}
	}
	req := &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1, Keys: []abi.RequestKey{{
		Key: `["k"]`, Messages: []abi.Message{msg("o1", "orders", 10, "order"), msg("p1", "payments", 12, "pay")}}}}
	resp := bothProcessOut(t, inst, goComp, req, intervalOutputs)
	k := resp.Keys[0]
	require.Empty(t, k.Error)
	require.Len(t, k.Emits, 1)
	require.Equal(t, "joined", k.Emits[0].Stream)
	require.Equal(t, `["k"] L(o1,orders,10,order) R(p1,payments,12,pay)#0,1`, string(k.Emits[0].Payload))
	require.Equal(t, []uint32{0, 1}, k.Emits[0].Parents)
	require.Equal(t, int64(12), *k.Emits[0].EventTimestamp)
	require.Len(t, k.TimersSet, 2)
	require.Equal(t, int64(16), k.TimersSet[0].TriggerTimestamp, "a left record expires at ts + upper + 1")
	require.Equal(t, int64(18), k.TimersSet[1].TriggerTimestamp, "a right record expires at ts - lower + 1")
	// Both records matched, so neither can still come out expired at its
	// own time: their timers hold the output watermark at nothing.
	require.Nil(t, k.TimersSet[0].EventTimestamp)
	require.Nil(t, k.TimersSet[1].EventTimestamp)
	state := intervalState([]any{byte(0), byte(1), int64(10), "o1", "order"}, []any{byte(1), byte(1), int64(12), "p1", "pay"})
	require.Equal(t, abi.StateReplace, k.StateOp)
	require.Equal(t, state, k.State)

	req = &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 2, Keys: []abi.RequestKey{{
		Key: `["k"]`, State: state, Timers: []abi.DueTimer{{ID: "t16", TriggerTimestamp: 16, EventTimestamp: 10}, {ID: "t18", TriggerTimestamp: 18, EventTimestamp: 12}}}}}
	resp = bothProcessOut(t, inst, goComp, req, intervalOutputs)
	k = resp.Keys[0]
	require.Empty(t, k.Error)
	require.Empty(t, k.Emits, "matched records do not come out expired")
	require.Equal(t, abi.StateDelete, k.StateOp)
}
