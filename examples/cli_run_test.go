package examples_test

// Tests of how `flowhost run` ends (issue 11, items 2 and 4): the summary
// it prints, its exit status, the default CPU limit of the operator's
// plugins, and SIGTERM and SIGINT against a guest in an infinite loop.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/plugins"
)

// loopPlugin builds, once per test binary, a plugin directory "loop"
// whose guest (host/engine/testdata/guests/loop) never returns from
// flowhost_process: only an interruption stops it. Its manifest asks for
// no batch_timeout, so only the operator's default CPU limit bounds it.
var loopPlugin = func() func(t *testing.T) string {
	var once sync.Once
	var dir string
	var err error
	return func(t *testing.T) string {
		t.Helper()
		once.Do(func() { dir, err = buildLoopPlugin() })
		require.NoError(t, err)
		return dir
	}
}()

func buildLoopPlugin() (string, error) {
	root := filepath.Join(env.work, "loop-plugins")
	dir := filepath.Join(root, "loop")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	wasm := filepath.Join(dir, "loop.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", wasm, "./host/engine/testdata/guests/loop")
	cmd.Dir = env.root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the loop guest: %w\n%s", err, out)
	}
	sum, err := plugins.Checksum(wasm)
	if err != nil {
		return "", err
	}
	manifest := fmt.Sprintf("name: loop\nversion: 1.0.0\nabi: 1\nkinds: [map]\nwasm: loop.wasm\nsha256: %s\n", sum)
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(manifest), 0o644); err != nil {
		return "", err
	}
	return root, nil
}

// loopPipeline writes, into a fresh directory, a pipeline whose file
// source holds records records, read by the loop plugin with the failure
// policy onFailure, and returns the spec's path. Dead letters go to
// dead-letter.jsonl beside it.
func loopPipeline(t *testing.T, records int, onFailure string) string {
	t.Helper()
	dir := t.TempDir()
	var data strings.Builder
	for i := range records {
		fmt.Fprintf(&data, `{"write_ts":"2024-05-01T10:00:%02dZ","payload":{"id":"r-%d"}}`+"\n", i, i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(data.String()), 0o644))
	spec := fmt.Sprintf(`name: loop
sources:
  - {name: in, type: file, stream: raw, file: {path: in.jsonl}}
computations:
  - name: spin
    plugin: loop
    kind: map
    group_by: [id]
    input_streams: [raw]
    output_streams: [spun]
    on_failure: %s
sinks:
  - {name: out, type: stdout, streams: [spun]}
dead_letter: {type: file, file: {path: dead-letter.jsonl}}
`, onFailure)
	path := filepath.Join(dir, "loop.yaml")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
	return path
}

// deadLetters reads the dead-letter file beside specPath (none: empty).
func deadLetters(t *testing.T, specPath string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(specPath), "dead-letter.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []map[string]any
	for _, l := range lines(string(data)) {
		if l == "" {
			continue
		}
		var rej map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rej), l)
		out = append(out, rej)
	}
	return out
}

// readSummary reads a --summary-json file.
func readSummary(t *testing.T, path string) host.RunSummary {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var s host.RunSummary
	require.NoError(t, json.Unmarshal(data, &s), "%s", data)
	return s
}

// exitCode is the exit status of a finished command, -1 when a signal
// killed it.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}

// waitGuestRunning waits until the run's operator computation holds a
// worker (flowhost_tenant_running_batches{tenant="operator"} is 1): its
// guest is in its loop.
func (r *liveRun) waitGuestRunning(t *testing.T) {
	t.Helper()
	addr := r.waitStderr(t, regexp.MustCompile(`msg="serving metrics" addr=(http://\S+)`))
	running := regexp.MustCompile(`(?m)^flowhost_tenant_running_batches\{tenant="operator"\} 1$`)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && running.Match(body)
	}, exitDeadline, 20*time.Millisecond, "the guest never started its batch; stderr:\n%s", &r.stderr)
}

// loopRunArgs are the arguments of a run of specPath on dataDir with the
// loop plugin.
func loopRunArgs(t *testing.T, specPath, dataDir string, more ...string) []string {
	return append([]string{"run", "-f", specPath, "--plugins", loopPlugin(t), "--cache-dir", env.cache,
		"--data-dir", dataDir, "--reload=false"}, more...)
}

