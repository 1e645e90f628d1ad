package connect

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// groupingHost stands for the runtime's side of emit: it honours
// Record.More as the runtime does, accepting a group only when its last
// record arrives and discarding it when an emit of the group fails.
type groupingHost struct {
	// fail, if set, is asked about every record before it is taken; an
	// error fails that emit.
	fail func(Record) error

	mu       sync.Mutex
	held     []Record
	accepted []Record
}

func (g *groupingHost) emit(r Record) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		if err := g.fail(r); err != nil {
			g.held = nil
			return err
		}
	}
	g.held = append(g.held, r)
	if !r.More {
		if !r.Sync {
			return errors.New("the last record of a request must ask for durability")
		}
		g.accepted = append(g.accepted, g.held...)
		g.held = nil
	}
	return nil
}

func (g *groupingHost) records() []Record {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Record(nil), g.accepted...)
}

type httpSourceHarness struct {
	src    *HTTPSource
	url    string
	host   *groupingHost
	ctx    context.Context
	cancel context.CancelFunc
	// runDone is closed when Run has returned runErr.
	runDone chan struct{}
	runErr  error
}

// startHTTPSource runs a source on 127.0.0.1:0 (stream "orders", 2
// partitions and path /ingest unless cfg says otherwise) into a
// groupingHost that fails records as fail says (nil: never).
func startHTTPSource(t *testing.T, cfg HTTPSourceConfig, fail func(Record) error) *httpSourceHarness {
	t.Helper()
	h := &httpSourceHarness{runDone: make(chan struct{}), host: &groupingHost{fail: fail}}
	cfg.Addr = "127.0.0.1:0"
	if cfg.Path == "" {
		cfg.Path = "/ingest"
	}
	if cfg.Stream == "" {
		cfg.Stream, cfg.Partitions = "orders", 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	src, err := NewHTTPSource(cfg)
	require.NoError(t, err)
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	h.src, h.url = src, scheme+"://"+src.Addr().String()+cfg.Path
	h.ctx, h.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(h.runDone)
		h.runErr = src.Run(h.ctx, h.host.emit)
	}()
	t.Cleanup(func() {
		h.cancel()
		<-h.runDone
	})
	return h
}

func (h *httpSourceHarness) emitted() []Record { return h.host.records() }

func post(t *testing.T, url, contentType, body string) (int, http.Header, ingestResponse) {
	t.Helper()
	return postWith(t, http.DefaultClient, url, nil, body)
}

// postWith posts body with the given client and extra headers and decodes
// the JSON answer.
func postWith(t *testing.T, client *http.Client, url string, header http.Header, body string) (int, http.Header, ingestResponse) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r ingestResponse
	require.NoError(t, json.Unmarshal(data, &r), "%s", data)
	return resp.StatusCode, resp.Header, r
}

func payloads(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Payload)
	}
	return out
}

