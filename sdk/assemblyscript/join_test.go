package assemblyscript_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var (
	intervalOutputs = []string{"joined", "expired"}
	enrichOutputs   = []string{"enriched", "unmatched"}
)

// goJoinRecord spells out a record as the join guest's record does.
func goJoinRecord(r flowhost.JoinRecord) []byte {
	out := fmt.Appendf([]byte(r.ID), "/%s/%d/%d/", r.Stream, r.Input, r.EventTimestamp)
	return append(out, r.Payload...)
}

// goInterval is the Go helper configured as the join guest's interval join.
func goInterval(lower, upper int64) flowhost.Computation {
	j := flowhost.NewIntervalJoin("left", "right", time.Duration(lower), time.Duration(upper),
		func(p flowhost.JoinPair) []byte {
			out := append([]byte(p.Key+" L:"), goJoinRecord(p.Left)...)
			return append(append(out, " R:"...), goJoinRecord(p.Right)...)
		}, "joined", "expired",
		flowhost.WithExpired(func(r flowhost.JoinRecord) []byte { return append([]byte("X"), goJoinRecord(r)...) }))
	return flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = j.Process(k)
		}
		return nil
	}}
}

// goEnrich is the Go helper configured as the join guest's enrichment join.
func goEnrich() flowhost.Computation {
	e := flowhost.NewEnrichJoin("table", "events", func(ev flowhost.Message, v flowhost.JoinRecord) []byte {
		out := fmt.Appendf(nil, "%s/%s/%d/%d/", ev.ID, ev.Stream, ev.Input, ev.EventTimestamp)
		out = append(append(out, ev.Payload...), " V:"...)
		return append(out, goJoinRecord(v)...)
	}, "enriched", "unmatched")
	return flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = e.Process(k)
		}
		return nil
	}}
}

// joinInstance starts the join guest with params.
func joinInstance(tb testing.TB, m engine.Module, params map[string]any, outputs []string) engine.Instance {
	tb.Helper()
	inst := instantiate(tb, m)
	initGuest(tb, inst, &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform,
		Parameters: params, OutputStreams: outputs})
	return inst
}

// bothResponses passes req to the guest and to goComp and returns both
// responses' bytes.
func bothResponses(tb testing.TB, inst engine.Instance, goComp flowhost.Computation, req *abi.Request, outputs []string) (as, gor []byte) {
	tb.Helper()
	asResp := process(tb, inst, req, outputs)
	goResp, err := flowhost.Run(goComp, nil, req)
	require.NoError(tb, err)
	as, err = abi.EncodeResponse(asResp)
	require.NoError(tb, err)
	gor, err = abi.EncodeResponse(goResp)
	require.NoError(tb, err)
	return as, gor
}

// TestIntervalJoinMatchesGo runs the AssemblyScript join guest's interval
// join through the host's wazero engine on random out-of-order input of
// both sides (ties, late records, random bounds, negative ones too) in
// batches of 1, 7 and 1000 records, with timers placed as the host places
// them: every response (emits, parents, event times, state bytes, timers
// set and cancelled) must be the bytes the Go helper answers.
func TestIntervalJoinMatchesGo(t *testing.T) {
	m, _ := guestModule(t, joinGuest)
	var sawJoined, sawExpired bool
	rapid.Check(t, func(rt *rapid.T) {
		lower := rapid.Int64Range(-6, 3).Draw(rt, "lower")
		upper := lower + rapid.Int64Range(0, 6).Draw(rt, "width")
		inst := joinInstance(t, m, map[string]any{"join": "interval", "lower_ns": lower, "upper_ns": upper}, intervalOutputs)
		in := joinInput(rt, []string{"left", "right"}, false)
		d := &winDriver{t: t, rt: rt, inst: inst, goComp: goInterval(lower, upper), outputs: intervalOutputs}
		bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
		for _, size := range []int{1, 7, 1000} {
			res, _ := d.run(in, bound, size)
			for _, ps := range res {
				for _, p := range ps {
					if p[0] == 'X' {
						sawExpired = true
					} else {
						sawJoined = true
					}
				}
			}
		}
	})
	require.True(t, sawJoined, "no input had a match")
	require.True(t, sawExpired, "no input had an expired record")
}

