package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/engine"
)

// testDir holds the guests built for this test run and a compilation cache
// shared by the tests.
var testDir string

// guestNames are the directories under testdata/guests.
var guestNames = []string{"echo", "log", "loop", "trap", "badstatus", "oob", "noexports", "sock", "clock", "fs"}

// refusedGuests fail validation, so they are never compiled.
var refusedGuests = map[string]bool{"noexports": true, "sock": true}

// guests maps a guest name to its wasm binary.
var guests = map[string][]byte{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flowhost-engine-test-")
	if err == nil {
		testDir = dir
		err = prepareGuests()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// prepareGuests builds every guest once, concurrently, then compiles the
// valid ones into the shared cache in a separate test process built
// without the race detector (see testdata/precompile): compiling a Go
// guest is what makes these tests slow, several times more so under -race.
func prepareGuests() error {
	paths := make([]string, len(guestNames))
	errs := make([]error, len(guestNames))
	var wg sync.WaitGroup
	for i, name := range guestNames {
		paths[i] = filepath.Join(testDir, name+".wasm")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = goCommand(map[string]string{"GOOS": "wasip1", "GOARCH": "wasm", "CGO_ENABLED": "0"},
				"build", "-buildmode=c-shared", "-o", paths[i], "./testdata/guests/"+name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	precompile := []string{"test", "-count=1", "-run=^TestPrecompile$", "./testdata/precompile", "-args", "-cache", cacheDir()}
	for i, name := range guestNames {
		wasm, err := os.ReadFile(paths[i])
		if err != nil {
			return err
		}
		guests[name] = wasm
		if !refusedGuests[name] {
			precompile = append(precompile, paths[i])
		}
	}
	return goCommand(nil, precompile...)
}

// goCommand runs the go tool, which is always present where these tests
// run, with the test binary's environment minus -race (the wasm port has
// none, and the precompiler must not have it) plus env.
func goCommand(env map[string]string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Env = withoutRaceFlag(os.Environ())
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, output)
	}
	return nil
}

// withoutRaceFlag drops -race from GOFLAGS.
func withoutRaceFlag(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			var kept []string
			for _, f := range strings.Fields(v) {
				if f != "-race" {
					kept = append(kept, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(kept, " ")
		}
		out = append(out, kv)
	}
	return out
}

func guest(tb testing.TB, name string) []byte {
	tb.Helper()
	wasm, ok := guests[name]
	require.Truef(tb, ok, "no guest %q in testdata/guests", name)
	return wasm
}

func cacheDir() string { return filepath.Join(testDir, "cache") }

// testConfig is the default configuration plus the run's shared
// compilation cache, which keeps repeated compiles of a guest cheap.
func testConfig() engine.Config {
	return engine.NewConfig().WithCompilationCacheDir(cacheDir())
}

func newEngine(tb testing.TB, cfg engine.Config) engine.Engine {
	tb.Helper()
	e, err := engine.NewWazero(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, e.Close(context.Background())) })
	return e
}

func compile(tb testing.TB, e engine.Engine, name string) engine.Module {
	tb.Helper()
	return compileBytes(tb, e, name, guest(tb, name))
}

func compileBytes(tb testing.TB, e engine.Engine, name string, wasm []byte) engine.Module {
	tb.Helper()
	m, err := e.Compile(context.Background(), name, wasm)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, m.Close(context.Background())) })
	return m
}

func instantiate(tb testing.TB, m engine.Module) engine.Instance {
	tb.Helper()
	inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, inst.Close(context.Background())) })
	return inst
}

// echoed is what the echo guest answers to req.
func echoed(req []byte) []byte {
	out := []byte("echo:")
	for i := len(req) - 1; i >= 0; i-- {
		out = append(out, req[i])
	}
	return out
}
