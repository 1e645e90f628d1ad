package c_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/c"
	"github.com/flowhost/flowhost/sdk/conformance"
)

// The join conformance guest's streams (joinguest/main.c; the Go one is
// sdk/conformance/joinguest).
var (
	confIntervalOutputs = []string{"joined", "expired"}
	confEnrichOutputs   = []string{"enriched", "unmatched"}
)

// TestJoinConformanceGuestLikeGo drives random input (two keys, out of
// order, late records, empty payloads: tombstones in the table) through
// the C join conformance guest in batches of 1, 7 and 1000, every response
// required to equal the Go join guest's byte for byte.
func TestJoinConformanceGuestLikeGo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   map[string]any
		outputs  []string
		a, b     string
		interval bool
	}{
		{"interval", map[string]any{"join": "interval", "lower_ns": int64(-3), "upper_ns": int64(7)}, confIntervalOutputs, "left", "right", true},
		{"enrich", map[string]any{"join": "enrich"}, confEnrichOutputs, "table", "events", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, _ := instance(t, joinConformance)
			initWith(t, inst, "join", abi.KindTransform, tc.params, tc.outputs...)
			goComp := conformance.GoJoinComputation(tc.interval, -3, 7)
			seen := map[string]bool{}
			rapid.Check(t, func(rt *rapid.T) {
				in := joinInput(rt, tc.a, tc.b)
				bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
				for _, size := range []int{1, 7, 1000} {
					hostDrive(rt, inst, goComp, in, bound, size, tc.outputs, func(_ string, e abi.Emit) {
						seen[e.Stream] = true
						if e.Stream == tc.outputs[0] {
							require.Contains(rt, string(e.Payload), "|")
						}
					})
				}
			})
			for _, s := range tc.outputs {
				require.True(t, seen[s], "no input emitted on %s", s)
			}
		})
	}
}

// TestJoinConformanceGuestRefusesBadParameters: a missing or bad
// parameter refuses Init with an error naming it.
func TestJoinConformanceGuestRefusesBadParameters(t *testing.T) {
	for _, tt := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{}, `parameter "join" is missing`},
		{map[string]any{"join": "outer"}, `parameter "join": must be interval or enrich, got "outer"`},
		{map[string]any{"join": 1}, `parameter "join": expected string, got integer`},
		{map[string]any{"join": "interval", "upper_ns": 1}, `parameter "lower_ns" is missing`},
		{map[string]any{"join": "interval", "lower_ns": 1}, `parameter "upper_ns" is missing`},
		{map[string]any{"join": "interval", "lower_ns": "1s", "upper_ns": 1}, `parameter "lower_ns": expected integer, got string`},
		{map[string]any{"join": "interval", "lower_ns": 2, "upper_ns": 1}, `parameter "lower_ns": must not exceed upper_ns`},
		{map[string]any{"join": "interval", "lower_ns": int64(-1 << 63), "upper_ns": 1}, `parameter "lower_ns": must be above the smallest int64`},
	} {
		t.Run(tt.want, func(t *testing.T) {
			inst, _ := instance(t, joinConformance)
			b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Parameters: tt.params, OutputStreams: confIntervalOutputs})
			require.NoError(t, err)
			res, err := inst.Init(context.Background(), b)
			require.NoError(t, err)
			r, err := abi.DecodeInitResult(res)
			require.NoError(t, err)
			require.Equal(t, tt.want, r.Error)
		})
	}
}

// TestBuildJoinGuest builds the join guest the way the conformance suite
// does and runs one match through it.
func TestBuildJoinGuest(t *testing.T) {
	path, err := c.BuildJoinGuest(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig())
	require.NoError(t, err)
	defer e.Close(ctx)
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := e.Compile(ctx, "c-join-guest", wasm)
	require.NoError(t, err)
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(t, err)
	initWith(t, inst, "join", abi.KindTransform, map[string]any{"join": "interval", "lower_ns": -2, "upper_ns": 5}, confIntervalOutputs...)
	req := &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Epoch: 1, Keys: []abi.RequestKey{{Key: `["a"]`,
		Messages: []abi.Message{{ID: "l", Stream: "left", EventTimestamp: 10, Payload: []byte("L")}, {ID: "r", Stream: "right", EventTimestamp: 13, Payload: []byte("R")}}}}}
	b, err := abi.EncodeRequest(req)
	require.NoError(t, err)
	out, err := inst.Process(ctx, b)
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Len(t, resp.Keys, 1)
	require.Len(t, resp.Keys[0].Emits, 1)
	require.Equal(t, "joined", resp.Keys[0].Emits[0].Stream)
	require.Equal(t, "L|R", string(resp.Keys[0].Emits[0].Payload))
	require.Equal(t, int64(13), *resp.Keys[0].Emits[0].EventTimestamp)
}
