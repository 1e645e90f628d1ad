package connect

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/flowhost/flowhost/host/keys"
)

// Stages name where in the data path a record was refused.
const (
	StageIngest = "ingest" // a source could not read the record
	StageKey    = "key"    // no key could be extracted from the payload
	StageGuest  = "guest"  // a computation failed on it
	StageOutput = "output" // a computation's output was invalid
)

// Rejection is a record the host refused, with the reason.
type Rejection struct {
	// Origin says where the record came from, as precisely as known, e.g.
	// "orders.jsonl:17:12" (file:line:byte column).
	Origin string
	// Stage is one of the Stage constants.
	Stage string
	// Err is why the record was refused.
	Err error
	// Record is the refused record's bytes as received.
	Record []byte
}

// DeadLetter keeps refused records as JSON lines:
//
//	{"time":"2024-05-01T10:00:00.123456789Z","origin":"orders.jsonl:17:12","stage":"ingest","error":"...","record":{...}}
//
// record holds the bytes as JSON when they are valid JSON; otherwise as a
// string with "record_encoding":"text" when they are UTF-8 text, or as
// base64 with "record_encoding":"base64". Each line is written to the
// underlying writer with one Write call, so a file holds every rejection
// that Reject returned for, even if the process dies right after. A
// DeadLetter is safe for concurrent use.
type DeadLetter struct {
	now   func() time.Time
	count atomic.Uint64

	mu     sync.Mutex
	w      io.Writer
	closer io.Closer
	buf    bytes.Buffer
	enc    *json.Encoder
}

// NewDeadLetter writes rejections to w, which Close does not close.
func NewDeadLetter(w io.Writer) *DeadLetter {
	d := &DeadLetter{now: time.Now, w: w}
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false)
	return d
}

// OpenDeadLetter appends rejections to the file at path, creating it.
func OpenDeadLetter(path string) (*DeadLetter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dead letter: %w", err)
	}
	d := NewDeadLetter(f)
	d.closer = f
	return d, nil
}

type deadLetterLine struct {
	Time           string          `json:"time"`
	Origin         string          `json:"origin"`
	Stage          string          `json:"stage"`
	Error          string          `json:"error"`
	Record         json.RawMessage `json:"record"`
	RecordEncoding string          `json:"record_encoding,omitempty"`
}

// Reject writes one rejection. An error means the rejection is not kept,
// which the caller must treat as fatal: records would be lost otherwise.
func (d *DeadLetter) Reject(r Rejection) error {
	line := deadLetterLine{Origin: r.Origin, Stage: r.Stage, Error: "unknown error"}
	if r.Err != nil {
		line.Error = r.Err.Error()
	}
	line.Record, line.RecordEncoding = encodeBytes(r.Record, "text")
	d.mu.Lock()
	defer d.mu.Unlock()
	line.Time = d.now().UTC().Format(time.RFC3339Nano)
	d.buf.Reset()
	if err := d.enc.Encode(line); err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	if _, err := d.w.Write(d.buf.Bytes()); err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	d.count.Add(1)
	return nil
}

// Count returns how many rejections were written. It only grows, so it can
// back a Prometheus counter:
//
//	prometheus.NewCounterFunc(opts, func() float64 { return float64(d.Count()) })
func (d *DeadLetter) Count() uint64 { return d.count.Load() }

// Close closes the file opened by [OpenDeadLetter]; for a writer given to
// [NewDeadLetter] it does nothing.
func (d *DeadLetter) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closer == nil {
		return nil
	}
	err := d.closer.Close()
	d.closer = nil
	return err
}

// encodeBytes returns b as a JSON value: itself when it is valid JSON,
// else a string, with the encoding's name. A non-empty textEncoding allows
// UTF-8 text as a JSON string; otherwise such bytes are base64 too.
func encodeBytes(b []byte, textEncoding string) (json.RawMessage, string) {
	if len(b) > 0 && keys.ValidJSON(b) && utf8.Valid(b) {
		return b, ""
	}
	if textEncoding != "" && utf8.Valid(b) {
		s, _ := json.Marshal(string(b))
		return s, textEncoding
	}
	s, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
	return s, "base64"
}
