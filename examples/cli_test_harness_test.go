package examples_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/flowtest"
	"github.com/flowhost/flowhost/host/spec"
)

// TestCLITestHarness runs `flowhost test` through the binary on the
// window-count example: --update writes the expectation, a run against it
// passes, and a changed line fails with exit status 1 and a diff naming
// the line, in both compare modes.
func TestCLITestHarness(t *testing.T) {
	t.Parallel()
	dir := copyPipelines(t)
	spec := filepath.Join(dir, "window-count.yaml")
	want := filepath.Join(dir, "counts.jsonl")
	args := func(extra ...string) []string {
		return append([]string{"test", "-f", spec, "--plugins", env.plugins, "--cache-dir", env.cache,
			"--input", "clicks-in=" + filepath.Join(dir, "data", "clicks.jsonl"), "--expect", "counts=" + want}, extra...)
	}

	stdout, stderr, err := flowhostRun(t, args("--update")...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Contains(t, stdout, "updated "+want+": ")
	written, err := os.ReadFile(want)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(written), "\n"), "\n")
	require.Greater(t, len(lines), 2)
	require.Contains(t, lines[1], `"count":`)

	for _, mode := range []string{"exact", "per-key"} {
		stdout, stderr, err = flowhostRun(t, args("--compare", mode)...)
		require.NoError(t, err, "%s: stdout:\n%s\nstderr:\n%s", mode, stdout, stderr)
		require.Contains(t, stdout, "ok   stream counts: ")
	}

	wrong := strings.Replace(lines[1], `"count":`, `"count":1000`, 1)
	changed := strings.Replace(string(written), lines[1], wrong, 1)
	require.NoError(t, os.WriteFile(want, []byte(changed), 0o644))
	for _, mode := range []string{"exact", "per-key"} {
		stdout, stderr, err = flowhostRun(t, args("--compare", mode)...)
		requireExitFailure(t, err, stderr)
		require.Contains(t, stdout, "FAIL stream counts: 1 differences from "+want+" ("+mode)
		require.Contains(t, stdout, "(line 2):\n    - expected "+wrong+"\n    + got      "+lines[1]+"\n", mode)
		require.Contains(t, stderr, "outputs differ from the expectation")
	}

	// An --expect of a stream the pipeline does not write names those it does.
	_, stderr, err = flowhostRun(t, "test", "-f", spec, "--plugins", env.plugins, "--expect", "nope="+want)
	requireExitFailure(t, err, stderr)
	require.Contains(t, stderr, "--expect nope: the pipeline writes no such stream; its output streams are counts")
}

// TestDriverRunsAWASMPlugin drives the window-count plugin (WebAssembly)
// through host/flowtest: no window is emitted while the watermark is
// short of its end, its timer is pending and its key has state; raising
// the watermark past the end emits it with the count of its clicks.
func TestDriverRunsAWASMPlugin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := spec.ParseFile(filepath.Join(copyPipelines(t), "window-count.yaml"))
	require.NoError(t, err)
	d, err := flowtest.New(ctx, p, flowtest.WithPlugins(env.plugins), flowtest.WithCacheDir(env.cache))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()

	minute := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	for _, s := range []int{1, 7, 20} {
		require.NoError(t, d.Push("clicks-in", flowtest.Record{Event: minute + int64(s)*int64(time.Second), Payload: []byte(`{"user":"ann"}`)}))
	}
	require.NoError(t, d.Settle(ctx))
	require.Empty(t, d.Outputs("counts"))
	timers, err := d.Timers("per-user")
	require.NoError(t, err)
	require.NotEmpty(t, timers)
	key, err := d.KeyOf("per-user", []byte(`{"user":"ann"}`))
	require.NoError(t, err)
	_, found, err := d.State("per-user", key)
	require.NoError(t, err)
	require.True(t, found, "no state for key %s", key)

	require.NoError(t, d.AdvanceWatermark(ctx, "clicks-in", minute+int64(2*time.Minute)))
	got := d.Payloads("counts")
	require.Len(t, got, 1)
	var w struct {
		Key         string
		WindowStart int64 `json:"window_start"`
		Count       int
	}
	require.NoError(t, json.Unmarshal([]byte(got[0]), &w))
	require.Equal(t, "ann", w.Key)
	require.Equal(t, minute, w.WindowStart)
	require.Equal(t, 3, w.Count)
	require.Empty(t, d.DeadLetters())
}
