package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
)

const reloadPipeline = `
name: reload
sources:
  - {name: in, type: http, stream: in, http: {listen: "127.0.0.1:0", path: /in}}
computations:
  - {name: tag, plugin: tagger, group_by: [k], input_streams: [in], output_streams: [out]}
sinks:
  - {name: sink, type: file, streams: [out], file: {path: out.jsonl}}
dead_letter: {type: file, file: {path: dead.jsonl}}
`

// writePluginVersion writes version tag of the tagger plugin into dir the
// way a deployment does: the module first, then the manifest naming its
// checksum, each renamed into place. module nil: a module made from the
// tagger guest, marked with tag so that each version's checksum differs.
func writePluginVersion(t *testing.T, dir, tag string, module []byte, engine string) {
	t.Helper()
	if module == nil {
		module = appendCustomSection(buildGuest(t, "./host/internal/testguests/tagger"), "version-"+tag, 16)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	put := func(name string, data []byte) {
		tmp := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(tmp, data, 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
	}
	sum := sha256.Sum256(module)
	put("tagger.wasm", module)
	put("plugin.yaml", fmt.Appendf(nil, "name: tagger\nversion: 1.0.%d\nabi: 1\nwasm: tagger.wasm\nsha256: %s\nkinds: [transform]\nengine: %s\nparameters: {tag: %s}\n",
		len(tag), hex.EncodeToString(sum[:]), engine, tag))
}

// TestHotReloadSwapsAtAnEpochBoundary runs a pipeline fed over HTTP and
// replaces its plugin three times while it runs, on each engine: a good
// new version (every record posted after the swap is processed by it,
// every record before by the old one, each exactly once), then a
// truncated one, which is refused with the reason while the good version
// keeps running, then a good one again, which retires the one before.
func TestHotReloadSwapsAtAnEpochBoundary(t *testing.T) {
	for _, eng := range []string{"wazero", "wasmtime"} {
		t.Run(eng, func(t *testing.T) {
			dir := t.TempDir()
			pluginDir := filepath.Join(dir, "plugins", "tagger")
			writePluginVersion(t, pluginDir, "v1", nil, eng)
			specPath := filepath.Join(dir, "pipeline.yaml")
			require.NoError(t, os.WriteFile(specPath, []byte(reloadPipeline), 0o644))
			src, err := connect.NewHTTPSource(connect.HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/in", Stream: "in", Partitions: 1})
			require.NoError(t, err)
			reloads := make(chan error, 4)
			var logs lockedBuffer
			metricsAddr := make(chan string, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- host.Run(ctx, host.RunConfig{
					SpecPath:        specPath,
					PluginDirs:      []string{filepath.Join(dir, "plugins")},
					CacheDir:        filepath.Join(os.TempDir(), "flowhost-test-cache"),
					Logger:          slog.New(slog.NewTextHandler(&logs, nil)),
					DataDir:         t.TempDir(),
					Progress:        io.Discard,
					Options:         []runtime.Option{runtime.WithSource("in", src)},
					Reload:          true,
					OnReload:        func(_ string, err error) { reloads <- err },
					MetricsAddr:     "127.0.0.1:0",
					OnMetricsListen: func(addr string) { metricsAddr <- addr },
				})
			}()
			url := "http://" + src.Addr().String() + "/in"
			next := 0
			post := func(n int) {
				var body bytes.Buffer
				for range n {
					fmt.Fprintf(&body, `{"payload":{"k":"k%d","n":%d}}`+"\n", next%5, next)
					next++
				}
				resp, err := http.Post(url, "application/x-ndjson", &body)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			sinkLines := func() []string {
				data, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
				return strings.Split(strings.TrimSpace(string(data)), "\n")
			}
			waitFor := func(n int) {
				require.Eventually(t, func() bool { return len(sinkLines()) >= n && sinkLines()[0] != "" }, time.Minute, 5*time.Millisecond,
					"the sink reaches %d records", n)
			}
			waitReload := func() error {
				select {
				case err := <-reloads:
					return err
				case err := <-done:
					t.Fatalf("the run ended: %v", err)
				case <-time.After(time.Minute):
					t.Fatal("no reload within a minute")
				}
				return nil
			}

			post(40)
			waitFor(40)
			writePluginVersion(t, pluginDir, "v2", nil, eng)
			require.NoError(t, waitReload(), "the good version is swapped in")
			statusURL := "http://" + <-metricsAddr + "/status"
			resp, err := http.Get(statusURL)
			require.NoError(t, err)
			var status runtime.Status
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
			resp.Body.Close()
			require.Len(t, status.Computations, 1)
			require.Equal(t, uint64(1), status.Computations[0].Generation, "/status shows the reload")
			require.Contains(t, status.Computations[0].Version, "tagger 1.0.2 (sha256 ")
			post(40)
			waitFor(80)
			identity := buildGuest(t, "./host/internal/testguests/identity")
			writePluginVersion(t, pluginDir, "v3", identity[:len(identity)/3], eng)
			err = waitReload()
			require.ErrorContains(t, err, "truncated", "a truncated module is refused with the reason")
			require.ErrorContains(t, err, "tagger.wasm", "naming the module")
			post(40)
			waitFor(120)
			writePluginVersion(t, pluginDir, "v4", nil, eng)
			require.NoError(t, waitReload(), "a good version after the refused one")
			post(40)
			waitFor(160)
			cancel()
			require.NoError(t, <-done)

			lines := sinkLines()
			require.Len(t, lines, 160, "every record once")
			seen := map[int]bool{}
			for _, line := range lines {
				var rec connect.SinkRecord
				require.NoError(t, json.Unmarshal([]byte(line), &rec))
				var out struct {
					Tag string
					In  struct{ N int }
				}
				require.NoError(t, json.Unmarshal(rec.Payload, &out), "%s", rec.Payload)
				require.False(t, seen[out.In.N], "record %d twice", out.In.N)
				seen[out.In.N] = true
				want := "v2"
				switch {
				case out.In.N < 40:
					want = "v1"
				case out.In.N >= 120:
					want = "v4"
				}
				require.Equal(t, want, out.Tag, "record %d: posted before the swap: v1; after: v2, also after the refused v3; then v4", out.In.N)
			}
			require.Contains(t, logs.String(), "reloaded-away version retired", "v2's engine is closed once v4 runs")
			_, err = os.Stat(filepath.Join(dir, "dead.jsonl"))
			if err == nil {
				data, _ := os.ReadFile(filepath.Join(dir, "dead.jsonl"))
				require.Empty(t, data, "nothing dead-lettered")
			}
		})
	}
}
