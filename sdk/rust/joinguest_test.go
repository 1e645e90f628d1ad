package rust_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/conformance"
	"github.com/flowhost/flowhost/sdk/rust"
)

// compiledJoinGuest builds joinguest/ with BuildJoinGuest, as the
// conformance suite does, and compiles it.
func compiledJoinGuest(t *testing.T) engine.Module {
	t.Helper()
	path, err := rust.BuildJoinGuest(t.TempDir())
	require.NoError(t, err)
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	e, err := sharedEngine()
	require.NoError(t, err)
	m, err := e.Compile(context.Background(), "rust-joinguest", wasm)
	require.NoError(t, err)
	return m
}

// TestJoinGuestLikeGo drives random input (three keys, out of order, event
// times near the ends of int64, tombstones in the table, records of
// neither stream) through the join conformance guest in batches of 1, 7
// and 1000, every response required to equal the Go join guest's
// (conformance.GoJoinComputation) byte for byte.
func TestJoinGuestLikeGo(t *testing.T) {
	m := compiledJoinGuest(t)
	for _, tc := range []struct {
		name     string
		interval bool
		streams  []string
		outputs  []string
		want     []string
	}{
		{"interval", true, []string{"left", "right"}, []string{"joined", "expired"}, []string{"joined", "expired", "error"}},
		{"enrich", false, []string{"table", "events"}, []string{"enriched", "unmatched"}, []string{"enriched", "unmatched", "error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			rapid.Check(t, func(rt *rapid.T) {
				lower := rapid.Int64Range(-8, 8).Draw(rt, "lower")
				upper := lower + rapid.Int64Range(0, 10).Draw(rt, "width")
				params := map[string]any{"join": "enrich"}
				if tc.interval {
					params = map[string]any{"join": "interval", "lower_ns": lower, "upper_ns": upper}
				}
				c := joinCase{
					params:  params,
					goComp:  conformance.GoJoinComputation(tc.interval, lower, upper),
					in:      drawJoinInputs(rt, tc.streams...),
					bound:   rapid.Int64Range(0, 8).Draw(rt, "bound"),
					outputs: tc.outputs,
				}
				for _, size := range []int{1, 7, 1000} {
					runJoinCase(t, rt, m, c, size, seen)
				}
			})
			for _, what := range tc.want {
				require.True(t, seen[what], "no run had %s", what)
			}
		})
	}
}

// TestJoinGuestRefusesBadParameters builds joinguest/ with BuildJoinGuest,
// as the conformance suite does, and checks through the engine that it
// starts with good parameters and that a missing or bad one refuses Init
// with an error naming it, in the C and AssemblyScript join guests' words.
func TestJoinGuestRefusesBadParameters(t *testing.T) {
	m := compiledJoinGuest(t)
	outputs := []string{"joined", "expired"}
	initOf := func(params map[string]any) *abi.Init {
		return &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Parameters: params, OutputStreams: outputs}
	}
	initWith(t, instantiate(t, m), initOf(map[string]any{"join": "interval", "lower_ns": int64(-3), "upper_ns": int64(5)}))
	initWith(t, instantiate(t, m), initOf(map[string]any{"join": "enrich"}))
	for _, tt := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{}, `parameter "join" is missing`},
		{map[string]any{"join": "outer"}, `parameter "join": must be interval or enrich, got "outer"`},
		{map[string]any{"join": "interval", "upper_ns": 1}, `parameter "lower_ns" is missing`},
		{map[string]any{"join": "interval", "lower_ns": 1}, `parameter "upper_ns" is missing`},
		{map[string]any{"join": "interval", "lower_ns": "1s", "upper_ns": 1}, `parameter "lower_ns": expected integer, got string`},
		{map[string]any{"join": "interval", "lower_ns": 2, "upper_ns": 1}, `parameter "lower_ns": must not exceed upper_ns`},
	} {
		t.Run(tt.want, func(t *testing.T) {
			b, err := abi.EncodeInit(initOf(tt.params))
			require.NoError(t, err)
			res, err := instantiate(t, m).Init(context.Background(), b)
			require.NoError(t, err)
			require.NotNil(t, res, "%v should refuse init", tt.params)
			r, err := abi.DecodeInitResult(res)
			require.NoError(t, err)
			require.Equal(t, tt.want, r.Error)
		})
	}
}
