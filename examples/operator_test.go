package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/opview"
)

// operatorPipeline writes a pipeline that runs until stopped: a generator
// at 200 records/s read by a tenant's window count (acme) and by the
// operator's loop guest, which never returns, so that its partition is
// quarantined after its first batch. It returns the spec's path.
func operatorPipeline(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	spec := fmt.Sprintf(`name: opview
tenants:
  - {name: acme, weight: 2, plugin_dirs: [%q]}
sources:
  - {name: gen, type: generator, stream: clicks, partitions: 2, generator: {rate: 200, keys: 20, payload_bytes: 20}}
computations:
  - name: per-key
    plugin: window-count
    tenant: acme
    kind: transform
    partitions: 2
    group_by: [key]
    input_streams: [clicks]
    output_streams: [counts]
    parameters: {window: 1s}
  - name: spin
    plugin: loop
    kind: map
    group_by: [key]
    input_streams: [clicks]
    output_streams: [spun]
    on_failure: {retries: 0, quarantine_after: 1}
sinks:
  - {name: counts-out, type: file, streams: [counts], file: {path: counts.jsonl}}
  - {name: spun-out, type: file, streams: [spun], file: {path: spun.jsonl}}
dead_letter: {type: file, file: {path: dead-letter.jsonl}}
`, env.plugins)
	path := filepath.Join(dir, "opview.yaml")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
	return path
}

// artifactDir is where a test keeps what it shows a person (screenshots):
// $FLOWHOST_ARTIFACTS/NAME when set, which outlives the test, or else a
// temporary directory. The test logs it.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv("FLOWHOST_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, t.Name())
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	t.Logf("artefacts in %s", dir)
	return dir
}

