package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBodyBytes bounds an ingest request body when the config gives
// no bound.
const DefaultMaxBodyBytes = 8 << 20

// retryAfterSeconds is what a client is told to wait while the host shuts
// down or cannot take records.
const retryAfterSeconds = "5"

// HTTPSourceConfig configures an [HTTPSource].
type HTTPSourceConfig struct {
	// Addr is the address to listen on, e.g. "127.0.0.1:8080" or
	// "127.0.0.1:0" for any free port.
	Addr string
	// Path is the ingest path, e.g. "/ingest".
	Path string
	// Stream, Partitions and PartitionBy are as for [FileSourceConfig].
	Stream      string
	Partitions  int
	PartitionBy []string
	// MaxBodyBytes bounds a request body (default [DefaultMaxBodyBytes]);
	// larger bodies get 413 and nothing of them is accepted.
	MaxBodyBytes int64
	// Reject receives every refused line. An error from it stops the run
	// (the request gets 500). Nil makes the first bad line stop the run.
	Reject func(Rejection) error
	// ShutdownGrace bounds how long Run waits for requests in flight when
	// it stops (default 5s).
	ShutdownGrace time.Duration
}

// HTTPSource takes records from HTTP clients:
//
//	POST PATH
//
// with a body of record lines (see the package documentation) or, when the
// body's first non-space byte is '[', a JSON array of record objects (the
// Content-Type is not consulted). A request's records are handed to the
// host in body order, after all of them have been read; the answer comes
// only after that:
//
//   - 200 {"accepted":N}: every record was accepted.
//   - 400 {"accepted":N,"refused":[{"line":L,"column":C,"error":"..."}]}:
//     the listed lines (array bodies also give "item", the 0-based index)
//     were refused and went to the dead letter; all other records were
//     accepted. A body that is not a well-formed JSON array is refused
//     whole: {"accepted":0,"error":"..."}.
//   - 413: the body is larger than MaxBodyBytes; nothing was accepted.
//   - 503 with Retry-After: the host is shutting down or took no more
//     records; {"accepted":N,"error":"..."} says how many of the request's
//     first records were accepted before that.
//   - 500: a refused record could not be kept (the dead letter failed,
//     or there is none); the run stops.
//
// Records' origins are "http:PATH#REQUEST:LINE" for lines and
// "http:PATH#REQUEST[ITEM]" for array items, REQUEST counting requests from
// 1; a rejection's origin adds the 1-based byte offset of the fault within
// the line or item.
type HTTPSource struct {
	cfg      HTTPSourceConfig
	intake   intake
	ln       net.Listener
	requests atomic.Uint64

	batches  chan *ingestBatch
	stopping chan struct{}
	stopOnce sync.Once
	ran      atomic.Bool
}

// NewHTTPSource checks cfg and binds the listener, so that [HTTPSource.Addr]
// is known before Run.
func NewHTTPSource(cfg HTTPSourceConfig) (*HTTPSource, error) {
	if cfg.Path == "" || cfg.Path[0] != '/' {
		return nil, fmt.Errorf("http source: path %q must start with '/'", cfg.Path)
	}
	in, err := newIntake(cfg.Stream, cfg.Partitions, cfg.PartitionBy)
	if err != nil {
		return nil, fmt.Errorf("http source: %w", err)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	cfg.PartitionBy = append([]string(nil), cfg.PartitionBy...)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http source: %w", err)
	}
	return &HTTPSource{
		cfg: cfg, intake: in, ln: ln,
		batches:  make(chan *ingestBatch),
		stopping: make(chan struct{}),
	}, nil
}

// Addr returns the address the source listens on.
func (s *HTTPSource) Addr() net.Addr { return s.ln.Addr() }