// TestCLIRunSummary checks the summary every run prints: records in per
// source (and the one line it could not read), out per sink, per
// computation, and the data directory, on stderr and as JSON.
func TestCLIRunSummary(t *testing.T) {
	t.Parallel()
	dir := copyPipelines(t)
	ordersPath := filepath.Join(dir, "data", "orders.jsonl")
	data, err := os.ReadFile(ordersPath)
	require.NoError(t, err)
	orders := len(lines(string(data)))
	require.NoError(t, os.WriteFile(ordersPath, append(data, "not a record\n"...), 0o644))
	dataDir := t.TempDir()
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	stdout, stderr, err := flowhostRun(t, "run", "-f", filepath.Join(dir, "enrich.yaml"), "--plugins", env.plugins,
		"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", dataDir, "--summary-json", summaryPath)
	require.NoError(t, err, "stderr:\n%s", stderr)
	delivered := len(readTextLines(t, []byte(stdout)))
	require.Equal(t, orders, delivered)

	require.Contains(t, stderr, fmt.Sprintf("source orders-in (stream orders): %d records in, 1 dead letter (most common cause, 1 of them: ", orders))
	require.Contains(t, stderr, fmt.Sprintf("computation enrich: %d messages in, %d out, no dead letters, 0 timers pending", orders, delivered))
	require.Contains(t, stderr, fmt.Sprintf("sink console: %d records out", delivered))
	require.Contains(t, stderr, "data directory: "+dataDir)
	require.Contains(t, stderr, "result: ok")

	s := readSummary(t, summaryPath)
	require.Equal(t, "enrich", s.Pipeline)
	require.Equal(t, dataDir, s.DataDir)
	require.Equal(t, host.ExitOK, s.ExitCode)
	require.Len(t, s.Sources, 1)
	require.Equal(t, int64(orders), s.Sources[0].Records)
	require.Equal(t, int64(1), s.Sources[0].DeadLetters)
	require.NotNil(t, s.Sources[0].TopCause)
	require.Equal(t, int64(1), s.Sources[0].TopCause.Count)
	require.Len(t, s.Computations, 1)
	require.Equal(t, int64(orders), s.Computations[0].MessagesIn)
	require.Equal(t, int64(delivered), s.Computations[0].MessagesOut)
	require.Zero(t, s.Computations[0].DeadLetters)
	require.Len(t, s.Sinks, 1)
	require.Equal(t, int64(delivered), s.Sinks[0].Records)
}

// TestCLIRunDefaultCPULimitCutsALoopingGuest checks that an operator's
// plugin whose manifest sets no batch_timeout is still bounded: its
// looping batch is cut by the CPU limit per batch (--cpu-per-batch, small
// here so that the test is fast) and dead-lettered, and the run ends,
// exit status 0, with the dead letters and their cause in the summary.
func TestCLIRunDefaultCPULimitCutsALoopingGuest(t *testing.T) {
	t.Parallel()
	const records = 3
	specPath := loopPipeline(t, records, "{retries: 0, quarantine_after: 0}")
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	r := startFlowhost(t, loopRunArgs(t, specPath, t.TempDir(), "--metrics-addr", "", "--cpu-per-batch", "200ms",
		"--summary-json", summaryPath)...)
	require.Equal(t, host.ExitOK, r.waitExit(t), "stderr:\n%s", r.stderr.String())
	stderr := r.stderr.String()
	require.Contains(t, stderr, "batch_timeout=200ms")

	rejected := deadLetters(t, specPath)
	require.Len(t, rejected, records, "every record is dead-lettered once")
	for _, rej := range rejected {
		require.Equal(t, "guest", rej["stage"])
		require.Contains(t, rej["error"], "deadline exceeded (the CPU limit per batch is 200ms)")
	}
	s := readSummary(t, summaryPath)
	c := s.Computations[0]
	require.Equal(t, int64(records), c.DeadLetters)
	require.NotNil(t, c.TopCause)
	require.Contains(t, c.TopCause.Error, "deadline exceeded")
	require.Positive(t, c.TopCause.Count)
	require.Empty(t, c.Quarantined)
	require.Contains(t, stderr, fmt.Sprintf("computation spin: %d messages in, 0 out, %d dead letters (most common cause", records, records))
}

// TestCLIRunEndsNonZeroWhenQuarantined checks that a run that ends with a
// quarantined partition exits with status 3 and names the partition and
// why in its summary.
func TestCLIRunEndsNonZeroWhenQuarantined(t *testing.T) {
	t.Parallel()
	specPath := loopPipeline(t, 2, "{retries: 0, quarantine_after: 1}")
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	r := startFlowhost(t, loopRunArgs(t, specPath, t.TempDir(), "--metrics-addr", "", "--cpu-per-batch", "100ms",
		"--summary-json", summaryPath)...)
	require.Equal(t, host.ExitQuarantined, r.waitExit(t), "stderr:\n%s", r.stderr.String())
	stderr := r.stderr.String()
	require.Contains(t, stderr, "partition 0 quarantined: ")
	require.Contains(t, stderr, "flowhost: "+host.ErrQuarantined.Error())

	s := readSummary(t, summaryPath)
	require.Equal(t, host.ExitQuarantined, s.ExitCode)
	require.Len(t, s.Computations[0].Quarantined, 1)
	require.Contains(t, s.Computations[0].Quarantined[0].Reason, "quarantine_after")
	require.Equal(t, int64(2), s.Computations[0].DeadLetters, "nothing is lost: the quarantined partition dead-letters what it gets")
	require.Len(t, deadLetters(t, specPath), 2)
}

