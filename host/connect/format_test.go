package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// formatCase is one line in one source format and what a source makes of
// it: the payload and event time of the record, or the column, field and
// error text of its refusal.
type formatCase struct {
	name      string
	format    SourceFormat
	field     string // event_time.field, with timeFormat
	timeFmt   string
	line      string
	payload   string // want, when the line is a record
	event     int64
	hasEvent  bool
	errColumn int // want a refusal at this column (0: a record)
	errField  string
	errText   string
	// blank: a file or HTTP source skips the line, as it holds no record.
	blank bool
}

var formatCases = []formatCase{
	{name: "envelope", format: SourceEnvelope, line: `{"event_ts":5,"payload":{"a":1}}`, payload: `{"a":1}`, event: 5, hasEvent: true},
	{name: "envelope is the default", line: `{"payload":[1]}`, payload: `[1]`},
	{name: "envelope refuses a bare payload", format: SourceEnvelope, line: `{"a":1}`, errColumn: 2, errField: "a", errText: `unknown field "a"`},
	{name: "json object", format: SourceJSON, line: `{"a":1}`, payload: `{"a":1}`},
	{name: "json keeps the bytes", format: SourceJSON, line: ` [1, 2] `, payload: ` [1, 2] `},
	{name: "json scalar", format: SourceJSON, line: `"text"`, payload: `"text"`},
	{name: "json looks like an envelope", format: SourceJSON, line: `{"payload":1}`, payload: `{"payload":1}`},
	{name: "json invalid", format: SourceJSON, line: `{"a":}`, errColumn: 6, errText: "the payload is not JSON"},
	{name: "json cut off", format: SourceJSON, line: `{"a":1`, errColumn: 7, errText: "the payload is not JSON"},
	{name: "json blank", format: SourceJSON, line: " ", errColumn: 1, errText: "the payload is empty", blank: true},
	{name: "json event field unix_ms", format: SourceJSON, field: "ts", timeFmt: "unix_ms", line: `{"a":1,"ts":1714557600123}`,
		payload: `{"a":1,"ts":1714557600123}`, event: 1714557600123000000, hasEvent: true},
	{name: "json event field rfc3339", format: SourceJSON, field: "at", timeFmt: "rfc3339", line: `{"at":"2024-05-01T10:00:00.5Z"}`,
		payload: `{"at":"2024-05-01T10:00:00.5Z"}`, event: time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC).UnixNano(), hasEvent: true},
	{name: "json event field quoted number", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: `{"ts":"17"}`, payload: `{"ts":"17"}`, event: 17e9, hasEvent: true},
	{name: "json event field nested is not top level", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: `{"x":{"ts":1}}`,
		errColumn: 1, errField: "ts", errText: "no field ts (the event time)"},
	{name: "json event field missing", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: `{"a":1}`, errColumn: 1, errField: "ts", errText: "no field ts"},
	{name: "json event field bad", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: `{"a":1, "ts":"soon"}`,
		errColumn: 14, errField: "ts", errText: `event time field ts: expected an integer (unix_s); got "soon"`},
	{name: "json event field twice", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: `{"ts":1,"ts":2}`,
		errColumn: 9, errField: "ts", errText: "appears twice"},
	{name: "json event field in an array", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: ` [1]`,
		errColumn: 2, errField: "ts", errText: "not a JSON object"},
	{name: "json event field out of range", format: SourceJSON, field: "ts", timeFmt: "unix_s", line: `{"ts":9223372037}`,
		errColumn: 7, errField: "ts", errText: "outside the int64 nanosecond range"},
	{name: "raw text", format: SourceRaw, line: `GET /index.html 200`, payload: `GET /index.html 200`},
	{name: "raw json stays bytes", format: SourceRaw, line: ` {"a": 1} `, payload: ` {"a": 1} `},
	{name: "raw not utf-8", format: SourceRaw, line: "\xff\xfe", payload: "\xff\xfe"},
	{name: "raw blank line is a record", format: SourceRaw, line: "  ", payload: "  "},
}

