package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSavepointOfAStoreBeingWrittenIsConsistent takes savepoints while a
// writer commits batches that each set two keys to the same new value:
// every restored copy holds both keys of every batch it holds, and the
// data directory goes on without the savepoints.
func TestSavepointOfAStoreBeingWrittenIsConsistent(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, filepath.Join(dir, "data"))
	require.NoError(t, s.Bind("shape"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written int
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b := s.NewBatch()
			v := fmt.Appendf(nil, "%d", i)
			b.SetState("c", 0, "a", v)
			b.SetState("c", 0, "b", v)
			if err := b.Commit(); err != nil {
				t.Error(err)
				return
			}
			written = i
		}
	})
	var seen []string
	for n := range 3 {
		sp := filepath.Join(dir, fmt.Sprintf("sp%d", n))
		info, err := s.Savepoint(sp)
		require.NoError(t, err)
		require.Equal(t, "shape", info.Pipeline)
		restored := filepath.Join(dir, fmt.Sprintf("restored%d", n))
		_, err = RestoreSavepoint(sp, restored, false)
		require.NoError(t, err)
		r := openT(t, restored)
		require.NoError(t, r.Bind("shape"), "the copy belongs to the same pipeline")
		a, okA, err := r.State("c", 0, "a")
		require.NoError(t, err)
		b, okB, err := r.State("c", 0, "b")
		require.NoError(t, err)
		require.Equal(t, okA, okB)
		require.Equal(t, string(a), string(b), "a savepoint holds whole commits")
		seen = append(seen, string(a))
		require.NoError(t, r.Close())
	}
	close(stop)
	wg.Wait()
	last, _, err := s.State("c", 0, "a")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(written), string(last), "the data directory went on")
	t.Logf("savepoints at values %v of %d", seen, written)
}

func TestSavepointAndRestoreRefuseWhatTheyWouldOverwrite(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, filepath.Join(dir, "data"))
	b := s.NewBatch()
	b.SetState("c", 0, "k", []byte("saved"))
	require.NoError(t, b.Commit())

	full := filepath.Join(dir, "full")
	require.NoError(t, os.MkdirAll(full, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(full, "notes.txt"), []byte("x"), 0o644))
	_, err := s.Savepoint(full)
	require.ErrorContains(t, err, "savepoint directory "+full+" is not empty (it holds notes.txt")

	sp := filepath.Join(dir, "sp")
	_, err = s.Savepoint(sp)
	require.NoError(t, err)

	_, err = ReadSavepoint(full)
	require.ErrorContains(t, err, full+" is not a savepoint")

	// Restoring over a data directory that holds something is refused
	// unless replace, and a data directory in use is never replaced.
	_, err = RestoreSavepoint(sp, full, false)
	require.ErrorContains(t, err, "data directory "+full+" is not empty")
	require.ErrorContains(t, err, "--replace-data-dir")
	_, err = RestoreSavepoint(sp, filepath.Join(dir, "data"), true)
	require.ErrorIs(t, err, ErrLocked)

	b = s.NewBatch()
	b.SetState("c", 0, "k", []byte("after"))
	require.NoError(t, b.Commit())
	require.NoError(t, s.Close())
	_, err = RestoreSavepoint(sp, filepath.Join(dir, "data"), true)
	require.NoError(t, err)
	r := openT(t, filepath.Join(dir, "data"))
	v, _, err := r.State("c", 0, "k")
	require.NoError(t, err)
	require.Equal(t, "saved", string(v), "the data directory holds the savepoint's state")
	require.NoError(t, r.Close())

	// The savepoint is untouched: it restores again.
	_, err = RestoreSavepoint(sp, full, true)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(full, "notes.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	r = openT(t, full)
	v, _, err = r.State("c", 0, "k")
	require.NoError(t, err)
	require.Equal(t, "saved", string(v))
}

// TestRestoreReplacesAMissingStore restores over a data directory whose
// store files were deleted (Open refuses it with ErrMissing): replacing it
// is what the restore is for.
func TestRestoreReplacesAMissingStore(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := openT(t, data)
	b := s.NewBatch()
	b.SetState("c", 0, "k", []byte("saved"))
	require.NoError(t, b.Commit())
	sp := filepath.Join(dir, "sp")
	_, err := s.Savepoint(sp)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(data, "db")))
	_, err = Open(data, Options{})
	require.ErrorIs(t, err, ErrMissing)

	_, err = RestoreSavepoint(sp, data, true)
	require.NoError(t, err)
	r := openT(t, data)
	v, _, err := r.State("c", 0, "k")
	require.NoError(t, err)
	require.Equal(t, "saved", string(v))
}

func TestHasStoreCreatesNothing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	ok, err := HasStore(missing)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// FuzzParseSavepointInfo feeds arbitrary bytes to the savepoint
// description parser: it never panics, and what it accepts is of a format
// this flowhost reads and encodes and parses again to the same
// description.
func FuzzParseSavepointInfo(f *testing.F) {
	f.Add([]byte(`{"format":1,"created":"2026-12-01T12:00:00Z","data_dir":"/d","pipeline":"pipeline p: source a->b/1"}`))
	f.Add([]byte(`{"format":2,"created":"2026-12-01T12:00:00Z","data_dir":"/d"}`))
	f.Add([]byte(`{"format":3,"created":"2026-12-01T12:00:00Z","data_dir":"/d"}`))
	f.Add([]byte(`{"format":1,"extra":true}`))
	f.Add([]byte(`{"format":1} {"format":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := parseSavepointInfo("sp", b)
		if err != nil {
			if !strings.Contains(err.Error(), "savepoint sp") {
				t.Fatalf("the error does not name the savepoint: %v", err)
			}
			return
		}
		if info.Format != FormatVersion && info.Format != upgradableFormat {
			t.Fatalf("accepted format %d", info.Format)
		}
		again, err := json.Marshal(info)
		if err != nil {
			t.Fatalf("encoding an accepted description: %v", err)
		}
		back, err := parseSavepointInfo("sp", again)
		if err != nil {
			t.Fatalf("parsing a re-encoded description %s: %v", again, err)
		}
		if !back.Created.Equal(info.Created) || back.DataDir != info.DataDir || back.Pipeline != info.Pipeline {
			t.Fatalf("round trip changed the description: %+v -> %+v", info, back)
		}
	})
}

// A restore tells its progress in bytes of the savepoint's files: from 0,
// never backwards, to the whole of them.
func TestRestoreSavepointProgress(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, filepath.Join(dir, "data"))
	require.NoError(t, s.Bind("shape"))
	b := s.NewBatch()
	b.SetState("c", 0, "a", []byte("value"))
	require.NoError(t, b.Commit())
	sp := filepath.Join(dir, "sp")
	_, err := s.Savepoint(sp)
	require.NoError(t, err)
	var want int64
	entries, err := os.ReadDir(filepath.Join(sp, "db"))
	require.NoError(t, err)
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		want += fi.Size()
	}
	require.Positive(t, want)

	var reports [][2]int64
	_, err = RestoreSavepointProgress(sp, filepath.Join(dir, "restored"), false, func(done, total int64) {
		reports = append(reports, [2]int64{done, total})
	})
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, want}, reports[0])
	require.Equal(t, [2]int64{want, want}, reports[len(reports)-1])
	require.Len(t, reports, len(entries)+1, "one report per file copied")
	for i := 1; i < len(reports); i++ {
		require.GreaterOrEqual(t, reports[i][0], reports[i-1][0])
		require.Equal(t, want, reports[i][1])
	}
}
