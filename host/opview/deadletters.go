package opview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// DeadLetter is one line of a dead-letter file (dead_letter: {type: file}),
// as package connect writes it.
type DeadLetter struct {
	// Line is its line number in the file, from 1.
	Line   int    `json:"line"`
	Time   string `json:"time"`
	Origin string `json:"origin"`
	Stage  string `json:"stage"`
	Error  string `json:"error"`
	// Computation is the computation that refused the record, read from
	// the origin ("COMPUTATION <- STREAM ID"); "" for a record a source's
	// connector could not read.
	Computation    string          `json:"computation,omitempty"`
	Record         json.RawMessage `json:"record"`
	RecordEncoding string          `json:"record_encoding,omitempty"`
}

// DeadLetterFilter selects dead letters; a zero field selects all.
type DeadLetterFilter struct {
	// Computation selects those the computation refused.
	Computation string
	// Cause selects those whose error contains it.
	Cause string
	// Since and Until select those written at or after Since and before
	// Until.
	Since, Until time.Time
}

func (f DeadLetterFilter) match(d *DeadLetter, at time.Time) bool {
	return (f.Computation == "" || d.Computation == f.Computation) &&
		(f.Cause == "" || strings.Contains(d.Error, f.Cause)) &&
		(f.Since.IsZero() || !at.Before(f.Since)) &&
		(f.Until.IsZero() || at.Before(f.Until))
}

// maxDeadLetterLine bounds one line: a record is at most what a source
// accepts, far below it.
const maxDeadLetterLine = 64 << 20

// ReadDeadLetters calls fn with each dead letter of r (a dead-letter file,
// named name in errors) that f selects, in the file's order. A line that
// is not a dead letter stops it with an error naming the file and the line;
// a last line without its newline (a writer that died mid-line) is
// reported the same way.
func ReadDeadLetters(r io.Reader, name string, f DeadLetterFilter, fn func(DeadLetter) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s:%d: the last line has no newline: the writer stopped in the middle of it", name, n)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var d DeadLetter
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return fmt.Errorf("%s:%d: not a dead letter: %v", name, n, err)
		}
		at, err := time.Parse(time.RFC3339Nano, d.Time)
		if err != nil {
			return fmt.Errorf("%s:%d: time: %q is not an RFC 3339 time", name, n, d.Time)
		}
		if d.Stage == "" {
			return fmt.Errorf("%s:%d: stage: missing", name, n)
		}
		d.Line = n
		if comp, _, ok := strings.Cut(d.Origin, " <- "); ok {
			d.Computation = comp
		}
		if f.match(&d, at) {
			if err := fn(d); err != nil {
				return err
			}
		}
	}
}

// readLine reads one line with its newline cut; io.EOF with the bytes
// of a last line without one.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxDeadLetterLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxDeadLetterLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}
