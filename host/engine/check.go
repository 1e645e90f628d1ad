package engine

import (
	"fmt"
	"strings"

	"github.com/flowhost/flowhost/abi"
)

// WASIModule is the import module name of WASI snapshot preview1.
const WASIModule = "wasi_snapshot_preview1"

// The ABI v1 signatures.
var (
	markerType  = Func(nil)
	allocType   = Func([]ValueType{I32}, I32)
	processType = Func([]ValueType{I32, I32}, I64)
	logType     = Func([]ValueType{I32, I32, I32})
)

// requiredExports are the function exports ABI v1 demands, in the order
// problems are reported.
var requiredExports = []struct {
	name string
	typ  FuncType
}{
	{abi.ExportVersionMarker, markerType},
	{abi.ExportAlloc, allocType},
	{abi.ExportProcess, processType},
}

// wasiGrant says which capability a WASI preview1 function needs.
type wasiGrant int

const (
	// grantAlways: harmless without a grant. Descriptor functions only
	// reach the descriptors the host opened (stdio, and preopens when a
	// directory is granted); clocks are fake and randomness deterministic
	// unless granted; proc_exit ends only the guest.
	grantAlways wasiGrant = iota
	// grantDir: opens or inspects paths, so needs a granted directory.
	grantDir
	// grantNever: sockets are never granted.
	grantNever
)

type wasiFunc struct {
	typ   FuncType
	grant wasiGrant
}

// wasiFuncs is every function of WASI snapshot preview1 with its signature
// and the grant it needs. Go's wasip1 runtime and wasi-libc import subsets
// of the grantAlways ones.
var wasiFuncs = func() map[string]wasiFunc {
	i32, i64 := I32, I64
	f := func(grant wasiGrant, params ...ValueType) wasiFunc {
		return wasiFunc{typ: Func(params, I32), grant: grant}
	}
	return map[string]wasiFunc{
		"args_get":                f(grantAlways, i32, i32),
		"args_sizes_get":          f(grantAlways, i32, i32),
		"environ_get":             f(grantAlways, i32, i32),
		"environ_sizes_get":       f(grantAlways, i32, i32),
		"clock_res_get":           f(grantAlways, i32, i32),
		"clock_time_get":          f(grantAlways, i32, i64, i32),
		"fd_advise":               f(grantAlways, i32, i64, i64, i32),
		"fd_allocate":             f(grantAlways, i32, i64, i64),
		"fd_close":                f(grantAlways, i32),
		"fd_datasync":             f(grantAlways, i32),
		"fd_fdstat_get":           f(grantAlways, i32, i32),
		"fd_fdstat_set_flags":     f(grantAlways, i32, i32),
		"fd_fdstat_set_rights":    f(grantAlways, i32, i64, i64),
		"fd_filestat_get":         f(grantAlways, i32, i32),
		"fd_filestat_set_size":    f(grantAlways, i32, i64),
		"fd_filestat_set_times":   f(grantAlways, i32, i64, i64, i32),
		"fd_pread":                f(grantAlways, i32, i32, i32, i64, i32),
		"fd_prestat_get":          f(grantAlways, i32, i32),
		"fd_prestat_dir_name":     f(grantAlways, i32, i32, i32),
		"fd_pwrite":               f(grantAlways, i32, i32, i32, i64, i32),
		"fd_read":                 f(grantAlways, i32, i32, i32, i32),
		"fd_readdir":              f(grantAlways, i32, i32, i32, i64, i32),
		"fd_renumber":             f(grantAlways, i32, i32),
		"fd_seek":                 f(grantAlways, i32, i64, i32, i32),
		"fd_sync":                 f(grantAlways, i32),
		"fd_tell":                 f(grantAlways, i32, i32),
		"fd_write":                f(grantAlways, i32, i32, i32, i32),
		"path_create_directory":   f(grantDir, i32, i32, i32),
		"path_filestat_get":       f(grantDir, i32, i32, i32, i32, i32),
		"path_filestat_set_times": f(grantDir, i32, i32, i32, i32, i64, i64, i32),
		"path_link":               f(grantDir, i32, i32, i32, i32, i32, i32, i32),
		"path_open":               f(grantDir, i32, i32, i32, i32, i32, i64, i64, i32, i32),
		"path_readlink":           f(grantDir, i32, i32, i32, i32, i32, i32),
		"path_remove_directory":   f(grantDir, i32, i32, i32),
		"path_rename":             f(grantDir, i32, i32, i32, i32, i32, i32),
		"path_symlink":            f(grantDir, i32, i32, i32, i32, i32),
		"path_unlink_file":        f(grantDir, i32, i32, i32),
		"poll_oneoff":             f(grantAlways, i32, i32, i32, i32),
		"proc_exit":               {typ: Func([]ValueType{i32}), grant: grantAlways},
		"proc_raise":              f(grantAlways, i32),
		"random_get":              f(grantAlways, i32, i32),
		"sched_yield":             f(grantAlways),
		"sock_accept":             f(grantNever, i32, i32, i32),
		"sock_recv":               f(grantNever, i32, i32, i32, i32, i32, i32),
		"sock_send":               f(grantNever, i32, i32, i32, i32, i32),
		"sock_shutdown":           f(grantNever, i32, i32),
	}
}()

