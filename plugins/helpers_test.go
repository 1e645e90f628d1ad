package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// sha256 of "abc", a published test vector.
const abcSHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

const validManifest = `name: order-join
version: 1.2.0
abi: 1
wasm: join.wasm
sha256: ` + abcSHA256 + `
kinds: [transform]
`

const fullManifest = `name: order-join
version: 1.2.0-rc.1+build.5
abi: 1
wasm: ./bin/../join.wasm
sha256: BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD
kinds: [transform, map]
description: joins orders and payments
parameters:
  window: 1m
  fields: [id, amount]
limits:
  memory_pages: 256
  batch_timeout: 5s
  max_response_bytes: 64MiB
capabilities:
  clock: true
  read_only_dirs: [data, ./ref/]
engine: wasmtime
`

// manifestErrors flattens err, a *ManifestError or a join of them, and
// fails the test on anything else.
func manifestErrors(t testing.TB, err error) []*ManifestError {
	t.Helper()
	var out []*ManifestError
	var walk func(error)
	walk = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		var me *ManifestError
		if !errors.As(err, &me) {
			t.Fatalf("error %v (%T) is not a *ManifestError", err, err)
		}
		out = append(out, me)
	}
	walk(err)
	return out
}

// emptyModule is the smallest valid WebAssembly module: the header alone.
var emptyModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// typeModule adds a type section holding one func type () -> ().
var typeModule = append(slices.Clone(emptyModule), 0x01, 0x04, 0x01, 0x60, 0x00, 0x00)

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// writePlugin creates a plugin directory dir with a manifest for name whose
// module is wasm and whose sha256 is the module's, plus extra manifest
// lines. It returns dir.
func writePlugin(t testing.TB, dir, name string, wasm []byte, extra string) string {
	t.Helper()
	manifest := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: 1\nwasm: %s.wasm\nsha256: %s\nkinds: [transform]\n%s",
		name, name, sha256Hex(wasm), extra)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644))
	return dir
}

// loadPlugin loads the plugin directory dir and fails the test on error.
func loadPlugin(t testing.TB, dir string) *Plugin {
	t.Helper()
	p, err := Load(dir)
	require.NoError(t, err)
	return p
}
