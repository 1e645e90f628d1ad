package examples_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/plugins"
)

// buildFixedLoopPlugin builds, into a directory of its own, version 1.0.1
// of plugin "loop": the fix of the looping guest, which passes every
// message on unchanged on stream "out" (host/internal/testguests/identity).
func buildFixedLoopPlugin(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "loop")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	wasm := filepath.Join(dir, "loop.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", wasm, "./host/internal/testguests/identity")
	cmd.Dir = env.root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the identity guest: %s", out)
	sum, err := plugins.Checksum(wasm)
	require.NoError(t, err)
	manifest := fmt.Sprintf("name: loop\nversion: 1.0.1\nabi: 1\nkinds: [map]\nwasm: loop.wasm\nsha256: %s\n", sum)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(manifest), 0o644))
	return root
}

var replaySourceLine = regexp.MustCompile(`"http source listening" source=in url=(\S+)`)

// TestDeadLettersReplayReachesTheSinkExactlyOnce: a run whose plugin loops
// dead-letters every record; after the fix (a new version of the plugin)
// the next run on the same data directory gets them again from
// flowhost dead-letters replay, through its HTTP source, and the sink
// holds each exactly once, though the replay ran twice.
func TestDeadLettersReplayReachesTheSinkExactlyOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	specPath := filepath.Join(dir, "replay.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(`name: replay
sources:
  - {name: in, type: http, stream: raw, http: {listen: ":0", path: /in}}
computations:
  - name: spin
    plugin: loop
    kind: map
    input_streams: [raw]
    output_streams: [out]
    on_failure: {retries: 0, quarantine_after: 0}
sinks:
  - {name: sink, type: file, streams: [out], file: {path: out.jsonl}}
dead_letter: {type: file, file: {path: dead-letter.jsonl}}
`), 0o644))
	dataDir := filepath.Join(dir, "data")
	summaryPath := filepath.Join(dir, "summary.json")
	run := func(pluginDir string) (*liveRun, string) {
		r := startFlowhost(t, "run", "-f", specPath, "--plugins", pluginDir, "--cache-dir", env.cache, "--data-dir", dataDir,
			"--metrics-addr", "", "--reload=false", "--cpu-per-batch", "200ms", "--summary-json", summaryPath)
		return r, r.waitStderr(t, replaySourceLine)
	}
	stop := func(r *liveRun) {
		t.Helper()
		require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
		require.Zero(t, r.waitExit(t), "stderr:\n%s", r.log())
	}

	// The broken version dead-letters what it gets.
	r, url := run(loopPlugin(t))
	for n := 1; n <= 3; n++ {
		status, answer := postIngest(t, url, "", fmt.Sprintf(`{"payload":{"n":%d}}`, n))
		require.Equal(t, 200, status, "%+v", answer)
	}
	deadFile := filepath.Join(dir, "dead-letter.jsonl")
	r.waitFor(t, "three dead letters", func() bool {
		b, _ := os.ReadFile(deadFile)
		return strings.Count(string(b), "\n") == 3
	})
	stop(r)

	// The fixed version runs on the same data directory; the dead
	// letters are replayed into it, twice.
	r, url = run(buildFixedLoopPlugin(t))
	for try := 1; try <= 2; try++ {
		stdout, stderr, err := flowhostRun(t, "dead-letters", "replay", "-f", specPath, "--to", "in", "--url", url, "--computation", "spin")
		require.NoError(t, err, "stdout %s stderr %s", stdout, stderr)
		require.Contains(t, stderr, "replayed 3 of 3 dead letters", "try %d", try)
	}
	status, _ := postIngest(t, url, "", `{"payload":{"n":4}}`)
	require.Equal(t, 200, status)
	out := filepath.Join(dir, "out.jsonl")
	r.waitFor(t, "four records in the sink", func() bool {
		b, _ := os.ReadFile(out)
		return strings.Count(string(b), "\n") >= 4
	})
	stop(r)
	s := readSummary(t, summaryPath)
	require.Equal(t, int64(4), s.Sources[0].Records, "the second replay's records were acknowledged, not appended again")
	require.Zero(t, s.Computations[0].DeadLetters, "the fixed version refuses nothing")

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var got []string
	for _, line := range lines(string(data)) {
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		got = append(got, string(rec.Payload))
	}
	sort.Strings(got)
	require.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}, got, "each replayed dead letter exactly once")

	// What cannot be replayed is refused with its line.
	require.NoError(t, os.WriteFile(deadFile, []byte(`{"time":"2026-01-01T00:00:00Z","origin":"in.jsonl:3:1","stage":"ingest","error":"not JSON","record":"{oops","record_encoding":"text"}`+"\n"), 0o644))
	_, stderr, err := flowhostRun(t, "dead-letters", "replay", "-f", specPath, "--to", "in", "--url", url)
	require.Error(t, err)
	require.Contains(t, stderr, "dead-letter.jsonl: line 1: origin \"in.jsonl:3:1\" names no computation's message")
}
