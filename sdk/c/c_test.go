package c_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/abi/abitest"
	"github.com/flowhost/flowhost/host/engine"
	c "github.com/flowhost/flowhost/sdk/c"
)

// vectorDir holds the golden vectors every SDK is tested against.
var vectorDir = abitest.Dir()

// workDir holds what this test binary builds: the guests and a compilation
// cache. TestMain removes it. Fuzzing worker processes, which are stopped
// without running their TestMain to the end, inherit the directory of the
// process that started them through workDirEnv and leave it to that one.
var workDir string

const workDirEnv = "FLOWHOST_SDK_C_TEST_DIR"

func TestMain(m *testing.M) {
	dir, inherited := os.LookupEnv(workDirEnv)
	if !inherited {
		var err error
		if dir, err = os.MkdirTemp("", "flowhost-sdk-c-test-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(workDirEnv, dir)
	}
	workDir = dir
	code := m.Run()
	if !inherited {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// The guests the tests run, by name: the test guest (golden scripts and the
// fuzz script), the conformance guest, the window-count example and a C++
// guest.
const (
	testGuest        = "guest"
	conformanceGuest = "conformance"
	windowCount      = "window-count"
	cxxGuest         = "cxx"
	windowGuest      = "window-guest"
	windowConcat     = "window-concat"
	joinGuest        = "join-guest"
	joinConformance  = "join-conformance"
	typedStateGuest  = "typed-state"
	keyGuest         = "key-guest"
)

// allGuests are every guest the tests build: those of guestSources and
// the conformance guest.
var allGuests = []string{testGuest, conformanceGuest, windowCount, cxxGuest, windowGuest, windowConcat, joinGuest, joinConformance, typedStateGuest, keyGuest}

var guestSources = map[string][]string{
	testGuest:       {"testdata/guest/main.c"},
	windowCount:     {"examples/window-count/main.c"},
	cxxGuest:        {"testdata/cxx/main.cc"},
	windowGuest:     {"windowguest/main.c"},
	windowConcat:    {"testdata/windowconcat/main.c"},
	joinGuest:       {"testdata/joinguest/main.c"},
	joinConformance: {"joinguest/main.c"},
	typedStateGuest: {"testdata/typedstate/main.c"},
	keyGuest:        {"testdata/keyguest/main.c"},
}

var (
	buildOnce sync.Once
	built     = map[string][]byte{}
	buildErr  error
)

// guestWasm returns the module of a guest, building every guest, at the
// same time, on the first call of the test binary. A missing toolchain
// fails the test with the packages to install. A process that inherited
// the work directory uses the guests its parent built there.
func guestWasm(tb testing.TB, name string) []byte {
	tb.Helper()
	buildOnce.Do(func() {
		shared := filepath.Join(workDir, "guests")
		if _, err := os.Stat(filepath.Join(shared, "complete")); err == nil {
			for _, name := range allGuests {
				wasm, err := os.ReadFile(filepath.Join(shared, name+".wasm"))
				if err != nil {
					buildErr = err
					return
				}
				built[name] = wasm
			}
			return
		}
		dir, err := os.MkdirTemp(workDir, "build-")
		if err != nil {
			buildErr = err
			return
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var errs []error
		record := func(name, path string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				var wasm []byte
				if wasm, err = os.ReadFile(path); err == nil {
					built[name] = wasm
				}
			}
			errs = append(errs, err)
		}
		for name, srcs := range guestSources {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := filepath.Join(dir, name+".wasm")
				record(name, out, c.Build(srcs, out))
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, err := c.BuildConformanceGuest(dir)
			if err == nil {
				err = os.Rename(path, filepath.Join(dir, conformanceGuest+".wasm"))
				path = filepath.Join(dir, conformanceGuest+".wasm")
			}
			record(conformanceGuest, path, err)
		}()
		wg.Wait()
		if buildErr = errors.Join(errs...); buildErr == nil {
			// Publish the guests for worker processes, all at once.
			if os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644) == nil {
				_ = os.Rename(dir, shared)
			}
		}
	})
	require.NoError(tb, buildErr, "building the C guests (install %s, and %s for C++)", c.Toolchain, c.CxxToolchain)
	wasm, ok := built[name]
	require.True(tb, ok, "no guest %q", name)
	return wasm
}

// logRecorder keeps the guest log lines of one engine.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// instance instantiates a guest in a new engine whose guest log lines the
// returned recorder keeps. Compiled code is cached across engines.
func instance(tb testing.TB, name string) (engine.Instance, *logRecorder) {
	tb.Helper()
	return instanceWith(tb, name, engine.NewConfig())
}

// instanceWith is instance with an engine configuration to start from.
func instanceWith(tb testing.TB, name string, cfg engine.Config) (engine.Instance, *logRecorder) {
	tb.Helper()
	ctx := context.Background()
	logs := &logRecorder{}
	e, err := engine.NewWazero(ctx, cfg.WithCompilationCacheDir(filepath.Join(workDir, "cache")).WithLogger(slog.New(logs)))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, e.Close(ctx)) })
	m, err := e.Compile(ctx, "c-"+name, guestWasm(tb, name))
	require.NoError(tb, err)
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(tb, err)
	return inst, logs
}

