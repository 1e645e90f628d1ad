package rust_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/rust"
)

// ExampleBuild builds the window-count example guest and lists the
// functions the module exports to the host.
func ExampleBuild() {
	out, err := os.MkdirTemp("", "window-count-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(out)
	// The crate's directory, relative to sdk/rust.
	path, err := rust.Build("examples/window-count", out)
	if err != nil {
		panic(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	info, err := engine.Inspect(wasm)
	if err != nil {
		panic(err)
	}
	fmt.Println(filepath.Base(path))
	for _, e := range info.Exports {
		if e.Kind == engine.KindFunc {
			fmt.Println(e.Name, e.Func)
		}
	}
	// Output:
	// window_count.wasm
	// flowhost_abi_v1 () -> ()
	// flowhost_alloc i32 -> i32
	// flowhost_init (i32, i32) -> i64
	// flowhost_process (i32, i32) -> i64
	// _initialize () -> ()
}
