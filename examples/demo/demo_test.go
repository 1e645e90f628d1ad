package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemoRuns runs the demo, as `make demo` does but on a smaller data
// set, in a process of its own (outside the race detector, which would
// make compiling the plugin many times slower), and checks that it
// succeeds and prints each of its parts. The demo itself fails when a run
// does not join every paid order exactly once.
func TestDemoRuns(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	work := filepath.Join(dir, "work")
	out, err = exec.Command(bin, "-orders", "300", "-work", work, "-rows", "5").CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	for _, want := range []string{
		"work directory: " + work,
		"built   order-join",
		"Generated 300 orders",
		"(a) time_type event (bias on), stream_delays payments: 10s, batch.max_rows 1",
		"(b) time_type alignment (bias off), batch.max_rows 1",
		"Both runs joined each of the 297 paid orders with its payment exactly once",
		"ORDER    CUSTOMER  ORDERED AT",
		"messages delivered to the join                    597                  597",
		"What the figure means",
	} {
		require.Contains(t, text, want)
	}
	require.Len(t, regexp.MustCompile(`(?m)^   o-\d{5} `).FindAllString(text, -1), 5, "five joined records shown")
	for _, f := range []string{"event/trace.jsonl", "alignment/trace.jsonl", "event/join.yaml", "data/orders.jsonl"} {
		_, err := os.Stat(filepath.Join(work, f))
		require.NoError(t, err, "the demo leaves %s for inspection", f)
	}
}
