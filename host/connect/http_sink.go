package connect

import (
	"bytes"
	"context"
	"crypto/tls"
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
	// of the sink and how far a live subscriber may fall behind; older
	// records are served from Log, if there is one.
	RingRecords int
	// Next is the number of the record the first Write appends: records
	// before it were written by an earlier run of the host (default 0).
	Next int64
	// Log, if set, serves subscribers the records the ring does not hold,
	// from before Next or evicted since. It must hold every record before
	// Write is called with it (see [SinkLog]).
	Log SinkLog
	// WriteTimeout bounds one write to a subscriber (default 10s); a
	// subscriber that takes longer is disconnected.
	WriteTimeout time.Duration
	// Logger receives the reasons subscribers are disconnected (default
	// slog.Default()).
	Logger *slog.Logger
	// TLS, if set, makes the endpoint serve HTTPS with it; nil serves
	// plain HTTP.
	TLS *tls.Config
	// BearerToken, if not empty, is the token every subscriber must send
	// as "Authorization: Bearer TOKEN"; others get 401.
	BearerToken string
	// Format is what a line holds: [FormatJSON] (also "", the record with
	// every timestamp and id) or [FormatPayload] (the payload alone).
	Format Format
}

// SinkLog is the durable, numbered log of a sink's records, which an
// HTTP sink serves records from that its ring no longer holds.
//
// Its records are the lines of [HTTPSink.Line], numbered without
// gaps; retention deletes them only from the oldest end. A record must be
// in the log before [HTTPSink.Write] is called with it, so that the log
// holds every record the ring holds, retention aside.
type SinkLog interface {
	// Bounds returns the number of the oldest record the log still
	// holds, and end = one past the newest (oldest == end when empty).
	Bounds() (oldest, end int64, err error)
	// Read calls fn for the records numbered from from on, in order, up
	// to the end of the log as it stands; it stops early when fn returns
	// an error and returns that error. line is valid only during the call.
	Read(from int64, fn func(n int64, line []byte) error) error
}

// HTTPSink serves records live to any number of subscribers:
//
//	GET PATH[?from=N]
//
// streams records as lines in the sink's format (chunked, flushed after
// every batch; application/x-ndjson for json, text/plain for payload) until
// the client leaves or the sink closes. Records are numbered in the order
// written, continuing from [HTTPSinkConfig.Next]; the response header
// X-First-Record gives the number of the first line sent, so that a client
// can resume with from=N after the last record it read plus one. Without
// from the stream starts with the next record written; from=N may also
// name a record not yet written.
//
// The sink keeps the last RingRecords records in memory. A subscriber
// asking for an older record is first sent the records from the log
// ([HTTPSinkConfig.Log]), in order, up to where the ring takes over. One
// asking for a record neither holds any more gets 410 Gone with
// {"error":"...","oldest":M}, M being the oldest record still available.
//
// With a log, a subscriber that remembers the number of the last record it
// processed and reconnects with from=last+1 gets every record exactly once,
// across host restarts, as long as the record is within the retention of
// the log.
//
// With [HTTPSinkConfig.BearerToken] a request without "Authorization:
// Bearer TOKEN" (or with another token) gets 401; with
// [HTTPSinkConfig.TLS] the sink serves HTTPS only.
//
// Write never waits for subscribers: each reads from the shared ring, or
// from the log on its own goroutine, at its own pace. A live subscriber
// that falls so far behind that the ring evicts records it has not been
// sent, one catching up that the log's retention overtakes, and one whose
// connection does not take a write within WriteTimeout, are disconnected
// and the reason logged.
type HTTPSink struct {
	cfg    HTTPSinkConfig
	ln     net.Listener
	srv    *http.Server
	served chan error
	// handlers counts the subscriptions being served, so that Close can
	// wait until none reads the log any more.
	handlers sync.WaitGroup

	mu     sync.Mutex
	ring   [][]byte // ring[n % len(ring)] is record n's JSON line
	next   int64    // number of the next record
	subs   map[*subscriber]struct{}
	wake   chan struct{} // closed and replaced whenever records arrive
	closed bool
}

type subscriber struct {
	remote string
	cursor int64 // next record to send; guarded by HTTPSink.mu
	// fromLog: the subscriber is being sent records from the log, and
	// Write leaves it alone; guarded by HTTPSink.mu.
	fromLog bool
	kicked  chan struct{}
	reason  string // why kicked; guarded by HTTPSink.mu
	w       http.ResponseWriter
	rc      *http.ResponseController
	// sending: a write to the client may be under way; guarded by
	// HTTPSink.mu.
	sending bool
}

