package flowhost

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/flowhost/flowhost/abi"
	"github.com/stretchr/testify/require"
)

// TestExampleGuestBuilds compiles the example guest the way users build
// theirs and checks the module's interface: the ABI v1 exports, the WASI
// reactor's _initialize, and the host's log import.
func TestExampleGuestBuilds(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out := filepath.Join(t.TempDir(), "exampleguest.wasm")
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", out, "./internal/exampleguest")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)

	module, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(module, []byte("\x00asm\x01\x00\x00\x00")), "not a WebAssembly module")

	imports, exports, err := wasmInterface(module)
	require.NoError(t, err)
	requireKind := func(m map[string]byte, name string, want byte) {
		t.Helper()
		kind, ok := m[name]
		require.True(t, ok, "%s is missing", name)
		require.Equal(t, want, kind, "%s has the wrong kind", name)
	}
	for _, name := range []string{abi.ExportVersionMarker, abi.ExportAlloc, abi.ExportProcess, abi.ExportInit, "_initialize"} {
		requireKind(exports, name, kindFunc)
	}
	requireKind(exports, abi.ExportMemory, kindMemory)
	requireKind(imports, abi.ImportModule+"."+abi.ImportLog, kindFunc)
	for name := range imports {
		if name != abi.ImportModule+"."+abi.ImportLog {
			require.Regexp(t, `^wasi_snapshot_preview1\.`, name, "a guest imports only WASI and the host's log")
		}
	}
}

const (
	kindFunc   byte = 0
	kindMemory byte = 2
)

// wasmInterface lists a module's imports ("module.name") and exports with
// their kinds, reading only the import and export sections.
func wasmInterface(module []byte) (imports, exports map[string]byte, err error) {
	r := &wasmReader{b: module[8:]}
	imports, exports = map[string]byte{}, map[string]byte{}
	for len(r.b) > 0 && r.err == nil {
		id := r.byte()
		section := &wasmReader{b: r.bytes(int(r.uleb()))}
		switch id {
		case 2: // imports
			for n := section.uleb(); n > 0 && section.err == nil; n-- {
				name := section.name() + "." + section.name()
				kind := section.byte()
				imports[name] = kind
				switch kind {
				case 0: // function: type index
					section.uleb()
				case 1: // table: reference type, limits
					section.byte()
					section.limits()
				case 2: // memory: limits
					section.limits()
				case 3: // global: value type, mutability
					section.byte()
					section.byte()
				}
			}
			r.err = errors.Join(r.err, section.err)
		case 7: // exports
			for n := section.uleb(); n > 0 && section.err == nil; n-- {
				name := section.name()
				exports[name] = section.byte()
				section.uleb()
			}
			r.err = errors.Join(r.err, section.err)
		}
	}
	return imports, exports, r.err
}

type wasmReader struct {
	b   []byte
	err error
}

func (r *wasmReader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.err = errors.New("truncated module")
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *wasmReader) byte() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *wasmReader) uleb() uint64 {
	var v uint64
	for shift := 0; shift < 64 && r.err == nil; shift += 7 {
		b := r.byte()
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	return v
}

func (r *wasmReader) name() string { return string(r.bytes(int(r.uleb()))) }

func (r *wasmReader) limits() {
	if r.byte()&1 != 0 {
		r.uleb()
	}
	r.uleb()
}