// TestEnrichJoinMatchesGo is TestIntervalJoinMatchesGo for the enrichment
// join, with tombstones (empty table payloads) among the table records.
func TestEnrichJoinMatchesGo(t *testing.T) {
	m, _ := guestModule(t, joinGuest)
	inst := joinInstance(t, m, map[string]any{"join": "enrich"}, enrichOutputs)
	var sawEnriched, sawUnmatched bool
	rapid.Check(t, func(rt *rapid.T) {
		in := joinInput(rt, []string{"table", "events"}, true)
		d := &winDriver{t: t, rt: rt, inst: inst, goComp: goEnrich(), outputs: enrichOutputs}
		bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
		for _, size := range []int{1, 7, 1000} {
			res, _ := d.run(in, bound, size)
			for _, ps := range res {
				for _, p := range ps {
					if bytes.Contains([]byte(p), []byte(" V:")) {
						sawEnriched = true
					} else {
						sawUnmatched = true
					}
				}
			}
		}
	})
	require.True(t, sawEnriched, "no event was enriched")
	require.True(t, sawUnmatched, "no event was unmatched")
}

// joinInput draws up to 60 records of three keys on the two streams,
// out of order; with tombstones, a table record may have an empty payload.
func joinInput(rt *rapid.T, streams []string, tombstones bool) []winRecord {
	n := rapid.IntRange(0, 60).Draw(rt, "n")
	base := rapid.SampledFrom([]int64{100, -37}).Draw(rt, "base")
	in := make([]winRecord, n)
	for i := range in {
		in[i] = winRecord{
			key:    rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key"),
			ts:     base + int64(i) + rapid.Int64Range(-15, 3).Draw(rt, "jitter"),
			value:  int64(i + 1),
			stream: rapid.SampledFrom(streams).Draw(rt, "stream"),
		}
		in[i].empty = tombstones && in[i].stream == streams[0] && rapid.IntRange(0, 3).Draw(rt, "tombstone") == 0
	}
	return in
}

// joinStateRequest is one key with state, a due timer at trigger and a
// message of stream at ts.
func joinStateRequest(state []byte, trigger int64, stream string, ts int64, payload []byte) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1,
		Keys: []abi.RequestKey{{Key: "k", State: state,
			Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: trigger, EventTimestamp: trigger}},
			Messages: []abi.Message{{ID: "m", Stream: stream, EventTimestamp: ts, Payload: payload}}}}}
}

