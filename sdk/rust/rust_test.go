package rust_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/abi/abitest"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/rust"
)

// vectorDir holds the golden vectors every SDK is tested against.
var vectorDir = abitest.Dir()

// guestCrates are the crates of this SDK that build guests, by the name
// the tests use.
var guestCrates = map[string]string{
	"testguest":    "testguest",
	"conformance":  "conformance",
	"window-count": "examples/window-count",
	"join":         "testdata/join-guest",
}

// modules builds every guest crate once per test binary with rust.Build,
// the way users' guests are built.
var modules = sync.OnceValues(func() (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "flowhost-rust-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sdk, err := rust.SDKDir()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for name, crate := range guestCrates {
		path, err := rust.Build(filepath.Join(sdk, crate), dir)
		if err != nil {
			return nil, err
		}
		if out[name], err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// module returns a built guest; a missing toolchain fails the test with
// the error naming the Debian packages to install.
func module(tb testing.TB, name string) []byte {
	tb.Helper()
	m, err := modules()
	require.NoError(tb, err, "building the Rust guests")
	require.Contains(tb, m, name)
	return m[name]
}

// sharedEngine compiles each guest once per test binary; tests that need
// the guests' log lines make their own engine.
var sharedEngine = sync.OnceValues(func() (engine.Engine, error) {
	return engine.NewWazero(context.Background(), engine.NewConfig())
})

var (
	compiledMu sync.Mutex
	compiled   = map[string]engine.Module{}
)

func compiledModule(tb testing.TB, name string) engine.Module {
	tb.Helper()
	wasm := module(tb, name)
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if m, ok := compiled[name]; ok {
		return m
	}
	e, err := sharedEngine()
	require.NoError(tb, err)
	m, err := e.Compile(context.Background(), "rust-"+name, wasm)
	require.NoError(tb, err)
	compiled[name] = m
	return m
}

func instantiate(tb testing.TB, m engine.Module) engine.Instance {
	tb.Helper()
	inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
	require.NoError(tb, err)
	tb.Cleanup(func() { inst.Close(context.Background()) })
	return inst
}

// initWith passes an init envelope to inst and requires that the guest
// starts.
func initWith(tb testing.TB, inst engine.Instance, in *abi.Init) {
	tb.Helper()
	b, err := abi.EncodeInit(in)
	require.NoError(tb, err)
	res, err := inst.Init(context.Background(), b)
	require.NoError(tb, err)
	require.Nil(tb, res, "the guest should start with nothing to say")
}

type vectorDoc = abitest.Vector

var readVector = abitest.Read

// TestGoldenVectors runs every golden vector through the test guest
// (testguest/: one scripted computation per case, chosen by the init
// parameter "script") compiled to WebAssembly and run by the host's
// engine, and requires the golden response and init result bytes exactly.
func TestGoldenVectors(t *testing.T) {
	m := compiledModule(t, "testguest")
	docs, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no golden vectors in %s", vectorDir)
	for _, path := range docs {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var doc vectorDoc
		require.NoError(t, json.Unmarshal(raw, &doc))
		t.Run(doc.Name, func(t *testing.T) {
			inst := instantiate(t, m)
			ctx := context.Background()
			if initBytes, ok := readVector(t, doc.Name, "init"); ok {
				got, err := inst.Init(ctx, initBytes)
				require.NoError(t, err)
				want, _ := readVector(t, doc.Name, "init_result")
				require.Equal(t, want, bytes.Clone(got), "init result of %s", doc.Name)
			}
			reqBytes, ok := readVector(t, doc.Name, "request")
			if !ok {
				return
			}
			req, err := abi.DecodeRequest(reqBytes)
			require.NoError(t, err)
			initWith(t, inst, &abi.Init{ABI: abi.Version, Computation: req.Computation, Kind: req.Kind, Partition: req.Partition,
				Parameters: map[string]any{"script": doc.Name}, OutputStreams: doc.OutputStreams})
			want, ok := readVector(t, doc.Name, "response")
			require.True(t, ok, "a request vector needs a response")
			got, err := inst.Process(ctx, reqBytes)
			require.NoError(t, err)
			if !bytes.Equal(want, got) {
				gotResp, err := abi.DecodeResponse(got, abi.ResponseLimits{})
				require.NoError(t, err, "%x", got)
				wantResp, err := abi.DecodeResponse(want, abi.ResponseLimits{})
				require.NoError(t, err)
				require.Equal(t, wantResp, gotResp, "response differs from %s.response.cbor", doc.Name)
				require.Failf(t, "same value, different bytes", "got  %x\nwant %x", got, want)
			}
		})
	}
}

// TestModuleInterface checks what every built guest exports and imports:
// the ABI v1 exports, the reactor's _initialize (so the linker does not
// wrap each export in constructor calls), no _start, and imports of only
// flowhost.log and harmless WASI functions.
func TestModuleInterface(t *testing.T) {
	for name := range guestCrates {
		t.Run(name, func(t *testing.T) {
			info, err := engine.Inspect(module(t, name))
			require.NoError(t, err)
			require.NoError(t, engine.CheckABI(name, info, engine.Capabilities{}))
			for _, export := range []string{abi.ExportVersionMarker, abi.ExportAlloc, abi.ExportProcess, abi.ExportInit, "_initialize"} {
				e, ok := info.Export(export)
				require.True(t, ok, "missing export %s", export)
				require.Equal(t, engine.KindFunc, e.Kind, export)
			}
			_, ok := info.Export("_start")
			require.False(t, ok, "a guest is a reactor")
			var imports []string
			for _, imp := range info.Imports {
				imports = append(imports, imp.String())
				if imp.Module != abi.ImportModule {
					require.Equal(t, engine.WASIModule, imp.Module, imp.String())
					require.False(t, strings.HasPrefix(imp.Name, "sock_") || strings.HasPrefix(imp.Name, "path_"), imp.String())
				}
			}
			require.Contains(t, imports, abi.ImportModule+"."+abi.ImportLog)
		})
	}
}

// TestAllocOutOfMemory checks that a request larger than the guest's
// memory limit is refused by flowhost_alloc with a null address, which
// the engine reports as ErrAlloc, and that the instance keeps working.
func TestAllocOutOfMemory(t *testing.T) {
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig().WithMemoryLimitPages(64)) // 4 MiB
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(ctx) })
	m, err := e.Compile(ctx, "rust-conformance", module(t, "conformance"))
	require.NoError(t, err)
	inst := instantiate(t, m)
	initWith(t, inst, &conformanceInit)
	_, err = inst.Process(ctx, make([]byte, 8<<20))
	require.ErrorIs(t, err, engine.ErrAlloc)
	req, err := abi.EncodeRequest(conformanceRequest(abi.KindTransform, abi.RequestKey{Key: "k", Messages: []abi.Message{msg("m", 1, "hi")}}))
	require.NoError(t, err)
	got, err := inst.Process(ctx, req)
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(got, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Equal(t, []abi.Emit{emit("out", "hi", 0)}, resp.Keys[0].Emits)
}

