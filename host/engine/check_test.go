package engine_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/engine"
)

type vt = engine.ValueType

var (
	tI32 = engine.I32
	tI64 = engine.I64
)

func funcExport(name string, params []vt, results ...vt) engine.Export {
	return engine.Export{Name: name, Kind: engine.KindFunc, Func: engine.Func(params, results...)}
}

func funcImport(module, name string, params []vt, results ...vt) engine.Import {
	return engine.Import{Module: module, Name: name, Kind: engine.KindFunc, Func: engine.Func(params, results...)}
}

// validInfo is what a well-formed ABI v1 Go guest exports and imports.
func validInfo() *engine.ModuleInfo {
	return &engine.ModuleInfo{
		Exports: []engine.Export{
			funcExport("_initialize", nil),
			funcExport("flowhost_abi_v1", nil),
			funcExport("flowhost_alloc", []vt{tI32}, tI32),
			funcExport("flowhost_process", []vt{tI32, tI32}, tI64),
			funcExport("flowhost_init", []vt{tI32, tI32}, tI64),
			{Name: "memory", Kind: engine.KindMemory, Memory: engine.MemoryType{Min: 32}},
		},
		Imports: []engine.Import{
			funcImport("flowhost", "log", []vt{tI32, tI32, tI32}),
			funcImport("wasi_snapshot_preview1", "sched_yield", nil, tI32),
			funcImport("wasi_snapshot_preview1", "proc_exit", []vt{tI32}),
			funcImport("wasi_snapshot_preview1", "args_get", []vt{tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "args_sizes_get", []vt{tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "clock_time_get", []vt{tI32, tI64, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "environ_get", []vt{tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "environ_sizes_get", []vt{tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "fd_write", []vt{tI32, tI32, tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "random_get", []vt{tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "poll_oneoff", []vt{tI32, tI32, tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "fd_close", []vt{tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "fd_fdstat_get", []vt{tI32, tI32}, tI32),
			funcImport("wasi_snapshot_preview1", "fd_prestat_get", []vt{tI32, tI32}, tI32),
		},
	}
}

func TestCheckABI(t *testing.T) {
	pathOpen := funcImport("wasi_snapshot_preview1", "path_open",
		[]vt{tI32, tI32, tI32, tI32, tI32, tI64, tI64, tI32, tI32}, tI32)
	withDir := engine.Capabilities{}.WithReadOnlyDir(t.TempDir(), "/data")

	tests := []struct {
		name string
		edit func(*engine.ModuleInfo)
		caps engine.Capabilities
		want string // "" for acceptance
		n    int    // problems found when more than one
	}{
		{name: "valid Go reactor", edit: func(*engine.ModuleInfo) {}},
		{
			name: "no optional exports",
			edit: func(m *engine.ModuleInfo) {
				m.Exports = slices.DeleteFunc(m.Exports, func(e engine.Export) bool {
					return e.Name == "_initialize" || e.Name == "flowhost_init"
				})
			},
		},
		{
			name: "missing marker",
			edit: func(m *engine.ModuleInfo) { m.Exports = without(m.Exports, "flowhost_abi_v1") },
			want: `plugin "p": missing export flowhost_abi_v1 (func () -> ())`,
		},
		{
			name: "newer ABI marker",
			edit: func(m *engine.ModuleInfo) { rename(m.Exports, "flowhost_abi_v1", "flowhost_abi_v2") },
			want: `plugin "p": export flowhost_abi_v2 declares an ABI this host does not speak (it speaks v1, marker flowhost_abi_v1)`,
		},
		{
			name: "missing alloc and process",
			edit: func(m *engine.ModuleInfo) {
				m.Exports = without(without(m.Exports, "flowhost_alloc"), "flowhost_process")
			},
			want: `plugin "p": missing export flowhost_alloc (func i32 -> i32); missing export flowhost_process (func (i32, i32) -> i64)`,
			n:    2,
		},
		{
			name: "process with the wrong signature",
			edit: func(m *engine.ModuleInfo) { replace(m.Exports, funcExport("flowhost_process", []vt{tI32, tI32}, tI32)) },
			want: `plugin "p": export flowhost_process has type (i32, i32) -> i32, want (i32, i32) -> i64`,
		},
		{
			name: "init with the wrong signature",
			edit: func(m *engine.ModuleInfo) { replace(m.Exports, funcExport("flowhost_init", nil)) },
			want: `plugin "p": export flowhost_init has type () -> (), want (i32, i32) -> i64`,
		},
		{
			name: "alloc is a global",
			edit: func(m *engine.ModuleInfo) {
				replace(m.Exports, engine.Export{Name: "flowhost_alloc", Kind: engine.KindGlobal})
			},
			want: `plugin "p": export flowhost_alloc is a global, want func i32 -> i32`,
		},
		{
			name: "no memory",
			edit: func(m *engine.ModuleInfo) { m.Exports = without(m.Exports, "memory") },
			want: `plugin "p": missing export memory (the guest's linear memory)`,
		},
		{
			name: "memory is a function",
			edit: func(m *engine.ModuleInfo) { replace(m.Exports, funcExport("memory", nil)) },
			want: `plugin "p": export memory is a func, want a memory`,
		},
		{
			name: "64-bit memory",
			edit: func(m *engine.ModuleInfo) {
				replace(m.Exports, engine.Export{Name: "memory", Kind: engine.KindMemory, Memory: engine.MemoryType{Min: 1, Is64: true}})
			},
			want: `plugin "p": export memory is a 64-bit memory, want a 32-bit one`,
		},
		{
			name: "WASI command",
			edit: func(m *engine.ModuleInfo) { m.Exports = append(m.Exports, funcExport("_start", nil)) },
			want: `plugin "p": export _start marks a WASI command, which exits after main; build the guest as a reactor (Go: -buildmode=c-shared)`,
		},
		{
			name: "_initialize with parameters",
			edit: func(m *engine.ModuleInfo) { replace(m.Exports, funcExport("_initialize", []vt{tI32})) },
			want: `plugin "p": export _initialize has type i32 -> (), want () -> ()`,
		},
		{
			name: "socket import",
			edit: func(m *engine.ModuleInfo) {
				m.Imports = append(m.Imports, funcImport("wasi_snapshot_preview1", "sock_accept", []vt{tI32, tI32, tI32}, tI32))
			},
			caps: withDir,
			want: `plugin "p": import wasi_snapshot_preview1.sock_accept is not allowed: sockets are never granted`,
		},
		{
			name: "path_open without a directory",
			edit: func(m *engine.ModuleInfo) { m.Imports = append(m.Imports, pathOpen) },
			want: `plugin "p": import wasi_snapshot_preview1.path_open is not allowed: no directory is granted`,
		},
		{
			name: "path_open with a directory",
			edit: func(m *engine.ModuleInfo) { m.Imports = append(m.Imports, pathOpen) },
			caps: withDir,
		},
		{
			name: "unknown WASI function",
			edit: func(m *engine.ModuleInfo) {
				m.Imports = append(m.Imports, funcImport("wasi_snapshot_preview1", "thread_spawn", []vt{tI32}, tI32))
			},
			want: `plugin "p": import wasi_snapshot_preview1.thread_spawn is not allowed: not a WASI preview1 function`,
		},
		{
			name: "WASI function with the wrong signature",
			edit: func(m *engine.ModuleInfo) {
				m.Imports = append(m.Imports, funcImport("wasi_snapshot_preview1", "fd_read", []vt{tI32}, tI32))
			},
			want: `plugin "p": import wasi_snapshot_preview1.fd_read has type i32 -> i32, want (i32, i32, i32, i32) -> i32`,
		},
		{
			name: "other host module",
			edit: func(m *engine.ModuleInfo) { m.Imports = append(m.Imports, funcImport("env", "abort", nil)) },
			want: `plugin "p": import env.abort is not allowed: only flowhost.log and wasi_snapshot_preview1 functions can be imported`,
		},
		{
			name: "unknown flowhost function",
			edit: func(m *engine.ModuleInfo) { m.Imports = append(m.Imports, funcImport("flowhost", "state_get", nil)) },
			want: `plugin "p": import flowhost.state_get is not allowed: module flowhost provides only log`,
		},
		{
			name: "log with the wrong signature",
			edit: func(m *engine.ModuleInfo) { m.Imports[0] = funcImport("flowhost", "log", []vt{tI32, tI32}) },
			want: `plugin "p": import flowhost.log has type (i32, i32) -> (), want (i32, i32, i32) -> ()`,
		},
		{
			name: "imported memory",
			edit: func(m *engine.ModuleInfo) {
				m.Imports = append(m.Imports, engine.Import{Module: "env", Name: "memory", Kind: engine.KindMemory})
			},
			want: `plugin "p": import env.memory is a memory; only functions can be imported`,
		},
		{
			name: "every problem at once, exports first",
			edit: func(m *engine.ModuleInfo) {
				m.Imports = append([]engine.Import{funcImport("wasi_snapshot_preview1", "sock_send", []vt{tI32, tI32, tI32, tI32, tI32}, tI32)}, m.Imports...)
				m.Exports = without(m.Exports, "memory")
			},
			want: `plugin "p": missing export memory (the guest's linear memory); import wasi_snapshot_preview1.sock_send is not allowed: sockets are never granted`,
			n:    2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := validInfo()
			tt.edit(info)
			err := engine.CheckABI("p", info, tt.caps)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
			var ve *engine.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "p", ve.Plugin)
			require.Len(t, ve.Problems, max(tt.n, 1))
		})
	}
}

func without(exports []engine.Export, name string) []engine.Export {
	return slices.DeleteFunc(slices.Clone(exports), func(e engine.Export) bool { return e.Name == name })
}

func rename(exports []engine.Export, from, to string) {
	for i := range exports {
		if exports[i].Name == from {
			exports[i].Name = to
		}
	}
}

func replace(exports []engine.Export, e engine.Export) {
	for i := range exports {
		if exports[i].Name == e.Name {
			exports[i] = e
		}
	}
}

// TestCheckABIAcceptsBuiltGuests runs the check on what Inspect reads from
// real Go guests, so the allowed set covers what Go's wasip1 port imports.
func TestCheckABIAcceptsBuiltGuests(t *testing.T) {
	for _, name := range []string{"echo", "log", "loop", "trap", "badstatus", "oob", "clock"} {
		info, err := engine.Inspect(guest(t, name))
		require.NoError(t, err)
		require.NoError(t, engine.CheckABI(name, info, engine.Capabilities{}), name)
	}
}
