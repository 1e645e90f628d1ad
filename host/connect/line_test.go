package connect

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/ordering"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line string
		want LineRecord
	}{
		{`{"payload":{"a":1}}`, LineRecord{Payload: []byte(`{"a":1}`)}},
		{` { "write_ts" : 10 , "event_ts":-5, "payload" : [1, 2] } `, LineRecord{Write: 10, HasWrite: true, Event: -5, HasEvent: true, Payload: []byte(`[1, 2]`)}},
		{`{"payload":"x","write_ts":null,"event_ts":null}`, LineRecord{Payload: []byte(`"x"`)}},
		{`{"payload":null}`, LineRecord{Payload: []byte(`null`)}},
		{`{"event_ts":"2024-05-01T10:00:00.5Z","payload":1}`, LineRecord{Event: 1714557600500000000, HasEvent: true, Payload: []byte(`1`)}},
		{`{"write_ts":"2024-05-01T12:00:00+02:00","payload":1}`, LineRecord{Write: 1714557600000000000, HasWrite: true, Payload: []byte(`1`)}},
		{`{"parents":["raw/p0:2","spin/p1:7>out:0"],"payload":1}`, LineRecord{Payload: []byte(`1`), Parents: []ordering.MessageID{
			ordering.SourceID("raw", 0, 2), ordering.SourceID("spin", 1, 7).Derive("out", 0)}}},
		{`{"parents":[],"payload":1}`, LineRecord{Payload: []byte(`1`)}},
		{`{"parents":null,"payload":1}`, LineRecord{Payload: []byte(`1`)}},
	}
	for _, tt := range tests {
		got, err := ParseLine([]byte(tt.line))
		require.NoError(t, err, tt.line)
		require.Equal(t, tt.want, got, tt.line)
	}
}

func TestParseLineErrors(t *testing.T) {
	tests := []struct {
		line   string
		column int
		want   string
	}{
		{`not json`, 2, "invalid character 'o' in literal null"},
		{`[1]`, 1, "a record line must be a JSON object"},
		{`  "x"`, 3, "a record line must be a JSON object"},
		{`{"write_ts":1}`, 1, `record has no "payload"`},
		{`{"payload":1,"write_ts":"soon"}`, 25, `write_ts: "soon" is not an RFC 3339 time`},
		{`{"payload":1,"write_ts":1.5}`, 25, "write_ts: 1.5 is not an integer of nanoseconds"},
		{`{"payload":1,"event_ts":99999999999999999999}`, 25, "event_ts: 99999999999999999999 is not an integer"},
		{`{"payload":1,"event_ts":true}`, 25, "event_ts: true is not a timestamp"},
		{`{"payload":1,"event_ts":"3000-01-01T00:00:00Z"}`, 25, "outside the nanosecond range"},
		{`{"payload":1,"evnt_ts":1}`, 14, `unknown field "evnt_ts"`},
		{`{"payload":1,"payload":2}`, 14, `field "payload" appears twice`},
		{`{"payload":1} {}`, 15, "data after the record object"},
		{`{"payload":1`, 13, "line ends inside the JSON object"},
		{`{"payload":tru}`, 15, "invalid character '}' in literal true"},
		{`{"payload" 1}`, 12, "invalid JSON"},
		{`{"payload":1,}`, 14, "invalid JSON"},
		{``, 1, "empty line"},
		{`{"payload":1,"parents":"raw/p0:2"}`, 24, "parents: expected an array of message id strings"},
		{`{"payload":1,"parents":[""]}`, 24, "parents: parent 0: empty id"},
		{`{"payload":1,"parents":["raw/p0:2","raw:x"]}`, 24, "parents: parent 1: "},
		{`{"payload":1,"parents":[],"parents":[]}`, 27, `field "parents" appears twice`},
	}
	for _, tt := range tests {
		_, err := ParseLine([]byte(tt.line))
		var le *LineError
		require.True(t, errors.As(err, &le), "%s: %v", tt.line, err)
		require.ErrorContains(t, err, tt.want, tt.line)
		require.Equal(t, tt.column, le.Column, "%s: %v", tt.line, err)
		require.Contains(t, err.Error(), fmt.Sprintf("column %d: ", tt.column))
	}
}

func FuzzFileLine(f *testing.F) {
	f.Add([]byte(`{"write_ts":10,"event_ts":5,"payload":{"a":[1,"x"]}}`))
	f.Add([]byte(`{"payload":null,"event_ts":"2024-05-01T10:00:00Z"}`))
	f.Add([]byte(`{"payload":1,"evnt_ts":1}`))
	f.Add([]byte(`{"payload":1} x`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"parents":["raw/p0:2","a:1>b/p3:4"],"payload":0}`))
	f.Add([]byte(`{"payload":"\u00e9\ud800"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseLine(line)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LineError", err)
			}
			if le.Column < 1 || le.Column > len(line)+1 {
				t.Fatalf("column %d outside the line of %d bytes: %v", le.Column, len(line), err)
			}
			return
		}
		if !json.Valid(rec.Payload) {
			t.Fatalf("payload %q is not JSON", rec.Payload)
		}
		// Writing the record back in canonical form reads the same.
		again := `{"payload":` + string(rec.Payload)
		if rec.HasWrite {
			again += `,"write_ts":` + strconv.FormatInt(rec.Write, 10)
		}
		if rec.HasEvent {
			again += `,"event_ts":` + strconv.FormatInt(rec.Event, 10)
		}
		if rec.ID != "" {
			id, _ := json.Marshal(rec.ID)
			again += `,"id":` + string(id)
		}
		if rec.Parents != nil {
			parents, _ := json.Marshal(rec.Parents) // MessageID marshals as its canonical text
			again += `,"parents":` + string(parents)
		}
		again += "}"
		rec2, err := ParseLine([]byte(again))
		if err != nil {
			t.Fatalf("%s: %v", again, err)
		}
		require.Equal(t, rec, rec2)
	})
}

func BenchmarkParseLine(b *testing.B) {
	line := []byte(`{"write_ts":1714557600000000000,"event_ts":1714557599000000000,"payload":{"order_id":"o-1234567","customer":{"id":987654},"amount":129.95}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := ParseLine(line); err != nil {
			b.Fatal(err)
		}
	}
}