// TestCargoTest runs the crates' own tests natively with Debian's cargo:
// the SDK's decoding, encoding and parameter rules, the golden vectors
// through the SDK's dispatch, and the pure functions of the conformance
// guest and the example.
func TestCargoTest(t *testing.T) {
	sdk, err := rust.SDKDir()
	require.NoError(t, err)
	cmd, err := rust.CargoCommand(sdk, "test", "--workspace")
	require.NoError(t, err)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "cargo test:\n%s", out)
	require.Contains(t, string(out), "test result: ok")
	require.NotContains(t, string(out), "FAILED")
}

// TestBuildErrors checks that Build's errors say what is wrong with the
// crate it was given.
func TestBuildErrors(t *testing.T) {
	writeCrate := func(t *testing.T, manifest, lib string) string {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte(manifest), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "lib.rs"), []byte(lib), 0o644))
		return dir
	}
	const pkg = "[package]\nname = \"broken\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{"not a crate", func(t *testing.T) string { return t.TempDir() }, []string{"is not a Rust crate", "Cargo.toml"}},
		{"does not compile", func(t *testing.T) string {
			return writeCrate(t, pkg+"[lib]\ncrate-type = [\"cdylib\"]\n", "pub fn f() -> u32 { \"x\" }\n")
		}, []string{"cargo build of", "mismatched types", "src/lib.rs"}},
		{"not a cdylib", func(t *testing.T) string {
			return writeCrate(t, pkg, "pub fn f() -> u32 { 1 }\n")
		}, []string{"built no WebAssembly module", "crate-type = [\"cdylib\"]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rust.Build(c.dir(t), t.TempDir())
			require.Error(t, err)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestMissingToolchain checks that every missing part of the toolchain
// fails Build with an error that names the Debian packages to install.
func TestMissingToolchain(t *testing.T) {
	for _, c := range []struct{ which, says string }{
		{"cargo", "cargo is missing"},
		{"rustc", "rustc is missing"},
		{"rust-lld", "rust-lld (lld) is missing"},
		{"registry", "crate serde_cbor-0.11 is missing"},
	} {
		t.Run(c.which, func(t *testing.T) {
			restore := rust.SetToolchainPath(c.which, filepath.Join(t.TempDir(), "absent"))
			defer restore()
			_, err := rust.Build("examples/window-count", t.TempDir())
			require.ErrorIs(t, err, rust.ErrToolchain)
			require.ErrorContains(t, err, c.says)
			require.ErrorContains(t, err, "install rustc cargo libstd-rust-dev-wasm32 librust-serde-cbor-dev")
			require.ErrorContains(t, err, "apt-get install "+rust.Packages)
		})
	}
}

// TestWasmArtifact checks how Build finds the module in cargo's output:
// only a cdylib's .wasm of the crate asked for counts.
func TestWasmArtifact(t *testing.T) {
	const manifest = "/src/guest/Cargo.toml"
	line := func(path, kind string, files ...string) string {
		b, _ := json.Marshal(map[string]any{"reason": "compiler-artifact", "manifest_path": path,
			"target": map[string]any{"kind": []string{kind}}, "filenames": files})
		return string(b)
	}
	cases := []struct {
		name, output, want, err string
	}{
		{"cdylib", line(manifest, "cdylib", "/t/guest.wasm") + "\n", "/t/guest.wasm", ""},
		{"after a dependency", line("/src/sdk/Cargo.toml", "lib", "/t/libsdk.rlib") + "\nnot json\n" +
			`{"reason":"build-finished","success":true}` + "\n" + line(manifest, "cdylib", "/t/guest.wasm"), "/t/guest.wasm", ""},
		{"another crate's module", line("/src/other/Cargo.toml", "cdylib", "/t/other.wasm"), "", "built no WebAssembly module"},
		{"a library only", line(manifest, "lib", "/t/libguest.rlib"), "", "built no WebAssembly module"},
		{"nothing", "", "", "built no WebAssembly module"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := rust.WasmArtifact(strings.NewReader(c.output), manifest)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func FuzzWasmArtifact(f *testing.F) {
	f.Add(`{"reason":"compiler-artifact","manifest_path":"/m/Cargo.toml","target":{"kind":["cdylib"]},"filenames":["/x.wasm"]}`)
	f.Add("{\"reason\":\"compiler-artifact\"}\n\n{")
	f.Fuzz(func(t *testing.T, output string) {
		got, err := rust.WasmArtifact(strings.NewReader(output), "/m/Cargo.toml")
		if err == nil {
			require.True(t, strings.HasSuffix(got, ".wasm"), got)
			require.Contains(t, output, "/m/Cargo.toml")
		}
	})
}

// FuzzProcess feeds arbitrary requests to the test guest running the
// one_key_one_message script: the guest must never trap, must answer only
// a bad-request or version status, and must answer every request the
// host's strict decoder accepts with a response that the host accepts.
func FuzzProcess(f *testing.F) {
	for _, name := range []string{"one_key_one_message", "many_keys", "timers", "unicode", "state_replace", "map_kind"} {
		b, err := os.ReadFile(filepath.Join(vectorDir, name+".request.cbor"))
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0xa0})
	m := compiledModule(f, "testguest")
	var inst engine.Instance
	start := func(t *testing.T) {
		if inst != nil {
			return
		}
		var err error
		inst, err = m.Instantiate(context.Background(), engine.NewInstanceConfig())
		require.NoError(t, err)
		initWith(t, inst, &abi.Init{ABI: abi.Version, Computation: "fuzz", Kind: abi.KindTransform,
			Parameters: map[string]any{"script": "one_key_one_message"}, OutputStreams: []string{"out"}})
	}
	f.Fuzz(func(t *testing.T, request []byte) {
		start(t)
		got, err := inst.Process(context.Background(), request)
		req, decErr := abi.DecodeRequest(request)
		hostAccepts := decErr == nil && req.Validate() == nil && req.ABI == abi.Version
		if err != nil {
			var ge *engine.GuestError
			require.ErrorAs(t, err, &ge)
			if !errors.Is(err, engine.ErrStatus) {
				inst = nil // dead: the next input gets a new one
			}
			require.ErrorIs(t, err, engine.ErrStatus, "the guest must not trap")
			require.Contains(t, []int64{int64(abi.StatusBadRequest), int64(abi.StatusUnsupportedVersion)}, ge.Status)
			require.False(t, hostAccepts, "the guest refused a request the host accepts: %v", err)
			return
		}
		resp, err := abi.DecodeResponse(got, abi.ResponseLimits{})
		require.NoError(t, err)
		if hostAccepts {
			require.NoError(t, abi.ValidateResponse(resp, req, []string{"out"}))
		}
	})
}

// buildGoPlugin builds a Go plugin of this module for wasip1, the way
// examples/internal/build does.
func buildGoPlugin(tb testing.TB, pkg string) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "plugin.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = "../.."
	env := []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}
	for _, kv := range os.Environ() {
		if flags, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			kv = "GOFLAGS=" + strings.ReplaceAll(flags, "-race", "") // the wasm port has no race detector
		}
		env = append(env, kv)
	}
	cmd.Env = env
	output, err := cmd.CombinedOutput()
	require.NoError(tb, err, "go build %s:\n%s", pkg, output)
	wasm, err := os.ReadFile(out)
	require.NoError(tb, err)
	return wasm
}

// BenchmarkProcess measures one batch of 100 echoed messages of 100 bytes
// through the conformance guest: decoding, the SDK's API and encoding,
// plus the engine's copying; with and without the engine's interruptible
// mode, which the host enables for plugins with a batch timeout.
func BenchmarkProcess(b *testing.B) {
	key := abi.RequestKey{Key: `["k"]`}
	for i := range 100 {
		key.Messages = append(key.Messages, abi.Message{ID: fmt.Sprintf("m%d", i), Stream: "in", Payload: bytes.Repeat([]byte{'x'}, 100)})
	}
	req, err := abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "bench", Kind: abi.KindTransform, Keys: []abi.RequestKey{key}})
	require.NoError(b, err)
	for _, interruptible := range []bool{false, true} {
		b.Run(fmt.Sprintf("interruptible=%t", interruptible), func(b *testing.B) {
			ctx := context.Background()
			e, err := engine.NewWazero(ctx, engine.NewConfig().WithInterruptible(interruptible))
			require.NoError(b, err)
			defer e.Close(ctx)
			m, err := e.Compile(ctx, "rust-conformance", module(b, "conformance"))
			require.NoError(b, err)
			inst := instantiate(b, m)
			initWith(b, inst, &abi.Init{ABI: abi.Version, Computation: "bench", Kind: abi.KindTransform, OutputStreams: []string{"out"}})
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				if _, err := inst.Process(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
