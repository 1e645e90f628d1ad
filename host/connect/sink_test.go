package connect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/ordering"
)

func testMessage(seq uint64, key string, payload []byte) *ordering.Message {
	parent := ordering.SourceID("orders", 1, seq)
	return &ordering.Message{
		ID:      parent.Derive("enriched", 0),
		Stream:  "enriched",
		Key:     key,
		Time:    ordering.Timestamps{Event: 1714557600123000000 + int64(seq), System: 20, Write: 0, Alignment: 30},
		Task:    ordering.TaskID(seq + 7),
		Parents: []ordering.MessageID{parent},
		Payload: payload,
	}
}

func TestNewSinkRecord(t *testing.T) {
	r := NewSinkRecord(testMessage(4, `["a"]`, []byte("{\n  \"total\": 3, \"html\": \"<b>\"\n}")))
	line, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"stream":"enriched","message_id":"orders/p1:4>enriched:0","parents":["orders/p1:4"],"key":"[\"a\"]",
		"event_ts":1714557600123000004,"system_ts":20,"alignment_ts":30,"write_ts":0,"task_id":11,
		"payload":{"total":3,"html":"<b>"}}`, string(line))
	got, err := r.PayloadBytes()
	require.NoError(t, err)
	require.Equal(t, "{\n  \"total\": 3, \"html\": \"<b>\"\n}", string(got))

	for _, payload := range [][]byte{{0xff, 0x01}, []byte("plain text"), nil} {
		r = NewSinkRecord(testMessage(1, "", payload))
		require.Equal(t, "base64", r.PayloadEncoding)
		got, err = r.PayloadBytes()
		require.NoError(t, err)
		require.Equal(t, string(payload), string(got))
	}
	noParents := testMessage(1, "", []byte("1"))
	noParents.Parents = nil
	line, err = json.Marshal(NewSinkRecord(noParents))
	require.NoError(t, err)
	require.Contains(t, string(line), `"parents":[]`)
}

func TestWriterSinkJSON(t *testing.T) {
	var out bytes.Buffer
	s, err := NewWriterSink(&out, "")
	require.NoError(t, err)
	batch := []SinkRecord{
		NewSinkRecord(testMessage(1, `[1]`, []byte("{\"a\": \"<&>\",\n\"b\": [1, 2]}"))),
		NewSinkRecord(testMessage(2, `[2]`, []byte{0})),
	}
	require.NoError(t, s.Write(context.Background(), batch))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2, "a multi-line payload stays on one line")
	require.Contains(t, lines[0], `"payload":{"a":"<&>","b":[1,2]}}`)
	require.Contains(t, lines[1], `"payload":"AA==","payload_encoding":"base64"}`)
	for i, l := range lines {
		var back SinkRecord
		require.NoError(t, json.Unmarshal([]byte(l), &back))
		want, err := batch[i].PayloadBytes()
		require.NoError(t, err)
		got, err := back.PayloadBytes()
		require.NoError(t, err)
		if i == 0 {
			require.JSONEq(t, string(want), string(got))
		} else {
			require.Equal(t, want, got)
		}
		require.Equal(t, batch[i].MessageID, back.MessageID)
	}
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.EqualError(t, s.Write(context.Background(), batch), "sink: write after close")

	_, err = NewWriterSink(&out, "xml")
	require.EqualError(t, err, `sink format "xml" is unknown (want json, text or payload)`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err = NewWriterSink(&out, FormatJSON)
	require.NoError(t, err)
	require.ErrorIs(t, s.Write(ctx, batch), context.Canceled)
}

func TestWriterSinkText(t *testing.T) {
	var out bytes.Buffer
	s, err := NewWriterSink(&out, FormatText)
	require.NoError(t, err)
	short := NewSinkRecord(testMessage(1, `["a"]`, []byte(`{"n": 1}`)))
	long := NewSinkRecord(testMessage(2, `["customer-17"]`, []byte{1, 2}))
	long.Stream = "enriched_orders"
	require.NoError(t, s.Write(context.Background(), []SinkRecord{long, short}))
	require.NoError(t, s.Close())
	want := "" +
		`enriched_orders  ["customer-17"]  2024-05-01T10:00:00.123Z  orders/p1:2>enriched:0  base64:AQI=` + "\n" +
		`enriched         ["a"]            2024-05-01T10:00:00.123Z  orders/p1:1>enriched:0  {"n":1}` + "\n"
	require.Equal(t, want, out.String())
}

func TestFileSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s, err := OpenFileSink(FileSinkConfig{Path: path})
	require.NoError(t, err)
	require.NoError(t, s.Write(context.Background(), []SinkRecord{NewSinkRecord(testMessage(1, "", []byte("1")))}))
	// Flushed at the end of Write, before Close.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 1, bytes.Count(data, []byte("\n")))
	require.NoError(t, s.Write(context.Background(), []SinkRecord{NewSinkRecord(testMessage(2, "", []byte("2")))}))
	require.NoError(t, s.Close())

	// Appends by default; Truncate starts over.
	s, err = OpenFileSink(FileSinkConfig{Path: path})
	require.NoError(t, err)
	require.NoError(t, s.Write(context.Background(), []SinkRecord{NewSinkRecord(testMessage(3, "", []byte("3")))}))
	require.NoError(t, s.Close())
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 3, bytes.Count(data, []byte("\n")))

	s, err = OpenFileSink(FileSinkConfig{Path: path, Truncate: true, Format: FormatText})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Empty(t, data)

	_, err = OpenFileSink(FileSinkConfig{Path: filepath.Join(path, "not-a-dir", "x")})
	require.ErrorContains(t, err, "file sink: ")
}

// safeBuffer is a bytes.Buffer for logs written from server goroutines.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func sinkBatch(from, n int) []SinkRecord {
	var out []SinkRecord
	for i := from; i < from+n; i++ {
		out = append(out, NewSinkRecord(testMessage(uint64(i), "", []byte(fmt.Sprintf(`{"n":%d}`, i)))))
	}
	return out
}

// subscribe opens a subscription and returns the response and a reader of
// its lines.
func subscribe(t *testing.T, url string) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

func readSinkLine(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line, err := r.ReadBytes('\n')
	require.NoError(t, err)
	var rec SinkRecord
	require.NoError(t, json.Unmarshal(line, &rec))
	var p struct{ N int }
	require.NoError(t, json.Unmarshal(rec.Payload, &p))
	return p.N
}

// requireStreamEnds reads a subscription to its end. The end is clean when
// the handler was idle, and breaks off when it was writing.
func requireStreamEnds(t *testing.T, r io.Reader) {
	t.Helper()
	if _, err := io.ReadAll(r); err != nil {
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
}

func TestHTTPSink(t *testing.T) {
	var logs safeBuffer
	s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 5, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	url := "http://" + s.Addr().String() + "/out"
	ctx := context.Background()
	require.NoError(t, s.Write(ctx, sinkBatch(0, 3))) // records 0..2

	// from=1 replays 1 and 2, then goes on live.
	resp, lines := subscribe(t, url+"?from=1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("X-First-Record"))
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	require.Equal(t, 1, readSinkLine(t, lines))
	require.Equal(t, 2, readSinkLine(t, lines))

	// Without from: live from the next record.
	liveResp, live := subscribe(t, url)
	require.Equal(t, "3", liveResp.Header.Get("X-First-Record"))

	require.NoError(t, s.Write(ctx, sinkBatch(3, 2))) // records 3, 4
	require.Equal(t, 3, readSinkLine(t, lines))
	require.Equal(t, 4, readSinkLine(t, lines))
	require.Equal(t, 3, readSinkLine(t, live))
	require.Equal(t, 4, readSinkLine(t, live))
	require.Equal(t, 2, s.Subscribers())

	// A batch that evicts what a subscriber has not been sent disconnects
	// it; Write itself does not wait.
	require.NoError(t, s.Write(ctx, sinkBatch(5, 6))) // records 5..10; ring keeps 6..10
	requireStreamEnds(t, lines)
	require.Contains(t, logs.String(), `reason="fell behind: record 5 was evicted before it was sent (the sink keeps 5 records)"`)

	// Evicted positions: 410 with the oldest available.
	res, err := http.Get(url + "?from=2")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusGone, res.StatusCode)
	require.JSONEq(t, `{"error":"record 2 was evicted; the sink keeps the last 5 records","oldest":6}`, string(body))

	// The oldest kept record is still there, and a future one can be awaited.
	_, replay := subscribe(t, url+"?from=6")
	for n := 6; n <= 10; n++ {
		require.Equal(t, n, readSinkLine(t, replay))
	}
	futureResp, future := subscribe(t, url+"?from=12")
	require.Equal(t, "12", futureResp.Header.Get("X-First-Record"))
	require.NoError(t, s.Write(ctx, sinkBatch(11, 2)))
	require.Equal(t, 12, readSinkLine(t, future))
	require.Equal(t, 11, readSinkLine(t, replay))

	res, err = http.Get(url + "?from=-1")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	res, err = http.Post(url, "", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)

	// Close ends the streams.
	require.NoError(t, s.Close())
	requireStreamEnds(t, future)
	requireStreamEnds(t, replay)
	requireStreamEnds(t, live)
	require.NoError(t, s.Close())
	require.EqualError(t, s.Write(ctx, sinkBatch(13, 1)), "http sink: write after close")
	require.Contains(t, logs.String(), `reason="sink closed"`)
}

// A subscriber whose connection takes nothing is cut off once the ring
// evicts what it has not been sent, even while a write to it is blocked.
func TestHTTPSinkSlowSubscriber(t *testing.T) {
	var logs safeBuffer
	s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer s.Close()
	// A small receive buffer (it also turns off autotuning) makes the
	// socket fill after a few records.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			err = conn.(*net.TCPConn).SetReadBuffer(8 << 10)
		}
		return conn, err
	}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + s.Addr().String() + "/out")
	require.NoError(t, err)
	defer resp.Body.Close()
	// Never read resp.Body: the socket buffers fill and the handler's write
	// blocks.
	big := NewSinkRecord(testMessage(0, "", []byte(`{"filler":"`+strings.Repeat("x", 256<<10)+`"}`)))
	for i := 0; s.Subscribers() == 1; i++ {
		require.Less(t, i, 1000, "the slow subscriber was never disconnected")
		require.NoError(t, s.Write(context.Background(), []SinkRecord{big}))
	}
	require.Contains(t, logs.String(), "fell behind")
}

func TestHTTPSinkConfigErrors(t *testing.T) {
	_, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "out"})
	require.EqualError(t, err, `http sink: path "out" must start with '/'`)
	_, err = NewHTTPSink(HTTPSinkConfig{Addr: "256.0.0.1:0", Path: "/out"})
	require.ErrorContains(t, err, "listen 256.0.0.1:0: ")
}

// TestSinkRecordFormatterBatchesAsOneByOne: records formatted a batch at a
// time (sharing one string and one Parents slice) equal those formatted one
// message at a time, for messages with no, one and several parents, and
// one record's Parents cannot reach into the next's.
func TestSinkRecordFormatterBatchesAsOneByOne(t *testing.T) {
	src := func(seq uint64) ordering.MessageID { return ordering.SourceID("orders", 2, seq) }
	noParents := testMessage(1, "", []byte(`{"a":1}`))
	noParents.Parents = nil
	noParents.ID = src(9)
	several := testMessage(2, `["k"]`, []byte("not json\xff"))
	several.Parents = []ordering.MessageID{src(3), ordering.TransformID("join", 1, 44), src(5)}
	ms := []*ordering.Message{noParents, testMessage(3, `["a"]`, []byte(`[1]`)), several, testMessage(4, `["b"]`, nil)}

	var f SinkRecordFormatter
	batch := f.Append(nil, ms...)
	require.Len(t, batch, len(ms))
	for i, m := range ms {
		var alone SinkRecordFormatter
		require.Equal(t, alone.Append(nil, m), batch[i:i+1], "record %d", i)
		require.Len(t, batch[i].Parents, len(m.Parents))
		for j, p := range m.Parents {
			require.Equal(t, p.String(), batch[i].Parents[j])
		}
		require.Equal(t, m.ID.String(), batch[i].MessageID)
	}
	line, err := json.Marshal(batch[0])
	require.NoError(t, err)
	require.Contains(t, string(line), `"parents":[]`, "no parents is an empty list, not null")

	batch[1].Parents = append(batch[1].Parents, "extra")
	require.Equal(t, several.Parents[0].String(), batch[2].Parents[0])

	again := f.Append(nil, ms[3])
	require.Equal(t, ms[3].ID.String(), again[0].MessageID)
	require.Equal(t, several.Parents[2].String(), batch[2].Parents[2], "reusing the formatter leaves earlier records as they were")
}