// logChunkBytes is about how much a subscriber catching up reads from the
// log at a time. Lines are copied out and sent after the read has
// returned, so that a slow client never keeps a read of the store open.
const logChunkBytes = 256 << 10

// NewHTTPSink checks cfg, binds the listener and starts serving. A listen
// error reads "listen ADDR: REASON".
func NewHTTPSink(cfg HTTPSinkConfig) (*HTTPSink, error) {
	if cfg.Path == "" || cfg.Path[0] != '/' {
		return nil, fmt.Errorf("http sink: path %q must start with '/'", cfg.Path)
	}
	if cfg.RingRecords <= 0 {
		cfg.RingRecords = DefaultRingRecords
	}
	if cfg.Next < 0 {
		return nil, fmt.Errorf("http sink: next record %d is negative", cfg.Next)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch cfg.Format {
	case "":
		cfg.Format = FormatJSON
	case FormatJSON, FormatPayload:
	default:
		return nil, fmt.Errorf("http sink: format %q is unknown (want json or payload)", cfg.Format)
	}
	ln, err := listenEndpoint(cfg.Addr, cfg.TLS)
	if err != nil {
		return nil, err
	}
	s := &HTTPSink{
		cfg: cfg, ln: ln, served: make(chan error, 1),
		ring: make([][]byte, cfg.RingRecords),
		next: cfg.Next,
		subs: make(map[*subscriber]struct{}),
		wake: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the sink listens on.
func (s *HTTPSink) Addr() net.Addr { return s.ln.Addr() }

// Line returns r as the sink serves it, in its format (see
// [SinkRecord.Line]): what a runtime stores in the [SinkLog] is byte for
// byte what the sink serves live.
func (s *HTTPSink) Line(r *SinkRecord) ([]byte, error) { return r.Line(s.cfg.Format) }

// Subscribers returns how many clients are subscribed.
func (s *HTTPSink) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Write appends the batch to the ring, numbering its records on from the
// last, and wakes the subscribers. It never blocks on them. A batch with a
// record that cannot be encoded is not appended at all, so that the
// numbering stays the log's.
func (s *HTTPSink) Write(ctx context.Context, records []SinkRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Encoded before taking the lock: subscribers wait on it.
	lines := make([][]byte, len(records))
	for i := range records {
		line, err := s.Line(&records[i])
		if err != nil {
			return fmt.Errorf("http sink: record %s: %w", records[i].MessageID, err)
		}
		lines[i] = line
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("http sink: write after close")
	}
	for _, line := range lines {
		s.ring[s.next%int64(len(s.ring))] = line
		s.next++
	}
	oldest := s.oldestLocked()
	for sub := range s.subs {
		if !sub.fromLog && sub.cursor < oldest {
			s.kickLocked(sub, fmt.Sprintf("fell behind: record %d was evicted before it was sent (the sink keeps %d records)", sub.cursor, s.cfg.RingRecords))
		}
	}
	close(s.wake)
	s.wake = make(chan struct{})
	return nil
}

// oldestLocked returns the oldest record the ring holds, or the next one
// when it holds none. Records before Next were never in it.
func (s *HTTPSink) oldestLocked() int64 {
	return max(s.cfg.Next, s.next-int64(s.cfg.RingRecords))
}

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
	if why := bearerRefusal(r, s.cfg.BearerToken); why != "" {
		challengeBearer(w)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": why})
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
			if s.cfg.Log == nil {
				s.mu.Unlock()
				why := fmt.Sprintf("record %d was evicted; the sink keeps the last %d records", n, s.cfg.RingRecords)
				if n < s.cfg.Next {
					why = fmt.Sprintf("record %d was written before the sink started, and the sink has no log", n)
				}
				writeGone(w, why, oldest)
				return
			}
			sub.fromLog = true
		}
		sub.cursor = n
	}
	s.subs[sub] = struct{}{}
	s.handlers.Add(1)
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
		s.handlers.Done()
	}()

	var pending [][]byte
	if sub.fromLog {
		// The first records are read before the response starts, so that
		// a record retention deleted since the check above is still a 410.
		var err error
		if pending, err = s.readLog(sub.cursor); err == nil && len(pending) == 0 {
			var oldest int64
			if oldest, err = s.missing(sub.cursor); err == nil {
				writeGone(w, fmt.Sprintf("record %d is no longer in the sink log", sub.cursor), oldest)
			}
		}
		if err != nil {
			s.mu.Lock()
			s.kickLocked(sub, err.Error())
			s.mu.Unlock()
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		}
		if len(pending) == 0 {
			return
		}
	}

	if s.cfg.Format == FormatPayload {
		w.Header().Set("Content-Type", "text/plain")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("X-First-Record", strconv.FormatInt(sub.cursor, 10))
	w.WriteHeader(http.StatusOK)
	if err := sub.rc.Flush(); err != nil {
		return
	}
	if sub.fromLog && !s.catchUp(sub, r, pending) {
		return
	}
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

func writeGone(w http.ResponseWriter, why string, oldest int64) {
	writeJSON(w, http.StatusGone, map[string]any{"error": why, "oldest": oldest})
}

// missing tells why the log did not return record n, which the ring does
// not hold. When retention deleted it, missing returns the oldest record
// still available; when the log has a gap instead, an error.
func (s *HTTPSink) missing(n int64) (int64, error) {
	oldest, end, err := s.cfg.Log.Bounds()
	if err != nil {
		return 0, fmt.Errorf("record %d: reading the bounds of the sink log: %w", n, err)
	}
	s.mu.Lock()
	if ring := s.oldestLocked(); oldest >= end || ring < oldest {
		oldest = ring
	}
	s.mu.Unlock()
	if n >= oldest {
		return 0, fmt.Errorf("record %d is missing from the sink log, which holds records %d to %d", n, oldest, end-1)
	}
	return oldest, nil
}

var (
	errKicked    = errors.New("subscriber disconnected")
	errChunkFull = errors.New("log chunk full")
	errLogGap    = errors.New("gap in the log")
)

// readLog returns copies of the log's records from from on, as many as
// follow each other without a gap, about logChunkBytes of them; none if
// the log does not hold record from.
func (s *HTTPSink) readLog(from int64) ([][]byte, error) {
	var lines [][]byte
	size := 0
	err := s.cfg.Log.Read(from, func(n int64, line []byte) error {
		if n != from+int64(len(lines)) {
			return errLogGap
		}
		lines = append(lines, bytes.Clone(line))
		if size += len(line); size >= logChunkBytes {
			return errChunkFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errChunkFull) && !errors.Is(err, errLogGap) {
		return nil, fmt.Errorf("reading the sink log from record %d: %w", from+int64(len(lines)), err)
	}
	return lines, nil
}

// catchUp sends sub the records from its cursor on from the log, lines
// being the first of them, until the ring holds its cursor. It reports
// whether sub is to go on from the ring.
func (s *HTTPSink) catchUp(sub *subscriber, r *http.Request, lines [][]byte) bool {
	for {
		if err := s.send(sub, lines); err != nil {
			s.mu.Lock()
			s.kickLocked(sub, "write failed: "+err.Error())
			s.mu.Unlock()
			return false
		}
		s.mu.Lock()
		sub.cursor += int64(len(lines))
		if sub.reason != "" {
			s.mu.Unlock()
			return false
		}
		if sub.cursor >= s.oldestLocked() {
			// The ring holds the cursor and, as Write evicts only under
			// this lock, keeps it until Write sees fromLog false: the
			// subscriber goes over without a gap or a repeat. Its cursor
			// may be past the ring's newest record when the log was ahead.
			sub.fromLog = false
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return false
		}
		var err error
		if lines, err = s.readLog(sub.cursor); err == nil && len(lines) == 0 {
			if _, err = s.missing(sub.cursor); err == nil {
				err = fmt.Errorf("fell behind: record %d was deleted from the sink log before it was sent", sub.cursor)
			}
		}
		if err != nil {
			s.mu.Lock()
			s.kickLocked(sub, err.Error())
			s.mu.Unlock()
			return false
		}
	}
}

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

// Close ends every subscription, stops the server and drops the ring. It
// returns once no subscription reads the log any more, so that the log's
// store can be closed right after.
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
	// Server.Close does not wait for handlers: one may still be reading the
	// log, and only stops at its next check of the kick.
	s.handlers.Wait()
	s.mu.Lock()
	s.ring = nil
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("http sink: %w", err)
	}
	return nil
}
