package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

type httpSourceHarness struct {
	src    *HTTPSource
	url    string
	ctx    context.Context
	cancel context.CancelFunc
	// runDone is closed when Run has returned runErr.
	runDone chan struct{}
	runErr  error
	dead    *bytes.Buffer
	dl      *DeadLetter

	mu      sync.Mutex
	records []Record
}

// startHTTPSource runs a source on 127.0.0.1:0; emit, if not nil, is
// called for every record before it is recorded.
func startHTTPSource(t *testing.T, cfg HTTPSourceConfig, emit func(Record) error) *httpSourceHarness {
	t.Helper()
	h := &httpSourceHarness{runDone: make(chan struct{}), dead: &bytes.Buffer{}}
	h.dl = NewDeadLetter(h.dead)
	cfg.Addr = "127.0.0.1:0"
	if cfg.Path == "" {
		cfg.Path = "/ingest"
	}
	if cfg.Stream == "" {
		cfg.Stream, cfg.Partitions = "orders", 2
	}
	cfg.Reject = h.dl.Reject
	src, err := NewHTTPSource(cfg)
	require.NoError(t, err)
	h.src, h.url = src, "http://"+src.Addr().String()+cfg.Path
	h.ctx, h.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(h.runDone)
		h.runErr = src.Run(h.ctx, func(r Record) error {
			if emit != nil {
				if err := emit(r); err != nil {
					return err
				}
			}
			h.mu.Lock()
			h.records = append(h.records, r)
			h.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() {
		h.cancel()
		<-h.runDone
	})
	return h
}

func (h *httpSourceHarness) emitted() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Record(nil), h.records...)
}

func post(t *testing.T, url, contentType, body string) (int, http.Header, ingestResponse) {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r ingestResponse
	require.NoError(t, json.Unmarshal(data, &r), "%s", data)
	return resp.StatusCode, resp.Header, r
}

