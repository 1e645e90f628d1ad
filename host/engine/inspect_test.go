package engine_test

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/flowhost/flowhost/host/engine"
)

// The helpers below assemble small modules byte by byte, so tests control
// every section without a toolchain.

func leb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func vec(items ...[]byte) []byte { return cat(leb(uint64(len(items))), cat(items...)) }

func str(s string) []byte { return cat(leb(uint64(len(s))), []byte(s)) }

func section(id byte, body []byte) []byte { return cat([]byte{id}, leb(uint64(len(body))), body) }

func wasmModule(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

func functype(params, results []byte) []byte {
	return cat([]byte{0x60}, leb(uint64(len(params))), params, leb(uint64(len(results))), results)
}

const (
	i32 = 0x7f
	i64 = 0x7e
)

// minimalGuest is the smallest ABI v1 guest: it imports flowhost.log,
// its alloc answers 1024 and its process answers the packed region
// (1024, len), so it echoes the request unchanged. No _initialize, no WASI.
func minimalGuest() []byte {
	types := section(1, vec(
		functype(nil, nil),                      // 0: marker
		functype([]byte{i32}, []byte{i32}),      // 1: alloc
		functype([]byte{i32, i32}, []byte{i64}), // 2: process
		functype([]byte{i32, i32, i32}, nil),    // 3: log
	))
	imports := section(2, vec(cat(str("flowhost"), str("log"), []byte{0x00}, leb(3))))
	funcs := section(3, vec(leb(0), leb(1), leb(2)))
	memory := section(5, vec([]byte{0x00, 0x04})) // min 4 pages, no max
	exports := section(7, vec(
		cat(str("flowhost_abi_v1"), []byte{0x00}, leb(1)),
		cat(str("flowhost_alloc"), []byte{0x00}, leb(2)),
		cat(str("flowhost_process"), []byte{0x00}, leb(3)),
		cat(str("memory"), []byte{0x02}, leb(0)),
	))
	body := func(code ...byte) []byte { return cat(leb(uint64(len(code)+1)), []byte{0x00}, code) }
	code := section(10, vec(
		body(0x0b),                   // end
		body(0x41, 0x80, 0x08, 0x0b), // i32.const 1024; end
		// i64.const 1024 << 32; local.get 1; i64.extend_i32_u; i64.or; end
		body(cat([]byte{0x42}, sleb(1024<<32), []byte{0x20, 0x01, 0xad, 0x84, 0x0b})...),
	))
	return wasmModule(types, imports, funcs, memory, exports, code)
}

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func TestMinimalGuestRuns(t *testing.T) {
	// A guest without WASI or _initialize, for plumbing checks that need
	// no Go runtime in the guest.
	e := newEngine(t, testConfig())
	m, err := e.Compile(context.Background(), "minimal", minimalGuest())
	require.NoError(t, err)
	inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
	require.NoError(t, err)
	defer inst.Close(context.Background())
	resp, err := inst.Process(context.Background(), []byte("unchanged"))
	require.NoError(t, err)
	require.Equal(t, "unchanged", string(resp))
}

// TestInspectMatchesWazero checks Inspect against wazero's own decoder on
// real guests: the same imports and exports with the same signatures.
func TestInspectMatchesWazero(t *testing.T) {
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(cacheDir())
	require.NoError(t, err)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache).WithCloseOnContextDone(true))
	defer rt.Close(ctx)

	modules := map[string][]byte{"minimal": minimalGuest(), "echo": guest(t, "echo"), "fs": guest(t, "fs")}
	for name, wasm := range modules {
		t.Run(name, func(t *testing.T) {
			info, err := engine.Inspect(wasm)
			require.NoError(t, err)
			compiled, err := rt.CompileModule(ctx, wasm)
			require.NoError(t, err)

			var got, want []string
			for _, imp := range info.Imports {
				got = append(got, "import "+imp.String()+" "+imp.Func.String())
			}
			for _, def := range compiled.ImportedFunctions() {
				mod, name, _ := def.Import()
				want = append(want, "import "+mod+"."+name+" "+signature(def))
			}
			for _, exp := range info.Exports {
				switch exp.Kind {
				case engine.KindFunc:
					got = append(got, "export "+exp.Name+" "+exp.Func.String())
				case engine.KindMemory:
					got = append(got, "export memory "+exp.Name)
				}
			}
			for name, def := range compiled.ExportedFunctions() {
				want = append(want, "export "+name+" "+signature(def))
			}
			for name := range compiled.ExportedMemories() {
				want = append(want, "export memory "+name)
			}
			sort.Strings(got)
			sort.Strings(want)
			require.Equal(t, want, got)
		})
	}
}

// signature renders a wazero definition the way FuncType.String does.
func signature(def api.FunctionDefinition) string {
	conv := func(ts []api.ValueType) []engine.ValueType {
		out := make([]engine.ValueType, len(ts))
		for i, t := range ts {
			out[i] = engine.ValueType(t)
		}
		return out
	}
	return engine.Func(conv(def.ParamTypes()), conv(def.ResultTypes())...).String()
}