// TestOperatorPageInBrowser runs a real pipeline and reads its operator
// page in headless Chromium: the graph shows every node, the watermarks
// and rates change while data flows, the quarantine of the failing loop
// guest appears with its reason and the tenant's CPU share appears. It
// saves screenshots, then checks that flowhost status prints the same
// view from the API.
func TestOperatorPageInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "the browser test needs Debian's chromium (make deps installs it)")
	specPath := operatorPipeline(t)
	r := startFlowhost(t, "run", "-f", specPath, "--plugins", loopPlugin(t), "--cache-dir", env.cache,
		"--data-dir", t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--reload=false", "--cpu-per-batch", "200ms", "--stop-grace", "5s")
	addr := r.metricsAddr(t)
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), exitDeadline)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1600), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	wait := func(what, expr string) {
		t.Helper()
		_, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(exitDeadline)))
		require.NoError(t, err, "the page never showed %s; flowhost's stderr:\n%s", what, r.log())
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(tab, chromedp.Evaluate[string](expr))
		require.NoError(t, err, expr)
		return v
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o644))
	}

	require.NoError(t, chromedp.Do(tab, chromedp.Navigate("http://"+addr+"/")))
	wait("a first snapshot", `Number(document.body.dataset.updates || 0) >= 1`)

	// Every node of the spec is in the graph.
	nodes := eval(`JSON.stringify([...document.querySelectorAll('#graph [data-node-id]')].map(e => e.dataset.nodeId))`)
	var ids []string
	require.NoError(t, json.Unmarshal([]byte(nodes), &ids))
	require.ElementsMatch(t, []string{"source:gen", "computation:per-key", "computation:spin", "sink:counts-out", "sink:spun-out"}, ids)

	// The watermarks and counts move while data flows, without a reload.
	cell := func(stream, class string) string {
		return fmt.Sprintf(`(document.querySelector('#streams tr[data-stream=%q] .%s') || {}).textContent`, stream, class)
	}
	wait("an event watermark on clicks", cell("clicks", "ewm")+` && !`+cell("clicks", "ewm")+`.includes('none')`)
	firstWM, firstIn := eval(cell("clicks", "ewm")), eval(cell("clicks", "in"))
	wait("the event watermark of clicks moving", cell("clicks", "ewm")+` !== `+strconv.Quote(firstWM))
	wait("the count of clicks moving", cell("clicks", "in")+` !== `+strconv.Quote(firstIn))
	wait("a rate in on clicks", `parseFloat(`+cell("clicks", "rate-in")+`) > 0`)
	wait("the event watermark of counts", cell("counts", "ewm")+` && !`+cell("counts", "ewm")+`.includes('none')`)
	firstCounts := eval(cell("counts", "ewm"))
	wait("the event watermark of counts moving", cell("counts", "ewm")+` !== `+strconv.Quote(firstCounts))

	// The loop guest's partition is quarantined, with why.
	wait("the quarantine", `[...document.querySelectorAll('#quarantines td.reason')].some(td => td.textContent.includes('quarantine_after'))`)
	reason := eval(`document.querySelector('#quarantines td.reason').textContent`)
	require.Contains(t, reason, "spin")
	wait("the quarantined node in the graph", `(document.querySelector('[data-node-id="computation:spin"]') || {}).textContent.includes('quarantined')`)

	// The tenant's CPU share, against its weight.
	wait("acme's CPU share", `parseFloat((document.querySelector('#tenants tr[data-tenant="acme"] .cpu-share') || {}).textContent) > 0`)
	wait("a rate chart with a line per stream", `document.querySelectorAll('#legend-rates span').length >= 3`)
	screenshot("operator-page.png")
	require.Contains(t, eval(`document.getElementById('conn').textContent`), "live")

	// flowhost status prints the same view from the API.
	out, err := exec.Command(env.flowhost, "status", "--addr", addr).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, want := range []string{"pipeline opview", "source:gen", "computation:per-key", "computation:spin", "sink:counts-out",
		"sink:spun-out", "QUARANTINED", "quarantine_after", "acme", "clicks", "event time held back by"} {
		require.Contains(t, string(out), want)
	}
	// --watch prints it again, clearing the terminal in between.
	w := startFlowhost(t, "status", "--addr", addr, "--watch", "--interval", "100ms")
	w.waitFor(t, "flowhost status --watch refreshing", func() bool {
		return strings.Count(w.stdout.String(), "\x1b[H\x1b[2Jpipeline opview") >= 2
	})
	require.NoError(t, w.cmd.Process.Kill())
	<-w.exited

	// And its JSON is the API's, versioned.
	c, err := opview.NewClient(addr, "", "")
	require.NoError(t, err)
	snap, err := c.Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snap.Quarantines, 1)
	require.Equal(t, "spin", snap.Quarantines[0].Computation)
	require.Positive(t, snap.DeadLetters.ByNode["spin"], "the quarantined partition dead-letters what it gets")

	require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, host.ExitQuarantined, r.waitExit(t), "a quarantined partition ends the run with status 3")
}

