package connect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DefaultRingRecords is how many recent records an HTTP sink keeps when
// the config gives no bound.
const DefaultRingRecords = 10000

// HTTPSinkConfig configures an [HTTPSink].
type HTTPSinkConfig struct {
	// Addr is the address to listen on ("127.0.0.1:0" for any free port).
	Addr string
	// Path is the subscription path, e.g. "/out".
	Path string
	// RingRecords is how many of the most recent records are kept for
	// subscribers (default [DefaultRingRecords]). It bounds both the memory
	// of the sink and how far a subscriber may fall behind.
	RingRecords int
	// WriteTimeout bounds one write to a subscriber (default 10s); a
	// subscriber that takes longer is disconnected.
	WriteTimeout time.Duration
	// Logger receives the reasons subscribers are disconnected (default
	// slog.Default()).
	Logger *slog.Logger
}

// HTTPSink serves records live to any number of subscribers:
//
//	GET PATH[?from=N]
//
// streams records as JSON lines (chunked, flushed after every batch) until
// the client leaves or the sink closes. Records are numbered from 0 in the
// order written; the response header X-First-Record gives the number of
// the first line sent, so that a client can resume with from=N after the
// last record it read plus one. Without from the stream starts with the
// next record written; from=N may also name a record not yet written.
//
// The sink keeps the last RingRecords records in memory. A subscriber
// asking for a record already evicted gets 410 Gone with
// {"error":"...","oldest":M}, M being the oldest record still kept.
//
// Write never waits for subscribers: each reads from the shared ring at
// its own pace. A subscriber that falls so far behind that the ring evicts
// records it has not been sent, or whose connection does not take a write
// within WriteTimeout, is disconnected and the reason logged.
type HTTPSink struct {
	cfg    HTTPSinkConfig
	ln     net.Listener
	srv    *http.Server
	served chan error

	mu     sync.Mutex
	ring   [][]byte // ring[n % len(ring)] is record n's JSON line
	next   int64    // number of the next record
	subs   map[*subscriber]struct{}
	wake   chan struct{} // closed and replaced whenever records arrive
	closed bool
	line   bytes.Buffer
}

type subscriber struct {
	remote string
	cursor int64 // next record to send; guarded by HTTPSink.mu
	kicked chan struct{}
	reason string // why kicked; guarded by HTTPSink.mu
	w      http.ResponseWriter
	rc     *http.ResponseController
	// sending: a write to the client may be under way; guarded by
	// HTTPSink.mu.
	sending bool
}