// CheckABI reports, as a *ValidationError naming plugin, every way info
// breaks ABI v1 or imports more than caps allow:
//   - the exports flowhost_abi_v1 func(), flowhost_alloc (i32) -> i32,
//     flowhost_process (i32, i32) -> i64 and a 32-bit memory named memory
//     must be present; flowhost_init, when present, must be
//     (i32, i32) -> i64 and _initialize func(); a WASI command (_start)
//     is refused, since a guest must be a reactor that stays alive
//     between calls;
//   - functions are the only imports; they may come from module flowhost
//     (only log (i32, i32, i32)) and from wasi_snapshot_preview1 with the
//     preview1 signature, where sock_* is never allowed and path_* only
//     when caps grants a directory.
//
// It returns nil when the module is acceptable. Engines run it at Compile;
// the plugin validator runs it without an engine.
func CheckABI(plugin string, info *ModuleInfo, caps Capabilities) error {
	var problems []string
	problems = checkExports(problems, info)
	problems = checkImports(problems, info, caps)
	if len(problems) == 0 {
		return nil
	}
	return &ValidationError{Plugin: plugin, Problems: problems}
}

func checkExports(problems []string, info *ModuleInfo) []string {
	if _, ok := info.Export(abi.ExportVersionMarker); !ok {
		for _, e := range info.Exports {
			if strings.HasPrefix(e.Name, "flowhost_abi_v") {
				return append(problems, fmt.Sprintf("export %s declares an ABI this host does not speak (it speaks v%d, marker %s)", e.Name, abi.Version, abi.ExportVersionMarker))
			}
		}
	}
	for _, want := range requiredExports {
		problems = checkFuncExport(problems, info, want.name, want.typ, true)
	}
	problems = checkFuncExport(problems, info, abi.ExportInit, processType, false)

	switch mem, ok := info.Export(abi.ExportMemory); {
	case !ok:
		problems = append(problems, "missing export "+abi.ExportMemory+" (the guest's linear memory)")
	case mem.Kind != KindMemory:
		problems = append(problems, fmt.Sprintf("export %s is a %s, want a memory", abi.ExportMemory, mem.Kind))
	case mem.Memory.Is64:
		problems = append(problems, fmt.Sprintf("export %s is a 64-bit memory, want a 32-bit one", abi.ExportMemory))
	}

	problems = checkFuncExport(problems, info, "_initialize", markerType, false)
	if _, ok := info.Export("_start"); ok {
		problems = append(problems, "export _start marks a WASI command, which exits after main; build the guest as a reactor (Go: -buildmode=c-shared)")
	}
	return problems
}

func checkFuncExport(problems []string, info *ModuleInfo, name string, want FuncType, required bool) []string {
	e, ok := info.Export(name)
	switch {
	case !ok && required:
		return append(problems, fmt.Sprintf("missing export %s (func %s)", name, want))
	case !ok:
		return problems
	case e.Kind != KindFunc:
		return append(problems, fmt.Sprintf("export %s is a %s, want func %s", name, e.Kind, want))
	case !e.Func.Equal(want):
		return append(problems, fmt.Sprintf("export %s has type %s, want %s", name, e.Func, want))
	}
	return problems
}

func checkImports(problems []string, info *ModuleInfo, caps Capabilities) []string {
	for _, imp := range info.Imports {
		if imp.Kind != KindFunc {
			problems = append(problems, fmt.Sprintf("import %s is a %s; only functions can be imported", imp, imp.Kind))
			continue
		}
		switch imp.Module {
		case abi.ImportModule:
			if imp.Name != abi.ImportLog {
				problems = append(problems, fmt.Sprintf("import %s is not allowed: module %s provides only %s", imp, abi.ImportModule, abi.ImportLog))
			} else if !imp.Func.Equal(logType) {
				problems = append(problems, fmt.Sprintf("import %s has type %s, want %s", imp, imp.Func, logType))
			}
		case WASIModule:
			problems = checkWASIImport(problems, imp, caps)
		default:
			problems = append(problems, fmt.Sprintf("import %s is not allowed: only %s.%s and %s functions can be imported", imp, abi.ImportModule, abi.ImportLog, WASIModule))
		}
	}
	return problems
}

func checkWASIImport(problems []string, imp Import, caps Capabilities) []string {
	f, ok := wasiFuncs[imp.Name]
	switch {
	case !ok:
		return append(problems, fmt.Sprintf("import %s is not allowed: not a WASI preview1 function", imp))
	case f.grant == grantNever:
		return append(problems, fmt.Sprintf("import %s is not allowed: sockets are never granted", imp))
	case f.grant == grantDir && len(caps.dirs) == 0:
		return append(problems, fmt.Sprintf("import %s is not allowed: no directory is granted", imp))
	case !imp.Func.Equal(f.typ):
		return append(problems, fmt.Sprintf("import %s has type %s, want %s", imp, imp.Func, f.typ))
	}
	return problems
}
