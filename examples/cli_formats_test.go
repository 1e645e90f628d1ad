package examples_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
)

// TestCLIRawFileToPayloadFile runs the built binary on a raw file source
// and a json one, each into a payload file sink (and the raw one into a
// json sink too): the payload sink writes the raw lines back byte for
// byte, empty and non-UTF-8 ones included; the json sink keeps what is not
// JSON in base64; the json source takes its event time from a field and
// sends the line that is not JSON to the dead letter with file:line:column.
// A second run on the same data directory writes nothing again.
func TestCLIRawFileToPayloadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rawLines := []string{"GET /index.html 200", "", "\xff\xfe binary", ` {"a": 1} `, "last line without a newline"}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "access.log"), []byte(strings.Join(rawLines, "\n")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clicks.jsonl"), []byte(
		`{"user":"u1","at":"2024-05-01T10:00:00.5Z"}`+"\n"+
			`{"user":"u2","at":`+"\n"+ // line 2: cut off
			`{"user":"u3","at":"2024-05-01T10:00:01Z"}`+"\n"), 0o644))
	spec := filepath.Join(dir, "formats.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`name: formats
sources:
  - {name: log-in, type: file, stream: lines, format: raw, file: {path: access.log}}
  - name: clicks-in
    type: file
    stream: clicks
    format: json
    event_time: {field: at, format: rfc3339}
    file: {path: clicks.jsonl}
sinks:
  - {name: lines-out, type: file, streams: [lines], format: payload, file: {path: lines.out}}
  - {name: lines-json, type: file, streams: [lines], file: {path: lines.jsonl}}
  - {name: clicks-out, type: file, streams: [clicks], format: payload, file: {path: clicks.out}}
  - {name: clicks-json, type: file, streams: [clicks], file: {path: clicks-full.jsonl}}
`), 0o644))
	data := t.TempDir()
	run := func() {
		_, stderr, err := flowhostRun(t, "run", "-f", spec, "--plugins", env.plugins,
			"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", data)
		require.NoError(t, err, "stderr:\n%s", stderr)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return string(b)
	}
	run()

	require.Equal(t, strings.Join(rawLines, "\n")+"\n", read("lines.out"), "a raw source into a payload sink gives the lines back")
	var full []connect.SinkRecord
	for _, l := range lines(read("lines.jsonl")) {
		var r connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		full = append(full, r)
	}
	require.Len(t, full, len(rawLines))
	for i, r := range full {
		p, err := r.PayloadBytes()
		require.NoError(t, err)
		if r.PayloadEncoding == "" && rawLines[i] != "" {
			require.JSONEq(t, rawLines[i], string(p), "a json sink compacts a JSON payload onto its line")
		} else {
			require.Equal(t, rawLines[i], string(p))
		}
		require.Equal(t, r.WriteTS, r.EventTS, "a raw file record's event time is its arrival")
		require.NotZero(t, r.WriteTS)
	}
	require.Equal(t, "base64", full[0].PayloadEncoding, "text that is not JSON is kept in base64 by a json sink")
	require.Equal(t, "", full[3].PayloadEncoding, "a raw line that is JSON is written as JSON")

	require.Equal(t, `{"user":"u1","at":"2024-05-01T10:00:00.5Z"}`+"\n"+`{"user":"u3","at":"2024-05-01T10:00:01Z"}`+"\n", read("clicks.out"))
	var events []int64
	for _, l := range lines(read("clicks-full.jsonl")) {
		var r connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		events = append(events, r.EventTS)
	}
	require.Equal(t, []int64{
		time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC).UnixNano(),
		time.Date(2024, 5, 1, 10, 0, 1, 0, time.UTC).UnixNano(),
	}, events, "the event time is the field")
	dead := deadLetters(t, spec)
	require.Len(t, dead, 1)
	require.Equal(t, filepath.Join(dir, "clicks.jsonl")+":2:19", dead[0]["origin"])
	require.Contains(t, dead[0]["error"], "the payload is not JSON")

	run()
	require.Equal(t, strings.Join(rawLines, "\n")+"\n", read("lines.out"), "a second run on the data directory writes nothing again")
	require.Len(t, deadLetters(t, spec), 1)
}
