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
	"github.com/flowhost/flowhost/host/opview"
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
// holds each exactly once, though the replay ran twice. The replayed
// record's message has the refused message's id as its parent, so the
// lineage of what the fixed version made of it reaches back to the
// original.
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
  - {name: lineage, type: file, streams: [raw], file: {path: raw.jsonl}}
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
	// The id of the message each payload was refused as, from the
	// dead letters' origins.
	original := map[string]string{}
	deadData, err := os.ReadFile(deadFile)
	require.NoError(t, err)
	for _, line := range lines(string(deadData)) {
		var d opview.DeadLetter
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		require.NotEmpty(t, opview.ReplayParent(d), line)
		original[string(d.Record)] = opview.ReplayParent(d)
	}
	require.Len(t, original, 3)

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

	// The source stream as the lineage sink holds it: the first run's
	// records, without parents, and the replayed ones, each once, with
	// the refused message as their parent.
	rawParents := map[string][]string{} // message id -> parents
	replayed := map[string][]string{}   // payload -> parents of its replayed message
	rawData, err := os.ReadFile(filepath.Join(dir, "raw.jsonl"))
	require.NoError(t, err)
	for _, line := range lines(string(rawData)) {
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		rawParents[rec.MessageID] = rec.Parents
		if len(rec.Parents) > 0 {
			_, twice := replayed[string(rec.Payload)]
			require.False(t, twice, "%s replayed twice", rec.Payload)
			replayed[string(rec.Payload)] = rec.Parents
		}
	}
	want := map[string][]string{}
	for payload, id := range original {
		want[payload] = []string{id}
	}
	require.Equal(t, want, replayed, "each replayed record's parent is the message that was refused")

	var got []string
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	for _, line := range lines(string(data)) {
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		got = append(got, string(rec.Payload))
		// The output's lineage: its parent, the replayed record, has the
		// original as its parent; the record posted afresh has none.
		require.Len(t, rec.Parents, 1, line)
		grand, ok := rawParents[rec.Parents[0]]
		require.True(t, ok, "parent %s of %s is not in the source stream", rec.Parents[0], line)
		if id, wasRefused := original[string(rec.Payload)]; wasRefused {
			require.Equal(t, []string{id}, grand, line)
		} else {
			require.Empty(t, grand, line)
		}
	}
	sort.Strings(got)
	require.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}, got, "each replayed dead letter exactly once")

	// What cannot be replayed is refused with its line.
	require.NoError(t, os.WriteFile(deadFile, []byte(`{"time":"2026-01-01T00:00:00Z","origin":"in.jsonl:3:1","stage":"ingest","error":"not JSON","record":"{oops","record_encoding":"text"}`+"\n"), 0o644))
	_, stderr, err := flowhostRun(t, "dead-letters", "replay", "-f", specPath, "--to", "in", "--url", url)
	require.Error(t, err)
	require.Contains(t, stderr, "dead-letter.jsonl: line 1: origin \"in.jsonl:3:1\" names no computation's message")
}
