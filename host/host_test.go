package host_test

import (
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
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
)

// writePlugin lays out a plugin directory for a guest of this repository.
func writePlugin(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	return writePluginOn(t, dir, name, pkg, "")
}

// writePluginOn is writePlugin for a manifest that names its engine ("":
// the default).
func writePluginOn(t *testing.T, dir, name, pkg, engine string) string {
	t.Helper()
	wasm := buildGuest(t, pkg)
	pdir := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(pdir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pdir, name+".wasm"), wasm, 0o644))
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: 1\nwasm: %s.wasm\nsha256: %s\nkinds: [transform, map]\n", name, name, hex.EncodeToString(sum[:]))
	if engine != "" {
		manifest += "engine: " + engine + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "plugin.yaml"), []byte(manifest), 0o644))
	return pdir
}

// signalSink closes first when it is first written to.
type signalSink struct {
	once  sync.Once
	first chan struct{}
	countSink
}

func (s *signalSink) Write(ctx context.Context, recs []connect.SinkRecord) error {
	_ = s.countSink.Write(ctx, recs)
	s.once.Do(func() { close(s.first) })
	return nil
}

// TestRunServesMetricsAndStopsCleanly runs a WASM pipeline through
// host.Run: it serves /metrics while running and returns nil when
// interrupted.
func TestRunServesMetricsAndStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	writePlugin(t, filepath.Join(dir, "plugins"), "identity", "./host/internal/testguests/identity")
	specPath := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(`
name: live
sources:
  - {name: gen, type: generator, stream: in, partitions: 2, generator: {count: 0, rate: 2000, keys: 10}}
computations:
  - {name: identity, plugin: identity, group_by: [key], input_streams: [in], output_streams: [out]}
sinks:
  - {name: out, type: stdout, streams: [out]}
`), 0o644))
	sink := &signalSink{first: make(chan struct{})}
	addr := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- host.Run(ctx, host.RunConfig{
			SpecPath:        specPath,
			PluginDirs:      []string{filepath.Join(dir, "plugins")},
			MetricsAddr:     "127.0.0.1:0",
			CacheDir:        filepath.Join(os.TempDir(), "flowhost-test-cache"),
			Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnMetricsListen: func(a string) { addr <- a },
			DataDir:         t.TempDir(),
			Options:         []runtime.Option{runtime.WithSink("out", sink), runtime.WithDeadLetter(io.Discard)},
		})
	}()
	metricsAddr := <-addr
	select {
	case <-sink.first:
	case err := <-done:
		t.Fatalf("run ended before any output: %v", err)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, name := range []string{
		`flowhost_messages_in_total{computation="identity",stream="in"}`,
		`flowhost_messages_out_total{computation="identity",stream="out"}`,
		`flowhost_batch_rows_bucket{computation="identity"`,
		`flowhost_batch_duration_seconds_bucket{computation="identity"`,
		`flowhost_stream_bias_seconds{stream="in"}`,
		`flowhost_stream_event_watermark_seconds{stream="in"}`,
		`flowhost_stream_system_watermark_seconds{stream="out"}`,
		`flowhost_stream_buffered_messages{stream="in"}`,
		`flowhost_stream_buffered_bytes{stream="in"}`,
		`flowhost_source_records_total{source="gen",stream="in"}`,
		`flowhost_store_commit_seconds_bucket{stage="ingest"`,
		`flowhost_store_commit_seconds_bucket{stage="route"`,
		`flowhost_store_commit_seconds_bucket{stage="epoch"`,
		`flowhost_computation_quarantined{computation="identity"} 0`,
		`go_goroutines`,
	} {
		require.Contains(t, string(body), name)
	}
	cancel()
	require.NoError(t, <-done)
	require.Positive(t, sink.n)
	require.False(t, strings.Contains(string(body), `flowhost_guest_errors_total{`), "no guest errors")
}

