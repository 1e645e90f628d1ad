package examples_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	csdk "github.com/flowhost/flowhost/sdk/c"
	rustsdk "github.com/flowhost/flowhost/sdk/rust"
)

// writeManifest turns a built module into a plugin directory.
func writeManifest(t *testing.T, dir, name, wasmPath string) {
	t.Helper()
	wasm, err := os.ReadFile(wasmPath)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644))
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: 1\nwasm: %s.wasm\nsha256: %s\nkinds: [transform]\n",
		name, name, hex.EncodeToString(sum[:]))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(manifest), 0o644))
}

// TestMixedLanguagePipeline runs examples/pipelines/mixed.yaml: a Go map
// feeding the windowed count built twice, in C and in Rust, in one
// pipeline. Both counts must equal the ones the test computes from the
// input, and each other.
func TestMixedLanguagePipeline(t *testing.T) {
	t.Parallel()
	mixed := filepath.Join(t.TempDir(), "plugins")
	cWasm := filepath.Join(t.TempDir(), "window-count-c.wasm")
	require.NoError(t, csdk.Build([]string{filepath.Join(env.root, "sdk", "c", "examples", "window-count", "main.c")}, cWasm))
	writeManifest(t, filepath.Join(mixed, "window-count-c"), "window-count-c", cWasm)
	rustWasm, err := rustsdk.Build(filepath.Join(env.root, "sdk", "rust", "examples", "window-count"), t.TempDir())
	require.NoError(t, err)
	writeManifest(t, filepath.Join(mixed, "window-count-rust"), "window-count-rust", rustWasm)

	const window = int64(time.Minute)
	type win struct {
		customer string
		start    int64
	}
	rng := rand.New(rand.NewPCG(5, 6))
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	customers := []string{"ann", "bob", "cy"}
	want := map[win]int64{}
	var recs []recordLine
	for i := range 300 {
		c := customers[rng.IntN(len(customers))]
		event := start + rng.Int64N(int64(10*time.Minute))
		write := event + rng.Int64N(int64(10*time.Second))
		recs = append(recs, recordLine{Write: write, Event: event, Payload: map[string]any{
			"order_id": fmt.Sprintf("o-%d", i), "customer": c, "amount": "1.00", "currency": "eur"}})
		want[win{c, event / window * window}]++
	}
	slices.SortFunc(recs, func(a, b recordLine) int { return cmp.Compare(a.Write, b.Write) })

	r := runPipelineWith(t, "mixed/mixed", map[string][]byte{"data/orders.jsonl": jsonLines(t, recs)}, env.plugins, mixed)
	require.Empty(t, r.dead)
	for _, stream := range []string{"counts-c", "counts-rust"} {
		got := map[win]int64{}
		for _, rec := range r.stream(stream) {
			var p struct {
				Key         string `json:"key"`
				WindowStart int64  `json:"window_start"`
				Count       int64  `json:"count"`
			}
			require.NoError(t, json.Unmarshal(rec.Payload, &p), "%s: %s", stream, rec.Payload)
			got[win{p.Key, p.WindowStart}] += p.Count
		}
		require.Equal(t, want, got, stream)
	}
}
