package opview_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/internal/testtls"
	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

const pipelineYAML = `
name: shop
tenants:
  - {name: acme, weight: 3, plugin_dirs: [plugins]}
sources:
  - {name: orders, type: generator, stream: raw, partitions: 2, generator: {count: 10}}
computations:
  - {name: parse, plugin: identity, kind: map, partitions: 2, input_streams: [raw], output_streams: [parsed]}
  - {name: score, plugin: identity, tenant: acme, kind: map, partitions: 1, input_streams: [parsed], output_streams: [scored]}
sinks:
  - {name: out, type: stdout, streams: [scored]}
`

// fakeRun is a run whose status and metrics the test sets: the view's
// arithmetic is checked against figures the test chose.
type fakeRun struct {
	mu     sync.Mutex
	status runtime.Status
	reg    *prometheus.Registry
	src    *prometheus.CounterVec
	in     *prometheus.CounterVec
	out    *prometheus.CounterVec
	sink   *prometheus.CounterVec
	worker *prometheus.CounterVec
	wait   *prometheus.CounterVec
	quota  *prometheus.CounterVec
	dead   *prometheus.CounterVec
	buf    *prometheus.GaugeVec
	bias   *prometheus.GaugeVec
	pdone  *prometheus.GaugeVec
	ptotal *prometheus.GaugeVec
	now    time.Time
}

func newFakeRun(t *testing.T) (*fakeRun, *spec.Pipeline) {
	t.Helper()
	pipe, err := spec.Parse("shop.yaml", []byte(pipelineYAML))
	require.NoError(t, err)
	f := &fakeRun{reg: prometheus.NewRegistry(), now: time.Unix(1_700_000_000, 0)}
	cv := func(name string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: name}, labels)
		f.reg.MustRegister(c)
		return c
	}
	gv := func(name string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, labels)
		f.reg.MustRegister(g)
		return g
	}
	f.src = cv("flowhost_source_records_total", "source", "stream")
	f.in = cv("flowhost_messages_in_total", "computation", "stream")
	f.out = cv("flowhost_messages_out_total", "computation", "stream")
	f.sink = cv("flowhost_sink_records_total", "sink")
	f.worker = cv("flowhost_tenant_worker_seconds_total", "tenant")
	f.wait = cv("flowhost_tenant_throttled_seconds_total", "tenant")
	f.quota = cv("flowhost_quota_exceeded_total", "tenant", "computation", "quota")
	f.dead = cv("flowhost_dead_letters_total", "stage", "node")
	f.buf = gv("flowhost_stream_buffered_messages", "stream")
	f.bias = gv("flowhost_stream_bias_seconds", "stream")
	f.pdone = gv(runtime.ProgressDoneMetric, "kind", "name")
	f.ptotal = gv(runtime.ProgressTotalMetric, "kind", "name")
	wm := f.now.Add(-3 * time.Second).UnixNano()
	f.status = runtime.Status{Pipeline: "shop",
		Computations: []runtime.ComputationStatus{
			{Name: "parse", Partitions: 2, PartitionDetails: []runtime.PartitionStatus{
				{Partition: 0, Epoch: 7, Queued: 3, LastBatchRows: 5, LastBatchNanos: 1e6, LastBatchAt: wm, StateKeys: 2, StateBytes: 40, EventWatermark: wm},
				{Partition: 1, Epoch: 4, EventWatermark: wm - 5e9},
			}},
			{Name: "score", Tenant: "acme", Partitions: 1,
				Quarantined:      []runtime.QuarantinedPartition{{Partition: 0, Reason: "guest trapped 3 times: unreachable"}},
				PartitionDetails: []runtime.PartitionStatus{{Partition: 0, Epoch: 2, EventWatermark: ordering.NoWatermark}}},
		},
		Streams: []runtime.StreamStatus{
			{Name: "parsed", EventWatermark: wm, SystemWatermark: wm},
			{Name: "raw", EventWatermark: wm - 1e9, SystemWatermark: wm},
			{Name: "scored", EventWatermark: ordering.NoWatermark, SystemWatermark: ordering.NoWatermark, Finished: true},
		},
		DeadLetters: []runtime.DeadLetterRecord{{Node: "score", Stage: "guest", Cause: "unreachable", Time: wm}},
	}
	return f, pipe
}