// Close releases the listener of a source whose Run was never called; it is
// harmless after Run.
func (s *HTTPSource) Close() error {
	s.stop()
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func (s *HTTPSource) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// ingestBatch is one request's worth of work for Run.
type ingestBatch struct {
	items []ingestItem
	done  chan ingestResult // buffered: Run never waits for the handler
}

type ingestItem struct {
	record    Record
	rejection *Rejection // set instead of record for refused lines
	refusal   refusal
}

type ingestResult struct {
	accepted int
	err      error // emit's error, or a fatal dead-letter error
	fatal    bool  // the dead letter failed
}

type refusal struct {
	Item   *int   `json:"item,omitempty"`
	Line   int    `json:"line"`
	Column int    `json:"column,omitempty"`
	Error  string `json:"error"`
}

type ingestResponse struct {
	Accepted int       `json:"accepted"`
	Refused  []refusal `json:"refused,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Run serves requests until ctx is cancelled (it returns ctx.Err()), emit
// fails (it returns emit's error) or the dead letter fails. On the way out
// it answers 503 to requests not yet accepted and waits up to
// ShutdownGrace for the others.
func (s *HTTPSource) Run(ctx context.Context, emit func(Record) error) error {
	if s.ran.Swap(true) {
		return errors.New("http source: Run called twice")
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.ln) }()
	reject := s.cfg.Reject
	if reject == nil {
		reject = func(r Rejection) error { return fmt.Errorf("%s: %w", r.Origin, r.Err) }
	}

	var runErr error
loop:
	for {
		select {
		case b := <-s.batches:
			res := s.process(b, emit, reject)
			b.done <- res
			if res.err != nil {
				runErr = res.err
				break loop
			}
		case <-ctx.Done():
			runErr = ctx.Err()
			break loop
		case err := <-served:
			runErr = fmt.Errorf("http source: %w", err)
			break loop
		}
	}
	s.stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return runErr
}

func (s *HTTPSource) process(b *ingestBatch, emit func(Record) error, reject func(Rejection) error) ingestResult {
	var res ingestResult
	last := -1 // the last record to accept: it asks for durability before the answer
	for i, it := range b.items {
		if it.rejection == nil {
			last = i
		}
	}
	for i, it := range b.items {
		if it.rejection != nil {
			if err := reject(*it.rejection); err != nil {
				res.err, res.fatal = err, true
				return res
			}
			continue
		}
		rec := it.record
		rec.Sync = i == last
		if err := emit(rec); err != nil {
			res.err = err
			return res
		}
		res.accepted++
	}
	return res
}

// ServeHTTP implements the ingest endpoint; it can also be mounted on
// another server's mux, as long as Run is running.
func (s *HTTPSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.cfg.Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, ingestResponse{Error: "use POST"})
		return
	}
	select {
	case <-s.stopping:
		s.unavailable(w, 0, "shutting down")
		return
	default:
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, ingestResponse{Error: fmt.Sprintf("body is larger than %d bytes; nothing was accepted", tooBig.Limit)})
			return
		}
		writeJSON(w, http.StatusBadRequest, ingestResponse{Error: "reading body: " + err.Error()})
		return
	}
	origin := "http:" + s.cfg.Path + "#" + strconv.FormatUint(s.requests.Add(1), 10)
	b := &ingestBatch{done: make(chan ingestResult, 1)}
	var bodyErr error // the body as a whole is malformed
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		b.items, bodyErr = s.parseArray(body, origin)
		if bodyErr != nil {
			// The whole body is kept, so that nothing is lost silently.
			b.items = []ingestItem{{rejection: &Rejection{Origin: origin, Stage: StageIngest, Err: bodyErr, Record: body}}}
		}
	} else {
		b.items = s.parseLines(body, origin)
	}
	var refused []refusal
	if bodyErr == nil {
		for _, it := range b.items {
			if it.rejection != nil {
				refused = append(refused, it.refusal)
			}
		}
	}

	select {
	case s.batches <- b:
	case <-s.stopping:
		s.unavailable(w, 0, "shutting down")
		return
	case <-r.Context().Done():
		return // the client left before anything was accepted
	}
	res := <-b.done
	switch {
	case res.fatal:
		writeJSON(w, http.StatusInternalServerError, ingestResponse{Accepted: res.accepted, Error: "refused records could not be kept, the run stops: " + res.err.Error()})
	case res.err != nil:
		s.unavailable(w, res.accepted, res.err.Error())
	case bodyErr != nil:
		writeJSON(w, http.StatusBadRequest, ingestResponse{Error: bodyErr.Error()})
	case len(refused) > 0:
		writeJSON(w, http.StatusBadRequest, ingestResponse{Accepted: res.accepted, Refused: refused})
	default:
		writeJSON(w, http.StatusOK, ingestResponse{Accepted: res.accepted})
	}
}

func (s *HTTPSource) unavailable(w http.ResponseWriter, accepted int, why string) {
	w.Header().Set("Retry-After", retryAfterSeconds)
	writeJSON(w, http.StatusServiceUnavailable, ingestResponse{Accepted: accepted, Error: why})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *HTTPSource) parseLines(body []byte, origin string) []ingestItem {
	var items []ingestItem
	for lineNo := 1; len(body) > 0; lineNo++ {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		items = append(items, s.item(line, origin+":"+strconv.Itoa(lineNo), lineNo, 1, nil))
	}
	return items
}

// item parses one record; line and col say where it starts in the body.
func (s *HTTPSource) item(rec []byte, origin string, line, col int, index *int) ingestItem {
	r, rej, errCol := s.intake.parse(rec, origin)
	if rej == nil {
		return ingestItem{record: r}
	}
	ref := refusal{Item: index, Line: line, Error: rej.Err.Error()}
	if errCol > 0 {
		ref.Column = col + errCol - 1
		if index != nil {
			// A multi-line array element: count lines inside it.
			before := rec[:min(errCol-1, len(rec))]
			if nl := bytes.Count(before, []byte("\n")); nl > 0 {
				ref.Line += nl
				ref.Column = errCol - 1 - bytes.LastIndexByte(before, '\n')
			}
		}
	}
	return ingestItem{rejection: rej, refusal: ref}
}

// parseArray reads a JSON array of record objects. An error means the body
// is not a well-formed JSON array.
func (s *HTTPSource) parseArray(body []byte, origin string) ([]ingestItem, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '['
		return nil, arrayError(body, err)
	}
	var items []ingestItem
	for index := 0; dec.More(); index++ {
		start := int(dec.InputOffset())
		for start < len(body) && (body[start] == ',' || isJSONSpace(body[start])) {
			start++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, arrayError(body, err)
		}
		line, col := lineCol(body, start)
		idx := index
		items = append(items, s.item(raw, origin+"["+strconv.Itoa(index)+"]", line, col, &idx))
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, arrayError(body, err)
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		line, col := lineCol(body, len(body)-len(rest))
		return nil, fmt.Errorf("body: line %d column %d: data after the JSON array", line, col)
	}
	return items, nil
}

func arrayError(body []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if pos, se := syntaxColumn(body); se != nil {
			line, col := lineCol(body, pos-1)
			return fmt.Errorf("body is not a JSON array of records: line %d column %d: %v", line, col, se)
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("body is not a JSON array of records: it ends inside the array")
	}
	return fmt.Errorf("body is not a JSON array of records: %v", err)
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// lineCol converts a byte offset to a 1-based line and byte column.
func lineCol(body []byte, off int) (int, int) {
	off = max(0, min(off, len(body)))
	before := body[:off]
	return bytes.Count(before, []byte("\n")) + 1, off - bytes.LastIndexByte(before, '\n')
}