func (tc formatCase) decoder(t *testing.T) *RecordDecoder {
	t.Helper()
	d, err := NewRecordDecoder(tc.format, EventTimeSource{Field: tc.field, Format: tc.timeFmt})
	require.NoError(t, err)
	return d
}

func TestRecordDecoder(t *testing.T) {
	for _, tc := range formatCases {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := tc.decoder(t).Decode([]byte(tc.line))
			if tc.errColumn > 0 {
				var le *LineError
				require.ErrorAs(t, err, &le)
				require.Equal(t, tc.errColumn, le.Column, "%v", err)
				require.Equal(t, tc.errField, le.Field)
				require.Contains(t, le.Err.Error(), tc.errText)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.payload, string(rec.Payload))
			require.Equal(t, tc.hasEvent, rec.HasEvent)
			require.Equal(t, tc.event, rec.Event)
		})
	}
}

func TestNewRecordDecoderErrors(t *testing.T) {
	for _, tc := range []struct {
		format SourceFormat
		et     EventTimeSource
		want   string
	}{
		{"csv", EventTimeSource{}, `format "csv" is unknown`},
		{SourceEnvelope, EventTimeSource{Field: "ts", Format: "unix_s"}, "needs format json, not envelope"},
		{SourceRaw, EventTimeSource{Field: "ts", Format: "unix_s"}, "needs format json, not raw"},
		{SourceJSON, EventTimeSource{Field: "ts"}, `event time format "" is unknown`},
	} {
		_, err := NewRecordDecoder(tc.format, tc.et)
		require.ErrorContains(t, err, tc.want)
	}
}

// TestFileSourceFormats reads each case's line as line 2 of a file (line 1
// is blank) and checks the record or the dead letter, whose origin names
// the file, line and column.
func TestFileSourceFormats(t *testing.T) {
	for _, tc := range formatCases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "in", "\n"+tc.line+"\n")
			var rejs []Rejection
			src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Format: tc.format,
				EventTime: EventTimeSource{Field: tc.field, Format: tc.timeFmt},
				Reject:    func(r Rejection) error { rejs = append(rejs, r); return nil }})
			require.NoError(t, err)
			recs, err := collect(t, context.Background(), src)
			require.NoError(t, err)
			if tc.blank {
				require.Empty(t, recs)
				require.Empty(t, rejs)
				return
			}
			if tc.errColumn > 0 {
				require.Empty(t, recs)
				require.Len(t, rejs, 1)
				require.Equal(t, fmt.Sprintf("%s:2:%d", path, tc.errColumn), rejs[0].Origin)
				require.Equal(t, StageIngest, rejs[0].Stage)
				require.Contains(t, rejs[0].Err.Error(), tc.errText)
				require.Equal(t, tc.line, string(rejs[0].Record), "the dead letter keeps the line")
				return
			}
			require.Empty(t, rejs)
			if tc.format == SourceRaw {
				// The first, empty line is a record too, and empty.
				require.Len(t, recs, 2)
				require.Equal(t, "", string(recs[0].Payload))
				require.Equal(t, path+":1", recs[0].Origin)
				recs = recs[1:]
			}
			require.Len(t, recs, 1)
			r := recs[0]
			require.Equal(t, tc.payload, string(r.Payload))
			require.Equal(t, tc.hasEvent, r.HasEvent)
			require.Equal(t, tc.event, r.Event)
			require.False(t, r.HasWrite, "without an envelope's write_ts the host stamps the write time")
			require.Equal(t, path+":2", r.Origin)
		})
	}
}

func TestFileSourceRawKeepsEveryLine(t *testing.T) {
	path := writeFile(t, "in.log", "a\r\n\n b \n\xff\nlast")
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Format: SourceRaw})
	require.NoError(t, err)
	recs, err := collect(t, context.Background(), src)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "", " b ", "\xff", "last"}, payloads(recs))
}

