package host_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
)

// TestTenantsHaveTheirOwnPlugins gives two tenants a plugin of the same
// name, each in its own plugin directory: one well-behaved, one that
// traps, with the engine chosen by each tenant for plugins whose manifest
// names none (a third tenant names none: the host's DefaultEngine), and a
// broken plugin beside it. Each
// computation runs its own tenant's plugin: the first one's sink gets
// every record, the second one's records are all dead-lettered naming
// its tenant's plugin; the broken plugin is reported, not fatal.
func TestTenantsHaveTheirOwnPlugins(t *testing.T) {
	dir := t.TempDir()
	writePluginOn(t, filepath.Join(dir, "acme"), "p", "./host/internal/testguests/passthrough", "")
	writePluginOn(t, filepath.Join(dir, "globex"), "p", "./host/engine/testdata/guests/trap", "")
	// A broken plugin beside it refuses only itself.
	broken := filepath.Join(dir, "globex", "broken")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "plugin.yaml"), []byte("name: broken\n"), 0o644))
	var input strings.Builder
	for i := range 50 {
		input.WriteString(`{"write_ts":1,"payload":{"k":"k` + string(rune('0'+i%5)) + `"}}` + "\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input.String()), 0o644))
	specPath := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(`
name: two-tenants
tenants:
  - {name: acme, plugin_dirs: [acme], engine: wazero}
  - {name: globex, plugin_dirs: [globex], engine: wasmtime}
  - {name: initech, plugin_dirs: [acme]}
sources:
  - {name: in, type: file, stream: in, file: {path: in.jsonl}}
computations:
  - {name: a, plugin: p, tenant: acme, group_by: [k], input_streams: [in], output_streams: [a-out]}
  - {name: g, plugin: p, tenant: globex, group_by: [k], input_streams: [in], output_streams: [g-out], on_failure: {retries: 0}}
  - {name: i, plugin: p, tenant: initech, group_by: [k], input_streams: [in], output_streams: [i-out]}
sinks:
  - {name: a-sink, type: file, streams: [a-out], file: {path: a.jsonl}}
  - {name: g-sink, type: file, streams: [g-out], file: {path: g.jsonl}}
  - {name: i-sink, type: file, streams: [i-out], file: {path: i.jsonl}}
dead_letter: {type: file, file: {path: dead.jsonl}}
`), 0o644))
	var logs lockedBuffer
	require.NoError(t, host.Run(context.Background(), host.RunConfig{
		SpecPath: specPath,
		CacheDir: filepath.Join(os.TempDir(), "flowhost-test-cache"),
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		InMemory: true,
		Progress: io.Discard,
	}))
	a, err := os.ReadFile(filepath.Join(dir, "a.jsonl"))
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(a)), "\n"), 50, "acme's plugin passes every record")
	i, err := os.ReadFile(filepath.Join(dir, "i.jsonl"))
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(i)), "\n"), 50, "initech's plugin (acme's, on the default engine) passes every record")
	g, err := os.ReadFile(filepath.Join(dir, "g.jsonl"))
	require.NoError(t, err)
	require.Empty(t, g, "globex's plugin traps")
	dead := deadRecords(t, dir)
	require.Len(t, dead, 50)
	for _, d := range dead {
		require.Contains(t, d.Error, `computation "g" (plugin "p")`)
		require.Contains(t, d.Error, "guest trapped")
	}
	require.Contains(t, logs.String(), "tenant's plugin directories have problems", "the broken plugin is reported")
	require.Contains(t, logs.String(), filepath.Join(broken, "plugin.yaml"))
	var engines []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "plugin compiled") {
			engines = append(engines, line[strings.Index(line, "tenant="):])
		}
	}
	require.ElementsMatch(t, []string{
		"tenant=acme engine=wazero memory_pages=1024 batch_timeout=5s max_response_bytes=67108864",
		"tenant=globex engine=wasmtime memory_pages=1024 batch_timeout=5s max_response_bytes=67108864",
		// Neither the manifest nor the tenant names one: the host's default.
		"tenant=initech engine=" + string(host.DefaultEngine) + " memory_pages=1024 batch_timeout=5s max_response_bytes=67108864",
	}, engines, "each tenant's engine and quotas")
}
