package opview_test

import (
	"bytes"
	"errors"
	"strings"
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
