package conformance_test

import (
	"fmt"
	"os"

	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/conformance"
)

// ExampleBuildGoGuest builds the Go conformance guest and lists the
// exports the host requires of it.
func ExampleBuildGoGuest() {
	dir, err := os.MkdirTemp("", "goguest-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	g := conformance.Guest{Name: "go", Build: conformance.BuildGoGuest}
	path, err := g.Build(dir)
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
	fmt.Println("valid:", engine.CheckABI(g.Name, info, engine.Capabilities{}) == nil)
	for _, name := range []string{"flowhost_abi_v1", "flowhost_alloc", "flowhost_process", "flowhost_init", "memory", "_initialize"} {
		_, ok := info.Export(name)
		fmt.Println(name, ok)
	}
	// Output:
	// valid: true
	// flowhost_abi_v1 true
	// flowhost_alloc true
	// flowhost_process true
	// flowhost_init true
	// memory true
	// _initialize true
}
