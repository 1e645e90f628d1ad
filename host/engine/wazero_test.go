package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/host/engine"
)

func TestProcessRoundTrip(t *testing.T) {
	inst := instantiate(t, compile(t, newEngine(t, testConfig()), "echo"))
	big := make([]byte, 100<<10)
	rand.NewChaCha8([32]byte{1}).Read(big)
	for _, req := range [][]byte{nil, {}, []byte("a"), []byte("hello, guest"), big} {
		t.Run(fmt.Sprintf("%dB", len(req)), func(t *testing.T) {
			resp, err := inst.Process(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, echoed(req), resp)
		})
	}
}

// TestProcessReuse drives one instance through many calls of random sizes,
// so the guest allocates, grows its memory and reuses its buffers while
// every answer must stay exact.
func TestProcessReuse(t *testing.T) {
	inst := instantiate(t, compile(t, newEngine(t, testConfig()), "echo"))
	calls := 0
	rapid.Check(t, func(t *rapid.T) {
		req := rapid.SliceOfN(rapid.Byte(), 0, 64<<10).Draw(t, "request")
		resp, err := inst.Process(context.Background(), req)
		calls++
		if err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		if !bytes.Equal(echoed(req), resp) {
			t.Fatalf("call %d: response of %d bytes differs from the expected %d", calls, len(resp), len(echoed(req)))
		}
	})
	require.Greater(t, calls, 1)
}

func TestResponseIsViewUntilNextCall(t *testing.T) {
	inst := instantiate(t, compile(t, newEngine(t, testConfig()), "echo"))
	first, err := inst.Process(context.Background(), []byte("first"))
	require.NoError(t, err)
	kept := bytes.Clone(first)
	_, err = inst.Process(context.Background(), []byte("second"))
	require.NoError(t, err)
	// The echo guest reuses its response buffer, so the old view now shows
	// the second answer: the documented reason to copy before calling on.
	require.Equal(t, echoed([]byte("first")), kept)
	require.NotEqual(t, kept, first)
}

func TestInit(t *testing.T) {
	e := newEngine(t, testConfig())
	echo := instantiate(t, compile(t, e, "echo"))

	result, err := echo.Init(context.Background(), []byte(`{"threshold":3}`))
	require.NoError(t, err)
	require.Equal(t, `init:{"threshold":3}`, string(result))

	result, err = echo.Init(context.Background(), nil)
	require.NoError(t, err)
	require.Nil(t, result, "a guest answering 0 has no init result")

	resp, err := echo.Process(context.Background(), []byte("after init"))
	require.NoError(t, err)
	require.Equal(t, echoed([]byte("after init")), resp)

	noInit := instantiate(t, compile(t, e, "log"))
	result, err = noInit.Init(context.Background(), []byte("ignored"))
	require.NoError(t, err)
	require.Nil(t, result, "a guest without flowhost_init has nothing to initialise")

	bad := instantiate(t, compile(t, e, "badstatus"))
	_, err = bad.Init(context.Background(), []byte("x"))
	var ge *engine.GuestError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, engine.OpInit, ge.Op)
	require.ErrorIs(t, err, engine.ErrStatus)
	require.EqualValues(t, -2, ge.Status)
}

