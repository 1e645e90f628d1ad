package opview_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/opview"
)

// deadLetterFile writes rejections as the runtime does, at the given times.
func deadLetterFile(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	dl := connect.NewDeadLetter(&buf)
	for _, r := range []connect.Rejection{
		{Origin: "orders.jsonl:3:1", Stage: connect.StageIngest, Err: errors.New("not JSON"), Record: []byte("{oops")},
		{Origin: "parse <- raw raw/p0:7", Stage: connect.StageGuest, Err: errors.New("trap: unreachable"), Record: []byte(`{"a":1}`)},
		{Origin: "score <- parsed parse/0:1", Stage: connect.StageKey, Err: errors.New("group_by [user]: missing"), Record: []byte(`{"b":2}`)},
		{Origin: "parse <- raw raw/p1:9", Stage: connect.StageGuest, Err: errors.New("deadline exceeded"), Record: []byte(`{"c":3}`)},
	} {
		require.NoError(t, dl.Reject(r))
	}
	return buf.Bytes()
}

func TestReadDeadLettersFilters(t *testing.T) {
	data := deadLetterFile(t)
	var first opview.DeadLetter
	require.NoError(t, opview.ReadDeadLetters(bytes.NewReader(data), "dl.jsonl", opview.DeadLetterFilter{}, func(d opview.DeadLetter) error {
		if d.Line == 1 {
			first = d
		}
		return nil
	}))
	at, err := time.Parse(time.RFC3339Nano, first.Time)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		f     opview.DeadLetterFilter
		lines []int
	}{
		{"all", opview.DeadLetterFilter{}, []int{1, 2, 3, 4}},
		{"computation", opview.DeadLetterFilter{Computation: "parse"}, []int{2, 4}},
		{"cause", opview.DeadLetterFilter{Cause: "deadline"}, []int{4}},
		{"both", opview.DeadLetterFilter{Computation: "parse", Cause: "trap"}, []int{2}},
		{"since", opview.DeadLetterFilter{Since: at}, []int{1, 2, 3, 4}},
		{"until", opview.DeadLetterFilter{Until: at}, nil},
		{"after", opview.DeadLetterFilter{Since: at.Add(time.Hour)}, nil},
		{"no such computation", opview.DeadLetterFilter{Computation: "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			require.NoError(t, opview.ReadDeadLetters(bytes.NewReader(data), "dl.jsonl", tc.f, func(d opview.DeadLetter) error {
				got = append(got, d.Line)
				return nil
			}))
			require.Equal(t, tc.lines, got)
		})
	}
}

func TestReadDeadLettersRefusesBadLines(t *testing.T) {
	good := string(deadLetterFile(t))
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", good + "nope\n", "dl.jsonl:5: not a dead letter"},
		{"unknown field", good + `{"time":"2024-05-01T10:00:00Z","stage":"guest","extra":1}` + "\n", `dl.jsonl:5: not a dead letter: json: unknown field "extra"`},
		{"bad time", good + `{"time":"yesterday","stage":"guest"}` + "\n", `dl.jsonl:5: time: "yesterday"`},
		{"no stage", `{"time":"2024-05-01T10:00:00Z"}` + "\n", "dl.jsonl:1: stage: missing"},
		{"cut last line", good + `{"time":`, "dl.jsonl:5: the last line has no newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := opview.ReadDeadLetters(strings.NewReader(tc.data), "dl.jsonl", opview.DeadLetterFilter{}, func(opview.DeadLetter) error { return nil })
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzReadDeadLetters: any input is read or refused with an error naming
// the file and a line; what is read has a stage and a line number.
func FuzzReadDeadLetters(f *testing.F) {
	var buf bytes.Buffer
	dl := connect.NewDeadLetter(&buf)
	_ = dl.Reject(connect.Rejection{Origin: "c <- s s/p0:1", Stage: connect.StageGuest, Err: errors.New("x"), Record: []byte("{}")})
	f.Add(buf.Bytes())
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"time":"2024-05-01T10:00:00Z","stage":"key","origin":"a <- b"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := opview.ReadDeadLetters(bytes.NewReader(data), "f", opview.DeadLetterFilter{}, func(d opview.DeadLetter) error {
			require.NotEmpty(t, d.Stage)
			require.Positive(t, d.Line)
			return nil
		})
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "f:"), err.Error())
		}
	})
}

func TestReplayIDAndReplayable(t *testing.T) {
	for _, tc := range []struct {
		origin, encoding, record, id, parent, refused string
	}{
		{origin: "parse <- raw raw/p0:7", record: `{"a":1}`, id: "dead-letter:parse:raw/p0:7", parent: "raw/p0:7"},
		{origin: "score <- parsed raw/p1:3>parsed:2", record: `{}`, id: "dead-letter:score:raw/p1:3>parsed:2", parent: "raw/p1:3>parsed:2"},
		{origin: "score <- parsed parse/0:1.2", record: `{}`, refused: `"parse/0:1.2" is not a message id`},
		{origin: "orders.jsonl:3:1", record: `{}`, refused: "names no computation's message"},
		{origin: "parse <- raw", record: `{}`, refused: "names no computation's message"},
		{origin: "parse <- raw raw/p0:7", encoding: "base64", record: `"AAE="`, refused: "not JSON (base64)"},
	} {
		d := opview.DeadLetter{Line: 4, Origin: tc.origin, RecordEncoding: tc.encoding, Record: []byte(tc.record)}
		err := opview.Replayable(d)
		if tc.refused != "" {
			require.ErrorContains(t, err, tc.refused, tc.origin)
			require.ErrorContains(t, err, "line 4", tc.origin)
			continue
		}
		require.NoError(t, err, tc.origin)
		require.Equal(t, tc.id, opview.ReplayID(d))
		require.Equal(t, tc.parent, opview.ReplayParent(d))
	}
}

// Replay posts each record with its id and the refused message as its
// parent, in chunks, with the token; a
// refusal stops it with the source's answer.
func TestReplayPostsRecordsWithTheirIDs(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	refuse := false
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"accepted":0,"error":"shutting down"}`)
			return
		}
		bodies = append(bodies, string(b))
		fmt.Fprintf(w, `{"accepted":%d}`, strings.Count(string(b), "\n"))
	}))
	t.Cleanup(hs.Close)
	var letters []opview.DeadLetter
	for i := range 1500 {
		letters = append(letters, opview.DeadLetter{Line: i + 1, Origin: fmt.Sprintf("c <- s s/p0:%d", i), Record: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	n, err := opview.Replay(context.Background(), hs.Client(), hs.URL, "tok", letters)
	require.NoError(t, err)
	require.Equal(t, 1500, n)
	require.Len(t, bodies, 2, "in chunks of 1000")
	require.True(t, strings.HasPrefix(bodies[0], `{"id":"dead-letter:c:s/p0:0","parents":["s/p0:0"],"payload":{"n":0}}`+"\n"), bodies[0][:80])
	mu.Lock()
	refuse = true
	mu.Unlock()
	n, err = opview.Replay(context.Background(), hs.Client(), hs.URL, "tok", letters[:1])
	require.Zero(t, n)
	require.ErrorContains(t, err, "503")
	require.ErrorContains(t, err, "shutting down")
}