// TestCLIRunEndsNonZeroWhenASourceFails checks that a run whose source
// fails exits non-zero after its summary.
func TestCLIRunEndsNonZeroWhenASourceFails(t *testing.T) {
	t.Parallel()
	specPath := loopPipeline(t, 1, "{retries: 0}")
	// A directory where the file source expects its file: reading it fails.
	in := filepath.Join(filepath.Dir(specPath), "in.jsonl")
	require.NoError(t, os.Remove(in))
	require.NoError(t, os.Mkdir(in, 0o755))
	_, stderr, err := flowhostRun(t, loopRunArgs(t, specPath, t.TempDir(), "--metrics-addr", "")...)
	require.Equal(t, host.ExitFailed, exitCode(t, err), "stderr:\n%s", stderr)
	require.Contains(t, stderr, "in.jsonl")
	require.Contains(t, stderr, "exit status 1")
}

// TestCLIRunSIGTERMStopsALoopingGuest checks that SIGTERM stops a run
// whose guest is in an infinite loop under a generous CPU limit: after the
// stop's grace period the guest is interrupted and flowhost exits with
// status 4, the interrupted batch not committed. A second run on the same
// data directory then starts cleanly and processes that batch, once.
func TestCLIRunSIGTERMStopsALoopingGuest(t *testing.T) {
	t.Parallel()
	const records = 2
	specPath := loopPipeline(t, records, "{retries: 0, quarantine_after: 0}")
	dataDir := t.TempDir()
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	r := startFlowhost(t, loopRunArgs(t, specPath, dataDir, "--metrics-addr", "127.0.0.1:0", "--cpu-per-batch", "1h",
		"--stop-grace", "500ms", "--summary-json", summaryPath)...)
	r.waitGuestRunning(t)
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, host.ExitInterrupted, r.waitExit(t), "stderr:\n%s", r.stderr.String())
	stderr := r.stderr.String()
	require.Contains(t, stderr, "the grace period ran out")
	require.Contains(t, stderr, "result: interrupted")
	s := readSummary(t, summaryPath)
	require.True(t, s.Interrupted)
	require.Equal(t, host.ExitInterrupted, s.ExitCode)
	require.Empty(t, deadLetters(t, specPath), "the interrupted batch is neither committed nor dead-lettered")

	// The restart resumes the uncommitted batch; a small limit cuts it.
	_, stderr, err := flowhostRun(t, loopRunArgs(t, specPath, dataDir, "--metrics-addr", "", "--cpu-per-batch", "200ms")...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Len(t, deadLetters(t, specPath), records, "each record is dead-lettered exactly once")
	require.Contains(t, stderr, "result: ok")
}

// TestCLIRunSecondSignalExitsAtOnce checks that a second signal ends a
// draining run at once, while its grace period would still have long to
// run, with status 128+signal; the data directory then opens again.
func TestCLIRunSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			t.Parallel()
			specPath := loopPipeline(t, 1, "{retries: 0, quarantine_after: 0}")
			dataDir := t.TempDir()
			r := startFlowhost(t, loopRunArgs(t, specPath, dataDir, "--metrics-addr", "127.0.0.1:0", "--cpu-per-batch", "1h",
				"--stop-grace", "1h")...)
			r.waitGuestRunning(t)
			require.NoError(t, r.cmd.Process.Signal(tc.sig))
			r.waitStderr(t, regexp.MustCompile(`stopping: delivering what was accepted`))
			require.NoError(t, r.cmd.Process.Signal(tc.sig))
			require.Equal(t, tc.code, r.waitExit(t), "stderr:\n%s", r.stderr.String())
			require.Contains(t, r.stderr.String(), "again: exiting at once")

			_, stderr, err := flowhostRun(t, loopRunArgs(t, specPath, dataDir, "--metrics-addr", "", "--cpu-per-batch", "200ms")...)
			require.NoError(t, err, "stderr:\n%s", stderr)
			require.Len(t, deadLetters(t, specPath), 1)
		})
	}
}

// TestCLIRunLimitFlags checks the new duration flags: their errors, and
// --cpu-per-batch 0, which turns the operator's CPU limit off.
func TestCLIRunLimitFlags(t *testing.T) {
	t.Parallel()
	specPath := loopPipeline(t, 1, "{retries: 0}")
	for _, tc := range []struct{ flag, value, want string }{
		{"--cpu-per-batch", "-1s", "--cpu-per-batch takes a duration such as 5s, or 0 for no limit; got -1s"},
		{"--stop-grace", "0s", "--stop-grace takes a duration above 0, such as 10s; got 0s"},
	} {
		_, stderr, err := flowhostRun(t, loopRunArgs(t, specPath, t.TempDir(), "--metrics-addr", "", tc.flag, tc.value)...)
		require.Equal(t, host.ExitFailed, exitCode(t, err))
		require.Contains(t, stderr, "flowhost: "+tc.want)
	}

	dir := copyPipelines(t)
	_, stderr, err := flowhostRun(t, "run", "-f", filepath.Join(dir, "enrich.yaml"), "--plugins", env.plugins,
		"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", t.TempDir(), "--cpu-per-batch", "0")
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Contains(t, stderr, "the operator's plugins have no CPU limit per batch")
	require.Contains(t, stderr, "batch_timeout=0s")
}