func TestFormatConfigErrors(t *testing.T) {
	_, err := NewFileSource(FileSourceConfig{Path: "f", Stream: "s", Partitions: 1, Format: SourceRaw, PartitionBy: []string{"k"}})
	require.ErrorContains(t, err, "partition_by cannot read fields")
	_, err = NewFileSource(FileSourceConfig{Path: "f", Stream: "s", Partitions: 1, Format: SourceJSON, EventTime: EventTimeSource{Header: "h", Format: "unix_s"}})
	require.ErrorContains(t, err, "only Kafka records have headers")
	_, err = NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/", Stream: "s", Partitions: 1, Format: "xml"})
	require.ErrorContains(t, err, `format "xml" is unknown`)
}

// TestHTTPSourceFormats posts each case's line as line 2 of a body (after
// a good line of its format): a good body is accepted whole, a bad one
// refused whole, its answer naming the line, column and field.
func TestHTTPSourceFormats(t *testing.T) {
	good := map[SourceFormat]string{"": `{"payload":0}`, SourceEnvelope: `{"payload":0}`, SourceJSON: `{"ts":0,"at":"2024-05-01T10:00:00Z"}`, SourceRaw: `zero`}
	for _, tc := range formatCases {
		t.Run(tc.name, func(t *testing.T) {
			h := startHTTPSource(t, HTTPSourceConfig{Format: tc.format, EventTime: EventTimeSource{Field: tc.field, Format: tc.timeFmt}}, nil)
			status, _, resp := post(t, h.url, "", good[tc.format]+"\n"+tc.line+"\n")
			if tc.blank {
				require.Equal(t, http.StatusOK, status)
				require.Equal(t, 1, resp.Accepted, "a blank line is no record")
				return
			}
			if tc.errColumn > 0 {
				require.Equal(t, http.StatusBadRequest, status)
				require.Equal(t, 1, resp.Invalid)
				require.Len(t, resp.Refused, 1)
				ref := resp.Refused[0]
				require.Equal(t, refusal{Line: 2, Column: tc.errColumn, Field: tc.errField, Error: ref.Error}, ref)
				require.Contains(t, ref.Error, tc.errText)
				require.Empty(t, h.emitted(), "nothing of a refused request is accepted")
				return
			}
			require.Equal(t, http.StatusOK, status, "%+v", resp)
			require.Equal(t, 2, resp.Accepted)
			recs := h.emitted()
			require.Len(t, recs, 2)
			r := recs[1]
			require.Equal(t, tc.payload, string(r.Payload))
			require.Equal(t, tc.hasEvent, r.HasEvent)
			require.Equal(t, tc.event, r.Event)
			require.Equal(t, "http:/ingest#1:2", r.Origin)
		})
	}
}

func TestHTTPSourceArrayBodiesAreEnvelopesOnly(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{Format: SourceJSON}, nil)
	status, _, resp := post(t, h.url, "", "[1, 2]\n[3]")
	require.Equal(t, http.StatusOK, status, "%+v", resp)
	require.Equal(t, []string{"[1, 2]", "[3]"}, payloads(h.emitted()), "in format json a line that is an array is one payload")
}

