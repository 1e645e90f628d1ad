package examples_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
)

// copyPipelines copies examples/pipelines (specs and data) into a fresh
// directory, so that what a run writes beside a spec (the dead-letter
// file) stays out of the repository.
func copyPipelines(t *testing.T) string {
	t.Helper()
	src := filepath.Join(env.root, "examples", "pipelines")
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// flowhostRun runs the built CLI and returns its stdout, stderr and error.
func flowhostRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(env.flowhost, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// traceFields are the field names of a --trace line, in order: part of
// flowhost's interface.
var traceFields = []string{
	"computation", "partition", "epoch", "key", "kind", "stream", "message_id", "parents",
	"event_ts", "system_ts", "alignment_ts", "write_ts", "bias", "delay", "priority_ts", "task_id", "trigger_ts",
}

// TestCLIRunsTheExamplePipelines runs each committed pipeline with the
// built flowhost binary, as examples/README.md tells people to, and checks
// its exit status, what it printed (text lines) and its trace.
func TestCLIRunsTheExamplePipelines(t *testing.T) {
	t.Parallel()
	dir := copyPipelines(t)
	countLines := func(name string) int {
		data, err := os.ReadFile(filepath.Join(dir, "data", name))
		require.NoError(t, err)
		return len(lines(string(data)))
	}
	for _, tc := range []struct {
		spec  string
		check func(t *testing.T, out []connect.SinkRecord)
	}{
		{"join.yaml", func(t *testing.T, out []connect.SinkRecord) {
			paid := map[string]bool{}
			data, err := os.ReadFile(filepath.Join(dir, "data", "payments.jsonl"))
			require.NoError(t, err)
			for _, l := range lines(string(data)) {
				var rec struct {
					Payload struct {
						OrderID string `json:"order_id"`
					} `json:"payload"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &rec))
				paid[rec.Payload.OrderID] = true
			}
			joined, unmatched := 0, 0
			for _, rec := range out {
				p := payloadMap(t, rec)
				switch rec.Stream {
				case "joined":
					require.True(t, paid[p["order_id"].(string)])
					joined++
				case "unmatched":
					require.False(t, paid[p["order_id"].(string)])
					unmatched++
				}
			}
			require.Equal(t, len(paid), joined)
			require.Equal(t, countLines("orders.jsonl")-len(paid), unmatched)
		}},
		{"enrich.yaml", func(t *testing.T, out []connect.SinkRecord) {
			require.Len(t, out, countLines("orders.jsonl"))
			for _, rec := range out {
				require.Contains(t, payloadMap(t, rec), "amount_cents")
			}
		}},
		{"window-count.yaml", func(t *testing.T, out []connect.SinkRecord) {
			total := int64(0)
			for _, rec := range out {
				n, err := payloadMap(t, rec)["count"].(json.Number).Int64()
				require.NoError(t, err)
				total += n
			}
			require.Equal(t, int64(countLines("clicks.jsonl")), total, "every click is counted once")
		}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "trace.jsonl")
			stdout, stderr, err := flowhostRun(t, "run", "-f", filepath.Join(dir, tc.spec),
				"--plugins", env.plugins, "--trace", trace, "--metrics-addr", "", "--cache-dir", env.cache,
				"--data-dir", t.TempDir())
			require.NoError(t, err, "stderr:\n%s", stderr)
			require.Contains(t, stderr, "pipeline stopped")
			out := readTextLines(t, []byte(stdout))
			require.NotEmpty(t, out)
			tc.check(t, out)
			checkTraceFields(t, trace)
		})
	}
}

// checkTraceFields requires every line of a trace file to hold exactly the
// documented fields, in the documented order.
func checkTraceFields(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		tok, err := dec.Token()
		require.NoError(t, err)
		require.Equal(t, json.Delim('{'), tok)
		var names []string
		for dec.More() {
			name, err := dec.Token()
			require.NoError(t, err)
			names = append(names, name.(string))
			var skip json.RawMessage
			require.NoError(t, dec.Decode(&skip))
		}
		require.Equal(t, traceFields, names, "%s:%d", path, n)
	}
	require.NoError(t, sc.Err())
	require.Positive(t, n, "empty trace")
}

// TestCLIPluginValidate checks that `flowhost plugin validate` accepts the
// built plugins and rejects one whose module no longer matches its
// checksum, naming the file.
func TestCLIPluginValidate(t *testing.T) {
	t.Parallel()
	names := []string{"enrich", "order-join", "window-count"}
	args := []string{"plugin", "validate"}
	for _, n := range names {
		args = append(args, filepath.Join(env.plugins, n))
	}
	stdout, stderr, err := flowhostRun(t, args...)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	for _, n := range names {
		require.Contains(t, stdout, "ok  "+filepath.Join(env.plugins, n)+" ("+n+" 1.0.0")
	}

	// A copy of order-join whose module lost its last byte's value.
	bad := filepath.Join(t.TempDir(), "order-join")
	require.NoError(t, os.CopyFS(bad, os.DirFS(filepath.Join(env.plugins, "order-join"))))
	wasm := filepath.Join(bad, "order-join.wasm")
	data, err := os.ReadFile(wasm)
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff
	require.NoError(t, os.WriteFile(wasm, data, 0o644))

	stdout, _, err = flowhostRun(t, "plugin", "validate", filepath.Join(env.plugins, "enrich"), bad)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.NotZero(t, exit.ExitCode())
	require.Contains(t, stdout, "ok  "+filepath.Join(env.plugins, "enrich"))
	badLine := ""
	for _, l := range lines(stdout) {
		if strings.HasPrefix(l, "bad ") {
			badLine = l
		}
	}
	require.Contains(t, badLine, wasm, "the error names the module file")
	require.Contains(t, badLine, "sha256 mismatch")
}
