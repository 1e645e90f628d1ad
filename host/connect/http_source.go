package connect

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// maxRefusalsReported bounds the per-record errors of one 400 answer, so
// that a body of a million bad lines does not get an answer larger than
// itself; the answer's "invalid" still counts them all.
const maxRefusalsReported = 100

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
	// Format is how a line is read ("" is [SourceEnvelope]); EventTime
	// (its Field, for format json) where the event time is.
	Format    SourceFormat
	EventTime EventTimeSource
	// MaxBodyBytes bounds a request body (default [DefaultMaxBodyBytes]);
	// larger bodies get 413 and nothing of them is accepted.
	MaxBodyBytes int64
	// TLS, if set, makes the endpoint serve HTTPS with it (certificates
	// included); nil serves plain HTTP.
	TLS *tls.Config
	// BearerToken, if not empty, is the token every request must carry as
	// "Authorization: Bearer TOKEN"; others get 401 and nothing of them is
	// read.
	BearerToken string
	// Logger receives a line for every refused request (default
	// slog.Default()).
	Logger *slog.Logger
	// ShutdownGrace bounds how long Run waits for requests in flight when
	// it stops (default 5s).
	ShutdownGrace time.Duration
}

// HTTPSource takes records from HTTP clients:
//
//	POST PATH
//
// with a body of records, one a line, in the source's format (see the
// package documentation) or, in format envelope when the body's first
// non-space byte is '[', a JSON array of record objects (the Content-Type
// is not consulted). In formats json and raw a body is always lines: a
// line "[1,2]" is one payload. Blank lines are not records, except in
// format raw.
//
// A request is accepted whole or not at all. Its body is read to its end
// and every record checked before any is handed to the host; a body that
// is cut off, too large or holds one invalid record is refused whole. The
// records of a valid request go to the host as one group (see
// [Record.More]), which commits them in one transaction before the answer:
//
//   - 200 {"accepted":N}: every record was accepted (and, with a data
//     directory, is durable). Empty lines are not records.
//   - 400 {"accepted":0,"invalid":K,"error":"...","refused":[...]}: K
//     records are invalid, so nothing was accepted. Each refused entry
//     gives "line" (1-based, in the body), "column" (1-based byte, when
//     the fault is at one), "field" (when a record field is at fault),
//     "item" (array bodies: the 0-based index) and "error"; at most 100
//     are listed. A body that is not a well-formed JSON array has no
//     refused list, only the error with its line and column. Fix or
//     remove the invalid records and send the request again.
//   - 401: the endpoint wants a bearer token and the request has none,
//     or a wrong one; nothing was read.
//   - 413: the body is larger than MaxBodyBytes; nothing was accepted.
//   - 503 with Retry-After {"accepted":0,"error":"..."}: the host is
//     shutting down, or could not take or commit the records; nothing was
//     accepted, send the same request again later.
//
// So a client may resend a request on any answer but 200 without
// duplicating records. What it cannot know is the fate of a request whose
// answer it never got: the host may have accepted it. Records with an
// "id" are accepted once, so resending those is always safe.
//
// Records' origins are "http:PATH#REQUEST:LINE" for lines and
// "http:PATH#REQUEST[ITEM]" for array items, REQUEST counting requests from
// 1.
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
// is known before Run. A listen error reads "listen ADDR: REASON".
func NewHTTPSource(cfg HTTPSourceConfig) (*HTTPSource, error) {
	if cfg.Path == "" || cfg.Path[0] != '/' {
		return nil, fmt.Errorf("http source: path %q must start with '/'", cfg.Path)
	}
	in, err := newIntake(cfg.Stream, cfg.Partitions, cfg.PartitionBy, cfg.Format, cfg.EventTime)
	if err != nil {
		return nil, fmt.Errorf("http source: %w", err)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.PartitionBy = append([]string(nil), cfg.PartitionBy...)
	ln, err := listenEndpoint(cfg.Addr, cfg.TLS)
	if err != nil {
		return nil, err
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

// ingestBatch is one valid request's records for Run.
type ingestBatch struct {
	records []Record
	done    chan error // buffered: Run never waits for the handler
}

// refusal is one invalid record of a refused request.
type refusal struct {
	Item   *int   `json:"item,omitempty"`
	Line   int    `json:"line"`
	Column int    `json:"column,omitempty"`
	Field  string `json:"field,omitempty"`
	Error  string `json:"error"`
}

// ingestResponse is the JSON body of every answer of the endpoint.
type ingestResponse struct {
	Accepted int       `json:"accepted"`
	Invalid  int       `json:"invalid,omitempty"`
	Error    string    `json:"error,omitempty"`
	Refused  []refusal `json:"refused,omitempty"`
}

// Run serves requests until ctx is cancelled (it returns ctx.Err()) or emit
// fails (it returns emit's error). On the way out it answers 503 to
// requests not yet accepted and waits up to ShutdownGrace for the others.
func (s *HTTPSource) Run(ctx context.Context, emit func(Record) error) error {
	if s.ran.Swap(true) {
		return errors.New("http source: Run called twice")
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.ln) }()

	var runErr error
loop:
	for {
		select {
		case b := <-s.batches:
			err := emitGroup(b.records, emit)
			b.done <- err
			if err != nil {
				runErr = err
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

// emitGroup hands one request's records to the host as one all-or-nothing
// group: every record but the last has More, and the last asks for
// durability before the answer.
func emitGroup(records []Record, emit func(Record) error) error {
	for i, rec := range records {
		last := i == len(records)-1
		rec.More, rec.Sync = !last, last
		if err := emit(rec); err != nil {
			return err
		}
	}
	return nil
}

// ServeHTTP implements the ingest endpoint; it can also be mounted on
// another server's mux, as long as Run is running.
func (s *HTTPSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.cfg.Path {
		http.NotFound(w, r)
		return
	}
	if why := bearerRefusal(r, s.cfg.BearerToken); why != "" {
		challengeBearer(w)
		writeJSON(w, http.StatusUnauthorized, ingestResponse{Error: why})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, ingestResponse{Error: "use POST"})
		return
	}
	select {
	case <-s.stopping:
		s.unavailable(w, "shutting down; nothing was accepted")
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
		// Most often the client went away mid-body; nothing of it counts.
		writeJSON(w, http.StatusBadRequest, ingestResponse{Error: "reading body: " + err.Error() + "; nothing was accepted"})
		return
	}
	origin := "http:" + s.cfg.Path + "#" + strconv.FormatUint(s.requests.Add(1), 10)
	records, refused, err := s.decodeBody(body, origin)
	if err != nil || len(refused) > 0 {
		s.refuse(w, r, origin, len(records)+len(refused), refused, err)
		return
	}
	if len(records) == 0 {
		writeJSON(w, http.StatusOK, ingestResponse{})
		return
	}

	b := &ingestBatch{records: records, done: make(chan error, 1)}
	select {
	case s.batches <- b:
	case <-s.stopping:
		s.unavailable(w, "shutting down; nothing was accepted")
		return
	case <-r.Context().Done():
		return // the client left before anything was accepted
	}
	if err := <-b.done; err != nil {
		s.unavailable(w, err.Error()+"; nothing was accepted")
		return
	}
	writeJSON(w, http.StatusOK, ingestResponse{Accepted: len(records)})
}

// refuse answers 400 to a request with invalid records (refused) or a
// malformed body (bodyErr): nothing of it was accepted.
func (s *HTTPSource) refuse(w http.ResponseWriter, r *http.Request, origin string, total int, refused []refusal, bodyErr error) {
	resp := ingestResponse{Invalid: len(refused)}
	if bodyErr != nil {
		resp.Error = bodyErr.Error() + "; nothing was accepted"
	} else {
		resp.Error = fmt.Sprintf("%d of %d records are invalid, so none was accepted: fix or remove them and send the request again", len(refused), total)
		resp.Refused = refused[:min(len(refused), maxRefusalsReported)]
	}
	first := resp.Error
	if len(refused) > 0 {
		first = fmt.Sprintf("line %d: %s", refused[0].Line, refused[0].Error)
	}
	s.cfg.Logger.Warn("http source: request refused, nothing accepted", "path", s.cfg.Path, "request", origin,
		"remote", r.RemoteAddr, "invalid", len(refused), "first", first)
	writeJSON(w, http.StatusBadRequest, resp)
}

func (s *HTTPSource) unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", retryAfterSeconds)
	writeJSON(w, http.StatusServiceUnavailable, ingestResponse{Error: why})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads a request body: record lines, or a JSON array of
// records when its first non-space byte is '['. It returns the records and
// the invalid ones, in body order, or bodyErr when the body is not a
// well-formed array at all.
func (s *HTTPSource) decodeBody(body []byte, origin string) (records []Record, refused []refusal, bodyErr error) {
	var items []ingestItem
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' && s.intake.decoder.Format() == SourceEnvelope {
		if items, bodyErr = s.parseArray(body, origin); bodyErr != nil {
			return nil, nil, bodyErr
		}
	} else {
		items = s.parseLines(body, origin)
	}
	for _, it := range items {
		if it.refused != nil {
			refused = append(refused, *it.refused)
		} else {
			records = append(records, it.record)
		}
	}
	return records, refused, nil
}

// ingestItem is one record of a body, or why it is invalid.
type ingestItem struct {
	record  Record
	refused *refusal
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
		if s.intake.skips(line) {
			continue
		}
		items = append(items, s.item(line, origin+":"+strconv.Itoa(lineNo), lineNo, 1, nil))
	}
	return items
}

// item parses one record; line and col say where it starts in the body.
func (s *HTTPSource) item(rec []byte, origin string, line, col int, index *int) ingestItem {
	r, rej, fault := s.intake.parse(rec, origin)
	if rej == nil {
		return ingestItem{record: r}
	}
	errCol := fault.column
	ref := refusal{Item: index, Line: line, Field: fault.field, Error: rej.Err.Error()}
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
	return ingestItem{refused: &ref}
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