func (f *fakeRun) Status() runtime.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *fakeRun) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeRun) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func newServer(t *testing.T, f *fakeRun, pipe *spec.Pipeline, mod func(*opview.Config)) (*opview.Server, *httptest.Server) {
	t.Helper()
	cfg := opview.Config{Pipeline: pipe, Status: f.Status, Gatherer: f.reg, Now: f.Now}
	if mod != nil {
		mod(&cfg)
	}
	s := opview.New(cfg)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{}))
	s.Register(mux)
	hs := httptest.NewServer(opview.Protect(cfg.Token, mux))
	t.Cleanup(hs.Close)
	return s, hs
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	if v != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}
	return resp.StatusCode
}

// Every endpoint answers its part of the view, with rates over the
// samples kept.
func TestEveryEndpoint(t *testing.T) {
	f, pipe := newFakeRun(t)
	s, hs := newServer(t, f, pipe, nil)

	// Ten seconds later: 200 records in, 150 delivered to parse, 100
	// emitted by parse; operator 1s of worker time, acme 3s.
	f.advance(10 * time.Second)
	f.src.WithLabelValues("orders", "raw").Add(200)
	f.in.WithLabelValues("parse", "raw").Add(150)
	f.out.WithLabelValues("parse", "parsed").Add(100)
	f.in.WithLabelValues("score", "parsed").Add(40)
	f.sink.WithLabelValues("out").Add(30)
	f.worker.WithLabelValues("operator").Add(1)
	f.worker.WithLabelValues("acme").Add(3)
	f.wait.WithLabelValues("acme").Add(0.5)
	f.quota.WithLabelValues("acme", "score", "state_bytes_per_key").Add(2)
	f.dead.WithLabelValues("guest", "score").Add(4)
	f.dead.WithLabelValues("key", "parse").Add(1)
	f.buf.WithLabelValues("raw").Set(50)
	f.bias.WithLabelValues("raw").Set(-0.25)
	s.Sample()

	var g opview.Graph
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/pipeline", &g))
	ids := []string{}
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
	}
	require.Equal(t, []string{"source:orders", "computation:parse", "computation:score", "sink:out"}, ids)
	require.Equal(t, []opview.Edge{
		{From: "source:orders", To: "computation:parse", Stream: "raw"},
		{From: "computation:parse", To: "computation:score", Stream: "parsed"},
		{From: "computation:score", To: "sink:out", Stream: "scored"},
	}, g.Edges)
	require.Equal(t, []string{"acme"}, g.Tenants)
	require.Equal(t, 1, g.Nodes[2].Quarantined)

	var streams []opview.Stream
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/streams", &streams))
	byName := map[string]opview.Stream{}
	for _, st := range streams {
		byName[st.Name] = st
	}
	raw := byName["raw"]
	require.Equal(t, int64(200), raw.In)
	require.Equal(t, int64(150), raw.Out)
	require.InDelta(t, 20.0, raw.RateIn, 1e-9)
	require.InDelta(t, 15.0, raw.RateOut, 1e-9)
	require.Equal(t, int64(50), raw.BufferedMessages)
	require.Equal(t, int64(-250*time.Millisecond), raw.BiasNanos)
	require.NotNil(t, raw.LagNanos)
	require.Equal(t, int64(14*time.Second), *raw.LagNanos, "the wall clock moved 10s past a watermark 4s behind")
	require.Equal(t, int64(30), byName["scored"].Out, "the sink reads scored alone")
	require.Nil(t, byName["scored"].EventWatermark, "no watermark yet")
	require.Nil(t, raw.BrokerLag, "no Kafka source")

	var parts []opview.Partition
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/partitions", &parts))
	require.Len(t, parts, 3)
	require.Equal(t, "parse", parts[0].Computation)
	require.Equal(t, uint64(7), parts[0].Epoch)
	require.Equal(t, 3, parts[0].Queued)
	require.Equal(t, int64(40), parts[0].StateBytes)
	require.Equal(t, "guest trapped 3 times: unreachable", parts[2].Quarantine)
	require.NotNil(t, parts[0].EventWatermark)
	require.Equal(t, f.status.Computations[0].PartitionDetails[0].EventWatermark, *parts[0].EventWatermark)
	require.Nil(t, parts[2].EventWatermark, "no watermark yet")

	var qs []opview.Quarantine
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/quarantines", &qs))
	require.Equal(t, []opview.Quarantine{{Computation: "score", Tenant: "acme", Partition: 0, Reason: "guest trapped 3 times: unreachable"}}, qs)

	var tenants []opview.Tenant
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/tenants", &tenants))
	require.Len(t, tenants, 2)
	require.Equal(t, "operator", tenants[0].Name)
	require.InDelta(t, 0.25, tenants[0].CPUShare, 1e-9)
	require.InDelta(t, 0.25, tenants[0].WeightShare, 1e-9)
	require.Equal(t, "acme", tenants[1].Name)
	require.InDelta(t, 0.75, tenants[1].CPUShare, 1e-9)
	require.InDelta(t, 0.75, tenants[1].WeightShare, 1e-9)
	require.InDelta(t, 0.5, tenants[1].ThrottledSeconds, 1e-9)
	require.Equal(t, int64(2), tenants[1].QuotaRefusals)

	var dl opview.DeadLetters
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/dead-letters", &dl))
	require.Equal(t, int64(5), dl.Total)
	require.Equal(t, map[string]int64{"score": 4, "parse": 1}, dl.ByNode)
	require.Len(t, dl.Latest, 1)
	require.Equal(t, "unreachable", dl.Latest[0].Cause)

	var hold opview.WatermarkHold
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/watermark-hold", &hold))
	require.Equal(t, "raw", hold.Stream, "the lowest watermark of the streams not ended")
	require.Equal(t, "score", hold.Computation, "a partition without a watermark holds everything after it")
	require.Nil(t, hold.PartitionWatermark)

	var h opview.History
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/history", &h))
	require.Len(t, h.Points, 1)
	require.InDelta(t, 20.0, h.Points[0].RateIn["raw"], 1e-9)
	require.InDelta(t, 0.75, h.Points[0].CPUShare["acme"], 1e-9)

	var snap opview.Snapshot
	require.Equal(t, 200, getJSON(t, hs.URL+"/api/v1/snapshot", &snap))
	require.Equal(t, opview.APIVersion, snap.APIVersion)
	require.Equal(t, f.Now().UnixNano(), snap.Time)
	require.Equal(t, g, snap.Pipeline)

	var e opview.Error
	require.Equal(t, 404, getJSON(t, hs.URL+"/api/v1/nope", &e))
	require.Contains(t, e.Error, "/api/v1/nope")
}

