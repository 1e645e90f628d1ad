package connect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/flowhost/flowhost/ordering"
)

// SinkRecord is one output message as sinks write it, one JSON object per
// line. Timestamps are nanoseconds since the Unix epoch; write_ts is 0 for
// messages that are not source records.
type SinkRecord struct {
	Stream      string   `json:"stream"`
	MessageID   string   `json:"message_id"`
	Parents     []string `json:"parents"`
	Key         string   `json:"key"`
	EventTS     int64    `json:"event_ts"`
	SystemTS    int64    `json:"system_ts"`
	AlignmentTS int64    `json:"alignment_ts"`
	WriteTS     int64    `json:"write_ts"`
	TaskID      uint64   `json:"task_id"`
	// Payload is the payload itself when it is valid UTF-8 JSON, otherwise a
	// JSON string of its base64 and PayloadEncoding is "base64".
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`
}

// NewSinkRecord converts a message for sinks. A caller converting many
// messages keeps a [SinkRecordFormatter] instead.
func NewSinkRecord(m *ordering.Message) SinkRecord {
	var f SinkRecordFormatter
	return f.Append(nil, m)[0]
}

// SinkRecordFormatter converts messages for sinks a batch at a time. The
// message ids and parents' ids of one batch are formatted into one buffer
// and made one string, which they share, and the batch's Parents share one
// slice: two allocations per batch instead of two per record, the larger
// part of what a sink's records cost. The records' strings therefore keep
// the whole batch's ids in memory while any of them is held. The zero value
// is ready to use; it is not safe for concurrent use.
type SinkRecordFormatter struct {
	text []byte
	ends []int
}

// Append appends the records of ms, in order, to dst and returns it.
func (f *SinkRecordFormatter) Append(dst []SinkRecord, ms ...*ordering.Message) []SinkRecord {
	f.text, f.ends = f.text[:0], f.ends[:0]
	nParents := 0
	for _, m := range ms {
		f.text, _ = m.ID.AppendText(f.text)
		f.ends = append(f.ends, len(f.text))
		for _, p := range m.Parents {
			f.text, _ = p.AppendText(f.text)
			f.ends = append(f.ends, len(f.text))
		}
		nParents += len(m.Parents)
	}
	all := string(f.text)
	parents := make([]string, nParents)
	start, e := 0, 0
	cut := func() string {
		s := all[start:f.ends[e]]
		start = f.ends[e]
		e++
		return s
	}
	for _, m := range ms {
		r := SinkRecord{
			Stream:      m.Stream,
			MessageID:   cut(),
			Parents:     parents[:len(m.Parents):len(m.Parents)],
			Key:         m.Key,
			EventTS:     m.Time.Event,
			SystemTS:    m.Time.System,
			AlignmentTS: m.Time.Alignment,
			WriteTS:     m.Time.Write,
			TaskID:      uint64(m.Task),
		}
		parents = parents[len(m.Parents):]
		for i := range r.Parents {
			r.Parents[i] = cut()
		}
		r.Payload, r.PayloadEncoding = encodeBytes(m.Payload, "")
		dst = append(dst, r)
	}
	return dst
}

// PayloadBytes returns the payload's original bytes.
func (r *SinkRecord) PayloadBytes() ([]byte, error) {
	switch r.PayloadEncoding {
	case "":
		return r.Payload, nil
	case "base64":
		var s string
		if err := json.Unmarshal(r.Payload, &s); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		return base64.StdEncoding.DecodeString(s)
	}
	return nil, fmt.Errorf("payload_encoding %q is unknown", r.PayloadEncoding)
}

// appendJSONLine appends r as one line of JSON. The payload is compacted
// (a JSON payload written over several lines must not break the line
// format) and HTML characters are left as they are.
func (r *SinkRecord) appendJSONLine(dst *bytes.Buffer) error {
	enc := json.NewEncoder(dst)
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// JSONLine returns r as the JSON sinks and the HTTP sink write it: one
// object, payload compacted, ending in a newline. It is the one encoding
// of a record as a line, so a line a runtime stores in a [SinkLog] is byte
// for byte the line an [HTTPSink] serves live for the same record.
func (r *SinkRecord) JSONLine() ([]byte, error) {
	var b bytes.Buffer
	if err := r.appendJSONLine(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrPayloadNewline is why a line sink in format payload refuses a record:
// its payload is not JSON (which the sink would compact onto one line) and
// holds a newline, so it cannot be written as one line without changing
// it. The run stops rather than split or alter the record; a json sink
// (which writes such a payload in base64) or a kafka sink take it as it is.
var ErrPayloadNewline = errors.New("the payload is not JSON and holds a newline, so format payload cannot write it as one line; use format json (which writes it in base64) or a kafka sink")

// appendPayloadLine appends r's payload bytes and a newline. A payload is
// written as it is, except that a JSON payload written over several lines
// is compacted onto one (the same JSON value); one that is not JSON and
// holds a newline is refused with [ErrPayloadNewline].
func (r *SinkRecord) appendPayloadLine(dst *bytes.Buffer) error {
	p, err := r.payloadLineBytes()
	if err != nil {
		return err
	}
	if bytes.IndexByte(p, '\n') < 0 {
		dst.Write(p)
	} else if err := json.Compact(dst, p); err != nil {
		return err
	}
	dst.WriteByte('\n')
	return nil
}

// payloadLineBytes returns the payload bytes of r, or [ErrPayloadNewline]
// when format payload cannot write them as one line.
func (r *SinkRecord) payloadLineBytes() ([]byte, error) {
	p, err := r.PayloadBytes()
	if err != nil {
		return nil, err
	}
	// A payload without encoding is valid JSON (see NewSinkRecord), which
	// compacts onto one line.
	if r.PayloadEncoding != "" && bytes.IndexByte(p, '\n') >= 0 {
		return nil, ErrPayloadNewline
	}
	return p, nil
}

// Line returns r as one line in format json ([SinkRecord.JSONLine]) or
// payload (the payload alone, see [FormatPayload]), ending in a newline.
// It is how the HTTP sink encodes records, live and in its log.
func (r *SinkRecord) Line(format Format) ([]byte, error) {
	switch format {
	case "", FormatJSON:
		return r.JSONLine()
	case FormatPayload:
		var b bytes.Buffer
		if err := r.appendPayloadLine(&b); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return nil, fmt.Errorf("sink format %q has no line encoding (want json or payload)", format)
}

// Sink receives committed output records.
//
// Write is called with the records of a batch in output order, from one
// goroutine at a time; when it returns nil the sink has taken the batch
// (what "taken" guarantees is the sink's to say). Close flushes and
// releases the sink; Write must not be called after it.
type Sink interface {
	Write(ctx context.Context, records []SinkRecord) error
	Close() error
}

// Format is how a [WriterSink] writes records.
type Format string

const (
	// FormatJSON writes one SinkRecord object per line.
	FormatJSON Format = "json"
	// FormatText writes one aligned human-readable line per record: stream,
	// key, event time (RFC 3339, milliseconds, UTC), message_id, payload.
	FormatText Format = "text"
	// FormatPayload writes the payload bytes alone, one per line: as they
	// are, a JSON payload compacted onto one line if it spans several;
	// a payload that is not JSON and holds a newline stops the sink with
	// [ErrPayloadNewline]. What a file source in format raw (or json, for
	// JSON payloads) reads back is the payload again.
	FormatPayload Format = "payload"
)

// WriterSink writes records to an io.Writer, buffered, flushing at the end
// of every Write. It is what the stdout and file sinks are made of.
//
// Durability: when Write returns, the batch has been handed to the
// writer (for a file: the operating system), not synced to disk; Close
// syncs a file. On its own it is at least once across a crash; the host
// makes file sinks exactly once with [CommittedFileSink], which syncs and
// commits the file's length after every batch.
type WriterSink struct {
	format Format
	closer io.Closer
	sync   func() error

	mu     sync.Mutex
	w      *bufio.Writer
	line   bytes.Buffer
	widths [2]int // text format: widest stream and key so far
	closed bool
}

// NewWriterSink writes to w in format ("" means JSON). Close flushes but
// does not close w.
func NewWriterSink(w io.Writer, format Format) (*WriterSink, error) {
	switch format {
	case "":
		format = FormatJSON
	case FormatJSON, FormatText, FormatPayload:
	default:
		return nil, fmt.Errorf("sink format %q is unknown (want json, text or payload)", format)
	}
	return &WriterSink{format: format, w: bufio.NewWriterSize(w, 64<<10)}, nil
}

// NewStdoutSink writes to the process's standard output.
func NewStdoutSink(format Format) (*WriterSink, error) { return NewWriterSink(os.Stdout, format) }

// FileSinkConfig configures a file sink.
type FileSinkConfig struct {
	Path   string
	Format Format // "" means JSON lines
	// Truncate empties an existing file; by default records are appended,
	// so that no earlier output is ever destroyed.
	Truncate bool
}

// OpenFileSink opens (creating) the file and returns a sink writing to it;
// Close flushes, syncs and closes the file.
func OpenFileSink(cfg FileSinkConfig) (*WriterSink, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if cfg.Truncate {
		flags = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	}
	f, err := os.OpenFile(cfg.Path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	s, err := NewWriterSink(f, cfg.Format)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closer, s.sync = f, f.Sync
	return s, nil
}

// Write writes the batch and flushes it to the underlying writer.
func (s *WriterSink) Write(ctx context.Context, records []SinkRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sink: write after close")
	}
	if s.format == FormatPayload {
		// Refuse a batch before writing any of it, so that no part of a
		// refused batch is left behind in the writer.
		for i := range records {
			if _, err := records[i].payloadLineBytes(); err != nil {
				return fmt.Errorf("sink: record %s: %w", records[i].MessageID, err)
			}
		}
	}
	for i := range records {
		s.line.Reset()
		var err error
		switch s.format {
		case FormatText:
			s.appendTextLine(&records[i])
		case FormatPayload:
			err = records[i].appendPayloadLine(&s.line)
		default:
			err = records[i].appendJSONLine(&s.line)
		}
		if err != nil {
			return fmt.Errorf("sink: record %s: %w", records[i].MessageID, err)
		}
		if _, err := s.w.Write(s.line.Bytes()); err != nil {
			return fmt.Errorf("sink: %w", err)
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	return nil
}

// textTimeLayout is RFC 3339 with milliseconds.
const textTimeLayout = "2006-01-02T15:04:05.000Z07:00"

func (s *WriterSink) appendTextLine(r *SinkRecord) {
	pad := func(text string, col int) {
		s.widths[col] = max(s.widths[col], utf8.RuneCountInString(text))
		s.line.WriteString(text)
		s.line.WriteString(strings.Repeat(" ", s.widths[col]-utf8.RuneCountInString(text)+2))
	}
	pad(r.Stream, 0)
	pad(r.Key, 1)
	s.line.WriteString(time.Unix(0, r.EventTS).UTC().Format(textTimeLayout))
	s.line.WriteString("  ")
	s.line.WriteString(r.MessageID)
	s.line.WriteString("  ")
	if r.PayloadEncoding == "" {
		_ = json.Compact(&s.line, r.Payload)
	} else {
		s.line.WriteString(r.PayloadEncoding + ":")
		s.line.Write(bytes.Trim(r.Payload, `"`))
	}
	s.line.WriteByte('\n')
}

// Close flushes, and for a file syncs and closes it. It is idempotent.
func (s *WriterSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.w.Flush()
	if s.sync != nil {
		err = errors.Join(err, s.sync())
	}
	if s.closer != nil {
		err = errors.Join(err, s.closer.Close())
	}
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	return nil
}