// NewHTTPSink checks cfg, binds the listener and starts serving.
func NewHTTPSink(cfg HTTPSinkConfig) (*HTTPSink, error) {
	if cfg.Path == "" || cfg.Path[0] != '/' {
		return nil, fmt.Errorf("http sink: path %q must start with '/'", cfg.Path)
	}
	if cfg.RingRecords <= 0 {
		cfg.RingRecords = DefaultRingRecords
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http sink: %w", err)
	}
	s := &HTTPSink{
		cfg: cfg, ln: ln, served: make(chan error, 1),
		ring: make([][]byte, cfg.RingRecords),
		subs: make(map[*subscriber]struct{}),
		wake: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the sink listens on.
func (s *HTTPSink) Addr() net.Addr { return s.ln.Addr() }

// Subscribers returns how many clients are subscribed.
func (s *HTTPSink) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Write appends the batch to the ring and wakes the subscribers. It never
// blocks on them.
func (s *HTTPSink) Write(ctx context.Context, records []SinkRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("http sink: write after close")
	}
	for i := range records {
		s.line.Reset()
		if err := records[i].appendJSONLine(&s.line); err != nil {
			return fmt.Errorf("http sink: record %s: %w", records[i].MessageID, err)
		}
		s.ring[s.next%int64(len(s.ring))] = bytes.Clone(s.line.Bytes())
		s.next++
	}
	oldest := s.oldestLocked()
	for sub := range s.subs {
		if sub.cursor < oldest {
			s.kickLocked(sub, fmt.Sprintf("fell behind: record %d was evicted before it was sent (the sink keeps %d records)", sub.cursor, len(s.ring)))
		}
	}
	close(s.wake)
	s.wake = make(chan struct{})
	return nil
}

func (s *HTTPSink) oldestLocked() int64 { return max(0, s.next-int64(len(s.ring))) }

// kickLocked disconnects sub. A write to it that may be blocked on the
// network is cut short through the connection's deadline (the client then
// sees the stream break off); an idle subscriber's stream ends cleanly.
func (s *HTTPSink) kickLocked(sub *subscriber, reason string) {
	if sub.reason != "" {
		return
	}
	sub.reason = reason
	close(sub.kicked)
	if sub.sending {
		_ = sub.rc.SetWriteDeadline(time.Now())
	}
}

// ServeHTTP implements the subscription endpoint.
func (s *HTTPSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.cfg.Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use GET"})
		return
	}
	sub := &subscriber{remote: r.RemoteAddr, kicked: make(chan struct{}), w: w, rc: http.NewResponseController(w)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "sink is closed"})
		return
	}
	sub.cursor = s.next
	if from := r.URL.Query().Get("from"); from != "" {
		n, err := strconv.ParseInt(from, 10, 64)
		if err != nil || n < 0 {
			s.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("from=%q is not a record number", from)})
			return
		}
		if oldest := s.oldestLocked(); n < oldest {
			s.mu.Unlock()
			writeJSON(w, http.StatusGone, map[string]any{
				"error":  fmt.Sprintf("record %d was evicted; the sink keeps the last %d records", n, len(s.ring)),
				"oldest": oldest,
			})
			return
		}
		sub.cursor = n
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	defer func() {
		// Log before leaving the set, so that whoever sees the subscriber
		// gone can also see why.
		s.mu.Lock()
		reason := sub.reason
		s.mu.Unlock()
		if reason != "" {
			s.cfg.Logger.Info("http sink: subscriber disconnected", "remote", sub.remote, "reason", reason)
		}
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-First-Record", strconv.FormatInt(sub.cursor, 10))
	w.WriteHeader(http.StatusOK)
	if err := sub.rc.Flush(); err != nil {
		return
	}
	var pending [][]byte
	for {
		s.mu.Lock()
		if sub.reason != "" {
			s.mu.Unlock()
			return
		}
		pending = pending[:0]
		for ; sub.cursor < s.next; sub.cursor++ {
			pending = append(pending, s.ring[sub.cursor%int64(len(s.ring))])
		}
		wake := s.wake
		s.mu.Unlock()

		if len(pending) > 0 {
			if err := s.send(sub, pending); err != nil {
				s.mu.Lock()
				s.kickLocked(sub, "write failed: "+err.Error())
				s.mu.Unlock()
				return
			}
			continue
		}
		select {
		case <-wake:
		case <-sub.kicked:
			return
		case <-r.Context().Done():
			return
		}
	}
}

var errKicked = errors.New("subscriber disconnected")

func (s *HTTPSink) send(sub *subscriber, lines [][]byte) error {
	// The deadline is set under the lock, so that a kick, which sets it to
	// now, cannot be overwritten by this longer one.
	s.mu.Lock()
	if sub.reason != "" {
		s.mu.Unlock()
		return errKicked
	}
	err := sub.rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	sub.sending = err == nil
	s.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		s.mu.Lock()
		sub.sending = false
		s.mu.Unlock()
	}()
	for _, line := range lines {
		if _, err := sub.w.Write(line); err != nil {
			return err
		}
	}
	return sub.rc.Flush()
}

// Close ends every subscription, stops the server and drops the ring.
func (s *HTTPSink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for sub := range s.subs {
		s.kickLocked(sub, "sink closed")
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	if serveErr := <-s.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	s.mu.Lock()
	s.ring = nil
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("http sink: %w", err)
	}
	return nil
}
