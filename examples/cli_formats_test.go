package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

// TestCLIHTTPJSONToHTTPPayload runs an HTTP source in format json into an
// HTTP sink in format payload, on a data directory: a subscriber reads the
// posted lines back as they were, a bad line is refused at its line and
// column, and after a restart the same lines come from the sink's log in
// the store, byte for byte.
func TestCLIHTTPJSONToHTTPPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "json-http.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`name: json-http
sources:
  - name: orders
    type: http
    stream: orders
    format: json
    event_time: {field: ts, format: unix_ms}
    http: {listen: "127.0.0.1:0", path: /ingest}
sinks:
  - {name: out, type: http, streams: [orders], format: payload, http: {listen: "127.0.0.1:0", path: /out}}
`), 0o644))
	data := t.TempDir()
	sinkLine := regexp.MustCompile(`"http sink listening" sink=out url=(\S+)`)
	posted := []string{`{"id":1,"ts":1714557600000}`, `{"id":2, "ts":1714557600001, "note":"spaces kept"}`, `{"id":3,"ts":"1714557600002"}`}
	readLines := func(t *testing.T, url string, n int) []string {
		t.Helper()
		res, err := http.Get(url + "?from=0")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, "text/plain", res.Header.Get("Content-Type"))
		r := bufio.NewReader(res.Body)
		var got []string
		for range n {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			got = append(got, strings.TrimSuffix(line, "\n"))
		}
		return got
	}

	first := startHTTPRun(t, spec, data)
	status, answer := postIngest(t, first.url, "", `{"id":9,"ts":1}`+"\n"+`{"id":10,"ts":}`+"\n")
	require.Equal(t, http.StatusBadRequest, status)
	require.Len(t, answer.Refused, 1)
	require.Equal(t, 2, answer.Refused[0].Line)
	require.Equal(t, 15, answer.Refused[0].Column)
	status, answer = postIngest(t, first.url, "", strings.Join(posted, "\n"))
	require.Equal(t, http.StatusOK, status, "%+v", answer)
	require.Equal(t, posted, readLines(t, first.waitStderr(t, sinkLine), len(posted)))
	first.stop(t)

	second := startHTTPRun(t, spec, data)
	require.Equal(t, posted, readLines(t, second.waitStderr(t, sinkLine), len(posted)), "from the sink's log after a restart")
	second.stop(t)
}

// TestCLIKafkaRawAndJSON runs a kafka source in format raw and one in
// format json (the default, its event time in a header) into file sinks:
// raw values of any bytes arrive as they are, with the Kafka timestamp as
// event time; the json value that is not JSON goes to the dead letter
// named by topic/partition@offset.
func TestCLIKafkaRawAndJSON(t *testing.T) {
	brokers, rawTopic := kafkaTopic(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	jsonTopic := rawTopic + "-json"
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, jsonTopic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	ts := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	rawValues := []string{"plain text", "two\nlines", "\x00\xff", `{"a": 1}`}
	var recs []*kgo.Record
	for _, v := range rawValues {
		recs = append(recs, &kgo.Record{Topic: rawTopic, Timestamp: ts, Value: []byte(v)})
	}
	at := []kgo.RecordHeader{{Key: "at", Value: []byte("1714557600000")}}
	recs = append(recs,
		&kgo.Record{Topic: jsonTopic, Timestamp: ts, Value: []byte(`{"n":1}`), Headers: at},
		&kgo.Record{Topic: jsonTopic, Timestamp: ts, Value: []byte(`not json`), Headers: at},
		&kgo.Record{Topic: jsonTopic, Timestamp: ts, Value: []byte(`{"n":3}`), Headers: at})
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())

	dir := t.TempDir()
	spec := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(spec, fmt.Appendf(nil, `name: kafka-formats
sources:
  - {name: raw-in, type: kafka, stream: raw, format: raw, kafka: {brokers: [%[1]q], topic: %[2]s}}
  - {name: json-in, type: kafka, stream: js, event_time: {header: at, format: unix_ms}, kafka: {brokers: [%[1]q], topic: %[3]s}}
sinks:
  - {name: raw-out, type: file, streams: [raw], file: {path: raw.jsonl}}
  - {name: json-out, type: file, streams: [js], format: payload, file: {path: js.out}}
`, brokers[0], rawTopic, jsonTopic), 0o644))
	run := startFlowhost(t, "run", "-f", spec, "--data-dir", filepath.Join(dir, "data"), "--metrics-addr", "")
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name)) // absent until the sink opens it
		return string(b)
	}
	run.waitFor(t, "every record in the sinks and the dead letter", func() bool {
		return strings.Count(read("raw.jsonl"), "\n") == len(rawValues) && strings.Count(read("js.out"), "\n") == 2 &&
			len(deadLetters(t, spec)) == 1
	})
	require.NoError(t, run.cmd.Process.Signal(syscall.SIGTERM))
	require.Zero(t, run.waitExit(t), "stderr:\n%s", run.log())

	for i, l := range lines(read("raw.jsonl")) {
		var r connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		p, err := r.PayloadBytes()
		require.NoError(t, err)
		if r.PayloadEncoding == "" {
			require.JSONEq(t, rawValues[i], string(p))
		} else {
			require.Equal(t, rawValues[i], string(p), "a raw value arrives as it is")
		}
		require.Equal(t, ts.UnixNano(), r.EventTS, "a raw record's event time is the Kafka timestamp")
	}
	require.Equal(t, "{\"n\":1}\n{\"n\":3}\n", read("js.out"))
	dead := deadLetters(t, spec)
	require.Equal(t, fmt.Sprintf("kafka:%s/0@1", jsonTopic), dead[0]["origin"])
	require.Contains(t, dead[0]["error"], fmt.Sprintf("topic %s partition 0 offset 1: column 2: the payload is not JSON: invalid character", jsonTopic))
}