// TestKafkaSourceFormats reads values in formats json and raw from an
// in-process kfake cluster: payloads, event times from a field, a header
// or the Kafka timestamp, and dead letters naming topic/partition@offset.
func TestKafkaSourceFormats(t *testing.T) {
	ts := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	hdr := []kgo.RecordHeader{{Key: "at", Value: []byte("1000")}}
	for _, tc := range []struct {
		name     string
		format   SourceFormat
		et       EventTimeSource
		value    string
		headers  []kgo.RecordHeader
		payload  string // want, or
		event    int64
		rejected string // a dead letter's error text
	}{
		{name: "json default", value: `{"a":1}`, payload: `{"a":1}`, event: ts.UnixNano()},
		{name: "json field", format: SourceJSON, et: EventTimeSource{Field: "t", Format: "unix_ns"}, value: `{"t":42}`, payload: `{"t":42}`, event: 42},
		{name: "json header", format: SourceJSON, et: EventTimeSource{Header: "at", Format: "unix_ms"}, value: `1`, headers: hdr, payload: `1`, event: 1e9},
		{name: "json bad", format: SourceJSON, value: `{"a"`, rejected: "column 5: the payload is not JSON: it ends inside a JSON value"},
		{name: "json bad byte", format: SourceJSON, value: `{"a"x`, rejected: "column 5: the payload is not JSON: invalid character 'x'"},
		{name: "json empty value", format: SourceJSON, value: ``, rejected: "the payload is empty"},
		{name: "json missing field", format: SourceJSON, et: EventTimeSource{Field: "t", Format: "unix_s"}, value: `{}`, rejected: "no field t (the event time)"},
		{name: "raw", format: SourceRaw, value: "line one\nline two\xff", payload: "line one\nline two\xff", event: ts.UnixNano()},
		{name: "raw header", format: SourceRaw, et: EventTimeSource{Header: "at", Format: "unix_ms"}, value: `x`, headers: hdr, payload: `x`, event: 1e9},
		{name: "envelope", format: SourceEnvelope, value: `{"event_ts":7,"id":"k1","payload":{"a":1}}`, payload: `{"a":1}`, event: 7},
		{name: "envelope without event_ts", format: SourceEnvelope, value: `{"payload":2}`, payload: `2`, event: ts.UnixNano()},
		{name: "envelope header", format: SourceEnvelope, et: EventTimeSource{Header: "at", Format: "unix_ms"}, value: `{"payload":3}`, headers: hdr, payload: `3`, event: 1e9},
		{name: "envelope with write_ts", format: SourceEnvelope, value: `{"write_ts":5,"payload":1}`, rejected: "write_ts: a kafka record's write time is its Kafka timestamp"},
		{name: "envelope bad", format: SourceEnvelope, value: `{"a":1}`, rejected: `unknown field "a"`},
		{name: "raw missing header", format: SourceRaw, et: EventTimeSource{Header: "at", Format: "unix_ms"}, value: `x`, rejected: "no header at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers, topic := testKafka(t, 1)
			first := `{"t":1}` // offset 0, a record in every case
			if tc.format == SourceEnvelope {
				first = `{"payload":{"t":1}}`
			}
			produce(t, brokers, &kgo.Record{Topic: topic, Timestamp: ts, Value: []byte(first), Headers: hdr},
				&kgo.Record{Topic: topic, Timestamp: ts, Value: []byte(tc.value), Headers: tc.headers})
			cfg := KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 1, Format: tc.format, EventTime: tc.et}
			if tc.rejected != "" {
				recs, rejs := runSource(t, cfg, 1, 1)
				require.Len(t, recs, 1)
				require.Equal(t, fmt.Sprintf("kafka:%s/0@1", topic), rejs[0].Origin)
				require.Contains(t, rejs[0].Err.Error(), fmt.Sprintf("topic %s partition 0 offset 1: ", topic))
				require.Contains(t, rejs[0].Err.Error(), tc.rejected)
				require.Equal(t, tc.value, string(rejs[0].Record))
				return
			}
			recs, _ := runSource(t, cfg, 2, 0)
			r := recs[1]
			require.Equal(t, tc.payload, string(r.Payload))
			require.True(t, r.HasEvent)
			require.Equal(t, tc.event, r.Event)
			require.Equal(t, ts.UnixNano(), r.Write, "the write time is the Kafka timestamp in every format")
			if tc.name == "envelope" {
				require.Equal(t, "k1", r.ID, "an envelope's id is the record's idempotency key")
			}
		})
	}
}