// TestJoinStateRefused: a state that is not the join encoding, or a
// message of neither stream, fails the key with the Go helper's error,
// word for word, naming the field and its byte offset.
func TestJoinStateRefused(t *testing.T) {
	m, _ := guestModule(t, joinGuest)
	ii := joinInstance(t, m, map[string]any{"join": "interval", "lower_ns": int64(-5), "upper_ns": int64(5)}, intervalOutputs)
	ei := joinInstance(t, m, map[string]any{"join": "enrich"}, enrichOutputs)
	const e = "flowhost: the key's state is not a join state: "
	for _, tc := range []struct {
		name   string
		enrich bool
		state  []byte
		stream string
		want   string
	}{
		{"empty", false, []byte{}, "left", e + "missing version at byte 0"},
		{"version", false, []byte{2, 'I', 0}, "left", e + "unknown version 2 at byte 0"},
		{"no kind", false, []byte{1}, "left", e + "missing kind at byte 1"},
		{"kind", false, []byte{1, 'E', 0}, "left", e + "kind 'E', want 'I' at byte 1"},
		{"kind byte", false, []byte{1, 0xad, 0}, "left", e + `kind '\u00ad', want 'I' at byte 1`},
		{"kind high", false, []byte{1, 0xe9, 0}, "left", e + "kind 'é', want 'I' at byte 1"},
		{"kind control", false, []byte{1, 0, 0}, "left", e + `kind '\x00', want 'I' at byte 1`},
		{"count", false, []byte{1, 'I', 0x80}, "left", e + "bad record count at byte 2"},
		{"count too large", false, []byte{1, 'I', 9, 0}, "left", e + "record count larger than the state at byte 3"},
		{"side", false, []byte{1, 'I', 1, 2, 0, 0, 0, 0}, "left", e + "record 0: side 2, want 0 or 1 at byte 3"},
		{"matched", false, []byte{1, 'I', 1, 0, 3, 0, 0, 0}, "left", e + "record 0: matched 3, want 0 or 1 at byte 4"},
		{"ts", false, []byte{1, 'I', 1, 0, 0, 0x80}, "left", e + "bad ts at byte 5"},
		{"id", false, []byte{1, 'I', 1, 0, 0, 0, 5, 'a'}, "left", e + "message_id length past the end at byte 6"},
		{"payload", false, []byte{1, 'I', 1, 0, 0, 0, 1, 'a'}, "left", e + "bad payload length at byte 8"},
		{"trailing", false, []byte{1, 'I', 0, 0}, "left", e + "trailing bytes at byte 3"},
		{"other stream", false, nil, "orders", `message m: stream "orders" is neither the left stream "left" nor the right stream "right" of the join`},
		{"enrich kind", true, []byte{1, 'I', 0}, "events", e + "kind 'I', want 'E' at byte 1"},
		{"enrich tombstone", true, []byte{1, 'E', 0, 1, 'a', 0}, "events", e + "empty payload (a tombstone is no state) at byte 5"},
		{"enrich trailing", true, []byte{1, 'E', 0, 1, 'a', 1, 'x', 0}, "events", e + "trailing bytes at byte 7"},
		{"enrich other stream", true, nil, "left", `message m: stream "left" is neither the table stream "table" nor the events stream "events" of the join`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, goComp, outputs := ii, goInterval(-5, 5), intervalOutputs
			if tc.enrich {
				inst, goComp, outputs = ei, goEnrich(), enrichOutputs
			}
			req := joinStateRequest(tc.state, 0, tc.stream, 3, []byte("x"))
			resp := process(t, inst, req, outputs)
			require.Len(t, resp.Keys, 1)
			require.Equal(t, tc.want, resp.Keys[0].Error)
			require.Empty(t, resp.Keys[0].Emits)
			as, gor := bothResponses(t, inst, goComp, req, outputs)
			require.Equal(t, gor, as, "the Go helper answers otherwise")
		})
	}
}

// TestIntervalJoinStateBytes pins the encoding on one example: a left
// record before 1970 held with its expiry timer, which holds its time.
func TestIntervalJoinStateBytes(t *testing.T) {
	m, _ := guestModule(t, joinGuest)
	inst := joinInstance(t, m, map[string]any{"join": "interval", "lower_ns": int64(-5), "upper_ns": int64(5)}, intervalOutputs)
	req := joinStateRequest(nil, math.MinInt64, "left", -3, []byte("p"))
	req.Keys[0].Timers = nil
	resp := process(t, inst, req, intervalOutputs)
	require.Len(t, resp.Keys, 1)
	require.Equal(t, abi.StateReplace, resp.Keys[0].StateOp)
	require.Equal(t, []byte{1, 'I', 1, 0, 0, 5 /* varint -3 */, 1, 'm', 1, 'p'}, resp.Keys[0].State)
	hold := int64(-3)
	require.Equal(t, []abi.Timer{{TriggerTimestamp: 3, EventTimestamp: &hold}}, resp.Keys[0].TimersSet)
}

