package connect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memLog is a [SinkLog] in memory. A Read sees the log as it stood when
// the Read began, as a store's iterator does; onRead, if set, runs inside
// every Read once that is fixed, so that a test can race the read.
type memLog struct {
	mu     sync.Mutex
	oldest int64
	lines  [][]byte // lines[i] is record oldest+i
	onRead func()
}

func (l *memLog) append(records []SinkRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range records {
		line, err := records[i].JSONLine()
		if err != nil {
			return err
		}
		l.lines = append(l.lines, line)
	}
	return nil
}

// commit stores the records in the log, then writes them to the sink, in
// the order the runtime does.
func (l *memLog) commit(s *HTTPSink, records []SinkRecord) error {
	if err := l.append(records); err != nil {
		return err
	}
	return s.Write(context.Background(), records)
}

func (l *memLog) deleteBefore(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = l.lines[n-l.oldest:]
	l.oldest = n
}

func (l *memLog) Bounds() (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.oldest, l.oldest + int64(len(l.lines)), nil
}

func (l *memLog) Read(from int64, fn func(n int64, line []byte) error) error {
	l.mu.Lock()
	oldest, lines, hook := l.oldest, l.lines, l.onRead
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
	for n := max(from, oldest); n < oldest+int64(len(lines)); n++ {
		if err := fn(n, lines[n-oldest]); err != nil {
			return err
		}
	}
	return nil
}

// gapLog leaves record gap out of its reads, as a corrupted log would.
type gapLog struct {
	*memLog
	gap int64
}

func (l gapLog) Read(from int64, fn func(n int64, line []byte) error) error {
	return l.memLog.Read(from, func(n int64, line []byte) error {
		if n == l.gap {
			return nil
		}
		return fn(n, line)
	})
}

// failingLog cannot be read.
type failingLog struct{ *memLog }

func (failingLog) Read(int64, func(int64, []byte) error) error { return errors.New("disk on fire") }

// historyRecords returns records from..to-1, each payload carrying its
// number and pad bytes of filler.
func historyRecords(from, to, pad int) []SinkRecord {
	var out []SinkRecord
	for n := from; n < to; n++ {
		out = append(out, SinkRecord{
			Stream: "out", MessageID: "m" + strconv.Itoa(n), Parents: []string{}, Key: "k",
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, n, strings.Repeat("x", pad))),
		})
	}
	return out
}

// historyLog returns a log holding records from..to-1, as an earlier run
// of the host left it.
func historyLog(t *testing.T, from, to, pad int) *memLog {
	t.Helper()
	l := &memLog{oldest: int64(from)}
	require.NoError(t, l.append(historyRecords(from, to, pad)))
	return l
}

// requireRecords reads records from..to-1 off a subscription, byte for
// byte the lines JSONLine makes of them.
func requireRecords(t *testing.T, r *bufio.Reader, from, to, pad int) {
	t.Helper()
	for n := from; n < to; n++ {
		line, err := r.ReadBytes('\n')
		require.NoError(t, err, "reading record %d", n)
		want, err := historyRecords(n, n+1, pad)[0].JSONLine()
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, line), "record %d: got %.80q", n, line)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSinkRecordJSONLine(t *testing.T) {
	r := NewSinkRecord(testMessage(4, "k", []byte("{\n  \"html\": \"<b>\"\n}")))
	line, err := r.JSONLine()
	require.NoError(t, err)
	var written bytes.Buffer
	w, err := NewWriterSink(&written, FormatJSON)
	require.NoError(t, err)
	require.NoError(t, w.Write(context.Background(), []SinkRecord{r}))
	require.NoError(t, w.Close())
	require.Equal(t, written.String(), string(line))
	require.Equal(t, 1, bytes.Count(line, []byte("\n")))
	require.True(t, bytes.HasSuffix(line, []byte("\n")))
}

