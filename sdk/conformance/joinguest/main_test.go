package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

func initWith(params map[string]any, outputs ...string) *abi.Init {
	return &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform,
		OutputStreams: outputs, Parameters: params}
}

func msg(id, stream string, ts int64, payload string) abi.Message {
	return abi.Message{ID: id, Stream: stream, EventTimestamp: ts, Payload: []byte(payload)}
}

func request(keys ...abi.RequestKey) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1, Keys: keys}
}

// TestInitRefusesBadParameters: a missing or bad parameter refuses Init
// with an error naming it.
func TestInitRefusesBadParameters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]any
		names  string
	}{
		{"no join", map[string]any{"lower_ns": int64(0), "upper_ns": int64(1)}, `"join"`},
		{"unknown join", map[string]any{"join": "outer"}, `"join"`},
		{"join not text", map[string]any{"join": int64(1)}, `"join"`},
		{"interval without lower", map[string]any{"join": "interval", "upper_ns": int64(1)}, `"lower_ns"`},
		{"interval without upper", map[string]any{"join": "interval", "lower_ns": int64(1)}, `"upper_ns"`},
		{"lower not an integer", map[string]any{"join": "interval", "lower_ns": "1s", "upper_ns": int64(1)}, `"lower_ns"`},
		{"upper not an integer", map[string]any{"join": "interval", "lower_ns": int64(0), "upper_ns": true}, `"upper_ns"`},
		{"lower above upper", map[string]any{"join": "interval", "lower_ns": int64(2), "upper_ns": int64(1)}, `"lower_ns"`},
		{"lower at int64 min", map[string]any{"join": "interval", "lower_ns": int64(math.MinInt64), "upper_ns": int64(1)}, `"lower_ns"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := flowhost.Run(computation, initWith(tc.params, joined, expired), request())
			require.ErrorContains(t, err, tc.names)
		})
	}
}

// TestIntervalJoin: with lower -2 and upper 5, a right record 3 after a
// left one matches (payload left|right, event time the later), a right
// record 7 after it does not; the expiry timers are ts+upper+1 (left) and
// ts-lower+1 (right); when they fire, the record that never matched comes
// out on expired unchanged at its own time and the matched ones do not.
func TestIntervalJoin(t *testing.T) {
	in := initWith(map[string]any{"join": "interval", "lower_ns": int64(-2), "upper_ns": int64(5)}, joined, expired)
	resp, err := flowhost.Run(computation, in, request(abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{
		msg("l1", left, 10, "L1"), msg("r1", right, 13, "R1"), msg("r2", right, 17, "R2")}}))
	require.NoError(t, err)
	require.Len(t, resp.Keys, 1)
	k := resp.Keys[0]
	require.Len(t, k.Emits, 1)
	require.Equal(t, joined, k.Emits[0].Stream)
	require.Equal(t, "L1|R1", string(k.Emits[0].Payload))
	require.Equal(t, int64(13), *k.Emits[0].EventTimestamp)
	var triggers []int64
	for _, tm := range k.TimersSet {
		triggers = append(triggers, tm.TriggerTimestamp)
	}
	require.Equal(t, []int64{16, 20}, triggers, "l1 and r1 expire at 16, r2 at 20")

	resp, err = flowhost.Run(computation, in, request(abi.RequestKey{Key: `["a"]`, State: k.State,
		Timers: []abi.DueTimer{{ID: "t16", TriggerTimestamp: 16}, {ID: "t20", TriggerTimestamp: 20}}}))
	require.NoError(t, err)
	k = resp.Keys[0]
	require.Len(t, k.Emits, 1)
	require.Equal(t, expired, k.Emits[0].Stream)
	require.Equal(t, "R2", string(k.Emits[0].Payload))
	require.Equal(t, int64(17), *k.Emits[0].EventTimestamp)
	require.Equal(t, abi.StateDelete, k.StateOp, "nothing is held any more")
}

// TestEnrichJoin: an event before any table record is unmatched, one after
// it is enriched as event|table, a tombstone (empty payload) deletes the
// value, and the value comes from the key's state in a later call.
func TestEnrichJoin(t *testing.T) {
	in := initWith(map[string]any{"join": "enrich"}, enriched, unmatched)
	resp, err := flowhost.Run(computation, in, request(abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{
		msg("e1", events, 5, "E1"), msg("t1", table, 3, "T1"), msg("e2", events, 1, "E2")}}))
	require.NoError(t, err)
	k := resp.Keys[0]
	require.Len(t, k.Emits, 2)
	require.Equal(t, unmatched, k.Emits[0].Stream)
	require.Equal(t, "E1", string(k.Emits[0].Payload))
	require.Equal(t, enriched, k.Emits[1].Stream)
	require.Equal(t, "E2|T1", string(k.Emits[1].Payload))
	require.Equal(t, int64(1), *k.Emits[1].EventTimestamp)

	resp, err = flowhost.Run(computation, in, request(abi.RequestKey{Key: `["a"]`, State: k.State, Messages: []abi.Message{
		msg("e3", events, 7, "E3"), msg("t2", table, 8, ""), msg("e4", events, 9, "E4")}}))
	require.NoError(t, err)
	k = resp.Keys[0]
	require.Len(t, k.Emits, 2)
	require.Equal(t, "E3|T1", string(k.Emits[0].Payload))
	require.Equal(t, unmatched, k.Emits[1].Stream)
	require.Equal(t, "E4", string(k.Emits[1].Payload))
	require.Equal(t, abi.StateDelete, k.StateOp, "the tombstone deletes the value")
}
