package c_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/engine"
	c "github.com/flowhost/flowhost/sdk/c"
)

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	t.Run("no sources", func(t *testing.T) {
		require.EqualError(t, c.Build(nil, filepath.Join(dir, "x.wasm")), "c: Build needs at least one source file")
	})
	t.Run("not C", func(t *testing.T) {
		err := c.Build([]string{write("main.rs", "fn main() {}")}, filepath.Join(dir, "x.wasm"))
		require.ErrorContains(t, err, "main.rs is neither C (.c) nor C++")
	})
	t.Run("compile error", func(t *testing.T) {
		src := write("broken.c", "#include \"flowhost.h\"\nint flowhost_process_key(fh_key *k) { return fh_no_such_function(k); }\n")
		err := c.Build([]string{src}, filepath.Join(dir, "x.wasm"))
		require.ErrorContains(t, err, "broken.c:2")
		require.ErrorContains(t, err, "fh_no_such_function")
		require.NotContains(t, err.Error(), "install", "a mistake in the source is not a missing toolchain")
	})
	t.Run("no process function", func(t *testing.T) {
		src := write("empty.c", "int unused;\n")
		require.ErrorContains(t, c.Build([]string{src}, filepath.Join(dir, "x.wasm")), "undefined symbol: flowhost_process_key")
	})
}

func TestBuildWithoutToolchain(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	src := filepath.Join(t.TempDir(), "main.c")
	require.NoError(t, os.WriteFile(src, []byte("int x;\n"), 0o644))
	err := c.Build([]string{src}, filepath.Join(t.TempDir(), "x.wasm"))
	require.ErrorContains(t, err, "clang not found on PATH")
	require.ErrorContains(t, err, "install clang lld wasi-libc libclang-rt-dev-wasm32")
	_, err = c.BuildConformanceGuest(t.TempDir())
	require.ErrorContains(t, err, "install clang lld wasi-libc")
}

func ExampleWriteSDK() {
	dir, err := os.MkdirTemp("", "flowhost-sdk-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := c.WriteSDK(dir); err != nil {
		panic(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// cbor.c
	// cbor.h
	// flowhost.c
	// flowhost.h
	// typed_state.c
	// typed_state.h
}

func ExampleBuild() {
	dir, err := os.MkdirTemp("", "flowhost-guest-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "main.c")
	err = os.WriteFile(src, []byte(`#include "flowhost.h"

int flowhost_process_key(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        fh_emit(k, "out", m->payload, m->payload_len);
    }
    return 0;
}
`), 0o644)
	if err != nil {
		panic(err)
	}
	out := filepath.Join(dir, "echo.wasm")
	if err := c.Build([]string{src}, out); err != nil {
		panic(err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		panic(err)
	}
	info, err := engine.Inspect(wasm)
	if err != nil {
		panic(err)
	}
	var exports []string
	for _, e := range info.Exports {
		exports = append(exports, e.Name)
	}
	slices.Sort(exports)
	fmt.Println(exports)
	fmt.Println(engine.CheckABI("echo", info, engine.Capabilities{}))
	// Output:
	// [_initialize flowhost_abi_v1 flowhost_alloc flowhost_init flowhost_process memory]
	// <nil>
}