func TestInspectRefusals(t *testing.T) {
	types := section(1, vec(functype(nil, nil)))
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		{"empty", nil, "invalid wasm at offset 0x0: too short for a wasm module"},
		{"bad magic", []byte("\x00ELF\x01\x00\x00\x00"), `invalid wasm at offset 0x4: not a wasm module: missing "\0asm" magic`},
		{"component", []byte("\x00asm\x0d\x00\x01\x00"), "invalid wasm at offset 0x8: a WebAssembly component, not a core module"},
		{"future version", []byte("\x00asm\x02\x00\x00\x00"), "invalid wasm at offset 0x8: unsupported wasm version 02 00 00 00"},
		{"section past the end", wasmModule([]byte{1, 10, 1}), "invalid wasm at offset 0x8: section 1: size 10 exceeds the 1 bytes left"},
		{"unknown section", wasmModule(section(14, nil)), "invalid wasm at offset 0x8: unknown section id 14"},
		{"overlong size", wasmModule([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x7f}), "invalid wasm at offset 0x8: section 1: size: integer too large"},
		{"sections out of order", wasmModule(section(7, vec()), types), "invalid wasm at offset 0xb: section 1 out of order or repeated after section 7"},
		{"repeated section", wasmModule(types, types), "invalid wasm at offset 0xe: section 1 out of order or repeated after section 1"},
		{"count beyond data", wasmModule(section(1, leb(1000))), "invalid wasm at offset 0xa: type section: count 1000 exceeds the 0 bytes left"},
		{"not a function type", wasmModule(section(1, vec([]byte{0x5e, 0x7f, 0x00}))), "invalid wasm at offset 0xb: type section: type 0: unsupported form 0x5e (only function types)"},
		{"unknown value type", wasmModule(section(1, vec(functype([]byte{0x63}, nil)))), "invalid wasm at offset 0xd: type section: type 0: unsupported value type 0x63"},
		{"import of a missing type", wasmModule(types, section(2, vec(cat(str("m"), str("f"), []byte{0x00}, leb(5))))),
			"invalid wasm at offset 0x16: import section: import m.f: type 5 does not exist"},
		{"name not UTF-8", wasmModule(types, section(2, vec(cat(str("m"), str("\xff"), []byte{0x00}, leb(0))))),
			"invalid wasm at offset 0x13: import section: import 0: name: name is not valid UTF-8"},
		{"export of a missing function", wasmModule(types, section(7, vec(cat(str("f"), []byte{0x00}, leb(0))))),
			"invalid wasm at offset 0x14: export section: export \"f\": function 0 does not exist"},
		{"export of a missing memory", wasmModule(section(7, vec(cat(str("memory"), []byte{0x02}, leb(0))))),
			"invalid wasm at offset 0x13: export section: export \"memory\": memory 0 does not exist"},
		{"section with trailing bytes", wasmModule(section(1, cat(vec(functype(nil, nil)), []byte{0}))),
			"invalid wasm at offset 0xe: type section: 1 bytes left over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.Inspect(tt.wasm)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestInspectMemoryTypes(t *testing.T) {
	tests := []struct {
		name   string
		limits []byte
		want   engine.MemoryType
	}{
		{"min only", []byte{0x00, 0x02}, engine.MemoryType{Min: 2}},
		{"min and max", []byte{0x01, 0x02, 0x80, 0x02}, engine.MemoryType{Min: 2, Max: 256, HasMax: true}},
		{"shared", []byte{0x03, 0x01, 0x10}, engine.MemoryType{Min: 1, Max: 16, HasMax: true, Shared: true}},
		{"memory64", []byte{0x04, 0x80, 0x80, 0x80, 0x80, 0x10}, engine.MemoryType{Min: 1 << 32, Is64: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := wasmModule(section(5, vec(tt.limits)), section(7, vec(cat(str("memory"), []byte{0x02}, leb(0)))))
			info, err := engine.Inspect(wasm)
			require.NoError(t, err)
			exp, ok := info.Export("memory")
			require.True(t, ok)
			require.Equal(t, engine.KindMemory, exp.Kind)
			require.Equal(t, tt.want, exp.Memory)
		})
	}
}

func FuzzInspect(f *testing.F) {
	f.Add(minimalGuest())
	f.Add(wasmModule(section(5, vec([]byte{0x04, 0x01})), section(7, vec(cat(str("memory"), []byte{0x02}, leb(0))))))
	f.Add([]byte("\x00asm\x0d\x00\x01\x00"))
	f.Add(wasmModule(section(0, cat(str("name"), []byte{1, 2, 3})), section(12, leb(0))))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		info, err := engine.Inspect(wasm)
		if err != nil {
			require.Nil(t, info)
			return
		}
		again, err := engine.Inspect(wasm)
		require.NoError(t, err)
		require.Equal(t, info, again)
		// Whatever was decoded must be checkable.
		_ = engine.CheckABI("fuzz", info, engine.Capabilities{})
	})
}