// FuzzJoinState gives both joins of the guest and the Go helpers the same
// state bytes, a due timer and a message: the responses (the error with
// its offset, or the emits, timers and new state) must be the same bytes.
func FuzzJoinState(f *testing.F) {
	f.Add([]byte{1, 'I', 1, 0, 0, 5, 1, 'm', 1, 'p'}, int64(3), false, int64(-3), true)
	f.Add([]byte{1, 'I', 2, 1, 1, 20, 0, 0, 0, 0, 0, 0, 0}, int64(0), true, int64(4), false)
	f.Add([]byte{1, 'E', 4, 1, 'v', 1, 'x'}, int64(0), false, int64(1), false)
	f.Add([]byte{1, 'E', 4, 1, 0xff, 1, 'x'}, int64(0), false, int64(1), true)
	f.Add([]byte{}, int64(math.MaxInt64), true, int64(math.MinInt64), true)
	f.Add([]byte{1, 'I', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, int64(0), false, int64(0), false)
	m, _ := guestModule(f, joinGuest)
	ii := joinInstance(f, m, map[string]any{"join": "interval", "lower_ns": int64(-5), "upper_ns": int64(5)}, intervalOutputs)
	ei := joinInstance(f, m, map[string]any{"join": "enrich"}, enrichOutputs)
	gi, ge := goInterval(-5, 5), goEnrich()
	f.Fuzz(func(t *testing.T, state []byte, trigger int64, right bool, ts int64, tombstone bool) {
		payload := []byte("x")
		if tombstone {
			payload = nil
		}
		stream := "left"
		if right {
			stream = "right"
		}
		as, gor := bothResponses(t, ii, gi, joinStateRequest(state, trigger, stream, ts, payload), intervalOutputs)
		require.Equal(t, gor, as, "interval join")
		stream = "events"
		if right {
			stream = "table"
		}
		req := joinStateRequest(state, trigger, stream, ts, payload)
		req.Keys[0].Timers = nil
		as, gor = bothResponses(t, ei, ge, req, enrichOutputs)
		require.Equal(t, gor, as, "enrichment join")
	})
}

// TestIntervalJoinExtremesMatchGo is TestIntervalJoinMatchesGo at the
// ends of int64: bounds as wide as they may be and event times near
// MinInt64 and MaxInt64, where an expiry is clamped and a difference of
// two event times overflows (out of range, as in Go).
func TestIntervalJoinExtremesMatchGo(t *testing.T) {
	m, _ := guestModule(t, joinGuest)
	bounds := [][2]int64{{-math.MaxInt64, math.MaxInt64}, {0, math.MaxInt64}, {-math.MaxInt64, 0},
		{math.MinInt64 + 1, math.MinInt64 + 1}, {math.MaxInt64, math.MaxInt64}, {-3, 3}}
	for _, b := range bounds {
		t.Run(fmt.Sprintf("%d..%d", b[0], b[1]), func(t *testing.T) {
			inst := joinInstance(t, m, map[string]any{"join": "interval", "lower_ns": b[0], "upper_ns": b[1]}, intervalOutputs)
			rapid.Check(t, func(rt *rapid.T) {
				n := rapid.IntRange(0, 20).Draw(rt, "n")
				in := make([]winRecord, n)
				for i := range in {
					base := rapid.SampledFrom([]int64{math.MinInt64, math.MinInt64 + 2, -1, 0, math.MaxInt64 - 2, math.MaxInt64}).Draw(rt, "base")
					in[i] = winRecord{key: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key"),
						ts: base + rapid.Int64Range(-2, 2).Draw(rt, "jitter"), value: int64(i + 1),
						stream: rapid.SampledFrom([]string{"left", "right"}).Draw(rt, "stream")}
				}
				d := &winDriver{t: t, rt: rt, inst: inst, goComp: goInterval(b[0], b[1]), outputs: intervalOutputs}
				for _, size := range []int{1, 7, 1000} {
					d.run(in, 0, size)
				}
			})
		})
	}
}

// TestJoinStateKindQuoted: the error of every wrong kind byte quotes it
// as Go's %q does (strconv.QuoteRune), for both joins.
func TestJoinStateKindQuoted(t *testing.T) {
	m, _ := guestModule(t, joinGuest)
	ii := joinInstance(t, m, map[string]any{"join": "interval", "lower_ns": int64(-5), "upper_ns": int64(5)}, intervalOutputs)
	ei := joinInstance(t, m, map[string]any{"join": "enrich"}, enrichOutputs)
	gi, ge := goInterval(-5, 5), goEnrich()
	for c := range 256 {
		as, gor := bothResponses(t, ii, gi, joinStateRequest([]byte{1, byte(c), 0}, 0, "left", 0, []byte("x")), intervalOutputs)
		require.Equal(t, gor, as, "interval join, kind byte %#x", c)
		as, gor = bothResponses(t, ei, ge, joinStateRequest([]byte{1, byte(c), 0}, 0, "events", 0, []byte("x")), enrichOutputs)
		require.Equal(t, gor, as, "enrichment join, kind byte %#x", c)
	}
}
