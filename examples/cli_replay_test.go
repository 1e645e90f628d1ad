package examples_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
)

// runArgs are the arguments of `flowhost run` on spec with data directory
// data, and extra after them.
func runArgs(spec, data string, extra ...string) []string {
	return append([]string{"run", "-f", spec, "--plugins", env.plugins, "--metrics-addr", "", "--cache-dir", env.cache,
		"--data-dir", data}, extra...)
}

// payloadsAndIDs returns "MESSAGE_ID PAYLOAD" per record, the part of a
// sink record that does not depend on the wall clock.
func payloadsAndIDs(recs []connect.SinkRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.MessageID + " " + string(r.Payload)
	}
	return out
}

// TestCLIReplayOfHistoricalRecordsAndResetState runs the window-count
// example (clicks written in 2024) and replays it at once: the records are
// still there, because retention counts from when they were ingested, not
// from their 2024 WriteTimestamps. A plain replay counts the clicks again
// on top of the first run's state; --reset-state gives exactly the first
// run's windows, counts and message ids.
func TestCLIReplayOfHistoricalRecordsAndResetState(t *testing.T) {
	t.Parallel()
	dir := copyPipelines(t)
	spec := filepath.Join(dir, "window-count.yaml")
	data := t.TempDir()
	first, stderr, err := flowhostRun(t, runArgs(spec, data)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	want := payloadsAndIDs(readTextLines(t, []byte(first)))
	require.NotEmpty(t, want)

	plain, stderr, err := flowhostRun(t, runArgs(spec, data, "--from", "clicks-in=0")...)
	require.NoError(t, err, "a replay right after the run finds its records; stderr:\n%s", stderr)
	require.NotEmpty(t, readTextLines(t, []byte(plain)), "the replay processes the clicks again")

	reset, stderr, err := flowhostRun(t, runArgs(spec, data, "--from", "clicks-in=0", "--reset-state")...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Contains(t, stderr, "computations=per-user")
	require.ElementsMatch(t, want, payloadsAndIDs(readTextLines(t, []byte(reset))), "the reset replay gives the first run's outputs")

	_, stderr, err = flowhostRun(t, runArgs(spec, data, "--reset-state")...)
	require.Error(t, err)
	require.Contains(t, stderr, "--reset-state resets the computations a replay reprocesses: give the sources to replay with --from")
}

// roundRobinSpec reads in.jsonl into a source of 3 partitions without
// partition_by, and writes the source stream itself to out.jsonl.
const roundRobinSpec = `
name: round-robin
sources:
  - name: in
    type: file
    stream: events
    partitions: 3
    file: {path: in.jsonl}
sinks:
  - {name: out, type: file, format: json, file: {path: out.jsonl}, streams: [events]}
`

// roundRobinInput is records from to to (exclusive), each {"n": i}.
func roundRobinInput(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, `{"write_ts":%d,"payload":{"n":%d}}`+"\n", int64(1714557600e9)+int64(i)*1e9, i)
	}
	return b.String()
}

// setupRoundRobin writes roundRobinSpec and its input into a new
// directory and returns the spec and a data directory beside it.
func setupRoundRobin(t *testing.T, content string) (spec, data string) {
	t.Helper()
	dir := t.TempDir()
	spec = filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(roundRobinSpec), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(content), 0o644))
	return spec, filepath.Join(dir, "data")
}

// idsByN returns the message id of each record n in the sink beside spec,
// requiring each once.
func idsByN(t *testing.T, spec string) map[int]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(spec), "out.jsonl"))
	require.NoError(t, err)
	out := map[int]string{}
	for _, l := range lines(string(raw)) {
		var rec struct {
			MessageID string `json:"message_id"`
			Payload   struct{ N int }
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		_, dup := out[rec.Payload.N]
		require.False(t, dup, "record %d written twice", rec.Payload.N)
		out[rec.Payload.N] = rec.MessageID
	}
	return out
}

