package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/flowhost/flowhost/ordering"
)

// LineRecord is one parsed line of the record line format (see the package
// documentation).
type LineRecord struct {
	Write    int64
	HasWrite bool
	Event    int64
	HasEvent bool
	// Payload is the payload's JSON text as written, in memory of its own.
	Payload []byte
	// ID is the record's idempotency key, if it has one (field "id").
	ID string
	// Parents are the ids of the messages the record derives from (field
	// "parents"), nil for none: a dead letter replayed by flowhost
	// dead-letters replay names the refused message, so that its lineage
	// reaches back to it.
	Parents []ordering.MessageID
}

// LineError says where and why a record line is malformed.
type LineError struct {
	// Column is the 1-based byte column of the fault.
	Column int
	// Field is the record field at fault (write_ts, event_ts, payload, id, parents,
	// or the unknown field's name), or empty when the line's JSON form is.
	Field string
	Err   error
}

func (e *LineError) Error() string { return fmt.Sprintf("column %d: %v", e.Column, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// ParseLine parses one record line (without its line terminator). Every
// error is a *LineError.
func ParseLine(line []byte) (LineRecord, error) {
	var rec LineRecord
	p := lineParser{line: line, dec: json.NewDecoder(bytes.NewReader(line))}
	p.dec.UseNumber()
	start := p.skip(0)
	tok, err := p.dec.Token()
	if err != nil {
		return rec, p.syntax(err, start)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return rec, &LineError{Column: start + 1, Err: errors.New("a record line must be a JSON object")}
	}
	var seenWrite, seenEvent, seenPayload, seenID, seenParents bool
	for p.dec.More() {
		keyAt := p.skip(int(p.dec.InputOffset()))
		tok, err := p.dec.Token()
		if err != nil {
			return rec, p.syntax(err, keyAt)
		}
		name := tok.(string) // More and Token only give strings as keys
		valueAt := p.skip(int(p.dec.InputOffset()))
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return rec, p.syntax(err, valueAt)
		}
		seen := &seenPayload
		switch name {
		case "write_ts":
			seen = &seenWrite
			rec.Write, rec.HasWrite, err = parseTimestamp(raw)
		case "event_ts":
			seen = &seenEvent
			rec.Event, rec.HasEvent, err = parseTimestamp(raw)
		case "payload":
			rec.Payload = raw
		case "id":
			seen = &seenID
			rec.ID, err = parseID(raw)
		case "parents":
			seen = &seenParents
			rec.Parents, err = parseParents(raw)
		default:
			return rec, &LineError{Column: keyAt + 1, Field: name, Err: fmt.Errorf("unknown field %q (want write_ts, event_ts, payload, id, parents)", name)}
		}
		if *seen {
			return rec, &LineError{Column: keyAt + 1, Field: name, Err: fmt.Errorf("field %q appears twice", name)}
		}
		*seen = true
		if err != nil {
			return rec, &LineError{Column: valueAt + 1, Field: name, Err: fmt.Errorf("%s: %w", name, err)}
		}
	}
	end := p.skip(int(p.dec.InputOffset()))
	if _, err := p.dec.Token(); err != nil { // '}'
		return rec, p.syntax(err, end)
	}
	if rest := p.skip(int(p.dec.InputOffset())); rest < len(line) {
		return rec, &LineError{Column: rest + 1, Err: errors.New("data after the record object")}
	}
	if !seenPayload {
		return rec, &LineError{Column: 1, Field: "payload", Err: errors.New(`record has no "payload"`)}
	}
	return rec, nil
}

// MaxIDBytes bounds a record's idempotency key.
const MaxIDBytes = 256

// parseID reads an idempotency key: a non-empty string of at most
// MaxIDBytes bytes.
func parseID(raw json.RawMessage) (string, error) {
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return "", errors.New("expected a string")
	}
	if id == "" || len(id) > MaxIDBytes {
		return "", fmt.Errorf("expected 1 to %d bytes, got %d", MaxIDBytes, len(id))
	}
	return id, nil
}

// MaxParents bounds the parents a record names.
const MaxParents = 64

// parseParents reads a record's parents: an array of at most MaxParents
// message ids in their canonical text form ([ordering.MessageID.String]),
// none empty; null or [] is none.
func parseParents(raw json.RawMessage) ([]ordering.MessageID, error) {
	var texts []string
	if err := json.Unmarshal(raw, &texts); err != nil {
		return nil, errors.New("expected an array of message id strings")
	}
	if len(texts) > MaxParents {
		return nil, fmt.Errorf("%d parents, at most %d", len(texts), MaxParents)
	}
	if len(texts) == 0 {
		return nil, nil
	}
	parents := make([]ordering.MessageID, len(texts))
	for i, t := range texts {
		if t == "" {
			return nil, fmt.Errorf("parent %d: empty id", i)
		}
		id, err := ordering.ParseMessageID(t)
		if err != nil {
			return nil, fmt.Errorf("parent %d: %w", i, err)
		}
		parents[i] = id
	}
	return parents, nil
}

type lineParser struct {
	line []byte
	dec  *json.Decoder
}

// skip returns the offset of the first byte at or after off that is not
// JSON white space or one of the separators the decoder consumes itself.
func (p *lineParser) skip(off int) int {
	for off < len(p.line) {
		switch p.line[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// syntax turns a decoder error into a LineError; at is where the token or
// value being read starts.
func (p *lineParser) syntax(err error, at int) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		if col, se := syntaxColumn(p.line); se != nil {
			return &LineError{Column: col, Err: fmt.Errorf("invalid JSON: %v", se)}
		}
		return &LineError{Column: at + 1, Err: fmt.Errorf("invalid JSON: %v", err)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(p.line)) == 0 {
			return &LineError{Column: 1, Err: errors.New("empty line")}
		}
		return &LineError{Column: len(p.line) + 1, Err: errors.New("line ends inside the JSON object")}
	}
	return &LineError{Column: at + 1, Err: err}
}

// syntaxColumn returns the 1-based byte position of the first syntax error
// in data, or nil if there is none. It exists because a json.Decoder's
// SyntaxError offsets are not positions in its input, while Unmarshal's
// count the bytes up to and including the bad one.
func syntaxColumn(data []byte) (int, *json.SyntaxError) {
	var se *json.SyntaxError
	var whole json.RawMessage
	if errors.As(json.Unmarshal(data, &whole), &se) {
		return max(int(se.Offset), 1), se
	}
	return 0, nil
}

// The times that int64 nanoseconds since the Unix epoch can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// parseTimestamp reads an integer of nanoseconds or an RFC 3339 string;
// null is absent.
func parseTimestamp(raw json.RawMessage) (int64, bool, error) {
	switch raw[0] {
	case 'n':
		return 0, false, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, false, fmt.Errorf("%q is not an RFC 3339 time", s)
		}
		if t.Before(minTime) || t.After(maxTime) {
			return 0, false, fmt.Errorf("%q is outside the nanosecond range of years 1678 to 2262", s)
		}
		return t.UnixNano(), true, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s is not an integer of nanoseconds since the Unix epoch", raw)
		}
		return v, true, nil
	}
	return 0, false, fmt.Errorf("%s is not a timestamp (want integer nanoseconds or an RFC 3339 string)", raw)
}
