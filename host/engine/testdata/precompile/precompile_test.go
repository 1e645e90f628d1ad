// Package precompile fills a compilation cache with the engine's test
// guests. The engine tests run it, through go test and without the race
// detector, before they start: wazero compiles a Go guest several times
// faster without -race, and the tests then load the native code from the
// cache, just as a restarted host would. It is a test, not a command,
// because wazero keys its cache by its own version, which only test
// binaries agree on (they carry no dependency versions and all say "dev").
//
// Usage: go test -count=1 ./testdata/precompile -args -cache DIR GUEST.wasm...
package precompile_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flowhost/flowhost/host/engine"
)

var cacheDir = flag.String("cache", "", "compilation cache directory to fill")

func TestPrecompile(t *testing.T) {
	if *cacheDir == "" || flag.NArg() == 0 {
		t.Fatal("run by the host/engine tests: -args -cache DIR GUEST.wasm...")
	}
	ctx := context.Background()
	// The grant lets guests that open files compile; it changes neither
	// the native code nor its cache key.
	caps := engine.Capabilities{}.WithReadOnlyDir(os.TempDir(), "/tmp")
	e, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(*cacheDir).WithCapabilities(caps))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)

	var wg sync.WaitGroup
	for _, path := range flag.Args() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasm, err := os.ReadFile(path)
			if err == nil {
				_, err = e.Compile(ctx, strings.TrimSuffix(filepath.Base(path), ".wasm"), wasm)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