// TestOperatorAPIRefusals checks, through the binary, that a metrics
// address that is not loopback is refused without TLS and a token, and
// that state lookup is off unless enabled and then reads committed state.
func TestOperatorAPIRefusals(t *testing.T) {
	t.Parallel()
	specPath := operatorPipeline(t)
	stdout, stderr, err := flowhostRun(t, "run", "-f", specPath, "--plugins", loopPlugin(t), "--cache-dir", env.cache,
		"--data-dir", t.TempDir(), "--metrics-addr", "0.0.0.0:0")
	require.Error(t, err, "stdout:\n%s", stdout)
	require.Contains(t, stderr, "--metrics-addr 0.0.0.0:0 is not a loopback address")
	require.Contains(t, stderr, "--insecure")

	// State lookup: off, then on against the window counts' store.
	r := startFlowhost(t, "run", "-f", specPath, "--plugins", loopPlugin(t), "--cache-dir", env.cache,
		"--data-dir", t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--reload=false", "--cpu-per-batch", "200ms")
	c, err := opview.NewClient(r.metricsAddr(t), "", "")
	require.NoError(t, err)
	_, err = c.State(context.Background(), "per-key", `["k1"]`)
	require.ErrorContains(t, err, "403")
	require.ErrorContains(t, err, "--enable-state-lookup")
	_, stderr, err = flowhostRun(t, "trace", "--addr", c.Base, "per-key", "0")
	require.Error(t, err)
	require.Contains(t, stderr, "--live-trace")
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	r.waitExit(t)

	r = startFlowhost(t, "run", "-f", specPath, "--plugins", loopPlugin(t), "--cache-dir", env.cache,
		"--data-dir", t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--reload=false", "--cpu-per-batch", "200ms", "--enable-state-lookup", "--live-trace", "10")
	c, err = opview.NewClient(r.metricsAddr(t), "", "")
	require.NoError(t, err)
	// Keys are found in both partitions: the lookup routes a key as the
	// runtime does.
	var found opview.StateValue
	foundIn := map[int]bool{}
	r.waitFor(t, "a window count's state committed for keys of both partitions", func() bool {
		for k := range 20 {
			v, err := c.State(context.Background(), "per-key", fmt.Sprintf(`["k%d"]`, k))
			require.NoError(t, err)
			if v.Found {
				found, foundIn[v.Partition] = v, true
			}
		}
		return len(foundIn) == 2
	})
	require.NotEmpty(t, found.Value)
	_, err = c.State(context.Background(), "nope", "k")
	require.ErrorContains(t, err, `no computation "nope"`)
	// The same through flowhost state get.
	stdout, stderr, err = flowhostRun(t, "state", "get", "--addr", c.Base, "per-key", found.Key)
	require.NoError(t, err, stderr)
	var got opview.StateValue
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	require.True(t, got.Found)
	require.Equal(t, found.Partition, got.Partition)
	// The live trace: the partition's last deliveries, as --trace lines.
	stdout, stderr, err = flowhostRun(t, "trace", "--addr", c.Base, "per-key", "0")
	require.NoError(t, err, stderr)
	traced := lines(stdout)
	require.NotEmpty(t, strings.TrimSpace(stdout))
	require.LessOrEqual(t, len(traced), 10)
	var prevEpoch uint64
	for _, l := range traced {
		var rec struct {
			Computation string
			Partition   int
			Epoch       uint64
			Kind        string
			MessageID   string `json:"message_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		require.Equal(t, "per-key", rec.Computation)
		require.Zero(t, rec.Partition)
		require.GreaterOrEqual(t, rec.Epoch, prevEpoch, "oldest first")
		require.NotEmpty(t, rec.MessageID)
		prevEpoch = rec.Epoch
	}
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	r.waitExit(t)
	require.False(t, strings.Contains(r.log(), "panic"), r.log())

	// flowhost dead-letters list reads the run's dead-letter file, by
	// computation and cause.
	stdout, stderr, err = flowhostRun(t, "dead-letters", "list", "-f", specPath, "--computation", "spin")
	require.NoError(t, err, stderr)
	require.NotEmpty(t, strings.TrimSpace(stdout), "the quarantined partition's inputs are dead letters")
	listed := lines(stdout)
	for _, l := range listed {
		require.Contains(t, l, "  spin  ")
	}
	require.Contains(t, stderr, fmt.Sprintf("%d dead letters", len(listed)))
	stdout, stderr, err = flowhostRun(t, "dead-letters", "list", "-f", specPath, "--computation", "per-key")
	require.NoError(t, err, stderr)
	require.Empty(t, strings.TrimSpace(stdout), "the tenant's computation refused nothing")
	stdout, stderr, err = flowhostRun(t, "dead-letters", "list", "-f", specPath, "--cause", "deadline exceeded", "--json")
	require.NoError(t, err, stderr)
	require.NotEmpty(t, strings.TrimSpace(stdout), "the batch cut by the CPU limit")
	first := lines(stdout)
	var dl opview.DeadLetter
	require.NoError(t, json.Unmarshal([]byte(first[0]), &dl))
	require.Equal(t, "spin", dl.Computation)
	require.Contains(t, dl.Error, "deadline exceeded")
	_, stderr, err = flowhostRun(t, "dead-letters", "list", "-f", specPath, "--since", "yesterday")
	require.Error(t, err)
	require.Contains(t, stderr, "--since")
}