// TestHTTPSourceRequestSemantics: a request is accepted whole or not at
// all, and a refused one says, record by record, what is wrong where.
func TestHTTPSourceRequestSemantics(t *testing.T) {
	item := func(i int) *int { return &i }
	for _, tc := range []struct {
		name     string
		body     string
		status   int
		resp     ingestResponse
		accepted []string // payloads, in order
	}{
		{
			name:   "valid lines",
			body:   "{\"write_ts\":1,\"payload\":{\"id\":\"a\"}}\n\n{\"payload\":{\"id\":\"b\"}}\r\n{\"payload\":{\"id\":\"a\"}}",
			status: http.StatusOK, resp: ingestResponse{Accepted: 3},
			accepted: []string{`{"id":"a"}`, `{"id":"b"}`, `{"id":"a"}`},
		},
		{
			name:   "empty body",
			body:   "\n \n",
			status: http.StatusOK, resp: ingestResponse{},
		},
		{
			name: "good and bad lines: nothing is accepted",
			body: strings.Join([]string{
				`{"payload":{"id":1}}`,
				`{"payload":{"id":2},"extra":true}`,
				`{"payload":{"no_id":3}}`,
				`{"payload":{"id":4}}`,
				`{"payload":{"id":5},"write_ts":"soon"}`,
				`{"payload":`,
			}, "\n"),
			status: http.StatusBadRequest,
			resp: ingestResponse{Invalid: 4,
				Error: "4 of 6 records are invalid, so none was accepted: fix or remove them and send the request again",
				Refused: []refusal{
					{Line: 2, Column: 21, Field: "extra", Error: `unknown field "extra" (want write_ts, event_ts, payload, id, parents)`},
					{Line: 3, Field: "payload", Error: `partition_by: payload lacks group_by field "id"`},
					{Line: 5, Column: 32, Field: "write_ts", Error: `write_ts: "soon" is not an RFC 3339 time`},
					{Line: 6, Column: 12, Error: `line ends inside the JSON object`},
				}},
		},
		{
			name:   "a field twice and a bad id",
			body:   "{\"payload\":{\"id\":1},\"payload\":2}\n{\"payload\":{\"id\":1},\"id\":7}",
			status: http.StatusBadRequest,
			resp: ingestResponse{Invalid: 2,
				Error: "2 of 2 records are invalid, so none was accepted: fix or remove them and send the request again",
				Refused: []refusal{
					{Line: 1, Column: 21, Field: "payload", Error: `field "payload" appears twice`},
					{Line: 2, Column: 26, Field: "id", Error: `id: expected a string`},
				}},
		},
		{
			name:   "valid array",
			body:   "[\n  {\"payload\": {\"id\":1}},\n  {\"event_ts\": 7, \"payload\": {\"id\":2}}\n]\n",
			status: http.StatusOK, resp: ingestResponse{Accepted: 2},
			accepted: []string{`{"id":1}`, `{"id":2}`},
		},
		{
			name:   "array with a bad item: nothing is accepted",
			body:   "[\n  {\"payload\": {\"id\":1}},\n  {\"payload\": {\"id\":2},\n   \"write_ts\": \"soon\"},\n  {\"event_ts\": 7, \"payload\": {\"id\":3}}\n]\n",
			status: http.StatusBadRequest,
			resp: ingestResponse{Invalid: 1,
				Error: "1 of 3 records are invalid, so none was accepted: fix or remove them and send the request again",
				Refused: []refusal{
					{Item: item(1), Line: 4, Column: 16, Field: "write_ts", Error: `write_ts: "soon" is not an RFC 3339 time`},
				}},
		},
		{
			name:   "array cut short",
			body:   `[{"payload":{"id":1}}, {"payload":{"id":2}}`,
			status: http.StatusBadRequest,
			resp:   ingestResponse{Error: "body is not a JSON array of records: it ends inside the array; nothing was accepted"},
		},
		{
			name:   "array with a syntax error",
			body:   "[{\"payload\":{\"id\":1}},\n x]",
			status: http.StatusBadRequest,
			resp:   ingestResponse{Error: "body is not a JSON array of records: line 2 column 2: invalid character 'x' looking for beginning of value; nothing was accepted"},
		},
		{
			name:   "data after the array",
			body:   "[{\"payload\":{\"id\":1}}]\n{}",
			status: http.StatusBadRequest,
			resp:   ingestResponse{Error: "body: line 2 column 1: data after the JSON array; nothing was accepted"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHTTPSource(t, HTTPSourceConfig{PartitionBy: []string{"id"}}, nil)
			status, _, resp := post(t, h.url, "application/x-ndjson", tc.body)
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.resp, resp)
			got := h.emitted()
			require.Equal(t, len(tc.accepted), len(got))
			if len(got) > 0 {
				require.Equal(t, tc.accepted, payloads(got))
			}
		})
	}
}

// The records of a request keep their origins and fields, and requests are
// numbered on.
func TestHTTPSourceRecordOrigins(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{PartitionBy: []string{"id"}}, nil)
	status, _, _ := post(t, h.url, "", "{\"write_ts\":1,\"payload\":{\"id\":\"a\"}}\n\n{\"id\":\"k\",\"payload\":{\"id\":\"a\"}}")
	require.Equal(t, http.StatusOK, status)
	status, _, _ = post(t, h.url, "", `[{"payload":{"id":"c"}},{"event_ts":7,"payload":{"id":"d"}}]`)
	require.Equal(t, http.StatusOK, status)
	got := h.emitted()
	require.Len(t, got, 4)
	require.Equal(t, []string{"http:/ingest#1:1", "http:/ingest#1:3", "http:/ingest#2[0]", "http:/ingest#2[1]"},
		[]string{got[0].Origin, got[1].Origin, got[2].Origin, got[3].Origin})
	require.Equal(t, int64(1), got[0].Write)
	require.True(t, got[0].HasWrite)
	require.Equal(t, "k", got[1].ID)
	require.Equal(t, got[0].Partition, got[1].Partition)
	require.Equal(t, int64(7), got[3].Event)
	// Each request is one group: More on all but its last record, which
	// asks for durability.
	require.Equal(t, []bool{true, false, true, false}, []bool{got[0].More, got[1].More, got[2].More, got[3].More})
	require.Equal(t, []bool{false, true, false, true}, []bool{got[0].Sync, got[1].Sync, got[2].Sync, got[3].Sync})
}

