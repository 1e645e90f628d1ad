package connect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// collect runs src and returns what it emitted.
func collect(t *testing.T, ctx context.Context, src Source) ([]Record, error) {
	var got []Record
	err := src.Run(ctx, func(r Record) error {
		got = append(got, r)
		return nil
	})
	return got, err
}

func TestFileSourceGoodAndBadLines(t *testing.T) {
	lines := []string{
		`{"write_ts":100,"event_ts":90,"payload":{"order_id":"o-1","n":1}}`, // 1
		`this is not json`,                      // 2
		``,                                      // 3: blank, skipped
		`{"payload":{"order_id":"o-2"}}`,        // 4
		`{"write_ts":"yesterday","payload":{}}`, // 5
		`{"payload":{"n":3}}`,                   // 6: no order_id
		`   `,                                   // 7: blank
		`{"event_ts":5,"payload":{"order_id":"o-1"}}` + "\r", // 8: CRLF
		`{"payload":{"order_id":"o-3"}`,                      // 9: truncated, no newline at the end
	}
	path := writeFile(t, "orders.jsonl", strings.Join(lines, "\n"))
	var dead bytes.Buffer
	dl := NewDeadLetter(&dead)
	var progress []FileProgress
	src, err := NewFileSource(FileSourceConfig{
		Path: path, Stream: "orders", Partitions: 4, PartitionBy: []string{"order_id"},
		Reject:   dl.Reject,
		Progress: func(p FileProgress) { progress = append(progress, p) },
	})
	require.NoError(t, err)
	got, err := collect(t, context.Background(), src)
	require.NoError(t, err)

	require.Len(t, got, 3)
	require.Equal(t, path+":1", got[0].Origin)
	require.Equal(t, Record{Stream: "orders", Partition: got[0].Partition, Event: 90, HasEvent: true, Write: 100, HasWrite: true,
		Payload: []byte(`{"order_id":"o-1","n":1}`), Origin: path + ":1", Resume: []byte(fmt.Sprintf("%d:2", len(lines[0])+1))}, got[0])
	require.Equal(t, path+":4", got[1].Origin)
	require.False(t, got[1].HasWrite)
	require.False(t, got[1].HasEvent)
	require.Equal(t, path+":8", got[2].Origin)
	require.Equal(t, got[0].Partition, got[2].Partition, "same order_id, same partition")

	// Every bad line is in the dead letter with file:line:column.
	dls := deadLines(t, dead.Bytes())
	require.Len(t, dls, 4)
	require.Equal(t, uint64(4), dl.Count())
	wantDead := []struct{ origin, stage, err string }{
		{path + ":2:2", StageIngest, "invalid JSON: invalid character 'h' in literal true"},
		{path + ":5:13", StageIngest, `write_ts: "yesterday" is not an RFC 3339 time`},
		{path + ":6", StageKey, `partition_by: payload lacks group_by field "order_id"`},
		{path + ":9:30", StageIngest, "line ends inside the JSON object"},
	}
	for i, w := range wantDead {
		require.Equal(t, w.origin, dls[i]["origin"], i)
		require.Equal(t, w.stage, dls[i]["stage"], i)
		require.Contains(t, dls[i]["error"], w.err, i)
	}
	require.Equal(t, "this is not json", dls[0]["record"])
	require.Equal(t, map[string]any{"payload": map[string]any{"n": float64(3)}}, dls[2]["record"])

	last := progress[len(progress)-1]
	size := int64(len(strings.Join(lines, "\n")))
	require.Equal(t, FileProgress{BytesRead: size, TotalBytes: size, Records: 3, Rejected: 4, Done: true}, last)
	for i := 1; i < len(progress); i++ {
		require.GreaterOrEqual(t, progress[i].BytesRead, progress[i-1].BytesRead)
		require.Equal(t, i == len(progress)-1, progress[i].Done, "only the last report is done")
	}
}

func TestFileSourceWithoutRejectStopsAtFirstBadLine(t *testing.T) {
	path := writeFile(t, "x.jsonl", "{\"payload\":1}\n{\"payload\":\n{\"payload\":2}\n")
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1})
	require.NoError(t, err)
	got, err := collect(t, context.Background(), src)
	require.EqualError(t, err, path+":2:12: line ends inside the JSON object")
	require.Len(t, got, 1)
}

func TestFileSourceDeadLetterFailureStopsRun(t *testing.T) {
	path := writeFile(t, "x.jsonl", "oops\n{\"payload\":1}\n")
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Reject: NewDeadLetter(failingWriter{}).Reject})
	require.NoError(t, err)
	got, err := collect(t, context.Background(), src)
	require.EqualError(t, err, "dead letter: disk full")
	require.Empty(t, got)
}

