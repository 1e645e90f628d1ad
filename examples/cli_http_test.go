package examples_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
)

// httpIngestSpec is a pipeline of one HTTP source, written with listen ":0"
// (no host: 127.0.0.1, a free port) and a bearer token from the
// environment, into a file sink.
const httpIngestSpec = `name: http-ingest
sources:
  - name: orders
    type: http
    stream: orders
    http:
      listen: ":0"
      path: /ingest
      auth: {bearer_token_env: FLOWHOST_INGEST_TOKEN}
sinks:
  - {name: out, type: file, streams: [orders], file: {path: out.jsonl}}
`

// httpRun is a `flowhost run` serving an HTTP source.
type httpRun struct {
	*liveRun
	url string // the source's URL, from the log
}

var httpListeningLine = regexp.MustCompile(`"http source listening" source=orders url=(\S+)`)

// startHTTPRun starts flowhost run on spec with the extra environment and
// waits until the log says where the HTTP source listens.
func startHTTPRun(t *testing.T, spec, dataDir string, environ ...string) *httpRun {
	t.Helper()
	r := &httpRun{liveRun: startFlowhostEnv(t, environ, "run", "-f", spec, "--plugins", env.plugins,
		"--data-dir", dataDir, "--metrics-addr", "", "--cache-dir", env.cache)}
	r.url = r.waitStderr(t, httpListeningLine)
	return r
}

// stop sends SIGTERM and requires a clean exit.
func (r *httpRun) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	require.Zero(t, r.waitExit(t), "stderr:\n%s", r.log())
}

type ingestAnswer struct {
	Accepted int    `json:"accepted"`
	Invalid  int    `json:"invalid"`
	Error    string `json:"error"`
	Refused  []struct {
		Line   int    `json:"line"`
		Column int    `json:"column"`
		Field  string `json:"field"`
		Error  string `json:"error"`
	} `json:"refused"`
}

func postIngest(t *testing.T, url, token, body string) (int, ingestAnswer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var a ingestAnswer
	require.NoError(t, json.Unmarshal(data, &a), "%s", data)
	return res.StatusCode, a
}

// TestCLIHTTPIngestRetriesNeverDuplicate posts to the HTTP source of a
// running flowhost as a client that resends on every answer but 200 would:
// a request with bad lines is refused whole, with the line, column and
// field of each, so resending it adds nothing; the corrected request is
// taken once, and resending it with ids after a lost answer adds nothing
// either. The sink holds each record exactly once.
func TestCLIHTTPIngestRetriesNeverDuplicate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "http-ingest.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(httpIngestSpec), 0o644))
	const token = "t0ken-for-the-test"
	run := startHTTPRun(t, spec, filepath.Join(dir, "data"), "FLOWHOST_INGEST_TOKEN="+token)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/ingest$`, run.url, "a listen without a host is 127.0.0.1")

	status, answer := postIngest(t, run.url, "", `{"payload":{"n":0}}`)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "missing bearer token: send the header Authorization: Bearer TOKEN", answer.Error)
	status, _ = postIngest(t, run.url, "not-"+token, `{"payload":{"n":0}}`)
	require.Equal(t, http.StatusUnauthorized, status)

	mixed := strings.Join([]string{
		`{"id":"a","payload":{"n":1}}`,
		`{"id":"b","payload":{"n":2},"evnt_ts":5}`,
		`{"id":"c","payload":{"n":3}}`,
		`{"id":"d","payload":{"n":4},"write_ts":"yesterday"}`,
	}, "\n")
	for try := 1; try <= 3; try++ {
		status, answer = postIngest(t, run.url, token, mixed)
		require.Equal(t, http.StatusBadRequest, status, "try %d", try)
		require.Zero(t, answer.Accepted)
		require.Equal(t, 2, answer.Invalid)
		require.Len(t, answer.Refused, 2)
		require.Equal(t, []any{2, 29, "evnt_ts"}, []any{answer.Refused[0].Line, answer.Refused[0].Column, answer.Refused[0].Field})
		require.Equal(t, []any{4, 40, "write_ts"}, []any{answer.Refused[1].Line, answer.Refused[1].Column, answer.Refused[1].Field})
	}

	fixed := strings.Join([]string{
		`{"id":"a","payload":{"n":1}}`,
		`{"id":"b","payload":{"n":2},"event_ts":5}`,
		`{"id":"c","payload":{"n":3}}`,
		`{"id":"d","payload":{"n":4},"write_ts":"2026-01-01T00:00:00Z"}`,
	}, "\n")
	status, answer = postIngest(t, run.url, token, fixed)
	require.Equal(t, http.StatusOK, status, "%+v", answer)
	require.Equal(t, 4, answer.Accepted)
	// The answer was lost, say: the client sends the request again.
	status, answer = postIngest(t, run.url, token, fixed)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 4, answer.Accepted)
	status, _ = postIngest(t, run.url, token, `{"payload":{"n":5}}`)
	require.Equal(t, http.StatusOK, status)
	run.stop(t)

	data, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	require.NoError(t, err)
	var got []string
	for _, line := range lines(string(data)) {
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		got = append(got, string(rec.Payload))
	}
	require.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`}, got, "every record exactly once")
}

// TestCLIHTTPListenRules: flowhost run refuses an HTTP source on an
// address that is not loopback, naming the source and the spec line,
// unless the run has --insecure-listen; and a busy port names the source.
func TestCLIHTTPListenRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSpec := func(name, listen string) string {
		path := filepath.Join(dir, name)
		spec := strings.Replace(httpIngestSpec, `listen: ":0"`, fmt.Sprintf("listen: %q", listen), 1)
		spec = strings.Replace(spec, "      auth: {bearer_token_env: FLOWHOST_INGEST_TOKEN}\n", "", 1)
		require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
		return path
	}
	runArgs := func(spec string, extra ...string) []string {
		return append([]string{"run", "-f", spec, "--plugins", env.plugins, "--data-dir", filepath.Join(dir, "data-"+filepath.Base(spec)),
			"--metrics-addr", "", "--cache-dir", env.cache}, extra...)
	}

	// TEST-NET-1 (RFC 5737) is on no interface here: refused, the run
	// never listens; allowed, binding it fails. Either way nothing of the
	// test ever listens beyond loopback.
	public := writeSpec("public.yaml", "192.0.2.1:0")
	_, stderr, err := flowhostRun(t, runArgs(public)...)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v\n%s", err, stderr)
	require.Contains(t, stderr, public+`:7:15: sources[0].http.listen: source "orders": listen 192.0.2.1:0 is not a loopback address`)
	require.Contains(t, stderr, "--insecure-listen")

	_, stderr, err = flowhostRun(t, runArgs(public, "--insecure-listen")...)
	require.True(t, errors.As(err, &exit), "%v\n%s", err, stderr)
	require.Contains(t, stderr, public+`:7:15: sources[0].http.listen: source "orders": listen 192.0.2.1:0: cannot assign requested address`)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := writeSpec("busy.yaml", ln.Addr().String())
	_, stderr, err = flowhostRun(t, runArgs(busy)...)
	require.True(t, errors.As(err, &exit), "%v\n%s", err, stderr)
	require.Contains(t, stderr, busy+`:7:15: sources[0].http.listen: source "orders": listen `+ln.Addr().String()+`: address already in use`)
}