// TestLineSinkFormats writes one batch to a file, stdout-like and HTTP
// sink in each format and checks the lines.
func TestLineSinkFormats(t *testing.T) {
	recs := []SinkRecord{
		NewSinkRecord(testMessage(1, "k", []byte(`{"a": 1}`))),
		NewSinkRecord(testMessage(2, "k", []byte("{\n  \"b\": \"x\\ny\"\n}"))), // JSON over lines: compacted
		NewSinkRecord(testMessage(3, "k", []byte("plain text\xff"))),           // not JSON: as it is
		NewSinkRecord(testMessage(4, "k", []byte(""))),
	}
	wantPayload := "{\"a\": 1}\n{\"b\":\"x\\ny\"}\nplain text\xff\n\n"
	check := func(t *testing.T, format Format, out string) {
		t.Helper()
		switch format {
		case FormatPayload:
			require.Equal(t, wantPayload, out)
		case FormatJSON:
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			require.Len(t, lines, len(recs))
			for i, line := range lines {
				var got SinkRecord
				require.NoError(t, json.Unmarshal([]byte(line), &got))
				require.Equal(t, recs[i].MessageID, got.MessageID)
				require.Equal(t, recs[i].EventTS, got.EventTS)
				p, err := got.PayloadBytes()
				require.NoError(t, err)
				want, err := recs[i].PayloadBytes()
				require.NoError(t, err)
				if recs[i].PayloadEncoding == "" {
					require.JSONEq(t, string(want), string(p))
				} else {
					require.Equal(t, want, p, "a payload that is not JSON is kept in base64")
				}
			}
		}
	}
	for _, format := range []Format{FormatJSON, FormatPayload} {
		t.Run("file/"+string(format), func(t *testing.T) {
			path := t.TempDir() + "/out"
			s, err := OpenFileSink(FileSinkConfig{Path: path, Format: format})
			require.NoError(t, err)
			require.NoError(t, s.Write(context.Background(), recs))
			require.NoError(t, s.Close())
			out, err := readAll(path)
			require.NoError(t, err)
			check(t, format, out)
		})
		t.Run("writer/"+string(format), func(t *testing.T) {
			var buf bytes.Buffer
			s, err := NewWriterSink(&buf, format)
			require.NoError(t, err)
			require.NoError(t, s.Write(context.Background(), recs))
			require.NoError(t, s.Close())
			check(t, format, buf.String())
		})
		t.Run("http/"+string(format), func(t *testing.T) {
			s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", Format: format, Logger: quietLogger()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			resp, r := subscribe(t, "http://"+s.Addr().String()+"/out?from=0")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			want := map[Format]string{FormatJSON: "application/x-ndjson", FormatPayload: "text/plain"}[format]
			require.Equal(t, want, resp.Header.Get("Content-Type"))
			require.NoError(t, s.Write(context.Background(), recs))
			var out strings.Builder
			for range recs {
				line, err := r.ReadString('\n')
				require.NoError(t, err)
				out.WriteString(line)
			}
			check(t, format, out.String())
			line, err := s.Line(&recs[0])
			require.NoError(t, err)
			require.Equal(t, strings.SplitAfter(out.String(), "\n")[0], string(line), "the log's line is the live one")
		})
	}
}