func TestFileSourceLongLine(t *testing.T) {
	long := `{"payload":"` + strings.Repeat("x", 100) + `"}`
	path := writeFile(t, "x.jsonl", long+"\n{\"payload\":2}\n")
	var dead bytes.Buffer
	dl := NewDeadLetter(&dead)
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, MaxLineBytes: 50, Reject: dl.Reject})
	require.NoError(t, err)
	got, err := collect(t, context.Background(), src)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, path+":2", got[0].Origin)
	dls := deadLines(t, dead.Bytes())
	require.Len(t, dls, 1)
	require.Equal(t, path+":1:51", dls[0]["origin"])
	require.Equal(t, long[:50], dls[0]["record"])
	require.Contains(t, dls[0]["error"], "line is longer than 50 bytes")
}

func TestFileSourceStopsOnCancelAndEmitError(t *testing.T) {
	path := writeFile(t, "x.jsonl", strings.Repeat("{\"payload\":1}\n", 10))
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 2})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = src.Run(ctx, func(r Record) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 3, n)

	stop := errors.New("host full")
	err = src.Run(context.Background(), func(Record) error { return stop })
	require.ErrorIs(t, err, stop)

	_, err = NewFileSource(FileSourceConfig{Path: path, Stream: "bad name", Partitions: 1})
	require.ErrorContains(t, err, `name "bad name": ' ' is not a letter`)
	_, err = NewFileSource(FileSourceConfig{Stream: "s", Partitions: 1})
	require.EqualError(t, err, "file source: path is empty")
	missing, err := NewFileSource(FileSourceConfig{Path: path + ".missing", Stream: "s", Partitions: 1})
	require.NoError(t, err)
	_, err = collect(t, context.Background(), missing)
	require.ErrorContains(t, err, "no such file")
}

func TestFileSourceRoundRobin(t *testing.T) {
	path := writeFile(t, "x.jsonl", strings.Repeat("{\"payload\":1}\n", 5))
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 2})
	require.NoError(t, err)
	got, err := collect(t, context.Background(), src)
	require.NoError(t, err)
	var parts []int
	for _, r := range got {
		parts = append(parts, r.Partition)
	}
	require.Equal(t, []int{0, 1, 0, 1, 0}, parts)
}

func BenchmarkFileSource(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.jsonl")
	var buf bytes.Buffer
	const lines = 10000
	for i := range lines {
		fmt.Fprintf(&buf, `{"write_ts":%d,"payload":{"order_id":"o-%d","customer":{"id":%d},"amount":129.95}}`+"\n", 1714557600000000000+i, i, i%100)
	}
	require.NoError(b, os.WriteFile(path, buf.Bytes(), 0o644))
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "orders", Partitions: 8, PartitionBy: []string{"order_id"}})
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		n := 0
		if err := src.Run(context.Background(), func(Record) error { n++; return nil }); err != nil || n != lines {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/record")
}

// TestFileSourceResumesAfterEachRecord starts a file source from every
// record's resume token: it must emit exactly the records after it, with
// the same origins (line numbers), and refuse a token past the file's end.
func TestFileSourceResumesAfterEachRecord(t *testing.T) {
	var lines []string
	for i := range 20 {
		if i%7 == 3 {
			lines = append(lines, "") // blank lines keep their numbers
		}
		lines = append(lines, fmt.Sprintf(`{"write_ts":%d,"payload":{"n":%d}}`, i, i))
	}
	path := writeFile(t, "resume.jsonl", strings.Join(lines, "\n")+"\n")
	open := func(resume []byte) []Record {
		src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Resume: resume})
		require.NoError(t, err)
		got, err := collect(t, context.Background(), src)
		require.NoError(t, err)
		return got
	}
	all := open(nil)
	require.Len(t, all, 20)

	// Resumed at the end: nothing is read, and the progress says so.
	var atEnd []FileProgress
	src, err := NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Resume: all[len(all)-1].Resume,
		Progress: func(p FileProgress) { atEnd = append(atEnd, p) }})
	require.NoError(t, err)
	got, err := collect(t, context.Background(), src)
	require.NoError(t, err)
	require.Empty(t, got)
	size := int64(len(strings.Join(lines, "\n")) + 1)
	require.Equal(t, []FileProgress{{BytesRead: size, TotalBytes: size, StartBytes: size, Done: true}}, atEnd)

	for i, rec := range all {
		rest := open(rec.Resume)
		require.Len(t, rest, len(all)-i-1, "after record %d", i)
		for j := range rest {
			require.Equal(t, all[i+1+j].Origin, rest[j].Origin)
			require.Equal(t, all[i+1+j].Payload, rest[j].Payload)
		}
	}
	src, err = NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Resume: []byte("999999:3")})
	require.NoError(t, err)
	_, err = collect(t, context.Background(), src)
	require.ErrorContains(t, err, "replaced or cut")
	src, err = NewFileSource(FileSourceConfig{Path: path, Stream: "s", Partitions: 1, Resume: []byte("garbage")})
	require.NoError(t, err)
	_, err = collect(t, context.Background(), src)
	require.ErrorContains(t, err, "not OFFSET:LINE")
}