func TestGuestErrors(t *testing.T) {
	tests := []struct {
		name    string
		guest   string
		cfg     func(engine.Config) engine.Config
		request string
		timeout time.Duration // 0: no deadline
		cancel  bool          // cancel the context while the guest runs
		cause   error
		want    string // the whole message, or its prefix when the detail varies
		status  int64
		alsoIs  error
		dead    bool
	}{
		{
			name: "go panic traps", guest: "trap", request: "panic",
			cause: engine.ErrTrap, want: `plugin "trap": process: guest trapped: panic: boom (wasm error: unreachable)`, dead: true,
		},
		{
			name: "os.Exit exits", guest: "trap", request: "exit",
			cause: engine.ErrExit, want: `plugin "trap": process: guest exited: exit code 3`, dead: true,
		},
		{
			name: "unreachable traps", guest: "trap", request: "unreachable",
			cause: engine.ErrTrap, want: `plugin "trap": process: guest trapped: wasm error: unreachable`, dead: true,
		},
		{
			name: "log line outside memory", guest: "log", request: "log outside memory",
			cause: engine.ErrTrap, want: `plugin "log": process: guest trapped: flowhost.log: line of 10 bytes at 0x7fff0000 is outside guest memory`, dead: true,
		},
		{
			name: "deadline stops an infinite loop", guest: "loop", request: "spin", timeout: 50 * time.Millisecond,
			cause: engine.ErrDeadline, alsoIs: context.DeadlineExceeded,
			want: `plugin "loop": process: deadline exceeded`, dead: true,
		},
		{
			name: "cancellation stops an infinite loop", guest: "loop", request: "spin", cancel: true,
			cause: engine.ErrCanceled, alsoIs: context.Canceled,
			want: `plugin "loop": process: canceled`, dead: true,
		},
		{
			name: "negative status", guest: "badstatus", request: "x",
			cause: engine.ErrStatus, status: -2, want: `plugin "badstatus": process: guest returned a failure status -2`,
		},
		{
			name: "packed pointer outside memory", guest: "oob", request: "x",
			cause: engine.ErrOutOfBounds, want: `plugin "oob": process: region outside guest memory: 16 bytes at 0x7fff0000, memory is `,
		},
		{
			name: "response over the limit", guest: "echo", request: "0123456789",
			cfg:   func(c engine.Config) engine.Config { return c.WithMaxResponseBytes(8) },
			cause: engine.ErrResponseTooLarge, want: `plugin "echo": process: response exceeds limit: 15 bytes, limit 8`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				cfg = tt.cfg(cfg)
			}
			inst := instantiate(t, compile(t, newEngine(t, cfg), tt.guest))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			if tt.cancel {
				timer := time.AfterFunc(20*time.Millisecond, cancel)
				defer timer.Stop()
			}
			_, err := inst.Process(ctx, []byte(tt.request))

			var ge *engine.GuestError
			require.ErrorAs(t, err, &ge)
			require.Equal(t, tt.guest, ge.Plugin)
			require.Equal(t, engine.OpProcess, ge.Op)
			require.ErrorIs(t, err, tt.cause)
			require.Equal(t, tt.status, ge.Status)
			if tt.alsoIs != nil {
				require.ErrorIs(t, err, tt.alsoIs)
			}
			require.Truef(t, len(err.Error()) >= len(tt.want) && err.Error()[:len(tt.want)] == tt.want,
				"error %q does not start with %q", err, tt.want)

			// The next call shows whether the instance survived.
			_, err = inst.Process(context.Background(), []byte(tt.request))
			if tt.dead {
				require.ErrorIs(t, err, engine.ErrDead)
				require.EqualError(t, err, fmt.Sprintf("plugin %q: process: instance is dead after an earlier failure", tt.guest))
			} else {
				require.ErrorIs(t, err, tt.cause, "a live instance fails the same way again")
			}
		})
	}
}

