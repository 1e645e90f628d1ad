package flowtest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/flowtest"
)

func out(key string, ev int64, payload string) connect.SinkRecord {
	return connect.SinkRecord{Stream: "s", Key: key, EventTS: ev, Payload: json.RawMessage(payload)}
}

func expected(t *testing.T, lines string) []flowtest.Expected {
	t.Helper()
	e, err := flowtest.ParseExpectations("want.jsonl", []byte(lines))
	require.NoError(t, err)
	return e
}

func TestCompare(t *testing.T) {
	want := `{"key":"a","event_ts":1,"payload":{"n":1}}
{"key":"b","event_ts":2,"payload":{"n":1}}

{"key":"a","event_ts":3,"payload":{"n":2}}
`
	for _, tc := range []struct {
		name string
		got  []connect.SinkRecord
		mode flowtest.Mode
		// diffs are the differences' String, in order.
		diffs []string
	}{
		{"same", []connect.SinkRecord{out("a", 1, `{"n":1}`), out("b", 2, `{"n":1}`), out("a", 3, `{"n": 2}`)}, flowtest.Exact, nil},
		{"keys interleaved differently, exact", []connect.SinkRecord{out("a", 1, `{"n":1}`), out("a", 3, `{"n":2}`), out("b", 2, `{"n":1}`)}, flowtest.Exact, []string{
			"stream s, output 2 (line 2):\n  - expected {\"key\":\"b\",\"event_ts\":2,\"payload\":{\"n\":1}}\n  + got      {\"key\":\"a\",\"event_ts\":3,\"payload\":{\"n\":2}}",
			"stream s, output 3 (line 4):\n  - expected {\"key\":\"a\",\"event_ts\":3,\"payload\":{\"n\":2}}\n  + got      {\"key\":\"b\",\"event_ts\":2,\"payload\":{\"n\":1}}",
		}},
		{"keys interleaved differently, per key", []connect.SinkRecord{out("a", 1, `{"n":1}`), out("a", 3, `{"n":2}`), out("b", 2, `{"n":1}`)}, flowtest.PerKey, nil},
		{"order within a key, per key", []connect.SinkRecord{out("a", 3, `{"n":2}`), out("b", 2, `{"n":1}`), out("a", 1, `{"n":1}`)}, flowtest.PerKey, []string{
			"stream s, key \"a\", output 1 of the key (line 1):\n  - expected {\"key\":\"a\",\"event_ts\":1,\"payload\":{\"n\":1}}\n  + got      {\"key\":\"a\",\"event_ts\":3,\"payload\":{\"n\":2}}",
			"stream s, key \"a\", output 2 of the key (line 4):\n  - expected {\"key\":\"a\",\"event_ts\":3,\"payload\":{\"n\":2}}\n  + got      {\"key\":\"a\",\"event_ts\":1,\"payload\":{\"n\":1}}",
		}},
		{"missing and extra", []connect.SinkRecord{out("a", 1, `{"n":1}`), out("c", 9, `"x"`)}, flowtest.PerKey, []string{
			"stream s, key \"a\", output 2 of the key (line 4): missing\n  - expected {\"key\":\"a\",\"event_ts\":3,\"payload\":{\"n\":2}}",
			"stream s, key \"b\", output 1 of the key (line 2): missing\n  - expected {\"key\":\"b\",\"event_ts\":2,\"payload\":{\"n\":1}}",
			"stream s, key \"c\", output 1 of the key (after the last line): not expected\n  + got      {\"key\":\"c\",\"event_ts\":9,\"payload\":\"x\"}",
		}},
		{"event time differs", []connect.SinkRecord{out("a", 1, `{"n":1}`), out("b", 5, `{"n":1}`), out("a", 3, `{"n":2}`)}, flowtest.Exact, []string{
			"stream s, output 2 (line 2):\n  - expected {\"key\":\"b\",\"event_ts\":2,\"payload\":{\"n\":1}}\n  + got      {\"key\":\"b\",\"event_ts\":5,\"payload\":{\"n\":1}}",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range flowtest.Compare("s", expected(t, want), tc.got, tc.mode, "") {
				got = append(got, d.String())
			}
			require.Equal(t, tc.diffs, got)
		})
	}
}

func TestCompareLargeIntegersExactly(t *testing.T) {
	want := expected(t, `{"key":"","event_ts":0,"payload":{"n":9007199254740993}}`)
	require.Len(t, flowtest.Compare("s", want, []connect.SinkRecord{out("", 0, `{"n":9007199254740992}`)}, flowtest.Exact, ""), 1)
	require.Empty(t, flowtest.Compare("s", want, []connect.SinkRecord{out("", 0, `{ "n" : 9007199254740993 }`)}, flowtest.Exact, ""))
}

