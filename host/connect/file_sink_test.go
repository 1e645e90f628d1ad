package connect

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommittedFileSinkCutsBackToTheCommit writes, commits, writes more
// without committing (a crash), and reopens: the file holds exactly the
// committed records, and a file shorter than the commit is refused.
func TestCommittedFileSinkCutsBackToTheCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("user's earlier content\n"), 0o644))
	cfg := FileSinkConfig{Path: path, Format: FormatText}
	rec := func(id string) SinkRecord {
		return SinkRecord{MessageID: id, Stream: "s", Payload: []byte(`{"v":1}`)}
	}

	s, discarded, err := OpenCommittedFileSink(cfg, 0, true)
	require.NoError(t, err)
	require.Zero(t, discarded)
	start, err := s.Commit()
	require.NoError(t, err)
	require.Equal(t, int64(len("user's earlier content\n")), start, "a fresh sink starts after what the file held")
	require.NoError(t, s.Write(context.Background(), []SinkRecord{rec("a/p0:0"), rec("a/p0:1")}))
	committed, err := s.Commit()
	require.NoError(t, err)
	require.NoError(t, s.Write(context.Background(), []SinkRecord{rec("a/p0:2")})) // never committed
	require.NoError(t, s.Close())
	withTail, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, int64(len(withTail)), committed)

	s, discarded, err = OpenCommittedFileSink(cfg, committed, false)
	require.NoError(t, err)
	require.Equal(t, int64(len(withTail))-committed, discarded)
	require.NoError(t, s.Write(context.Background(), []SinkRecord{rec("a/p0:2")}))
	again, err := s.Commit()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(withTail), string(got), "the record is in the file once")
	require.Equal(t, int64(len(got)), again)

	require.NoError(t, os.Truncate(path, committed-1))
	_, _, err = OpenCommittedFileSink(cfg, committed, false)
	require.ErrorContains(t, err, "fewer than the")
}

// FuzzParseFileResume reads arbitrary resume tokens: it never panics, and
// the position of an accepted token survives being written and read again.
func FuzzParseFileResume(f *testing.F) {
	f.Add([]byte("66:2"))
	f.Add([]byte("0:1"))
	f.Add([]byte(":"))
	f.Fuzz(func(t *testing.T, tok []byte) {
		off, line, err := parseFileResume(tok)
		if err != nil {
			return
		}
		o2, l2, err := parseFileResume(fileResume(off, line))
		if err != nil || o2 != off || l2 != line {
			t.Fatalf("%q -> (%d, %d) -> (%d, %d, %v)", tok, off, line, o2, l2, err)
		}
	})
}