// TestCLIRoundRobinIdsSurviveARestart reads a file into a round-robin
// source of 3 partitions, appends to the file and runs again: every
// record has the partition and message id it has when the whole file is
// read in one run.
func TestCLIRoundRobinIdsSurviveARestart(t *testing.T) {
	t.Parallel()
	whole, wholeData := setupRoundRobin(t, roundRobinInput(0, 20))
	_, stderr, err := flowhostRun(t, runArgs(whole, wholeData)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	want := idsByN(t, whole)
	require.Len(t, want, 20)

	split, splitData := setupRoundRobin(t, roundRobinInput(0, 7)) // 7: not a multiple of 3
	_, stderr, err = flowhostRun(t, runArgs(split, splitData)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	f, err := os.OpenFile(filepath.Join(filepath.Dir(split), "in.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(roundRobinInput(7, 20))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, stderr, err = flowhostRun(t, runArgs(split, splitData)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Equal(t, want, idsByN(t, split))
}

// TestCLIRoundRobinIdsSurviveAKill kills a round-robin file run with
// SIGKILL three times, each once its sink has grown past where the last
// kill left it, and then lets it finish: every record is in the sink once,
// with the partition and message id of an uninterrupted run. (A count
// restarting at 0 passes a kill only when the kill lands on a committed
// count that is a multiple of 3.)
func TestCLIRoundRobinIdsSurviveAKill(t *testing.T) {
	t.Parallel()
	const n = 60000
	input := roundRobinInput(0, n)
	whole, wholeData := setupRoundRobin(t, input)
	_, stderr, err := flowhostRun(t, runArgs(whole, wholeData)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	want := idsByN(t, whole)
	require.Len(t, want, n)

	spec, data := setupRoundRobin(t, input)
	sink := filepath.Join(filepath.Dir(spec), "out.jsonl")
	killedAt := int64(0)
	for kill := 1; kill <= 3; kill++ {
		run := startFlowhost(t, runArgs(spec, data)...)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			fi, err := os.Stat(sink)
			if err == nil && fi.Size() > killedAt {
				break
			}
			select {
			case <-run.exited:
				t.Fatalf("kill %d: the run ended (%v) before its sink grew past %d bytes:\n%s", kill, run.err, killedAt, run.log())
			default:
			}
			require.True(t, time.Now().Before(deadline), "kill %d: the sink did not grow within 2m:\n%s", kill, run.log())
			time.Sleep(2 * time.Millisecond) // polling interval, not synchronisation
		}
		require.NoError(t, run.cmd.Process.Kill())
		var exit *exec.ExitError
		<-run.exited
		require.ErrorAs(t, run.err, &exit, "kill %d landed before the run finished:\n%s", kill, run.log())
		fi, err := os.Stat(sink)
		require.NoError(t, err)
		killedAt = fi.Size()
		require.Less(t, sinkLines(t, sink), n, "kill %d: killed before the end", kill)
	}

	_, stderr, err = flowhostRun(t, runArgs(spec, data)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Equal(t, want, idsByN(t, spec))
}

// sinkLines counts the complete lines of a sink file (a kill may have
// cut its last one).
func sinkLines(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.Count(raw, []byte("\n"))
}

// savepointSpec counts a rate-limited generator's records per key in one
// window that holds them all (1000000h from the epoch), so the counts
// live in the state until the end of the data and do not depend on the
// clock: a lost or doubled state shows as a wrong count.
const savepointSpec = `
name: savepoint
sources:
  - name: gen
    type: generator
    stream: events
    partitions: 2
    generator: {count: %d, rate: %d, keys: 5, seed: 11}
computations:
  - name: per-key
    plugin: window-count
    kind: transform
    partitions: 2
    group_by: [key]
    input_streams: [events]
    output_streams: [counts]
    parameters: {window: 1000000h}
sinks:
  - {name: out, type: file, format: json, file: {path: out.jsonl}, streams: [counts]}
`

const savepointRecords = 3000

// writeSavepointSpec writes savepointSpec at rate into a new directory and
// returns the spec's path.
func writeSavepointSpec(t *testing.T, rate int) string {
	t.Helper()
	spec := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(spec, fmt.Appendf(nil, savepointSpec, savepointRecords, rate), 0o644))
	return spec
}

// countsOf reads the per-key counts from the sink file beside spec.
func countsOf(t *testing.T, spec string) map[string]int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(spec), "out.jsonl"))
	require.NoError(t, err)
	out := map[string]int64{}
	for _, l := range lines(string(raw)) {
		var rec struct{ Payload map[string]any }
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&rec), "sink line %q", l)
		key := rec.Payload["key"].(string)
		n, err := rec.Payload["count"].(json.Number).Int64()
		require.NoError(t, err)
		require.NotContains(t, out, key, "key %s counted in two windows", key)
		out[key] = n
	}
	return out
}

