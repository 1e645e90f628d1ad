package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// SourceFormat is how a file, HTTP or Kafka source reads the bytes of one
// record: a line (without its terminator) or a Kafka value. See the
// package documentation.
type SourceFormat string

// The source formats.
const (
	// SourceEnvelope is the record line format: a JSON object
	// {write_ts, event_ts, id, payload}. The default of file and HTTP
	// sources.
	SourceEnvelope SourceFormat = "envelope"
	// SourceJSON takes the bytes, which must be valid JSON, as the
	// payload; the event time is a top-level field of it, when a field is
	// given. The default of Kafka sources.
	SourceJSON SourceFormat = "json"
	// SourceRaw takes the bytes as they are as the payload.
	SourceRaw SourceFormat = "raw"
)

// RecordDecoder decodes the bytes of one record in a [SourceFormat]. It is
// what file, HTTP and Kafka sources share, so that a format means the same
// whichever source reads it. It is safe for concurrent use.
type RecordDecoder struct {
	format SourceFormat
	// field and timeFormat locate the event time of format json.
	field, timeFormat string
}

// NewRecordDecoder checks the format ("" is envelope) and the event time:
// et.Field (with its Format) only goes with format json. et.Header is not
// the decoder's: only a Kafka source, which has headers, reads it.
func NewRecordDecoder(format SourceFormat, et EventTimeSource) (*RecordDecoder, error) {
	if format == "" {
		format = SourceEnvelope
	}
	switch format {
	case SourceEnvelope, SourceJSON, SourceRaw:
	default:
		return nil, fmt.Errorf("format %q is unknown (want envelope, json or raw)", format)
	}
	if et.Field != "" {
		if format != SourceJSON {
			return nil, fmt.Errorf("an event time field needs format json, not %s", format)
		}
		if !validTimeFormat(et.Format) {
			return nil, fmt.Errorf("event time format %q is unknown", et.Format)
		}
	}
	return &RecordDecoder{format: format, field: et.Field, timeFormat: et.Format}, nil
}

// Format returns the decoder's format.
func (d *RecordDecoder) Format() SourceFormat { return d.format }

// Decode decodes one record. The payload it returns is in memory of its
// own. Every error is a *LineError: format envelope as [ParseLine]; format
// json when data is not valid JSON (at the column of the fault) or, with
// an event time field, when the payload is not an object with that field
// holding a time in the format. Format raw never fails.
func (d *RecordDecoder) Decode(data []byte) (LineRecord, error) { return d.decode(data, true) }

// decode is Decode, with a payload that is data itself unless clone: a
// Kafka record's value is the source's already, a line is the reader's
// buffer.
func (d *RecordDecoder) decode(data []byte, clone bool) (LineRecord, error) {
	if clone && d.format != SourceEnvelope { // ParseLine copies the payload itself
		data = bytes.Clone(data)
	}
	switch d.format {
	case SourceJSON:
		return parseJSONRecord(data, d.field, d.timeFormat)
	case SourceRaw:
		return LineRecord{Payload: data}, nil
	}
	return ParseLine(data)
}

// parseJSONRecord reads a JSON payload, data itself, and, when field is
// not empty, its event time from that top-level field.
func parseJSONRecord(data []byte, field, timeFormat string) (LineRecord, error) {
	if !json.Valid(data) {
		if len(bytes.TrimSpace(data)) == 0 {
			return LineRecord{}, &LineError{Column: 1, Err: errors.New("the payload is empty, which is not JSON")}
		}
		col, se := syntaxColumn(data)
		if se == nil || se.Error() == "unexpected end of JSON input" {
			// Unmarshal puts the end of the input at its last byte.
			return LineRecord{}, &LineError{Column: len(data) + 1, Err: errors.New("the payload is not JSON: it ends inside a JSON value")}
		}
		return LineRecord{}, &LineError{Column: col, Err: fmt.Errorf("the payload is not JSON: %v", se)}
	}
	rec := LineRecord{Payload: data}
	if field == "" {
		return rec, nil
	}
	p := lineParser{line: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	start := p.skip(0)
	if data[start] != '{' {
		return rec, &LineError{Column: start + 1, Field: field, Err: fmt.Errorf("the payload is not a JSON object, so it has no event time field %s", field)}
	}
	if _, err := p.dec.Token(); err != nil { // '{'; valid JSON cannot fail here
		return rec, p.syntax(err, start)
	}
	found := false
	for p.dec.More() {
		keyAt := p.skip(int(p.dec.InputOffset()))
		tok, err := p.dec.Token()
		if err != nil {
			return rec, p.syntax(err, keyAt)
		}
		valueAt := p.skip(int(p.dec.InputOffset()))
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return rec, p.syntax(err, valueAt)
		}
		if tok.(string) != field {
			continue
		}
		if found {
			// Decoders differ on which of two wins; the record says
			// nothing certain about its time.
			return rec, &LineError{Column: keyAt + 1, Field: field, Err: fmt.Errorf("the event time field %s appears twice", field)}
		}
		found = true
		if rec.Event, err = parseEventTimeJSON(raw, timeFormat); err != nil {
			return rec, &LineError{Column: valueAt + 1, Field: field, Err: fmt.Errorf("event time field %s: %w", field, err)}
		}
		rec.HasEvent = true
	}
	if !found {
		return rec, &LineError{Column: 1, Field: field, Err: fmt.Errorf("no field %s (the event time)", field)}
	}
	return rec, nil
}