// The page is one self-contained document: nothing it loads comes from
// elsewhere.
func TestPageHasNoExternalAssets(t *testing.T) {
	f, pipe := newFakeRun(t)
	_, hs := newServer(t, f, pipe, nil)
	resp, err := http.Get(hs.URL + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	require.NoError(t, err)
	page := b.String()
	require.True(t, strings.Contains(page, `"api/v1/events"`), "the page reads the event stream")
	require.NotRegexp(t, regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`), page, "an external asset")
	require.NotRegexp(t, regexp.MustCompile(`(?i)@import|<link[^>]+stylesheet`), page)
}

// The event stream sends a snapshot at once, and another after each
// sample.
func TestEventsStreamSnapshots(t *testing.T) {
	f, pipe := newFakeRun(t)
	s, hs := newServer(t, f, pipe, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+opview.PathEvents, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	next := func() opview.Snapshot {
		t.Helper()
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				var snap opview.Snapshot
				require.NoError(t, json.Unmarshal([]byte(data), &snap))
				return snap
			}
		}
		t.Fatalf("event stream ended: %v", lines.Err())
		return opview.Snapshot{}
	}
	first := next()
	f.advance(time.Second)
	f.src.WithLabelValues("orders", "raw").Add(7)
	s.Sample()
	second := next()
	require.Equal(t, first.Time+int64(time.Second), second.Time)
	require.Equal(t, int64(7), second.Streams[1].In)
}

// State lookup is refused unless enabled; enabled, it answers the
// lookup's value and refuses a request without its parameters.
func TestStateLookup(t *testing.T) {
	f, pipe := newFakeRun(t)
	_, off := newServer(t, f, pipe, nil)
	var e opview.Error
	require.Equal(t, http.StatusForbidden, getJSON(t, off.URL+"/api/v1/state?computation=parse&key=k", &e))
	require.Equal(t, opview.ErrStateLookupDisabled.Error(), e.Error)

	_, on := newServer(t, f, pipe, func(c *opview.Config) {
		c.StateLookup = func(comp, key string) (opview.StateValue, error) {
			return opview.StateValue{Computation: comp, Key: key, Partition: 1, Found: true, Value: []byte("v:" + key)}, nil
		}
	})
	var v opview.StateValue
	require.Equal(t, 200, getJSON(t, on.URL+`/api/v1/state?computation=parse&key=%5B%22u1%22%5D`, &v))
	require.Equal(t, opview.StateValue{Computation: "parse", Key: `["u1"]`, Partition: 1, Found: true, Value: []byte(`v:["u1"]`)}, v)
	require.Equal(t, http.StatusBadRequest, getJSON(t, on.URL+"/api/v1/state?computation=parse", &e))

	c, err := opview.NewClient(on.URL, "", "")
	require.NoError(t, err)
	got, err := c.State(context.Background(), "parse", "k")
	require.NoError(t, err)
	require.Equal(t, []byte("v:k"), got.Value)
	c, err = opview.NewClient(off.URL, "", "")
	require.NoError(t, err)
	_, err = c.State(context.Background(), "parse", "k")
	require.ErrorContains(t, err, "--enable-state-lookup")
}

// With a token, every request needs it: none and a wrong one get 401;
// only the page itself, which holds no data, is served without.
func TestBearerToken(t *testing.T) {
	f, pipe := newFakeRun(t)
	_, hs := newServer(t, f, pipe, func(c *opview.Config) { c.Token = "s3cret" })
	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"none", "", http.StatusUnauthorized},
		{"bad", "Bearer wrong", http.StatusUnauthorized},
		{"not bearer", "Basic czNjcmV0", http.StatusUnauthorized},
		{"good", "Bearer s3cret", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/", "/metrics", "/api/v1/snapshot", "/api/v1/events", "/api/v1/state?computation=a&key=b"} {
				req, err := http.NewRequest(http.MethodGet, hs.URL+path, nil)
				require.NoError(t, err)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				want := tc.want
				if path == "/" {
					want = http.StatusOK
				}
				if want == http.StatusOK && strings.HasPrefix(path, "/api/v1/state") {
					want = http.StatusForbidden // past the token, state lookup is off
				}
				require.Equal(t, want, resp.StatusCode, path)
			}
		})
	}
	c, err := opview.NewClient(hs.URL, "wrong", "")
	require.NoError(t, err)
	_, err = c.Snapshot(context.Background())
	require.ErrorContains(t, err, "bad bearer token")
	c.Token = "s3cret"
	snap, err := c.Snapshot(context.Background())
	require.NoError(t, err)
	require.Equal(t, "shop", snap.Pipeline.Name)
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	cert := testtls.New(t)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, cert.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, cert.KeyPEM, 0o600))
	return certFile, keyFile
}

// A bind that is not loopback needs TLS and a token, or Insecure; on
// loopback anything goes.
func TestSecurityResolve(t *testing.T) {
	cert, key := writeCert(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, tc := range []struct {
		name    string
		addr    string
		sec     opview.Security
		wantErr string
		tls     bool
		token   string
	}{
		{name: "loopback plain", addr: "127.0.0.1:9464"},
		{name: "localhost plain", addr: "localhost:9464"},
		{name: "ipv6 loopback", addr: "[::1]:9464"},
		{name: "all interfaces plain", addr: "0.0.0.0:9464", wantErr: "not a loopback address"},
		{name: "a name", addr: "example.com:9464", wantErr: "not a loopback address"},
		{name: "tls without token", addr: "0.0.0.0:9464", sec: opview.Security{CertFile: cert, KeyFile: key}, wantErr: "not a loopback address"},
		{name: "token without tls", addr: "0.0.0.0:9464", sec: opview.Security{TokenFile: token}, wantErr: "not a loopback address"},
		{name: "tls and token", addr: "0.0.0.0:9464", sec: opview.Security{CertFile: cert, KeyFile: key, TokenFile: token}, tls: true, token: "s3cret"},
		{name: "insecure", addr: "0.0.0.0:9464", sec: opview.Security{Insecure: true}},
		{name: "cert without key", addr: "127.0.0.1:9464", sec: opview.Security{CertFile: cert}, wantErr: "give both or neither"},
		{name: "bad cert", addr: "127.0.0.1:9464", sec: opview.Security{CertFile: token, KeyFile: key}, wantErr: "--metrics-tls-cert"},
		{name: "empty token", addr: "127.0.0.1:9464", sec: opview.Security{TokenFile: empty}, wantErr: "is empty"},
		{name: "missing token", addr: "127.0.0.1:9464", sec: opview.Security{TokenFile: filepath.Join(dir, "none")}, wantErr: "--metrics-token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.sec.Resolve(tc.addr)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.tls, l.TLS != nil)
			require.Equal(t, tc.token, l.Token)
		})
	}
}

// The client reaches an https server through the CA file it is given,
// and refuses it without.
func TestClientTLS(t *testing.T) {
	f, pipe := newFakeRun(t)
	certFile, keyFile := writeCert(t)
	l, err := opview.Security{CertFile: certFile, KeyFile: keyFile}.Resolve("127.0.0.1:0")
	require.NoError(t, err)
	s := opview.New(opview.Config{Pipeline: pipe, Status: f.Status, Gatherer: f.reg, Now: f.Now})
	mux := http.NewServeMux()
	s.Register(mux)
	hs := httptest.NewUnstartedServer(mux)
	hs.TLS = l.TLS
	hs.StartTLS()
	t.Cleanup(hs.Close)

	c, err := opview.NewClient(hs.URL, "", certFile)
	require.NoError(t, err)
	snap, err := c.Snapshot(context.Background())
	require.NoError(t, err)
	require.Equal(t, "shop", snap.Pipeline.Name)

	c, err = opview.NewClient(hs.URL, "", "")
	require.NoError(t, err)
	_, err = c.Snapshot(context.Background())
	require.ErrorContains(t, err, "certificate")
}

func TestNewClientAddresses(t *testing.T) {
	for _, tc := range []struct{ addr, base, wantErr string }{
		{addr: "127.0.0.1:9464", base: "http://127.0.0.1:9464"},
		{addr: "https://h:1/", base: "https://h:1"},
		{addr: "ftp://h:1", wantErr: "want HOST:PORT"},
		{addr: "http://", wantErr: "want HOST:PORT"},
	} {
		c, err := opview.NewClient(tc.addr, "", "")
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.addr)
			continue
		}
		require.NoError(t, err, tc.addr)
		require.Equal(t, tc.base, c.Base)
	}
}

// FuzzNewClient: any address is accepted as an http(s) base or refused
// with an error naming --addr; none panics.
func FuzzNewClient(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9464", "https://h:1/", "ftp://x", "", "http://[::1]:80", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		c, err := opview.NewClient(addr, "", "")
		if err != nil {
			require.Contains(t, err.Error(), "--addr")
			return
		}
		require.True(t, strings.HasPrefix(c.Base, "http://") || strings.HasPrefix(c.Base, "https://"), c.Base)
	})
}

// The terminal view names every node, the quarantine's reason, the
// tenants and the latest dead letter.
func TestFormat(t *testing.T) {
	f, pipe := newFakeRun(t)
	s, _ := newServer(t, f, pipe, nil)
	var b strings.Builder
	require.NoError(t, opview.Format(&b, s.Latest()))
	out := b.String()
	for _, want := range []string{"pipeline shop", "source:orders", "computation:parse", "computation:score", "sink:out",
		"guest trapped 3 times: unreachable", "acme", "operator", "parse/p0", "event time held back by stream raw", "unreachable"} {
		require.Contains(t, out, want)
	}
}

// Close ends the open event streams, so that a server's Shutdown does not
// wait for their clients.
func TestCloseEndsEventStreams(t *testing.T) {
	f, pipe := newFakeRun(t)
	s, hs := newServer(t, f, pipe, nil)
	// A stream Close did not end fails the read at the client's deadline.
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get(hs.URL + opview.PathEvents)
	require.NoError(t, err)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	require.True(t, lines.Scan(), "the first event")
	s.Close()
	for lines.Scan() { // the rest of the first event, then the end
	}
	require.NoError(t, lines.Err())
}

// The live trace is refused unless the run keeps one; on, it answers the
// partition's deliveries and refuses a request without its parameters.
func TestLiveTrace(t *testing.T) {
	f, pipe := newFakeRun(t)
	_, off := newServer(t, f, pipe, nil)
	c, err := opview.NewClient(off.URL, "", "")
	require.NoError(t, err)
	_, err = c.Trace(context.Background(), "parse", 0)
	require.ErrorContains(t, err, "403")
	require.ErrorContains(t, err, "--live-trace")

	want := []runtime.TraceRecord{{Computation: "parse", Partition: 1, Epoch: 3, Key: `["u1"]`, Kind: runtime.TraceMessage, Stream: "raw",
		MessageID: "raw/p1:4", Parents: []string{}, EventTS: 10, PriorityTS: 11}}
	_, on := newServer(t, f, pipe, func(cfg *opview.Config) {
		cfg.Trace = func(comp string, part int) ([]runtime.TraceRecord, error) {
			if comp != "parse" || part != 1 {
				return nil, fmt.Errorf("no partition %s/%d", comp, part)
			}
			return want, nil
		}
	})
	c, err = opview.NewClient(on.URL, "", "")
	require.NoError(t, err)
	got, err := c.Trace(context.Background(), "parse", 1)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = c.Trace(context.Background(), "parse", 7)
	require.ErrorContains(t, err, "404")
	require.ErrorContains(t, err, "no partition parse/7")
	var e opview.Error
	require.Equal(t, http.StatusBadRequest, getJSON(t, on.URL+"/api/v1/trace?computation=parse&partition=x", &e))
	require.Contains(t, e.Error, "partition")
}