func TestParseExpectationsErrors(t *testing.T) {
	for _, tc := range []struct{ data, err string }{
		{"{\"key\":\"a\",\"payload\":1}\nnot json\n", "want.jsonl:2: invalid character 'o' in literal null (expecting 'u')"},
		{"\n\n{\"key\":\"a\"}\n", "want.jsonl:3: payload: missing (each line is a JSON object with key, event_ts and payload)"},
		{`{"key":1,"payload":1}`, "want.jsonl:1: json: cannot unmarshal number into Go struct field SinkRecord.key of type string"},
	} {
		_, err := flowtest.ParseExpectations("want.jsonl", []byte(tc.data))
		require.EqualError(t, err, tc.err)
	}
}

// TestCheckUpdateThenPass: --update writes what a later check accepts, and
// a changed expectation fails with the difference.
func TestCheckUpdateThenPass(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	outputs := map[string][]connect.SinkRecord{"s": {out("a", 1, `{"n":1}`), out("b", 2, "{\n\"n\": 1}")}}
	var w bytes.Buffer
	require.NoError(t, flowtest.Check(&w, outputs, map[string]string{"s": path}, flowtest.Exact, "", true))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "{\"key\":\"a\",\"event_ts\":1,\"payload\":{\"n\":1}}\n{\"key\":\"b\",\"event_ts\":2,\"payload\":{\"n\":1}}\n", string(b))
	w.Reset()
	require.NoError(t, flowtest.Check(&w, outputs, map[string]string{"s": path}, flowtest.Exact, "", false))
	require.Contains(t, w.String(), "ok   stream s: 2 outputs")

	require.NoError(t, os.WriteFile(path, bytes.Replace(b, []byte(`"event_ts":2`), []byte(`"event_ts":7`), 1), 0o644))
	w.Reset()
	err = flowtest.Check(&w, outputs, map[string]string{"s": path}, flowtest.Exact, "", false)
	require.ErrorIs(t, err, flowtest.ErrDifferent)
	require.Contains(t, w.String(), "FAIL stream s: 1 differences")
	require.Contains(t, w.String(), `- expected {"key":"b","event_ts":7,"payload":{"n":1}}`)

	err = flowtest.Check(&w, outputs, map[string]string{"nope": path}, flowtest.Exact, "", false)
	require.EqualError(t, err, "--expect nope: the pipeline writes no such stream; its output streams are s")
}

func FuzzParseExpectations(f *testing.F) {
	f.Add([]byte(`{"key":"a","event_ts":1,"payload":{"n":1}}` + "\n"))
	f.Add([]byte(`{"stream":"s","message_id":"x","key":"","event_ts":-1,"payload":"aGk=","payload_encoding":"base64"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := flowtest.ParseExpectations("f", data)
		if err != nil {
			return
		}
		// What parses is written back and reads again as the same lines.
		var recs []connect.SinkRecord
		for _, e := range es {
			recs = append(recs, connect.SinkRecord{Key: e.Key, EventTS: e.EventTS, Payload: e.Payload})
		}
		path := filepath.Join(t.TempDir(), "e.jsonl")
		require.NoError(t, flowtest.WriteExpectations(path, recs))
		again, err := flowtest.ReadExpectations(path)
		require.NoError(t, err)
		require.Empty(t, flowtest.Compare("s", again, recs, flowtest.Exact, ""))
	})
}

func TestComparePerKeyField(t *testing.T) {
	want := expected(t, `{"key":"","event_ts":1,"payload":{"user":"a","n":1}}
{"key":"","event_ts":2,"payload":{"user":"b","n":1}}
{"key":"","event_ts":3,"payload":{"user":"a","n":2}}`)
	swapped := []connect.SinkRecord{out("", 1, `{"user":"a","n":1}`), out("", 3, `{"user":"a","n":2}`), out("", 2, `{"user":"b","n":1}`)}
	require.Empty(t, flowtest.Compare("s", want, swapped, flowtest.PerKey, "user"))
	require.Len(t, flowtest.Compare("s", want, swapped, flowtest.PerKey, ""), 2, "without the field every line has key \"\"")
	wrong := []connect.SinkRecord{out("", 3, `{"user":"a","n":2}`), out("", 1, `{"user":"a","n":1}`), out("", 2, `{"user":"b","n":1}`)}
	d := flowtest.Compare("s", want, wrong, flowtest.PerKey, "user")
	require.Len(t, d, 2)
	require.Equal(t, `"a"`, d[0].Key)
}