// TestGarbageResponseIsDeadLetteredWithThePluginNamed runs a guest that
// answers with bytes that are not a response: nothing is lost, every input
// lands in the dead-letter file with an error naming the plugin.
func TestGarbageResponseIsDeadLetteredWithThePluginNamed(t *testing.T) {
	dir := t.TempDir()
	writePlugin(t, filepath.Join(dir, "plugins"), "garbage", "./host/internal/testguests/garbage")
	input := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(input, []byte(`{"write_ts":1,"payload":{"k":"a"}}
{"write_ts":2,"payload":{"k":"b"}}
{"write_ts":3,"payload":{"k":"a"}}
`), 0o644))
	specPath := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(`
name: garbage
sources:
  - {name: in, type: file, stream: in, file: {path: in.jsonl}}
computations:
  - {name: g, plugin: garbage, group_by: [k], input_streams: [in], output_streams: [out]}
sinks:
  - {name: out, type: file, streams: [out], file: {path: out.jsonl}}
dead_letter: {type: file, file: {path: dead.jsonl}}
`), 0o644))
	err := host.Run(context.Background(), host.RunConfig{
		SpecPath:   specPath,
		PluginDirs: []string{filepath.Join(dir, "plugins")},
		CacheDir:   filepath.Join(os.TempDir(), "flowhost-test-cache"),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		DataDir:    t.TempDir(),
	})
	require.NoError(t, err)
	out, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	require.NoError(t, err)
	require.Empty(t, out)
	dead, err := os.ReadFile(filepath.Join(dir, "dead.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(dead)), "\n")
	require.Len(t, lines, 3, "every input is dead-lettered")
	for _, l := range lines {
		require.Contains(t, l, `plugin \"garbage\"`)
		require.Contains(t, l, `undecodable response`)
		require.Contains(t, l, `"stage":"guest"`)
	}
}

// TestPipelineRunsAlikeOnBothEngines runs one pipeline through host.Run
// with its plugin on wazero and on wasmtime: the sinks hold the same
// payloads in the same order per key, and the traces the same deliveries
// (message ids and timestamps) in the same order per partition and key.
// Batching, biases and system times depend on timing, not on the engine,
// so they are left out.
func TestPipelineRunsAlikeOnBothEngines(t *testing.T) {
	var input strings.Builder
	for i := range 300 {
		fmt.Fprintf(&input, `{"write_ts":%d,"payload":{"k":"k%d","seq":%d}}`+"\n", i+1, i%7, i)
	}
	outputs, traces := map[string][]string{}, map[string]map[string][]string{}
	for _, eng := range []string{"wazero", "wasmtime"} {
		dir := t.TempDir()
		writePluginOn(t, filepath.Join(dir, "plugins"), "identity", "./host/internal/testguests/identity", eng)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input.String()), 0o644))
		specPath := filepath.Join(dir, "pipeline.yaml")
		require.NoError(t, os.WriteFile(specPath, []byte(`
name: engines
sources:
  - {name: in, type: file, stream: in, file: {path: in.jsonl}}
computations:
  - {name: identity, plugin: identity, partitions: 2, group_by: [k], input_streams: [in], output_streams: [out]}
sinks:
  - {name: out, type: file, streams: [out], file: {path: out.jsonl}}
`), 0o644))
		require.NoError(t, host.Run(context.Background(), host.RunConfig{
			SpecPath:   specPath,
			PluginDirs: []string{filepath.Join(dir, "plugins")},
			CacheDir:   filepath.Join(os.TempDir(), "flowhost-test-cache"),
			Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
			DataDir:    filepath.Join(dir, "data"),
			Progress:   io.Discard,
			TracePath:  filepath.Join(dir, "trace.jsonl"),
		}), eng)
		trace, err := os.ReadFile(filepath.Join(dir, "trace.jsonl"))
		require.NoError(t, err)
		traces[eng] = map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(trace)), "\n") {
			var tr runtime.TraceRecord
			require.NoError(t, json.Unmarshal([]byte(line), &tr))
			lane := fmt.Sprintf("%s/%d/%s", tr.Computation, tr.Partition, tr.Key)
			traces[eng][lane] = append(traces[eng][lane], fmt.Sprintf("%s %s event=%d alignment=%d write=%d",
				tr.Kind, tr.MessageID, tr.EventTS, tr.AlignmentTS, tr.WriteTS))
		}
		data, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		require.NoError(t, err)
		perKey := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var rec connect.SinkRecord
			require.NoError(t, json.Unmarshal([]byte(line), &rec))
			var p struct{ K string }
			require.NoError(t, json.Unmarshal(rec.Payload, &p))
			perKey[p.K] = append(perKey[p.K], string(rec.Payload))
		}
		var all []string
		for k := range 7 {
			all = append(all, perKey[fmt.Sprintf("k%d", k)]...)
		}
		require.Len(t, all, 300, eng)
		outputs[eng] = all
	}
	require.Equal(t, outputs["wazero"], outputs["wasmtime"])
	require.Len(t, traces["wazero"], 7, "a lane per key")
	require.Equal(t, traces["wazero"], traces["wasmtime"], "the same trace")
}
