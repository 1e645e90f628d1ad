package host

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/internal/testtls"
	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// With TLS and a token, the metrics server serves the operator's API,
// /metrics and /status over HTTPS to requests with the token only, and
// refuses plain HTTP.
func TestMetricsServerTLSAndToken(t *testing.T) {
	cert := testtls.New(t)
	dir := t.TempDir()
	files := map[string][]byte{"cert.pem": cert.CertPEM, "key.pem": cert.KeyPEM, "token": []byte("s3cret\n")}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	sec := opview.Security{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), TokenFile: filepath.Join(dir, "token")}
	listen, err := sec.Resolve("127.0.0.1:0")
	require.NoError(t, err)
	pipe, err := spec.Parse("p.yaml", []byte(`name: p
sources:
  - {name: in, type: generator, stream: s, generator: {count: 1}}
sinks:
  - {name: out, type: stdout, streams: [s]}
`))
	require.NoError(t, err)
	status := func() runtime.Status { return runtime.Status{Pipeline: "p"} }
	reg := prometheus.NewRegistry()
	view := opview.New(opview.Config{Pipeline: pipe, Status: status, Gatherer: reg, Token: listen.Token})
	addrs := make(chan string, 1)
	stop, err := serveMetrics("127.0.0.1:0", false, reg, status, nil, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(a string) { addrs <- a }, view, listen)
	require.NoError(t, err)
	t.Cleanup(stop)
	addr := <-addrs

	c, err := opview.NewClient("https://"+addr, "s3cret", sec.CertFile)
	require.NoError(t, err)
	snap, err := c.Snapshot(context.Background())
	require.NoError(t, err)
	require.Equal(t, "p", snap.Pipeline.Name)

	c.Token = "wrong"
	_, err = c.Snapshot(context.Background())
	require.ErrorContains(t, err, "401")
	for _, path := range []string{"/metrics", "/status"} {
		resp, err := c.HTTP.Get("https://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
	}
	resp, err := http.Get("http://" + addr + "/api/v1/snapshot")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to an HTTPS server")
	}
}