// initWith sends an init envelope declaring outputs and requires the guest
// to start.
func initWith(tb testing.TB, inst engine.Instance, computation string, kind abi.Kind, params map[string]any, outputs ...string) {
	tb.Helper()
	b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: computation, Kind: kind, Parameters: params, OutputStreams: outputs})
	require.NoError(tb, err)
	res, err := inst.Init(context.Background(), b)
	require.NoError(tb, err)
	require.Nil(tb, res, "the guest refused to start: %x", res)
}

// process sends a request and returns a copy of the response.
func process(tb testing.TB, inst engine.Instance, req *abi.Request) []byte {
	tb.Helper()
	b, err := abi.EncodeRequest(req)
	require.NoError(tb, err)
	out, err := inst.Process(context.Background(), b)
	require.NoError(tb, err)
	return bytes.Clone(out)
}

// status returns the negative status of a failed call, or 0.
func status(err error) int64 {
	var ge *engine.GuestError
	if errors.As(err, &ge) && errors.Is(ge.Cause, engine.ErrStatus) {
		return ge.Status
	}
	return 0
}

type vectorDoc = abitest.Vector

func vectorDocs(tb testing.TB) []vectorDoc {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	require.NoError(tb, err)
	require.NotEmpty(tb, paths, "no golden vectors in %s", vectorDir)
	docs := make([]vectorDoc, 0, len(paths))
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		require.NoError(tb, err)
		var doc vectorDoc
		require.NoError(tb, json.Unmarshal(raw, &doc))
		docs = append(docs, doc)
	}
	return docs
}

var readVector = abitest.Read

// requireSameResponse compares a response with the golden bytes, and on a
// difference says whether the values or only the bytes differ.
func requireSameResponse(t *testing.T, want, got []byte, what string) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	gotResp, gotErr := abi.DecodeResponse(got, abi.ResponseLimits{})
	require.NoError(t, gotErr, "%s: the guest's response does not decode: %x", what, got)
	wantResp, err := abi.DecodeResponse(want, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Equal(t, wantResp, gotResp, "%s: response differs", what)
	require.Fail(t, "same value, different bytes", "%s:\n got %x\nwant %x", what, got, want)
}

// runVector passes one golden vector through a fresh instance of a guest.
func runVector(t *testing.T, guest string, doc vectorDoc) {
	inst, logs := instance(t, guest)
	ctx := context.Background()
	if initBytes, ok := readVector(t, doc.Name, "init"); ok {
		res, err := inst.Init(ctx, initBytes)
		require.NoError(t, err, "logs:\n%s", logs.text())
		if want, ok := readVector(t, doc.Name, "init_result"); ok {
			require.Equal(t, want, bytes.Clone(res), "init result differs from %s.init_result.cbor", doc.Name)
		} else {
			require.Nil(t, res, "the guest should start with nothing to say")
		}
	}
	reqBytes, ok := readVector(t, doc.Name, "request")
	if !ok {
		return
	}
	req, err := abi.DecodeRequest(reqBytes)
	require.NoError(t, err)
	// Declare the vector's outputs the way the host would, so that fh_emit
	// checks its streams as in production.
	initWith(t, inst, req.Computation, req.Kind, nil, doc.OutputStreams...)
	want, ok := readVector(t, doc.Name, "response")
	require.True(t, ok, "a request vector needs a response")
	got, err := inst.Process(ctx, reqBytes)
	require.NoError(t, err, "logs:\n%s", logs.text())
	requireSameResponse(t, want, bytes.Clone(got), doc.Name)
	// The response is also one the host accepts for this request.
	resp, err := abi.DecodeResponse(got, abi.ResponseLimits{})
	require.NoError(t, err)
	require.NoError(t, abi.ValidateResponse(resp, req, doc.OutputStreams))
}

// TestGoldenVectors runs every golden vector through the C test guest in
// the host's wazero engine, each against a C script that implements the
// vector's description, and requires the golden bytes exactly.
func TestGoldenVectors(t *testing.T) {
	for _, doc := range vectorDocs(t) {
		t.Run(doc.Name, func(t *testing.T) { runVector(t, testGuest, doc) })
	}
}

// TestCxxGuest runs the golden vectors a C++ guest implements.
func TestCxxGuest(t *testing.T) {
	for _, doc := range vectorDocs(t) {
		if doc.Name != "one_key_one_message" && doc.Name != "unicode" {
			continue
		}
		t.Run(doc.Name, func(t *testing.T) { runVector(t, cxxGuest, doc) })
	}
}

// TestGuestInterface checks what every C guest exports and imports: the ABI
// v1 exports, the WASI reactor's _initialize and nothing beyond the host's
// log and WASI preview1 without files or sockets.
func TestGuestInterface(t *testing.T) {
	for _, name := range allGuests {
		t.Run(name, func(t *testing.T) {
			wasm := guestWasm(t, name)
			info, err := engine.Inspect(wasm)
			require.NoError(t, err)
			require.NoError(t, engine.CheckABI(name, info, engine.Capabilities{}))
			exports := map[string]bool{}
			for _, e := range info.Exports {
				exports[e.Name] = true
			}
			for _, want := range []string{abi.ExportVersionMarker, abi.ExportAlloc, abi.ExportProcess, abi.ExportInit, abi.ExportMemory, "_initialize"} {
				require.True(t, exports[want], "%s is not exported", want)
			}
			require.False(t, exports["_start"], "a guest is a reactor")
			t.Logf("%s.wasm: %d bytes", name, len(wasm))
		})
	}
}
