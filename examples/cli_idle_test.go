package examples_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
)

// idleSpec is a file source and an HTTP source feeding one window-count
// computation. Nobody posts to the HTTP source, and its idle timeout is
// half a second.
const idleSpec = `name: idle-http
sources:
  - name: clicks-in
    type: file
    stream: clicks
    file: {path: clicks.jsonl}
    watermark: {out_of_orderness_bound: 30s}
  - name: live-in
    type: http
    stream: live
    http: {listen: "%s", path: /clicks}
    watermark: {idle_partitions: {duration: 500ms}}
computations:
  - name: per-user
    plugin: window-count
    group_by: [user]
    input_streams: [clicks, live]
    output_streams: [counts]
    parameters: {window: 1m}
sinks:
  - {name: console, type: stdout, format: json, streams: [counts]}
`

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a spec that must name its port so that the test can post to it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestCLIIdleHTTPSourceDoesNotHoldBackTimers runs, with the built binary,
// a pipeline whose HTTP source never receives anything beside a file
// source: once the HTTP source has been idle for its idle timeout it is
// left out of the computation's event watermark, so the file's event time
// closes every window while the run goes on (before this, nothing was
// emitted until the run was stopped, and then the timers were left
// pending). A record posted afterwards, far behind, makes the source
// rejoin; it is late, and counted in a window of its own rather than
// dropped. Then SIGINT stops the run.
func TestCLIIdleHTTPSourceDoesNotHoldBackTimers(t *testing.T) {
	t.Parallel()
	const minute = int64(time.Minute)
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	type win struct {
		user  string
		start int64
	}
	want := map[win]int64{}
	var recs []recordLine
	users := []string{"ann", "bob", "cy"}
	for i := range 90 {
		event := start + int64(i)*int64(4*time.Second) // six minutes of clicks, in order
		user := users[i%len(users)]
		recs = append(recs, recordLine{Write: event, Event: event, Payload: map[string]string{"user": user}})
		want[win{user, event / minute * minute}]++
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clicks.jsonl"), jsonLines(t, recs), 0o644))
	addr := freeAddr(t)
	specPath := filepath.Join(dir, "idle.yaml")
	require.NoError(t, os.WriteFile(specPath, fmt.Appendf(nil, idleSpec, addr), 0o644))

	run := startFlowhost(t, "run", "-f", specPath, "--plugins", env.plugins,
		"--metrics-addr", "127.0.0.1:0", "--cache-dir", env.cache, "--data-dir", filepath.Join(dir, "data"))

	counts := func() map[win][]int64 {
		got := map[win][]int64{}
		for _, l := range run.stdout.lines() {
			var rec connect.SinkRecord
			require.NoError(t, json.Unmarshal([]byte(l), &rec), "stdout line %q", l)
			var p struct {
				Key         string `json:"key"` // a one-field key is the field's value
				WindowStart int64  `json:"window_start"`
				Count       int64  `json:"count"`
			}
			require.NoError(t, json.Unmarshal(rec.Payload, &p), "payload %s", rec.Payload)
			w := win{p.Key, p.WindowStart}
			got[w] = append(got[w], p.Count)
		}
		return got
	}
	require.Eventually(t, func() bool { return len(run.stdout.lines()) >= len(want) }, 2*time.Minute, 10*time.Millisecond,
		"every window is emitted while the HTTP source stays silent; stderr:\n%s", run.log())
	got := counts()
	for w, n := range want {
		require.Equal(t, []int64{n}, got[w], "window %v", w)
	}
	require.Len(t, got, len(want))
	metricsURL := "http://" + run.metricsAddr(t) + "/metrics"
	metrics := func() string {
		resp, err := http.Get(metricsURL)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(data)
	}
	require.Contains(t, metrics(), `flowhost_source_idle_partitions{source="live-in"} 1`)
	require.Contains(t, metrics(), `flowhost_stream_idle{stream="live"} 1`)

	// A record far behind the watermark rejoins the HTTP source; it is
	// counted, late, in a window emitted again with just it.
	late := win{"ann", start}
	body := fmt.Sprintf(`{"event_ts": %d, "payload": {"user": "ann"}}`, start+int64(time.Second))
	resp, err := http.Post("http://"+addr+"/clicks", "application/x-ndjson", strings.NewReader(body))
	require.NoError(t, err)
	respBody, _ := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Less(t, resp.StatusCode, 300, "POST answered %s", respBody)
	require.Eventually(t, func() bool { return len(run.stdout.lines()) > len(want) }, time.Minute, 10*time.Millisecond,
		"the late record is counted; stderr:\n%s", run.log())
	require.Equal(t, []int64{want[late], 1}, counts()[late], "the late record's window, again with just it")
	require.Contains(t, metrics(), `flowhost_late_messages_total{computation="per-user",stream="live"} 1`)

	require.NoError(t, run.cmd.Process.Signal(os.Interrupt))
	require.Zero(t, run.waitExit(t), "stderr:\n%s", run.log())
	require.Contains(t, run.log(), "source idle")
}

// TestCLIRangesAreCheckedAtParseTime runs the binary on a spec at the edge
// of a range (idle_partitions.max_ratio: 1, which the spec has always
// documented and which used to fail when the run started, with no file or
// line), and on one past the edges, which is refused before anything
// runs, each error with its file, line and column.
func TestCLIRangesAreCheckedAtParseTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	ok := write("ratio-one.yaml", `name: ratio-one
sources:
  - {name: gen, type: generator, stream: s, partitions: 2, generator: {count: 5}, watermark: {idle_partitions: {max_ratio: 1}}}
sinks:
  - {name: out, type: stdout, streams: [s]}
`)
	stdout, stderr, err := flowhostRun(t, "run", "-f", ok, "--metrics-addr", "", "--data-dir", filepath.Join(dir, "data"))
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Len(t, lines(stdout), 5)

	bad := write("out-of-range.yaml", `name: out-of-range
sources:
  - {name: gen, type: generator, stream: s, partitions: 100000, partition_by: [user]}
computations:
  - {name: c, plugin: p, group_by: [user..id], input_streams: [s]}
tenants:
  - {name: t, plugin_dirs: [d], quotas: {cpu_limit: .inf}}
`)
	_, stderr, err = flowhostRun(t, "run", "-f", bad, "--metrics-addr", "", "--data-dir", filepath.Join(dir, "data2"))
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	for _, want := range []string{
		bad + `:3:57: sources[0].partitions: expected at most 65536; got 100000`,
		bad + `:3:80: sources[0].partition_by[0]: a generator's records have only the fields key, seq and filler; got "user"`,
		bad + `:5:37: computations[0].group_by[0]: field "user..id" has an empty path segment`,
		bad + `:7:53: tenants[0].quotas.cpu_limit: expected 0 (no cap) or a finite number of cores, at least 0.001; got +Inf`,
	} {
		require.Contains(t, stderr, want)
	}
	_, statErr := os.Stat(filepath.Join(dir, "data2"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing ran")
}
