package plugins_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowhost/flowhost/plugins"
)

func ExampleDiscover() {
	// A folder of plugin directories, as given to --plugins.
	root, err := os.MkdirTemp("", "plugins")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	module := []byte("\x00asm\x01\x00\x00\x00") // the smallest valid module
	sum := sha256.Sum256(module)
	dir := filepath.Join(root, "join")
	must(os.Mkdir(dir, 0o755))
	must(os.WriteFile(filepath.Join(dir, "join.wasm"), module, 0o644))
	must(os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(`name: order-join
version: 1.2.0
abi: 1
wasm: join.wasm
sha256: `+hex.EncodeToString(sum[:])+`
kinds: [transform]
parameters:
  window: 1m
limits:
  batch_timeout: 5s
`), 0o644))

	catalog, err := plugins.Discover([]string{root})
	if err != nil {
		panic(err)
	}
	p, err := catalog.Lookup("order-join")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Manifest.Name, p.Manifest.Version, p.Manifest.Kinds, p.Manifest.Engine == plugins.EngineDefault)
	fmt.Println("batch timeout:", p.Manifest.Limits.BatchTimeout)
	fmt.Println("parameters:", p.Manifest.MergeParameters(map[string]any{"window": "5m"}))
	fmt.Println("problems:", plugins.Validate(p))

	_, err = catalog.Lookup("order-split")
	fmt.Println(err)
	// Output:
	// order-join 1.2.0 [transform] true
	// batch timeout: 5s
	// parameters: map[window:5m]
	// problems: []
	// unknown plugin "order-split"; known plugins: order-join
}

func ExampleParseManifest() {
	_, err := plugins.ParseManifest("plugins/join/plugin.yaml", []byte(`name: order-join
version: 1.2.0
abi: 1
sha256: 3a7b12345678
kinds: [transform, reduce]
`))
	fmt.Println(err)
	// Output:
	// plugins/join/plugin.yaml:1:1: wasm: required field is missing
	// plugins/join/plugin.yaml:4:9: sha256: expected 64 hex digits, got 12 characters
	// plugins/join/plugin.yaml:5:20: kinds[1]: unknown kind "reduce"; use transform or map
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
