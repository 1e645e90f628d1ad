package engine

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// TestWASITableMatchesWazero checks the hand-written preview1 table
// against the functions wazero provides: the same names with the same
// signatures, so CheckABI never accepts an import instantiation refuses.
func TestWASITableMatchesWazero(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)

	defs := rt.Module(WASIModule).ExportedFunctionDefinitions()
	require.Equal(t, slices.Sorted(maps.Keys(defs)), slices.Sorted(maps.Keys(wasiFuncs)))
	for name, def := range defs {
		want := Func(valueTypes(def.ParamTypes()), valueTypes(def.ResultTypes())...)
		require.Truef(t, want.Equal(wasiFuncs[name].typ), "%s: wazero has %s, the table %s", name, want, wasiFuncs[name].typ)
	}
}

func valueTypes(ts []api.ValueType) []ValueType {
	out := make([]ValueType, len(ts))
	for i, t := range ts {
		out[i] = ValueType(t)
	}
	return out
}