// A client that resends a refused request, as clients retrying on 400
// do, never makes the host take its good records twice; the corrected
// request is taken once.
func TestHTTPSourceRetriedRequestNeverDuplicates(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{}, nil)
	bad := "{\"payload\":1}\n{\"payload\":2,\"oops\":0}\n{\"payload\":3}"
	for range 3 {
		status, _, resp := post(t, h.url, "", bad)
		require.Equal(t, http.StatusBadRequest, status)
		require.Zero(t, resp.Accepted)
		require.Empty(t, h.emitted())
	}
	status, _, resp := post(t, h.url, "", "{\"payload\":1}\n{\"payload\":3}")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 2, resp.Accepted)
	require.Equal(t, []string{"1", "3"}, payloads(h.emitted()))
}

// When the host cannot take a request's records (it stops, or its commit
// fails), the answer is 503 and nothing of the request was taken, so that
// sending it again to the next run takes it once.
func TestHTTPSourceUnavailableAcceptsNothing(t *testing.T) {
	storeDown := errors.New("committing 3 ingested records: disk full")
	h := startHTTPSource(t, HTTPSourceConfig{}, func(r Record) error {
		if !r.More { // the commit, at the group's end, fails
			return storeDown
		}
		return nil
	})
	body := "{\"payload\":1}\n{\"payload\":2}\n{\"payload\":3}"
	status, header, resp := post(t, h.url, "", body)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "5", header.Get("Retry-After"))
	require.Equal(t, ingestResponse{Error: storeDown.Error() + "; nothing was accepted"}, resp)
	<-h.runDone
	require.ErrorIs(t, h.runErr, storeDown)
	require.Empty(t, h.emitted())

	// After Run, the endpoint only says it is shutting down.
	rec := httptest.NewRecorder()
	h.src.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ingest", strings.NewReader(`{"payload":1}`)))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
	require.JSONEq(t, `{"accepted":0,"error":"shutting down; nothing was accepted"}`, rec.Body.String())
	require.NoError(t, h.src.Close())

	next := startHTTPSource(t, HTTPSourceConfig{}, nil)
	status, _, resp = post(t, next.url, "", body)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 3, resp.Accepted)
	require.Equal(t, []string{"1", "2", "3"}, payloads(next.emitted()))
}

