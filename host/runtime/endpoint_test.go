package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/internal/testtls"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// endpointSpec is a pipeline whose HTTP source has the http block given
// (flow style), written in dir so that relative paths resolve there.
func endpointSpec(t *testing.T, dir, httpBlock string) *spec.Pipeline {
	t.Helper()
	path := filepath.Join(dir, "pipeline.yaml")
	src := "name: endpoints\nsources:\n  - name: in\n    type: http\n    stream: events\n    http: " + httpBlock + "\nsinks:\n  - {name: sink, type: stdout, streams: [events]}\n"
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	p, err := spec.ParseFile(path)
	require.NoError(t, err)
	return p
}

func newEndpointRuntime(t *testing.T, p *spec.Pipeline, opts ...runtime.Option) (*runtime.Runtime, error) {
	t.Helper()
	opts = append([]runtime.Option{runtime.WithSink("sink", &failingSink{}), runtime.WithDeadLetter(&bytes.Buffer{})}, opts...)
	return runtime.New(p, nil, opts...)
}

// TEST-NET-1 (RFC 5737) is on no interface of the machine: binding it
// fails after every check of the spec has passed, and nothing ever listens
// beyond loopback.
const unassignedAddr = "192.0.2.1:0"

// An endpoint that is not loopback needs tls or WithInsecureListen; the
// refusal names the source and the spec line.
func TestNonLoopbackEndpointNeedsTLSOrInsecureListen(t *testing.T) {
	dir := t.TempDir()
	cert := testtls.New(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), cert.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), cert.KeyPEM, 0o600))
	specFile := filepath.Join(dir, "pipeline.yaml")
	for _, tc := range []struct {
		name     string
		http     string
		insecure bool
		want     string
	}{
		{"all interfaces", `{listen: "0.0.0.0:8080", path: /in}`, false,
			specFile + `:6:20: sources[0].http.listen: source "in": listen 0.0.0.0:8080 is not a loopback address, and plain HTTP there would let the network read the records: give the endpoint tls (cert_file, key_file), listen on 127.0.0.1, or run with --insecure-listen to allow it`},
		{"a host name", `{listen: "ingest.example.com:8080"}`, false,
			specFile + `:6:20: sources[0].http.listen: source "in": listen ingest.example.com:8080 is not a loopback address, and plain HTTP there would let the network read the records: give the endpoint tls (cert_file, key_file), listen on 127.0.0.1, or run with --insecure-listen to allow it`},
		{"allowed insecure", `{listen: "` + unassignedAddr + `"}`, true,
			specFile + `:6:20: sources[0].http.listen: source "in": listen ` + unassignedAddr + `: cannot assign requested address`},
		{"with tls", `{listen: "` + unassignedAddr + `", tls: {cert_file: cert.pem, key_file: key.pem}}`, false,
			specFile + `:6:20: sources[0].http.listen: source "in": listen ` + unassignedAddr + `: cannot assign requested address`},
		{"tls with a missing key", `{listen: "` + unassignedAddr + `", tls: {cert_file: cert.pem, key_file: nokey.pem}}`, false,
			specFile + `:6:40: sources[0].http.tls: source "in": loading the TLS certificate: open ` + filepath.Join(dir, "nokey.pem") + `: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []runtime.Option
			if tc.insecure {
				opts = append(opts, runtime.WithInsecureListen())
			}
			_, err := newEndpointRuntime(t, endpointSpec(t, dir, tc.http), opts...)
			require.EqualError(t, err, tc.want)
		})
	}
}

// A busy port names the source and the spec line.
func TestBusyHTTPSourcePortNamesTheSource(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	_, err = newEndpointRuntime(t, endpointSpec(t, dir, fmt.Sprintf(`{listen: %q}`, ln.Addr().String())))
	require.EqualError(t, err, filepath.Join(dir, "pipeline.yaml")+`:6:20: sources[0].http.listen: source "in": listen `+ln.Addr().String()+`: address already in use`)
}

// logCapture is a logger whose lines a test can search.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// An HTTP source of the spec serves HTTPS with the certificate files and
// takes the bearer token from a file or the environment; the log says where
// it listens.
func TestHTTPSourceTLSAndTokenFromTheSpec(t *testing.T) {
	dir := t.TempDir()
	cert := testtls.New(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), cert.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), cert.KeyPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("file-token\n"), 0o600))
	t.Setenv("FLOWHOST_TEST_TOKEN", "env-token")
	for _, tc := range []struct{ auth, token string }{
		{"{bearer_token_file: token}", "file-token"},
		{"{bearer_token_env: FLOWHOST_TEST_TOKEN}", "env-token"},
	} {
		t.Run(tc.token, func(t *testing.T) {
			logs := &logCapture{}
			p := endpointSpec(t, dir, `{listen: ":0", path: /in, tls: {cert_file: cert.pem, key_file: key.pem}, auth: `+tc.auth+`}`)
			rt, err := newEndpointRuntime(t, p, runtime.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
			require.NoError(t, err)
			m := regexp.MustCompile(`"http source listening" source=in url=(https://127\.0\.0\.1:\d+/in) bearer_token=true`).FindStringSubmatch(logs.String())
			require.NotNil(t, m, "%s", logs)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- rt.Run(ctx) }()
			defer func() {
				cancel()
				require.NoError(t, <-done)
			}()

			for token, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, tc.token: http.StatusOK} {
				req, err := http.NewRequest(http.MethodPost, m[1], strings.NewReader(`{"payload":1}`))
				require.NoError(t, err)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				res, err := cert.Client().Do(req)
				require.NoError(t, err)
				res.Body.Close()
				require.Equal(t, want, res.StatusCode, "token %q", token)
			}
		})
	}

	t.Setenv("FLOWHOST_TEST_TOKEN", "")
	_, err := newEndpointRuntime(t, endpointSpec(t, dir, `{listen: ":0", auth: {bearer_token_env: FLOWHOST_TEST_TOKEN}}`))
	require.EqualError(t, err, filepath.Join(dir, "pipeline.yaml")+`:6:51: sources[0].http.auth.bearer_token_env: source "in": the environment variable FLOWHOST_TEST_TOKEN holding the bearer token is not set or empty`)
}

// An HTTP sink keeps the same rules, and its errors name it the same way.
func TestHTTPSinkEndpointRules(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	specFile := filepath.Join(dir, "pipeline.yaml")
	for _, tc := range []struct{ listen, want string }{
		{unassignedAddr, specFile + `:4:63: sinks[0].http.listen: sink "out": listen ` + unassignedAddr + ` is not a loopback address, and plain HTTP there would let the network read the records: give the endpoint tls (cert_file, key_file), listen on 127.0.0.1, or run with --insecure-listen to allow it`},
		{ln.Addr().String(), specFile + `:4:63: sinks[0].http.listen: sink "out": listen ` + ln.Addr().String() + `: address already in use`},
	} {
		src := "name: endpoints\nsources: [{name: in, type: generator, stream: events, generator: {count: 1}}]\nsinks:\n  - {name: out, type: http, streams: [events], http: {listen: \"" + tc.listen + "\"}}\n"
		require.NoError(t, os.WriteFile(specFile, []byte(src), 0o644))
		p, err := spec.ParseFile(specFile)
		require.NoError(t, err)
		_, err = runtime.New(p, nil, runtime.WithDeadLetter(&bytes.Buffer{}))
		require.EqualError(t, err, tc.want)
	}
}
