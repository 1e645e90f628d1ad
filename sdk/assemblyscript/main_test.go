package assemblyscript_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
)

// The guests every test of this package runs, built once per test binary
// by TestMain.
const (
	testGuest        = "testguest"   // testdata/testguest: the golden scripts and a few more
	conformanceGuest = "conformance" // conformance: SCRIPT.md
	windowCountGuest = "window-count"
	windowGuest      = "windowguest"      // windowguest: the window conformance guest
	joinGuest        = "joinguest"        // testdata/joinguest: the join helpers, every field in the payloads
	joinConfGuest    = "join-conformance" // joinguest: the join conformance guest
	keyGuest         = "keyguest"         // testdata/keyguest: parseKey's answers (keyfields_test.go)
	tsGuest          = "tsguest"          // testdata/tsguest: typed state scripts (typed_state_test.go)
)

// guestEntries are the entry files of the guests.
var guestEntries = map[string]string{
	testGuest:        "testdata/testguest/index.ts",
	windowCountGuest: "examples/window-count/index.ts",
	joinGuest:        "testdata/joinguest/index.ts",
	keyGuest:         "testdata/keyguest/index.ts",
	tsGuest:          "testdata/tsguest/index.ts",
}

// guestWasm holds the built modules by guest name.
var guestWasm = map[string][]byte{}

// cacheDir is the compilation cache the tests' engines share, so that a
// module is compiled to native code once per test binary.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flowhost-assemblyscript-test-")
	if err == nil {
		cacheDir = filepath.Join(dir, "cache")
		err = loadGuests(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "assemblyscript tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// loadGuests builds every guest, or takes it from the build cache when
// nothing that goes into it has changed: fuzzing starts a test process per
// worker, and each would otherwise spend seconds compiling the guests.
func loadGuests(tmp string) error {
	sum, err := sourceHash()
	if err != nil {
		return err
	}
	dir := filepath.Join(tmp, "guests")
	userCache, err := os.UserCacheDir()
	if err == nil {
		dir = filepath.Join(userCache, "flowhost", "assemblyscript-test", sum)
	}
	names := []string{conformanceGuest, windowGuest, joinConfGuest}
	for name := range guestEntries {
		names = append(names, name)
	}
	cached := true
	for _, name := range names {
		wasm, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
		if err != nil {
			cached = false
			break
		}
		guestWasm[name] = wasm
	}
	if cached {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := buildGuests(dir); err != nil {
		return err
	}
	if userCache != "" {
		// Builds of older sources are never used again.
		old, _ := filepath.Glob(filepath.Join(userCache, "flowhost", "assemblyscript-test", "*"))
		for _, d := range old {
			if d != dir {
				_ = os.RemoveAll(d)
			}
		}
	}
	return nil
}

// buildGuests compiles every guest into dir, concurrently (a compile is a
// few seconds of one core), each through a temporary file renamed into
// place so that a concurrent reader never sees half a module.
func buildGuests(dir string) error {
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	build := func(name string, f func() (string, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, err := f()
			var wasm []byte
			if err == nil {
				wasm, err = os.ReadFile(path)
			}
			if err == nil {
				err = os.Rename(path, filepath.Join(dir, name+".wasm"))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("building the %s guest: %w", name, err))
				return
			}
			guestWasm[name] = wasm
		}()
	}
	for name, entry := range guestEntries {
		build(name, func() (string, error) {
			out := filepath.Join(tmp, name+".wasm")
			return out, assemblyscript.Build(entry, out)
		})
	}
	build(conformanceGuest, func() (string, error) { return assemblyscript.BuildConformanceGuest(tmp) })
	build(windowGuest, func() (string, error) { return assemblyscript.BuildWindowGuest(tmp) })
	build(joinConfGuest, func() (string, error) { return assemblyscript.BuildJoinGuest(tmp) })
	wg.Wait()
	return errors.Join(errs...)
}

// sourceHash reads everything that goes into a guest: the AssemblyScript
// sources, the compiler's pins and configuration, and the build helper's
// flags. Reading them also tells go test's result cache to rerun the tests
// when one changes: the compiler reads them in another process, which the
// cache does not see.
func sourceHash() (string, error) {
	h := sha256.New()
	add := func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	}
	for _, f := range []string{"package.json", "package-lock.json", "asconfig.json", "index.ts", "build.go"} {
		if err := add(f); err != nil {
			return "", err
		}
	}
	for _, dir := range []string{"assembly", "conformance", "examples", "testdata", "windowguest", "joinguest"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".ts") {
				return err
			}
			return add(path)
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// logRecorder collects the lines guests log through flowhost.log.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Level.String()+" "+rec.Message)
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// text returns everything logged so far, one line per call.
func (r *logRecorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// guestModule compiles a built guest on a fresh engine whose guest logs go
// to the returned recorder.
func guestModule(tb testing.TB, name string) (engine.Module, *logRecorder) {
	tb.Helper()
	wasm, ok := guestWasm[name]
	require.True(tb, ok, "guest %q was not built", name)
	logs := &logRecorder{}
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(cacheDir).WithLogger(slog.New(logs)))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, e.Close(ctx)) })
	m, err := e.Compile(ctx, "as-"+name, wasm)
	require.NoError(tb, err)
	return m, logs
}

func instantiate(tb testing.TB, m engine.Module) engine.Instance {
	tb.Helper()
	ctx := context.Background()
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, inst.Close(ctx)) })
	return inst
}

// initGuest passes an Init for a computation with outputs to inst and
// requires it to start.
func initGuest(tb testing.TB, inst engine.Instance, in *abi.Init) {
	tb.Helper()
	b, err := abi.EncodeInit(in)
	require.NoError(tb, err)
	res, err := inst.Init(context.Background(), b)
	require.NoError(tb, err)
	require.Nil(tb, res, "init should start with nothing to say")
}

// process passes req to inst and decodes and validates the response the
// way the host does.
func process(tb testing.TB, inst engine.Instance, req *abi.Request, outputs []string) *abi.Response {
	tb.Helper()
	b, err := abi.EncodeRequest(req)
	require.NoError(tb, err)
	raw, err := inst.Process(context.Background(), b)
	require.NoError(tb, err)
	resp, err := abi.DecodeResponse(raw, abi.ResponseLimits{})
	require.NoError(tb, err)
	require.NoError(tb, abi.ValidateResponse(resp, req, outputs))
	return resp
}