func TestExpiredContextLeavesInstanceAlive(t *testing.T) {
	inst := instantiate(t, compile(t, newEngine(t, testConfig()), "echo"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := inst.Process(ctx, []byte("never runs"))
	require.ErrorIs(t, err, engine.ErrCanceled)
	require.ErrorIs(t, err, context.Canceled)

	resp, err := inst.Process(context.Background(), []byte("runs"))
	require.NoError(t, err)
	require.Equal(t, echoed([]byte("runs")), resp)
}

func TestCompileRefusals(t *testing.T) {
	tests := []struct {
		name   string
		plugin string
		wasm   func(t *testing.T) []byte
		cfg    func(engine.Config) engine.Config
		want   string
	}{
		{
			name: "missing process", plugin: "noexports",
			wasm: func(t *testing.T) []byte { return guest(t, "noexports") },
			want: `plugin "noexports": missing export flowhost_process (func (i32, i32) -> i64)`,
		},
		{
			name: "forbidden socket import", plugin: "sock",
			wasm: func(t *testing.T) []byte { return guest(t, "sock") },
			want: `plugin "sock": import wasi_snapshot_preview1.sock_accept is not allowed: sockets are never granted`,
		},
		{
			name: "path_open without a granted directory", plugin: "fs",
			wasm: func(t *testing.T) []byte { return guest(t, "fs") },
			want: `plugin "fs": import wasi_snapshot_preview1.path_filestat_get is not allowed: no directory is granted; ` +
				`import wasi_snapshot_preview1.path_open is not allowed: no directory is granted`,
		},
		{
			name: "not wasm", plugin: "junk",
			wasm: func(*testing.T) []byte { return []byte("#!/bin/sh\necho hi\n") },
			want: `plugin "junk": invalid wasm at offset 0x4: not a wasm module: missing "\0asm" magic`,
		},
		{
			name: "minimum memory over the limit", plugin: "echo",
			wasm: func(t *testing.T) []byte { return guest(t, "echo") },
			cfg:  func(c engine.Config) engine.Config { return c.WithMemoryLimitPages(16) },
			want: `plugin "echo": compile: section memory: min 32 pages (2 Mi) over limit of 16 pages (1 Mi)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				cfg = tt.cfg(cfg)
			}
			_, err := newEngine(t, cfg).Compile(context.Background(), tt.plugin, tt.wasm(t))
			require.EqualError(t, err, tt.want)
		})
	}
}

// TestMemoryLimit shows the limit refusing growth: a request the guest
// handles in unlimited memory exhausts the limited one.
func TestMemoryLimit(t *testing.T) {
	req := bytes.Repeat([]byte("m"), 8<<20)

	unlimited := instantiate(t, compile(t, newEngine(t, testConfig()), "echo"))
	resp, err := unlimited.Process(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, resp, len(req)+len("echo:"))

	const limit = 160 // pages: 10 MiB, less than the guest needs
	limited := instantiate(t, compile(t, newEngine(t, testConfig().WithMemoryLimitPages(limit)), "echo"))
	_, err = limited.Process(context.Background(), []byte("small requests fit"))
	require.NoError(t, err)
	_, err = limited.Process(context.Background(), req)
	var ge *engine.GuestError
	require.ErrorAs(t, err, &ge)
	require.ErrorIs(t, err, engine.ErrTrap)
	require.Contains(t, err.Error(), `plugin "echo": alloc: guest trapped: runtime: out of memory: cannot allocate 8388608-byte block`)
	_, err = limited.Process(context.Background(), []byte("small"))
	require.ErrorIs(t, err, engine.ErrDead)
}

func TestGuestLogs(t *testing.T) {
	handler := newRecordingHandler(slog.LevelInfo)
	e := newEngine(t, testConfig().WithLogger(slog.New(handler)))
	m := compile(t, e, "log")
	inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig().WithLogAttrs(slog.Int("partition", 7)))
	require.NoError(t, err)
	defer inst.Close(context.Background())

	resp, err := inst.Process(context.Background(), []byte("hello from the guest"))
	require.NoError(t, err)
	require.Equal(t, "logged", string(resp))

	// The debug line is below the handler's level and never reaches it.
	require.Equal(t, []loggedRecord{
		{level: slog.LevelWarn, msg: "hello from the guest", attrs: "plugin=log partition=7"},
		{level: slog.LevelWarn, msg: "to stderr", attrs: "plugin=log partition=7 stream=stderr"},
	}, handler.all())
}

func TestConcurrentInstances(t *testing.T) {
	m := compile(t, newEngine(t, testConfig()), "echo")
	const workers, calls = 4, 100
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
				if err != nil {
					return err
				}
				defer inst.Close(context.Background())
				for c := range calls {
					req := fmt.Appendf(nil, "worker %d call %d %s", w, c, bytes.Repeat([]byte{byte(w)}, c*37))
					resp, err := inst.Process(context.Background(), req)
					if err != nil {
						return err
					}
					if !bytes.Equal(echoed(req), resp) {
						return fmt.Errorf("worker %d call %d: wrong response", w, c)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

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

func TestClock(t *testing.T) {
	guestNow := func(t *testing.T, cfg engine.Config) time.Time {
		inst := instantiate(t, compile(t, newEngine(t, cfg), "clock"))
		resp, err := inst.Process(context.Background(), nil)
		require.NoError(t, err)
		require.Len(t, resp, 8)
		return time.Unix(0, int64(binary.LittleEndian.Uint64(resp)))
	}

	before := time.Now()
	real := guestNow(t, testConfig().WithCapabilities(engine.Capabilities{}.WithClock()))
	after := time.Now()
	require.False(t, real.Before(before.Truncate(time.Microsecond)) || real.After(after), "granted clock %v is outside [%v, %v]", real, before, after)

	fake := guestNow(t, testConfig())
	require.Greater(t, time.Since(fake), 365*24*time.Hour, "without a grant the guest sees a fake clock, not %v", fake)
}

func TestReadOnlyDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("granted content"), 0o600))
	caps := engine.Capabilities{}.WithReadOnlyDir(dir, "/data")
	inst := instantiate(t, compile(t, newEngine(t, testConfig().WithCapabilities(caps)), "fs"))

	resp, err := inst.Process(context.Background(), []byte("read:/data/in.txt"))
	require.NoError(t, err)
	require.Equal(t, "granted content", string(resp))

	resp, err = inst.Process(context.Background(), []byte("write:/data/out.txt"))
	require.NoError(t, err)
	require.Contains(t, string(resp), "error: ")
	require.NoFileExists(t, filepath.Join(dir, "out.txt"))

	resp, err = inst.Process(context.Background(), []byte("read:/etc/passwd"))
	require.NoError(t, err)
	require.Contains(t, string(resp), "error: ", "only the granted directory is visible")
}

func TestConfigRefusals(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	tests := []struct {
		name string
		cfg  engine.Config
		want string
	}{
		{"memory limit over wasm32", engine.NewConfig().WithMemoryLimitPages(engine.MaxMemoryPages + 1),
			"engine config: memory limit of 65537 pages exceeds the wasm32 maximum of 65536"},
		{"relative guest path", engine.NewConfig().WithCapabilities(engine.Capabilities{}.WithReadOnlyDir(t.TempDir(), "data")),
			`guest path "data" is not absolute`},
		{"host path is a file", engine.NewConfig().WithCapabilities(engine.Capabilities{}.WithReadOnlyDir(file, "/data")),
			fmt.Sprintf("capabilities: read-only dir %q is not a directory", file)},
		{"guest path twice", engine.NewConfig().WithCapabilities(engine.Capabilities{}.WithReadOnlyDir(t.TempDir(), "/d").WithReadOnlyDir(t.TempDir(), "/d/")),
			`guest path "/d/" is mounted twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.NewWazero(context.Background(), tt.cfg)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestClosed(t *testing.T) {
	e, err := engine.NewWazero(context.Background(), testConfig())
	require.NoError(t, err)
	m, err := e.Compile(context.Background(), "echo", guest(t, "echo"))
	require.NoError(t, err)
	inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
	require.NoError(t, err)
	other, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
	require.NoError(t, err)

	require.NoError(t, inst.Close(context.Background()))
	require.NoError(t, inst.Close(context.Background()), "Close is idempotent")
	_, err = inst.Process(context.Background(), []byte("x"))
	require.ErrorIs(t, err, engine.ErrClosed)

	require.NoError(t, m.Close(context.Background()))
	_, err = other.Process(context.Background(), []byte("still works"))
	require.NoError(t, err, "instances outlive their module")
	_, err = m.Instantiate(context.Background(), engine.NewInstanceConfig())
	require.ErrorIs(t, err, engine.ErrClosed)

	require.NoError(t, e.Close(context.Background()))
	_, err = other.Process(context.Background(), []byte("x"))
	require.ErrorIs(t, err, engine.ErrClosed)
	_, err = e.Compile(context.Background(), "echo", guest(t, "echo"))
	require.ErrorIs(t, err, engine.ErrClosed)
	require.NoError(t, e.Close(context.Background()), "Close is idempotent")
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

func TestUninterruptibleEngineRunsGuests(t *testing.T) {
	require.True(t, engine.NewConfig().Interruptible(), "interruptible is the default")
	cfg := testConfig().WithInterruptible(false)
	require.False(t, cfg.Interruptible())
	inst := instantiate(t, compile(t, newEngine(t, cfg), "echo"))
	req := []byte("uninterruptible")
	resp, err := inst.Process(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, echoed(req), resp)
}