// referenceCounts runs the savepoint pipeline without a rate in one go.
func referenceCounts(t *testing.T) map[string]int64 {
	t.Helper()
	spec := writeSavepointSpec(t, 0)
	_, stderr, err := flowhostRun(t, runArgs(spec, filepath.Join(filepath.Dir(spec), "data"))...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	counts := countsOf(t, spec)
	total := int64(0)
	for _, n := range counts {
		total += n
	}
	require.Equal(t, int64(savepointRecords), total)
	return counts
}

// waitSourceRecords polls the run's /metrics until its sources have
// appended at least n records.
func waitSourceRecords(t *testing.T, addr string, n float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		total := 0.0
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "flowhost_source_records_total{") {
				v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				require.NoError(t, err)
				total += v
			}
		}
		if total >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "sources appended %v records, not %v, within a minute", total, n)
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// resumedAppended returns the records the restored run found appended in
// the savepoint, from its "resumed from its last commit" log lines.
func resumedAppended(stderr string) int {
	total := 0
	for _, m := range regexp.MustCompile(`source partition resumed from its last commit" .*appended=(\d+)`).FindAllStringSubmatch(stderr, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

// TestCLISavepointOfARunningPipeline takes a savepoint of a running
// pipeline through its metrics server, lets the run finish, and starts
// another data directory from the savepoint: the file sink is cut back to
// what the savepoint had committed, and the restored run ends with the
// counts of an uninterrupted run, which needs the state the savepoint
// held.
func TestCLISavepointOfARunningPipeline(t *testing.T) {
	t.Parallel()
	want := referenceCounts(t)
	spec := writeSavepointSpec(t, 1000)
	data := filepath.Join(filepath.Dir(spec), "data")
	run := startFlowhost(t, "run", "-f", spec, "--plugins", env.plugins, "--metrics-addr", "127.0.0.1:0", "--cache-dir", env.cache, "--data-dir", data)
	addr := run.metricsAddr(t)
	waitSourceRecords(t, addr, 1000)
	sp := filepath.Join(t.TempDir(), "sp")
	stdout, stderr, err := flowhostRun(t, "savepoint", "create", sp, "--addr", addr)
	require.NoError(t, err, "stderr:\n%s", stderr)
	var info struct {
		Dir     string `json:"dir"`
		DataDir string `json:"data_dir"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &info))
	require.Equal(t, sp, info.Dir)
	require.Equal(t, data, info.DataDir)
	require.Zero(t, run.waitExit(t), "the run goes on and ends; stderr:\n%s", run.log())
	require.Equal(t, want, countsOf(t, spec))

	_, stderr, err = flowhostRun(t, "savepoint", "create", sp, "--addr", "127.0.0.1:1")
	require.Error(t, err)
	require.Contains(t, stderr, "no running pipeline answers at --addr 127.0.0.1:1")

	restored := filepath.Join(t.TempDir(), "restored")
	_, stderr, err = flowhostRun(t, "run", "-f", spec, "--plugins", env.plugins, "--metrics-addr", "", "--cache-dir", env.cache,
		"--data-dir", restored, "--from-savepoint", sp)
	require.NoError(t, err, "stderr:\n%s", stderr)
	appended := resumedAppended(stderr)
	require.GreaterOrEqual(t, appended, 1000, "the savepoint was taken after 1000 records; stderr:\n%s", stderr)
	require.Less(t, appended, savepointRecords, "and before the end")
	require.Equal(t, want, countsOf(t, spec), "the restored run counts on from the savepoint's state")
}

// TestCLISavepointOfAStoppedPipeline interrupts a run (its windows still
// open in the state), takes a savepoint of its data directory and starts
// a new data directory from it: it ends with the counts of an
// uninterrupted run. The savepoint and the restore refuse what they would
// overwrite, with the directory named.
func TestCLISavepointOfAStoppedPipeline(t *testing.T) {
	t.Parallel()
	want := referenceCounts(t)
	spec := writeSavepointSpec(t, 1000)
	data := filepath.Join(filepath.Dir(spec), "data")
	run := startFlowhost(t, "run", "-f", spec, "--plugins", env.plugins, "--metrics-addr", "127.0.0.1:0", "--cache-dir", env.cache, "--data-dir", data)
	waitSourceRecords(t, run.metricsAddr(t), 500)
	require.NoError(t, run.cmd.Process.Signal(os.Interrupt))
	run.waitExit(t)
	require.Contains(t, run.log(), "pipeline stopped")

	sp := filepath.Join(t.TempDir(), "sp")
	_, stderr, err := flowhostRun(t, "savepoint", "create", sp, "-f", spec, "--data-dir", data)
	require.NoError(t, err, "stderr:\n%s", stderr)
	_, stderr, err = flowhostRun(t, "savepoint", "create", sp, "--data-dir", data)
	require.Error(t, err)
	require.Contains(t, stderr, "savepoint directory "+sp+" is not empty")
	missing := filepath.Join(t.TempDir(), "missing")
	_, stderr, err = flowhostRun(t, "savepoint", "create", filepath.Join(t.TempDir(), "sp2"), "--data-dir", missing)
	require.Error(t, err)
	require.Contains(t, stderr, missing+" holds no flowhost store")
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "a savepoint of a missing directory creates nothing")

	_, stderr, err = flowhostRun(t, runArgs(spec, data, "--from-savepoint", sp)...)
	require.Error(t, err)
	require.Contains(t, stderr, "--from-savepoint: restoring savepoint "+sp+": data directory "+data+" is not empty")
	require.Contains(t, stderr, "--replace-data-dir")

	restored := filepath.Join(t.TempDir(), "restored")
	_, stderr, err = flowhostRun(t, runArgs(spec, restored, "--from-savepoint", sp)...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Positive(t, resumedAppended(stderr))
	require.Equal(t, want, countsOf(t, spec))

	// The savepoint restores again, over the original data directory.
	_, stderr, err = flowhostRun(t, runArgs(spec, data, "--from-savepoint", sp, "--replace-data-dir")...)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Equal(t, want, countsOf(t, spec))
}
