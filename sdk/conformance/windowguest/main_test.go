package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

func initWith(params map[string]any) *abi.Init {
	return &abi.Init{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform,
		OutputStreams: []string{output, late}, Parameters: params}
}

// TestInitRefusesBadParameters: a missing or bad parameter refuses Init
// with an error naming it.
func TestInitRefusesBadParameters(t *testing.T) {
	req := &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 1}
	for _, tc := range []struct {
		name   string
		params map[string]any
		names  string
	}{
		{"no kind", map[string]any{"size_ns": int64(10)}, `"kind"`},
		{"unknown kind", map[string]any{"kind": "sliding"}, `"kind"`},
		{"kind not text", map[string]any{"kind": int64(1)}, `"kind"`},
		{"tumbling without size", map[string]any{"kind": "tumbling"}, `"size_ns"`},
		{"size zero", map[string]any{"kind": "tumbling", "size_ns": int64(0)}, `"size_ns"`},
		{"size not an integer", map[string]any{"kind": "tumbling", "size_ns": "10s"}, `"size_ns"`},
		{"hopping without advance", map[string]any{"kind": "hopping", "size_ns": int64(10)}, `"advance_ns"`},
		{"advance above size", map[string]any{"kind": "hopping", "size_ns": int64(10), "advance_ns": int64(11)}, `"advance_ns"`},
		{"session without gap", map[string]any{"kind": "session"}, `"gap_ns"`},
		{"negative lateness", map[string]any{"kind": "session", "gap_ns": int64(3), "lateness_ns": int64(-1)}, `"lateness_ns"`},
		{"lateness not an integer", map[string]any{"kind": "session", "gap_ns": int64(3), "lateness_ns": true}, `"lateness_ns"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := flowhost.Run(computation, initWith(tc.params), req)
			require.ErrorContains(t, err, tc.names)
		})
	}
}

// TestCountsAndResult: a window's count and the exact result payload,
// under the fired timer, and a record of a fired window on late.
func TestCountsAndResult(t *testing.T) {
	in := initWith(map[string]any{"kind": "tumbling", "size_ns": int64(10)})
	msg := func(id string, ts int64) abi.Message {
		return abi.Message{ID: id, Stream: "in", EventTimestamp: ts, Payload: []byte(id)}
	}
	req := &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 1,
		Keys: []abi.RequestKey{{Key: "k", Messages: []abi.Message{msg("m1", -3), msg("m2", -1)}}}}
	resp, err := flowhost.Run(computation, in, req)
	require.NoError(t, err)
	require.Len(t, resp.Keys, 1)
	k := resp.Keys[0]
	require.Equal(t, []abi.Timer{{TriggerTimestamp: 0}}, k.TimersSet)

	req.Keys = []abi.RequestKey{{Key: "k", State: k.State,
		Timers:   []abi.DueTimer{{ID: "t0", TriggerTimestamp: 0}},
		Messages: []abi.Message{msg("m3", -5)}}}
	resp, err = flowhost.Run(computation, in, req)
	require.NoError(t, err)
	k = resp.Keys[0]
	require.Len(t, k.Emits, 2)
	require.Equal(t, output, k.Emits[0].Stream)
	require.Equal(t, `{"start":-10,"end":0,"count":2}`, string(k.Emits[0].Payload))
	require.NotNil(t, k.Emits[0].EventTimestamp)
	require.Equal(t, int64(-1), *k.Emits[0].EventTimestamp)
	require.Equal(t, late, k.Emits[1].Stream)
	require.Equal(t, "m3", string(k.Emits[1].Payload))
}
