package opview

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// Defaults of [Config].
const (
	// DefaultInterval is how often the server samples the run.
	DefaultInterval = time.Second
	// DefaultHistory is how many samples it keeps for the charts: five
	// minutes at DefaultInterval.
	DefaultHistory = 300
)

// ErrStateLookupDisabled is what a state lookup gets when the run was not
// started with state lookup enabled: state may hold personal data.
var ErrStateLookupDisabled = errors.New("state lookup is disabled: start flowhost run with --enable-state-lookup to allow it (state may hold personal data)")

// StateValue is a key's state, as a state lookup returns it.
type StateValue struct {
	Computation string `json:"computation"`
	Key         string `json:"key"`
	Partition   int    `json:"partition"`
	// Found is false when the key has no state; Value is then empty.
	Found bool   `json:"found"`
	Value []byte `json:"value"`
}

// Config is what the server reads of the run. Pipeline, Status and
// Gatherer are required.
type Config struct {
	Pipeline *spec.Pipeline
	// Status is the runtime's (runtime.Runtime.Status).
	Status func() runtime.Status
	// Gatherer is the run's metrics registry.
	Gatherer prometheus.Gatherer
	// StateLookup reads a key's committed state; nil disables state
	// lookup (every request is refused with ErrStateLookupDisabled).
	StateLookup func(computation, key string) (StateValue, error)
	// Trace returns a partition's last deliveries (the live trace,
	// runtime.Runtime.RecentDeliveries); nil disables it.
	Trace func(computation string, partition int) ([]runtime.TraceRecord, error)
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); see [Protect].
	Token string
	// Interval and History are the sampling period and how many samples
	// are kept; 0 means DefaultInterval and DefaultHistory.
	Interval time.Duration
	History  int
	// Now is the wall clock; nil means time.Now.
	Now func() time.Time
	// HostID names this host as the owner of every computation
	// partition (Partition.Owner); "" means [DefaultHostID].
	HostID string
}

// DefaultHostID is the id of this host when none is given: its hostname
// and process id, "HOSTNAME:PID", which tells apart two flowhosts on one
// machine (a restarted one gets a new id).
func DefaultHostID() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	return name + ":" + strconv.Itoa(os.Getpid())
}

// Server serves the API and the page, and samples the run for rates and
// charts while it is started.
type Server struct {
	cfg Config

	mu      sync.Mutex
	latest  Snapshot
	history []sample
	// subs are the open event streams, woken after each sample.
	subs map[chan struct{}]struct{}
	// quit, closed by Close, ends the event streams.
	quit      chan struct{}
	closeOnce sync.Once
}

// New returns a server for cfg; call Start to sample, and mount Handler.
// It takes a first sample at once, so that every endpoint answers from the
// start.
func New(cfg Config) *Server {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HostID == "" {
		cfg.HostID = DefaultHostID()
	}
	s := &Server{cfg: cfg, subs: map[chan struct{}]struct{}{}, quit: make(chan struct{})}
	s.Sample()
	return s
}

// Sample takes a snapshot of the run now, keeps it for rates and charts
// and wakes the event streams; Start calls it every Interval. It returns
// the snapshot.
func (s *Server) Sample() Snapshot {
	families, _ := s.cfg.Gatherer.Gather() // a failing collector leaves its series out, not the view
	st := s.cfg.Status()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, cur := build(s.cfg.Pipeline, s.cfg.HostID, st, indexMetrics(families), s.cfg.Now(), s.history)
	s.history = append(s.history, cur)
	if len(s.history) > s.cfg.History {
		s.history = s.history[len(s.history)-s.cfg.History:]
	}
	s.latest = snap
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default: // it has not sent the last one yet: it sends the newest
		}
	}
	return snap
}

// Start samples every Interval until ctx is done or the returned stop is
// called; stop waits for the sampler to end.
func (s *Server) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.Sample()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Close ends the open event streams (a server's Shutdown waits for its
// handlers, and an event stream's lasts as long as its client): give it
// to http.Server.RegisterOnShutdown.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.quit) }) }

// Latest returns the last snapshot taken.
func (s *Server) Latest() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// API paths.
const (
	PathPrefix     = "/api/v1/"
	PathSnapshot   = PathPrefix + "snapshot"
	PathEvents     = PathPrefix + "events"
	PathState      = PathPrefix + "state"
	PathHistory    = PathPrefix + "history"
	PathTrace      = PathPrefix + "trace"
	pathPipeline   = PathPrefix + "pipeline"
	pathStreams    = PathPrefix + "streams"
	pathPartitions = PathPrefix + "partitions"
)

// Register mounts the page at / and the API under /api/v1/ on mux.
func (s *Server) Register(mux *http.ServeMux) {
	part := func(path string, pick func(Snapshot) any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, pick(s.Latest())) })
	}
	part(PathSnapshot, func(sn Snapshot) any { return sn })
	part(pathPipeline, func(sn Snapshot) any { return sn.Pipeline })
	part(pathStreams, func(sn Snapshot) any { return sn.Streams })
	part(pathPartitions, func(sn Snapshot) any { return sn.Partitions })
	part(PathPrefix+"quarantines", func(sn Snapshot) any { return sn.Quarantines })
	part(PathPrefix+"tenants", func(sn Snapshot) any { return sn.Tenants })
	part(PathPrefix+"dead-letters", func(sn Snapshot) any { return sn.DeadLetters })
	part(PathPrefix+"watermark-hold", func(sn Snapshot) any { return sn.WatermarkHold })
	part(PathPrefix+"progress", func(sn Snapshot) any { return sn.Progress })
	mux.HandleFunc("GET "+PathHistory, s.serveHistory)
	mux.HandleFunc("GET "+PathEvents, s.serveEvents)
	mux.HandleFunc("GET "+PathState, s.serveState)
	mux.HandleFunc("GET "+PathTrace, s.serveTrace)
	mux.HandleFunc(PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API endpoint %s %s (see docs/operator.md)", r.Method, r.URL.Path))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
		_, _ = w.Write(pageHTML)
	})
}

