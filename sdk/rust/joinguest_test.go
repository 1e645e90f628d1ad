package rust_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/sdk/rust"
)

// TestJoinGuestRefusesBadParameters builds joinguest/ with BuildJoinGuest,
// as the conformance suite does, and checks through the engine that it
// starts with good parameters and that a missing or bad one refuses Init
// with an error naming it, in the C and AssemblyScript join guests' words.
func TestJoinGuestRefusesBadParameters(t *testing.T) {
	path, err := rust.BuildJoinGuest(t.TempDir())
	require.NoError(t, err)
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	e, err := sharedEngine()
	require.NoError(t, err)
	m, err := e.Compile(context.Background(), "rust-joinguest", wasm)
	require.NoError(t, err)
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
