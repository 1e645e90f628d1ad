//go:build cgo && !nowasmtime

package engine

import (
	"os"
	"strings"
	"testing"

	"github.com/bytecodealliance/wasmtime-go/v39"
	"github.com/stretchr/testify/require"
)

// TestWASITableMatchesWasmtime checks the hand-written preview1 table
// against the functions wasmtime's linker provides: every function CheckABI
// may accept exists with the same signature, so instantiation never
// refuses a module that Compile accepted.
func TestWASITableMatchesWasmtime(t *testing.T) {
	eng := wasmtime.NewEngine()
	defer eng.Close()
	linker := wasmtime.NewLinker(eng)
	defer linker.Close()
	require.NoError(t, linker.DefineWasi())
	store := wasmtime.NewStore(eng)
	defer store.Close()
	store.SetWasi(wasmtime.NewWasiConfig())

	kinds := map[wasmtime.ValKind]ValueType{wasmtime.KindI32: I32, wasmtime.KindI64: I64}
	conv := func(ts []*wasmtime.ValType) []ValueType {
		out := make([]ValueType, len(ts))
		for i, vt := range ts {
			out[i] = kinds[vt.Kind()]
		}
		return out
	}
	for name, f := range wasiFuncs {
		ext := linker.Get(store, WASIModule, name)
		require.NotNilf(t, ext, "wasmtime has no %s.%s", WASIModule, name)
		ty := ext.Func().Type(store)
		got := Func(conv(ty.Params()), conv(ty.Results())...)
		require.Truef(t, got.Equal(f.typ), "%s: wasmtime has %s, the table %s", name, got, f.typ)
	}
}

// TestWasmtimeVersionMatchesGoMod keeps the version that keys the
// compilation cache in step with the module go.mod requires.
func TestWasmtimeVersionMatchesGoMod(t *testing.T) {
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	require.Truef(t, strings.Contains(string(gomod), "github.com/bytecodealliance/wasmtime-go/v39 v"+WasmtimeVersion+"\n") ||
		strings.Contains(string(gomod), "github.com/bytecodealliance/wasmtime-go/v39 v"+WasmtimeVersion+" "),
		"go.mod does not require wasmtime-go v%s: update WasmtimeVersion", WasmtimeVersion)
}

func TestWasmtimeMessage(t *testing.T) {
	for in, want := range map[string]string{
		"error while executing at wasm backtrace:\n    0: 0x1 - f\n\nCaused by:\n    flowhost.log: line\n\nStack backtrace:\n   0: x": "flowhost.log: line",
		"error while executing\n\nCaused by:\n    0: outer\n    1: inner":                                                             "outer",
		"single line":             "single line",
		"first line\nsecond line": "first line",
	} {
		require.Equal(t, want, wasmtimeMessage(in))
	}
}