func TestHTTPSourceAcceptsLines(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{PartitionBy: []string{"id"}}, nil)
	status, _, resp := post(t, h.url, "application/x-ndjson",
		"{\"write_ts\":1,\"payload\":{\"id\":\"a\"}}\n\n{\"payload\":{\"id\":\"b\"}}\r\n{\"payload\":{\"id\":\"a\"}}")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, ingestResponse{Accepted: 3}, resp)
	got := h.emitted()
	require.Len(t, got, 3)
	require.Equal(t, "http:/ingest#1:1", got[0].Origin)
	require.Equal(t, "http:/ingest#1:3", got[1].Origin)
	require.Equal(t, "http:/ingest#1:4", got[2].Origin)
	require.Equal(t, int64(1), got[0].Write)
	require.True(t, got[0].HasWrite)
	require.Equal(t, got[0].Partition, got[2].Partition)
	require.Equal(t, []byte(`{"id":"b"}`), got[1].Payload)

	// Request numbers go on.
	status, _, _ = post(t, h.url, "", `{"payload":{"id":"c"}}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "http:/ingest#2:1", h.emitted()[3].Origin)
	require.Zero(t, h.dl.Count())
}

func TestHTTPSourceRefusesBadLines(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{PartitionBy: []string{"id"}}, nil)
	body := strings.Join([]string{
		`{"payload":{"id":1}}`,
		`{"payload":{"id":2},"extra":true}`,
		`{"payload":{"no_id":3}}`,
		`{"payload":{"id":4}}`,
		`{"payload":`,
	}, "\n")
	status, _, resp := post(t, h.url, "text/plain", body)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, ingestResponse{Accepted: 2, Refused: []refusal{
		{Line: 2, Column: 21, Error: `unknown field "extra" (want write_ts, event_ts, payload, id)`},
		{Line: 3, Error: `partition_by: payload lacks group_by field "id"`},
		{Line: 5, Column: 12, Error: `line ends inside the JSON object`},
	}}, resp)
	got := h.emitted()
	require.Len(t, got, 2)
	require.Equal(t, []byte(`{"id":4}`), got[1].Payload)

	dls := deadLines(t, h.dead.Bytes())
	require.Len(t, dls, 3)
	require.Equal(t, "http:/ingest#1:2:21", dls[0]["origin"])
	require.Equal(t, "http:/ingest#1:3", dls[1]["origin"])
	require.Equal(t, StageKey, dls[1]["stage"])
	require.Equal(t, "http:/ingest#1:5:12", dls[2]["origin"])
	require.Equal(t, `{"payload":`, dls[2]["record"])
}

func TestHTTPSourceArrayBody(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{}, nil)
	body := "[\n  {\"payload\": 1},\n  {\"payload\": 2,\n   \"write_ts\": \"soon\"},\n  {\"event_ts\": 7, \"payload\": 3}\n]\n"
	status, _, resp := post(t, h.url, "application/json", body)
	require.Equal(t, http.StatusBadRequest, status)
	item := 1
	require.Equal(t, ingestResponse{Accepted: 2, Refused: []refusal{
		{Item: &item, Line: 4, Column: 16, Error: `write_ts: "soon" is not an RFC 3339 time`},
	}}, resp)
	got := h.emitted()
	require.Len(t, got, 2)
	require.Equal(t, "http:/ingest#1[2]", got[1].Origin)
	require.Equal(t, int64(7), got[1].Event)
	dls := deadLines(t, h.dead.Bytes())
	require.Len(t, dls, 1)
	require.Equal(t, "http:/ingest#1[1]:31", dls[0]["origin"])

	status, _, resp = post(t, h.url, "application/json", `[{"payload":1}, {"payload":2}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, ingestResponse{Error: "body is not a JSON array of records: it ends inside the array"}, resp)
	status, _, resp = post(t, h.url, "application/json", "[{\"payload\":1},\n x]")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "body is not a JSON array of records: line 2 column 2: invalid character 'x' looking for beginning of value", resp.Error)
	require.Len(t, h.emitted(), 2, "a malformed array is refused whole")
	dls = deadLines(t, h.dead.Bytes())
	require.Len(t, dls, 3)
	require.Equal(t, "http:/ingest#2", dls[1]["origin"])
	require.Equal(t, `[{"payload":1}, {"payload":2}`, dls[1]["record"])
}

func TestHTTPSourceLimitsAndMethods(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{MaxBodyBytes: 64}, nil)
	status, _, resp := post(t, h.url, "", strings.Repeat(`{"payload":1}`+"\n", 10))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "body is larger than 64 bytes; nothing was accepted", resp.Error)
	require.Empty(t, h.emitted())

	res, err := http.Get(h.url)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, "POST", res.Header.Get("Allow"))

	res, err = http.Post(strings.TrimSuffix(h.url, "/ingest")+"/other", "", strings.NewReader(`{"payload":1}`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// The answer comes only after the host took every record: while emit
// blocks, the client waits.
func TestHTTPSourceAnswersAfterEmit(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := startHTTPSource(t, HTTPSourceConfig{}, func(r Record) error {
		entered <- struct{}{}
		<-release
		return nil
	})
	type answer struct {
		status int
		resp   ingestResponse
	}
	answered := make(chan answer, 1)
	go func() {
		status, _, resp := post(t, h.url, "", "{\"payload\":1}\n{\"payload\":2}")
		answered <- answer{status, resp}
	}()
	<-entered
	select {
	case a := <-answered:
		t.Fatalf("answered %v while the host had not taken the first record", a)
	default:
	}
	release <- struct{}{}
	<-entered
	select {
	case a := <-answered:
		t.Fatalf("answered %v while the host had not taken the second record", a)
	default:
	}
	release <- struct{}{}
	a := <-answered
	require.Equal(t, answer{http.StatusOK, ingestResponse{Accepted: 2}}, a)
}

func TestHTTPSourceShutdown(t *testing.T) {
	entered := make(chan struct{})
	var h *httpSourceHarness
	h = startHTTPSource(t, HTTPSourceConfig{}, func(r Record) error {
		if r.Payload[0] == '1' {
			return nil
		}
		// The host stops taking records once the run is cancelled.
		entered <- struct{}{}
		<-h.ctx.Done()
		return h.ctx.Err()
	})
	type answer struct {
		status     int
		retryAfter string
		resp       ingestResponse
	}
	answered := make(chan answer, 1)
	go func() {
		status, header, resp := post(t, h.url, "", "{\"payload\":1}\n{\"payload\":2}\n{\"payload\":3}")
		answered <- answer{status, header.Get("Retry-After"), resp}
	}()
	<-entered
	h.cancel()
	require.Equal(t, answer{http.StatusServiceUnavailable, "5", ingestResponse{Accepted: 1, Error: "context canceled"}}, <-answered)
	<-h.runDone
	require.ErrorIs(t, h.runErr, context.Canceled)

	// After Run, the endpoint only says it is shutting down.
	rec := httptest.NewRecorder()
	h.src.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ingest", strings.NewReader(`{"payload":1}`)))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
	require.JSONEq(t, `{"accepted":0,"error":"shutting down"}`, rec.Body.String())
	require.NoError(t, h.src.Close())
}

func TestHTTPSourceConfigErrors(t *testing.T) {
	_, err := NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "ingest", Stream: "s", Partitions: 1})
	require.EqualError(t, err, `http source: path "ingest" must start with '/'`)
	_, err = NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/i", Stream: "s", Partitions: 0})
	require.EqualError(t, err, "http source: partitions must be at least 1, not 0")
	src, err := NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/i", Stream: "s", Partitions: 1})
	require.NoError(t, err)
	_, err = NewHTTPSource(HTTPSourceConfig{Addr: src.Addr().String(), Path: "/i", Stream: "s", Partitions: 1})
	require.ErrorContains(t, err, "address already in use")
	require.NoError(t, src.Close())
}

func TestHTTPSourceDeadLetterFailureStopsRun(t *testing.T) {
	src, err := NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/in", Stream: "s", Partitions: 1,
		Reject: NewDeadLetter(failingWriter{}).Reject})
	require.NoError(t, err)
	runErr := make(chan error, 1)
	var emitted []Record
	go func() {
		runErr <- src.Run(context.Background(), func(r Record) error { emitted = append(emitted, r); return nil })
	}()
	status, _, resp := post(t, "http://"+src.Addr().String()+"/in", "", "{\"payload\":1}\nbad\n{\"payload\":3}")
	require.Equal(t, http.StatusInternalServerError, status)
	require.Equal(t, ingestResponse{Accepted: 1, Error: "refused records could not be kept, the run stops: dead letter: disk full"}, resp)
	require.EqualError(t, <-runErr, "dead letter: disk full")
	require.Len(t, emitted, 1)
}
