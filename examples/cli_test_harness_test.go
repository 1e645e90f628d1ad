package examples_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
