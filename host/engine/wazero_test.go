package engine_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/engine"
)

// TestCompilationCacheSurvivesRestart compiles with one engine, then with a
// fresh engine on the same directory: the second compile must be served by
// the files the first wrote. wazero writes a cache entry to a temporary
// file and renames it into place, so a recompile would replace the file;
// an untouched file set proves a hit.
func TestCompilationCacheSurvivesRestart(t *testing.T) {
	t.Run("same process", func(t *testing.T) {
		dir := t.TempDir()
		cfg := engine.NewConfig().WithCompilationCacheDir(dir)
		first, err := engine.NewWazero(context.Background(), cfg)
		require.NoError(t, err)
		_, err = first.Compile(context.Background(), "minimal", minimalGuest())
		require.NoError(t, err)
		require.NoError(t, first.Close(context.Background()))
		require.NotEmpty(t, cacheFiles(t, dir), "the first compile populates the cache directory")

		requireServedFromCache(t, dir, "minimal", minimalGuest(), []byte("cached"), []byte("cached"))
	})
	t.Run("another process", func(t *testing.T) {
		// TestMain compiled the echo guest in a separate process: a
		// restarted host in miniature.
		requireServedFromCache(t, cacheDir(), "echo", guest(t, "echo"), []byte("cached"), echoed([]byte("cached")))
	})
}

// requireServedFromCache compiles wasm with a fresh engine on dir, checks
// it runs, and requires that the cache files are exactly those before.
func requireServedFromCache(t *testing.T, dir, name string, wasm, req, want []byte) {
	t.Helper()
	before := cacheFiles(t, dir)
	require.NotEmpty(t, before)
	m, err := newEngine(t, engine.NewConfig().WithCompilationCacheDir(dir)).Compile(context.Background(), name, wasm)
	require.NoError(t, err)
	resp, err := instantiate(t, m).Process(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, want, resp)

	after := cacheFiles(t, dir)
	require.Len(t, after, len(before), "a cache hit adds no entry")
	for path, fi := range before {
		require.Truef(t, os.SameFile(fi, after[path]), "cache entry %s was rewritten: the module was recompiled", path)
	}
}

func cacheFiles(t *testing.T, dir string) map[string]os.FileInfo {
	t.Helper()
	files := map[string]os.FileInfo{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		files[path] = fi
		return err
	}))
	return files
}

type loggedRecord struct {
	level slog.Level
	msg   string
	attrs string
}

// recordingHandler keeps the records it handles, for assertions.
type recordingHandler struct {
	level slog.Level
	attrs string

	mu      *sync.Mutex
	records *[]loggedRecord
}

func newRecordingHandler(level slog.Level) *recordingHandler {
	return &recordingHandler{level: level, mu: new(sync.Mutex), records: new([]loggedRecord)}
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := h.attrs
	r.Attrs(func(a slog.Attr) bool {
		attrs = joinAttr(attrs, a)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, loggedRecord{level: r.Level, msg: r.Message, attrs: attrs})
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	for _, a := range as {
		c.attrs = joinAttr(c.attrs, a)
	}
	return &c
}

func (h *recordingHandler) WithGroup(string) slog.Handler { panic("no groups expected") }

func (h *recordingHandler) all() []loggedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]loggedRecord(nil), *h.records...)
}

func joinAttr(s string, a slog.Attr) string {
	if s != "" {
		s += " "
	}
	return s + a.String()
}