// A restarted sink goes on numbering where the last run stopped and serves
// the records of the earlier run from the log.
func TestHTTPSinkResumesFromLog(t *testing.T) {
	log := &memLog{}
	s1, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 10, Log: log, Logger: quietLogger()})
	require.NoError(t, err)
	for n := 0; n < 100; n += 10 {
		require.NoError(t, log.commit(s1, historyRecords(n, n+10, 0)))
	}
	// Within one run too, what the ring evicted comes from the log.
	_, early := subscribe(t, "http://"+s1.Addr().String()+"/out?from=0")
	requireRecords(t, early, 0, 100, 0)
	require.NoError(t, s1.Close())
	requireStreamEnds(t, early)

	log.deleteBefore(20) // retention
	s2, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 3, Next: 100, Log: log, Logger: quietLogger()})
	require.NoError(t, err)
	defer s2.Close()
	url := "http://" + s2.Addr().String() + "/out"

	outer := t
	type open struct {
		first int
		lines *bufio.Reader
	}
	var subs []open
	for _, tc := range []struct {
		name  string
		query string
		first int    // X-First-Record of a 200
		gone  string // body of a 410
	}{
		{name: "from the log", query: "?from=50", first: 50},
		{name: "the oldest in the log", query: "?from=20", first: 20},
		{name: "the last of the earlier run", query: "?from=99", first: 99},
		{name: "the first of this run", query: "?from=100", first: 100},
		{name: "without from", query: "", first: 100},
		{name: "a record not yet written", query: "?from=102", first: 102},
		{name: "deleted from the log", query: "?from=10", gone: `{"error":"record 10 is no longer in the sink log","oldest":20}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(url + tc.query)
			require.NoError(t, err)
			// Open until the test ends: the records below go to every
			// subscriber.
			outer.Cleanup(func() { resp.Body.Close() })
			lines := bufio.NewReader(resp.Body)
			if tc.gone != "" {
				require.Equal(t, http.StatusGone, resp.StatusCode)
				body, err := io.ReadAll(lines)
				require.NoError(t, err)
				require.JSONEq(t, tc.gone, string(body))
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, strconv.Itoa(tc.first), resp.Header.Get("X-First-Record"))
			requireRecords(t, lines, tc.first, max(tc.first, 100), 0)
			subs = append(subs, open{tc.first, lines})
		})
	}
	// One record at a time, so that the tiny ring evicts nothing a live
	// subscriber has not been sent.
	for n := 100; n < 105; n++ {
		require.NoError(t, log.commit(s2, historyRecords(n, n+1, 0)))
		for _, sub := range subs {
			if n >= sub.first {
				requireRecords(t, sub.lines, n, n+1, 0)
			}
		}
	}
}

// Write may append while a subscriber reads the log, evicting from the ring
// records the read did not reach, or the log may be ahead of the ring: the
// subscriber still gets every record once, in order.
func TestHTTPSinkLogToRingHandover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// duringRead is committed while the subscriber's first read of the
		// log is under way; ahead is in the log, not yet written to the sink.
		duringRead, ahead int
	}{
		{name: "writes evict past the end of the read", duringRead: 10},
		{name: "writes stay within the ring", duringRead: 2},
		{name: "writes fill the ring exactly", duringRead: 3},
		{name: "the log is ahead of the ring", ahead: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := historyLog(t, 0, 100, 0)
			s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 3, Next: 100, Log: log, Logger: quietLogger()})
			require.NoError(t, err)
			defer s.Close()
			next := 100
			require.NoError(t, log.append(historyRecords(next, next+tc.ahead, 0)))
			var once sync.Once
			log.onRead = func() {
				once.Do(func() {
					assert.NoError(t, log.commit(s, historyRecords(next, next+tc.duringRead, 0)))
				})
			}

			resp, lines := subscribe(t, "http://"+s.Addr().String()+"/out?from=50")
			require.Equal(t, "50", resp.Header.Get("X-First-Record"))
			last := next + tc.duringRead + tc.ahead
			requireRecords(t, lines, 50, last, 0)
			if tc.ahead > 0 {
				// The runtime now hands the sink what the log already has.
				require.NoError(t, s.Write(context.Background(), historyRecords(next, next+tc.ahead, 0)))
			}
			require.NoError(t, log.commit(s, historyRecords(last, last+1, 0)))
			requireRecords(t, lines, last, last+1, 0)
		})
	}
}

// A subscriber catching up from the log while Write keeps appending, and
// reconnecting with from=last+1 whenever the tiny ring outruns it, gets
// every record exactly once and in order.
func TestHTTPSinkCatchUpWhileWriting(t *testing.T) {
	const (
		pad   = 1 << 10 // several log reads' worth of catching up
		next  = 1000
		total = 3000
		from  = 20
	)
	log := historyLog(t, 10, next, pad)
	s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 3, Next: next, Log: log, Logger: quietLogger()})
	require.NoError(t, err)
	defer s.Close()

	written := make(chan error, 1)
	go func() {
		for n := next; n < total; {
			k := min(1+n%5, total-n)
			if err := log.commit(s, historyRecords(n, n+k, pad)); err != nil {
				written <- err
				return
			}
			n += k
		}
		written <- nil
	}()

	n, connections := from, 0
	for n < total {
		connections++
		require.Less(t, connections, 2*total, "the subscriber makes no progress")
		resp, err := http.Get("http://" + s.Addr().String() + "/out?from=" + strconv.Itoa(n))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, strconv.Itoa(n), resp.Header.Get("X-First-Record"))
		lines := bufio.NewReader(resp.Body)
		for ; n < total; n++ {
			line, err := lines.ReadBytes('\n')
			if err != nil {
				break // disconnected: resume with from=n
			}
			want, err := historyRecords(n, n+1, pad)[0].JSONLine()
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, line), "record %d: got %.80q", n, line)
		}
		resp.Body.Close()
	}
	require.NoError(t, <-written)
	t.Logf("%d records over %d connections", total-from, connections)
}

// A subscriber catching up that the log's retention overtakes is cut off
// after the last record it could be sent, never skipping one.
func TestHTTPSinkCatchUpOvertakenByRetention(t *testing.T) {
	// Four lines fill a read of the log.
	const pad = logChunkBytes / 4
	log := historyLog(t, 20, 60, pad)
	var logs safeBuffer
	s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", RingRecords: 3, Next: 100, Log: log, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer s.Close()
	var once sync.Once
	log.onRead = func() { once.Do(func() { log.deleteBefore(50) }) }

	resp, lines := subscribe(t, "http://"+s.Addr().String()+"/out?from=20")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireRecords(t, lines, 20, 24, pad)
	requireStreamEnds(t, lines)
	require.NoError(t, s.Close())
	require.Contains(t, logs.String(), `reason="fell behind: record 24 was deleted from the sink log before it was sent"`)
}

func TestHTTPSinkHistoryUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		log    func(*memLog) SinkLog // nil: no log
		from   int
		status int
		body   string
	}{
		{
			name: "no log", from: 10, status: http.StatusGone,
			body: `{"error":"record 10 was written before the sink started, and the sink has no log","oldest":100}`,
		},
		{
			name: "deleted from the log", log: func(l *memLog) SinkLog { l.deleteBefore(30); return l }, from: 29, status: http.StatusGone,
			body: `{"error":"record 29 is no longer in the sink log","oldest":30}`,
		},
		{
			name: "a gap in the log", log: func(l *memLog) SinkLog { return gapLog{l, 40} }, from: 40, status: http.StatusInternalServerError,
			body: `{"error":"record 40 is missing from the sink log, which holds records 0 to 99"}`,
		},
		{
			name: "the log cannot be read", log: func(l *memLog) SinkLog { return failingLog{l} }, from: 40, status: http.StatusInternalServerError,
			body: `{"error":"reading the sink log from record 40: disk on fire"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", Next: 100, Logger: quietLogger()}
			if tc.log != nil {
				cfg.Log = tc.log(historyLog(t, 0, 100, 0))
			}
			s, err := NewHTTPSink(cfg)
			require.NoError(t, err)
			defer s.Close()
			resp, body := subscribe(t, "http://"+s.Addr().String()+"/out?from="+strconv.Itoa(tc.from))
			require.Equal(t, tc.status, resp.StatusCode)
			got, err := io.ReadAll(body)
			require.NoError(t, err)
			require.JSONEq(t, tc.body, string(got))
		})
	}
}

// A gap the catching up comes upon ends the stream before it, rather than
// skipping the record.
func TestHTTPSinkGapInLog(t *testing.T) {
	var logs safeBuffer
	s, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", Next: 100, Log: gapLog{historyLog(t, 0, 100, 0), 40}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer s.Close()
	_, lines := subscribe(t, "http://"+s.Addr().String()+"/out?from=30")
	requireRecords(t, lines, 30, 40, 0)
	requireStreamEnds(t, lines)
	require.NoError(t, s.Close())
	require.Contains(t, logs.String(), `reason="record 40 is missing from the sink log, which holds records 0 to 99"`)
}

func TestHTTPSinkNegativeNext(t *testing.T) {
	_, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", Next: -1})
	require.EqualError(t, err, "http sink: next record -1 is negative")
}
