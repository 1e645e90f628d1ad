package opview

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flowhost/flowhost/host/runtime"
)

// Client reads the API of a running pipeline, as flowhost status does.
type Client struct {
	// Base is the server's URL, such as http://127.0.0.1:9464.
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client of the pipeline whose metrics server is at
// addr: host:port (plain HTTP) or a URL (http:// or https://). token, if
// set, is sent as the bearer token; caFile, if set, is the certificate
// (PEM) an https server's must be signed by, as with a self-signed one.
func NewClient(addr, token, caFile string) (*Client, error) {
	base := addr
	if !strings.Contains(addr, "://") {
		base = "http://" + addr
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--addr %q: want HOST:PORT or an http:// or https:// URL", addr)
	}
	hc, err := HTTPClient(caFile)
	if err != nil {
		return nil, err
	}
	return &Client{Base: strings.TrimRight(u.String(), "/"), Token: token, HTTP: hc}, nil
}

// HTTPClient is the client of flowhost's commands that talk to a running
// pipeline: caFile, if set, is the PEM certificate an https server's must
// be signed by (a self-signed one, say).
func HTTPClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// get decodes the JSON answer of path into v; a refusal's error is the
// server's message.
func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the pipeline at %s (is it running, with this --metrics-addr?): %w", c.Base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s%s: %w", c.Base, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e Error
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s%s: %s: %s", c.Base, path, resp.Status, e.Error)
		}
		return fmt.Errorf("%s%s: %s", c.Base, path, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s%s: decoding the answer: %w", c.Base, path, err)
	}
	return nil
}

// Snapshot returns the pipeline's current snapshot.
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := c.get(ctx, PathSnapshot, &s)
	if err == nil && s.APIVersion != APIVersion {
		err = fmt.Errorf("%s speaks API version %d, this flowhost version %d", c.Base, s.APIVersion, APIVersion)
	}
	return s, err
}

// State returns a key's committed state; the run must have state lookup
// enabled.
func (c *Client) State(ctx context.Context, computation, key string) (StateValue, error) {
	var v StateValue
	q := url.Values{"computation": {computation}, "key": {key}}
	err := c.get(ctx, PathState+"?"+q.Encode(), &v)
	return v, err
}

// Trace returns a partition's last deliveries, oldest first; the run must
// keep a live trace.
func (c *Client) Trace(ctx context.Context, computation string, partition int) ([]runtime.TraceRecord, error) {
	var recs []runtime.TraceRecord
	q := url.Values{"computation": {computation}, "partition": {strconv.Itoa(partition)}}
	err := c.get(ctx, PathTrace+"?"+q.Encode(), &recs)
	return recs, err
}