// The answer comes only after the host took every record of the request:
// while the host blocks on it, the client waits.
func TestHTTPSourceAnswersAfterEmit(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := startHTTPSource(t, HTTPSourceConfig{}, func(r Record) error {
		if !r.More {
			entered <- struct{}{}
			<-release
		}
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
		t.Fatalf("answered %v while the host had not taken the request", a)
	default:
	}
	release <- struct{}{}
	require.Equal(t, answer{http.StatusOK, ingestResponse{Accepted: 2}}, <-answered)
}

// Shutting down while the host holds a request answers 503, and nothing
// of the request was accepted.
func TestHTTPSourceShutdown(t *testing.T) {
	entered := make(chan struct{})
	var h *httpSourceHarness
	h = startHTTPSource(t, HTTPSourceConfig{}, func(r Record) error {
		if r.More {
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
	require.Equal(t, answer{http.StatusServiceUnavailable, "5", ingestResponse{Error: "context canceled; nothing was accepted"}}, <-answered)
	<-h.runDone
	require.ErrorIs(t, h.runErr, context.Canceled)
	require.Empty(t, h.emitted())
}

// A body cut off before its end (the client went away, or its
// Content-Length promised more) is not accepted, not even the complete
// lines that came before the cut.
func TestHTTPSourceBodyCutOff(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{}, nil)
	conn, err := net.Dial("tcp", h.src.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	part := "{\"payload\":1}\n{\"payload\":2}\n"
	_, err = fmt.Fprintf(conn, "POST /ingest HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(part)+100, part)
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var r ingestResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	require.Equal(t, "reading body: unexpected EOF; nothing was accepted", r.Error)
	require.Empty(t, h.emitted())
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

// A 400 lists at most maxRefusalsReported refusals and counts them all.
func TestHTTPSourceBoundsTheRefusalList(t *testing.T) {
	h := startHTTPSource(t, HTTPSourceConfig{}, nil)
	n := maxRefusalsReported + 50
	status, _, resp := post(t, h.url, "", strings.Repeat("{\"payload\":1}\nnot json\n", n))
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, n, resp.Invalid)
	require.Len(t, resp.Refused, maxRefusalsReported)
	require.Equal(t, 2, resp.Refused[0].Line)
	require.Equal(t, 2*maxRefusalsReported, resp.Refused[maxRefusalsReported-1].Line)
	require.Equal(t, strconv.Itoa(n)+" of "+strconv.Itoa(2*n)+" records are invalid, so none was accepted: fix or remove them and send the request again", resp.Error)
	require.Empty(t, h.emitted())
}

func TestHTTPSourceConfigErrors(t *testing.T) {
	_, err := NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "ingest", Stream: "s", Partitions: 1})
	require.EqualError(t, err, `http source: path "ingest" must start with '/'`)
	_, err = NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/i", Stream: "s", Partitions: 0})
	require.EqualError(t, err, "http source: partitions must be at least 1, not 0")
	src, err := NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/i", Stream: "s", Partitions: 1})
	require.NoError(t, err)
	addr := src.Addr().String()
	_, err = NewHTTPSource(HTTPSourceConfig{Addr: addr, Path: "/i", Stream: "s", Partitions: 1})
	require.EqualError(t, err, "listen "+addr+": address already in use")
	require.NoError(t, src.Close())
}

// FuzzHTTPIngestBody decodes arbitrary request bodies: it never panics, a
// body is either well formed or refused with no records, every refusal
// points at a line and column inside the body, and a body of lines gives
// one record or one refusal per non-blank line.
func FuzzHTTPIngestBody(f *testing.F) {
	f.Add([]byte("{\"payload\":{\"id\":1}}\n{\"payload\":{\"id\":2},\"x\":1}\n\n{\"payload\":"))
	f.Add([]byte("[\n {\"payload\":{\"id\":1}},\n {\"payload\":{\"id\":2},\n  \"write_ts\":\"soon\"}\n]"))
	f.Add([]byte(`[{"payload":1}, {"payload":2}`))
	f.Add([]byte("[{\"payload\":{\"id\":1}}]\n{}"))
	f.Add([]byte("\r\n{\"id\":\"k\",\"payload\":{\"no_id\":1}}\r\n"))
	f.Add([]byte(" [ ] "))
	src, err := NewHTTPSource(HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/in", Stream: "s", Partitions: 3, PartitionBy: []string{"id"}})
	require.NoError(f, err)
	require.NoError(f, src.Close())
	f.Fuzz(func(t *testing.T, body []byte) {
		records, refused, bodyErr := src.decodeBody(body, "http:/in#1")
		lines := strings.Split(string(body), "\n")
		if bodyErr != nil {
			if len(records) > 0 || len(refused) > 0 {
				t.Fatalf("a malformed body gave %d records and %d refusals", len(records), len(refused))
			}
			if trimmed := strings.TrimLeft(string(body), " \t\r\n"); trimmed == "" || trimmed[0] != '[' {
				t.Fatalf("a body of lines was refused whole: %v", bodyErr)
			}
			return
		}
		for _, r := range records {
			if !json.Valid(r.Payload) {
				t.Fatalf("payload %q is not JSON", r.Payload)
			}
			if r.Partition < 0 || r.Partition >= 3 {
				t.Fatalf("partition %d out of range", r.Partition)
			}
		}
		for _, ref := range refused {
			if ref.Line < 1 || ref.Line > len(lines) {
				t.Fatalf("refusal at line %d of a body of %d lines: %+v", ref.Line, len(lines), ref)
			}
			if ref.Column < 0 || ref.Column > len(lines[ref.Line-1])+1 {
				t.Fatalf("refusal at column %d of a line of %d bytes: %+v", ref.Column, len(lines[ref.Line-1]), ref)
			}
			if ref.Error == "" {
				t.Fatalf("refusal without an error: %+v", ref)
			}
		}
		if trimmed := strings.TrimLeft(string(body), " \t\r\n"); trimmed == "" || trimmed[0] != '[' {
			nonBlank := 0
			for _, l := range lines {
				if strings.TrimSpace(strings.TrimSuffix(l, "\r")) != "" {
					nonBlank++
				}
			}
			if got := len(records) + len(refused); got != nonBlank {
				t.Fatalf("%d records and refusals for %d non-blank lines", got, nonBlank)
			}
		}
	})
}