//go:embed page.html
var pageHTML []byte

// History is what /api/v1/history returns: per sample, the time and each
// stream's rates in and out, and each tenant's CPU share, for the charts.
type History struct {
	Points []Point `json:"points"`
}

// Point is one sample of a [History]: rates between it and the sample
// before it.
type Point struct {
	Time     int64              `json:"time"`
	RateIn   map[string]float64 `json:"rate_in"`
	RateOut  map[string]float64 `json:"rate_out"`
	CPUShare map[string]float64 `json:"cpu_share"`
}

// History returns the rates between consecutive samples kept, oldest
// first.
func (s *Server) History() History {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := History{Points: []Point{}}
	for i := 1; i < len(s.history); i++ {
		prev, cur := &s.history[i-1], &s.history[i]
		dt := float64(cur.time-prev.time) / 1e9
		if dt <= 0 {
			continue
		}
		p := Point{Time: cur.time, RateIn: map[string]float64{}, RateOut: map[string]float64{}, CPUShare: map[string]float64{}}
		for name, n := range cur.streamIn {
			p.RateIn[name] = float64(n-prev.streamIn[name]) / dt
			p.RateOut[name] = float64(cur.streamOut[name]-prev.streamOut[name]) / dt
		}
		var used float64
		for t, sec := range cur.workerSeconds {
			used += sec - prev.workerSeconds[t]
		}
		for t, sec := range cur.workerSeconds {
			if used > 0 {
				p.CPUShare[t] = (sec - prev.workerSeconds[t]) / used
			} else {
				p.CPUShare[t] = 0
			}
		}
		h.Points = append(h.Points, p)
	}
	return h
}

func (s *Server) serveHistory(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.History())
}

// serveEvents streams a snapshot as a server-sent event ("snapshot") at
// once and after every sample, until the client goes.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "this connection cannot stream events")
		return
	}
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		case <-ch:
			b, err := json.Marshal(s.Latest())
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// serveState answers GET /api/v1/state?computation=C&key=K with the key's
// committed state, when state lookup is enabled.
func (s *Server) serveState(w http.ResponseWriter, r *http.Request) {
	if s.cfg.StateLookup == nil {
		writeError(w, http.StatusForbidden, ErrStateLookupDisabled.Error())
		return
	}
	q := r.URL.Query()
	comp, key := q.Get("computation"), q.Get("key")
	if comp == "" || !q.Has("key") {
		writeError(w, http.StatusBadRequest, "state lookup needs the query parameters computation and key")
		return
	}
	v, err := s.cfg.StateLookup(comp, key)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// ErrLiveTraceDisabled is what a trace request gets when the run keeps no
// live trace.
var ErrLiveTraceDisabled = errors.New("the live trace is off: start flowhost run with --live-trace N")

// serveTrace answers GET /api/v1/trace?computation=C&partition=P with the
// partition's last deliveries, oldest first, when the live trace is on.
func (s *Server) serveTrace(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Trace == nil {
		writeError(w, http.StatusForbidden, ErrLiveTraceDisabled.Error())
		return
	}
	q := r.URL.Query()
	comp := q.Get("computation")
	part, err := strconv.Atoi(q.Get("partition"))
	if comp == "" || err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the live trace needs the query parameters computation and partition (a number); got computation=%q partition=%q", comp, q.Get("partition")))
		return
	}
	recs, err := s.cfg.Trace(comp, part)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

// Error is the body of every refusal of the API.
type Error struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Error{Error: msg})
}

// Protect refuses every request to h that does not carry token as a
// bearer token (Authorization: Bearer TOKEN) with 401, but GET / (the
// page, which holds no data and which a browser cannot ask for with a
// header; it reads the token from its address, #token=TOKEN); an empty
// token protects nothing. The comparison takes the same time whatever the
// token given.
func Protect(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			h.ServeHTTP(w, r)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flowhost"`)
			msg := "missing bearer token: send Authorization: Bearer TOKEN (the run's --metrics-token-file)"
			if len(got) > 0 {
				msg = "bad bearer token"
			}
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}