func readAll(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestPayloadSinkRefusesANewline: a payload that is not JSON and holds a
// newline cannot be one line; the sink refuses the batch, writing none of
// it, rather than split or alter the record.
func TestPayloadSinkRefusesANewline(t *testing.T) {
	recs := []SinkRecord{
		NewSinkRecord(testMessage(1, "k", []byte(`ok`))),
		NewSinkRecord(testMessage(2, "k", []byte("two\nlines"))),
	}
	var buf bytes.Buffer
	s, err := NewWriterSink(&buf, FormatPayload)
	require.NoError(t, err)
	err = s.Write(context.Background(), recs)
	require.ErrorIs(t, err, ErrPayloadNewline)
	require.ErrorContains(t, err, recs[1].MessageID)
	require.NoError(t, s.Close())
	require.Empty(t, buf.String(), "nothing of a refused batch is written")

	h, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/", Format: FormatPayload, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.ErrorIs(t, h.Write(context.Background(), recs), ErrPayloadNewline)
	_, err = NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/", Format: FormatText})
	require.ErrorContains(t, err, `format "text" is unknown`)
}

// FuzzJSONRecordDecoder: format json with an event time field never
// panics; what it accepts is valid JSON kept byte for byte, with an event
// time exactly when it has the field; what it refuses is refused at a
// column inside the line (or just after it).
func FuzzJSONRecordDecoder(f *testing.F) {
	for _, tc := range formatCases {
		if tc.format == SourceJSON {
			f.Add(tc.line, tc.timeFmt)
		}
	}
	f.Add(`{"ts":"2024-05-01T10:00:00Z"}`, "rfc3339")
	f.Fuzz(func(t *testing.T, line, timeFmt string) {
		if !validTimeFormat(timeFmt) {
			timeFmt = "unix_ms"
		}
		d, err := NewRecordDecoder(SourceJSON, EventTimeSource{Field: "ts", Format: timeFmt})
		require.NoError(t, err)
		rec, err := d.Decode([]byte(line))
		if err != nil {
			var le *LineError
			require.ErrorAs(t, err, &le)
			require.GreaterOrEqual(t, le.Column, 1)
			require.LessOrEqual(t, le.Column, len(line)+1)
			return
		}
		require.True(t, json.Valid(rec.Payload))
		require.Equal(t, line, string(rec.Payload))
		require.True(t, rec.HasEvent)
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(line), &obj))
		require.Contains(t, obj, "ts")
	})
}

// FuzzRawRecordDecoder: format raw takes any bytes, unchanged, in memory
// of their own, and a payload sink writes them back as the same line when
// they hold no newline.
func FuzzRawRecordDecoder(f *testing.F) {
	f.Add([]byte("GET / 200"))
	f.Add([]byte("\xff\x00"))
	f.Add([]byte(`{"a": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := NewRecordDecoder(SourceRaw, EventTimeSource{})
		require.NoError(t, err)
		rec, err := d.Decode(data)
		require.NoError(t, err)
		require.Equal(t, string(data), string(rec.Payload))
		require.False(t, rec.HasEvent)
		if len(data) > 0 {
			data[0]++
			require.NotEqual(t, data[0], rec.Payload[0], "the payload must not share the input's memory")
			data[0]--
		}
		sr := NewSinkRecord(testMessage(1, "", rec.Payload))
		line, err := sr.Line(FormatPayload)
		if bytes.IndexByte(data, '\n') >= 0 && !(utf8.Valid(data) && json.Valid(data)) {
			require.ErrorIs(t, err, ErrPayloadNewline)
			return
		}
		require.NoError(t, err)
		require.Equal(t, byte('\n'), line[len(line)-1])
		require.Zero(t, bytes.Count(line[:len(line)-1], []byte("\n")), "one line")
		if bytes.IndexByte(data, '\n') < 0 {
			require.Equal(t, string(data)+"\n", string(line), "the bytes as they are")
		}
	})
}

// BenchmarkRecordDecoder decodes the same record in each format: the
// envelope (what file and HTTP sources read before formats) is the
// baseline to compare the others with, in the same run.
func BenchmarkRecordDecoder(b *testing.B) {
	payload := `{"order_id":"o-1234567","customer":{"id":987654},"amount":129.95,"ts":1714557599000}`
	for _, bc := range []struct {
		name   string
		format SourceFormat
		et     EventTimeSource
		line   string
	}{
		{"envelope", SourceEnvelope, EventTimeSource{}, `{"write_ts":1714557600000000000,"event_ts":1714557599000000000,"payload":` + payload + `}`},
		{"json", SourceJSON, EventTimeSource{}, payload},
		{"json-event-field", SourceJSON, EventTimeSource{Field: "ts", Format: "unix_ms"}, payload},
		{"raw", SourceRaw, EventTimeSource{}, payload},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d, err := NewRecordDecoder(bc.format, bc.et)
			require.NoError(b, err)
			line := []byte(bc.line)
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, err := d.Decode(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
