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

// The tests in this file hold every engine to the same behaviour: each
// runs once per engine of engineKinds, with the same guests and the same
// expected results and error messages. wazero's own tests (wazero_test.go)
// keep what only wazero has.

// engineKind is one implementation of engine.Engine.
type engineKind struct {
	name string
	new  func(engine.Config) (engine.Engine, error)
}

var engineKinds = []engineKind{
	{"wazero", func(cfg engine.Config) (engine.Engine, error) { return engine.NewWazero(context.Background(), cfg) }},
	{"wasmtime", engine.NewWasmtime},
}

// forEachEngine runs f as one subtest per engine. In a build without
// wasmtime (CGO_ENABLED=0 or -tags nowasmtime) its subtest is skipped.
func forEachEngine(t *testing.T, f func(t *testing.T, k engineKind)) {
	t.Helper()
	for _, k := range engineKinds {
		t.Run(k.name, func(t *testing.T) {
			k.skipIfMissing(t)
			f(t, k)
		})
	}
}

func (k engineKind) skipIfMissing(tb testing.TB) {
	tb.Helper()
	if k.name == "wasmtime" && !engine.WasmtimeAvailable {
		tb.Skip("this build has no wasmtime (CGO_ENABLED=0 or -tags nowasmtime)")
	}
}

// engine creates an engine of kind k, closed when the test ends.
func (k engineKind) engine(tb testing.TB, cfg engine.Config) engine.Engine {
	tb.Helper()
	e, err := k.new(cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, e.Close(context.Background())) })
	return e
}

// instance compiles the named test guest on a new engine of kind k and
// instantiates it.
func (k engineKind) instance(tb testing.TB, cfg engine.Config, name string) engine.Instance {
	tb.Helper()
	return instantiate(tb, compileBytes(tb, k.engine(tb, cfg), name, guest(tb, name)))
}

// rawGuest is an ABI v1 guest without WASI and without a Go runtime,
// assembled here: flowhost_alloc answers 1024 and flowhost_process
// (ptr, len) runs code, declaring locals i32 locals after its two
// parameters. memoryPages is its initial memory.
func rawGuest(memoryPages byte, locals byte, code ...byte) []byte {
	types := section(1, vec(
		functype(nil, nil),                      // 0: marker
		functype([]byte{i32}, []byte{i32}),      // 1: alloc
		functype([]byte{i32, i32}, []byte{i64}), // 2: process
	))
	funcs := section(3, vec(leb(0), leb(1), leb(2)))
	memory := section(5, vec([]byte{0x00, memoryPages}))
	exports := section(7, vec(
		cat(str("flowhost_abi_v1"), []byte{0x00}, leb(0)),
		cat(str("flowhost_alloc"), []byte{0x00}, leb(1)),
		cat(str("flowhost_process"), []byte{0x00}, leb(2)),
		cat(str("memory"), []byte{0x02}, leb(0)),
	))
	body := func(decls []byte, code []byte) []byte { return cat(leb(uint64(len(decls)+len(code))), decls, code) }
	declare := []byte{0x00}
	if locals > 0 {
		declare = []byte{0x01, locals, i32}
	}
	return wasmModule(types, funcs, memory, exports, section(10, vec(
		body([]byte{0x00}, []byte{0x0b}),
		body([]byte{0x00}, []byte{0x41, 0x80, 0x08, 0x0b}), // i32.const 1024
		body(declare, code),
	)))
}

// spinGuest's flowhost_process is `loop br 0 end`: an infinite loop that
// calls nothing, so only a check on the loop's back-edge can stop it.
func spinGuest() []byte {
	return rawGuest(1, 0,
		0x03, 0x40, 0x0c, 0x00, 0x0b, // loop; br 0; end
		0x42, 0x00, 0x0b, // i64.const 0; end
	)
}

// memoryBombGuest's flowhost_process grows its memory one page at a time
// until growing fails, and answers the number of pages it got as 4
// little-endian bytes at address 0.
func memoryBombGuest() []byte {
	return rawGuest(1, 0,
		0x02, 0x40, 0x03, 0x40, // block; loop
		0x41, 0x01, 0x40, 0x00, // i32.const 1; memory.grow
		0x41, 0x7f, 0x46, 0x0d, 0x01, // i32.const -1; i32.eq; br_if 1
		0x0c, 0x00, 0x0b, 0x0b, // br 0; end; end
		0x41, 0x00, 0x3f, 0x00, 0x36, 0x02, 0x00, // i32.const 0; memory.size; i32.store
		0x42, 0x04, 0x0b, // i64.const 4 (the region 0, 4); end
	)
}

// computeGuest's flowhost_process reads a count n (4 little-endian bytes)
// and iterates x = y ^ (y >> 16) with y = x*1103515245 + 12345, from
// x = 1, n times: pure computation, no memory traffic, no calls. It
// answers x as 4 little-endian bytes; computeExpected is the same in Go.
func computeGuest() []byte {
	return rawGuest(1, 2, cat(
		[]byte{0x20, 0x00, 0x28, 0x02, 0x00, 0x21, 0x01},                                          // n = i32.load(ptr), in local 1
		[]byte{0x41, 0x01, 0x21, 0x03},                                                            // x = 1
		[]byte{0x02, 0x40, 0x03, 0x40},                                                            // block; loop
		[]byte{0x20, 0x02, 0x20, 0x01, 0x4f, 0x0d, 0x01},                                          // br_if 1 (i >= n)
		[]byte{0x20, 0x03, 0x41}, sleb(1103515245), []byte{0x6c, 0x41}, sleb(12345), []byte{0x6a}, // y = x*a + c
		[]byte{0x22, 0x03, 0x20, 0x03, 0x41, 0x10, 0x76, 0x73, 0x21, 0x03}, // x = y ^ (y >> 16)
		[]byte{0x20, 0x02, 0x41, 0x01, 0x6a, 0x21, 0x02},                   // i++
		[]byte{0x0c, 0x00, 0x0b, 0x0b},                                     // br 0; end; end
		[]byte{0x41, 0x00, 0x20, 0x03, 0x36, 0x02, 0x00},                   // i32.store(0, x)
		[]byte{0x42, 0x04, 0x0b},                                           // i64.const 4; end
	)...)
}

func computeExpected(n uint32) []byte {
	x := uint32(1)
	for range n {
		y := x*1103515245 + 12345
		x = y ^ y>>16
	}
	return binary.LittleEndian.AppendUint32(nil, x)
}

func TestEnginesProcessRoundTrip(t *testing.T) {
	big := make([]byte, 100<<10)
	rand.NewChaCha8([32]byte{1}).Read(big)
	forEachEngine(t, func(t *testing.T, k engineKind) {
		inst := k.instance(t, testConfig(), "echo")
		for _, req := range [][]byte{nil, {}, []byte("a"), []byte("hello, guest"), big} {
			resp, err := inst.Process(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, echoed(req), resp)
		}
		// One instance, many calls of random sizes: the guest allocates,
		// grows its memory and reuses its buffers.
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

		// The response is a view of guest memory until the next call.
		first, err := inst.Process(context.Background(), []byte("first"))
		require.NoError(t, err)
		kept := bytes.Clone(first)
		_, err = inst.Process(context.Background(), []byte("second"))
		require.NoError(t, err)
		require.Equal(t, echoed([]byte("first")), kept)
		require.NotEqual(t, kept, first)
	})
}

func TestEnginesRawGuests(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		e := k.engine(t, testConfig())
		resp, err := instantiate(t, compileBytes(t, e, "minimal", minimalGuest())).Process(context.Background(), []byte("unchanged"))
		require.NoError(t, err)
		require.Equal(t, "unchanged", string(resp))

		compute := instantiate(t, compileBytes(t, e, "compute", computeGuest()))
		for _, n := range []uint32{0, 1, 2, 1000} {
			resp, err := compute.Process(context.Background(), binary.LittleEndian.AppendUint32(nil, n))
			require.NoError(t, err)
			require.Equal(t, computeExpected(n), resp, "n=%d", n)
		}
	})
}

func TestEnginesInit(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		e := k.engine(t, testConfig())
		echo := instantiate(t, compileBytes(t, e, "echo", guest(t, "echo")))
		result, err := echo.Init(context.Background(), []byte(`{"threshold":3}`))
		require.NoError(t, err)
		require.Equal(t, `init:{"threshold":3}`, string(result))
		result, err = echo.Init(context.Background(), nil)
		require.NoError(t, err)
		require.Nil(t, result)
		resp, err := echo.Process(context.Background(), []byte("after init"))
		require.NoError(t, err)
		require.Equal(t, echoed([]byte("after init")), resp)

		result, err = instantiate(t, compileBytes(t, e, "log", guest(t, "log"))).Init(context.Background(), []byte("ignored"))
		require.NoError(t, err)
		require.Nil(t, result, "a guest without flowhost_init has nothing to initialise")

		_, err = instantiate(t, compileBytes(t, e, "badstatus", guest(t, "badstatus"))).Init(context.Background(), []byte("x"))
		var ge *engine.GuestError
		require.ErrorAs(t, err, &ge)
		require.Equal(t, engine.OpInit, ge.Op)
		require.ErrorIs(t, err, engine.ErrStatus)
		require.EqualValues(t, -2, ge.Status)
	})
}

// TestEnginesGuestErrors requires the same *GuestError, message included,
// from every engine for every way a call can fail, and the same verdict
// on whether the instance survives.
func TestEnginesGuestErrors(t *testing.T) {
	tests := []struct {
		name    string
		guest   string
		wasm    func() []byte // a raw guest instead of a test guest
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
		{name: "go panic traps", guest: "trap", request: "panic",
			cause: engine.ErrTrap, want: `plugin "trap": process: guest trapped: panic: boom (wasm error: unreachable)`, dead: true},
		{name: "os.Exit exits", guest: "trap", request: "exit",
			cause: engine.ErrExit, want: `plugin "trap": process: guest exited: exit code 3`, dead: true},
		{name: "unreachable traps", guest: "trap", request: "unreachable",
			cause: engine.ErrTrap, want: `plugin "trap": process: guest trapped: wasm error: unreachable`, dead: true},
		{name: "log line outside memory", guest: "log", request: "log outside memory",
			cause: engine.ErrTrap, want: `plugin "log": process: guest trapped: flowhost.log: line of 10 bytes at 0x7fff0000 is outside guest memory`, dead: true},
		{name: "deadline stops an infinite loop", guest: "loop", request: "spin", timeout: 50 * time.Millisecond,
			cause: engine.ErrDeadline, alsoIs: context.DeadlineExceeded, want: `plugin "loop": process: deadline exceeded`, dead: true},
		{name: "cancellation stops an infinite loop", guest: "loop", request: "spin", cancel: true,
			cause: engine.ErrCanceled, alsoIs: context.Canceled, want: `plugin "loop": process: canceled`, dead: true},
		{name: "deadline stops a loop that calls nothing", guest: "spin", wasm: spinGuest, request: "spin", timeout: 50 * time.Millisecond,
			cause: engine.ErrDeadline, alsoIs: context.DeadlineExceeded, want: `plugin "spin": process: deadline exceeded`, dead: true},
		{name: "negative status", guest: "badstatus", request: "x",
			cause: engine.ErrStatus, status: -2, want: `plugin "badstatus": process: guest returned a failure status -2`},
		{name: "packed pointer outside memory", guest: "oob", request: "x",
			cause: engine.ErrOutOfBounds, want: `plugin "oob": process: region outside guest memory: 16 bytes at 0x7fff0000, memory is `},
		{name: "response over the limit", guest: "echo", request: "0123456789",
			cfg:   func(c engine.Config) engine.Config { return c.WithMaxResponseBytes(8) },
			cause: engine.ErrResponseTooLarge, want: `plugin "echo": process: response exceeds limit: 15 bytes, limit 8`},
	}
	forEachEngine(t, func(t *testing.T, k engineKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := testConfig()
				if tt.cfg != nil {
					cfg = tt.cfg(cfg)
				}
				wasm := guest
				if tt.wasm != nil {
					wasm = func(testing.TB, string) []byte { return tt.wasm() }
				}
				inst := instantiate(t, compileBytes(t, k.engine(t, cfg), tt.guest, wasm(t, tt.guest)))

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
				start := time.Now()
				_, err := inst.Process(ctx, []byte(tt.request))
				if tt.timeout > 0 || tt.cancel {
					require.Less(t, time.Since(start), 5*time.Second, "the guest was not stopped promptly")
				}

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

				_, err = inst.Process(context.Background(), []byte(tt.request))
				if tt.dead {
					require.EqualError(t, err, fmt.Sprintf("plugin %q: process: instance is dead after an earlier failure", tt.guest))
					require.ErrorIs(t, err, engine.ErrDead)
				} else {
					require.ErrorIs(t, err, tt.cause, "a live instance fails the same way again")
				}
			})
		}
	})
}

func TestEnginesExpiredContextLeavesInstanceAlive(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		inst := k.instance(t, testConfig(), "echo")
		ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
		defer cancel()
		_, err := inst.Process(ctx, []byte("never runs"))
		require.ErrorIs(t, err, engine.ErrDeadline)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		resp, err := inst.Process(context.Background(), []byte("runs"))
		require.NoError(t, err)
		require.Equal(t, echoed([]byte("runs")), resp)
	})
}

// TestEnginesCompileRefusals requires every engine to refuse the same
// modules with the same message, naming the import or export at fault.
func TestEnginesCompileRefusals(t *testing.T) {
	evilImport := wasmModule(
		section(1, vec(functype(nil, nil))),
		section(2, vec(cat(str("env"), str("evil"), []byte{0x00}, leb(0)))),
	)
	tests := []struct {
		name, plugin string
		wasm         func(t *testing.T) []byte
		cfg          func(engine.Config) engine.Config
		want         string
	}{
		{"missing process", "noexports", func(t *testing.T) []byte { return guest(t, "noexports") }, nil,
			`plugin "noexports": missing export flowhost_process (func (i32, i32) -> i64)`},
		{"forbidden socket import", "sock", func(t *testing.T) []byte { return guest(t, "sock") }, nil,
			`plugin "sock": import wasi_snapshot_preview1.sock_accept is not allowed: sockets are never granted`},
		{"path_open without a granted directory", "fs", func(t *testing.T) []byte { return guest(t, "fs") }, nil,
			`plugin "fs": import wasi_snapshot_preview1.path_filestat_get is not allowed: no directory is granted; ` +
				`import wasi_snapshot_preview1.path_open is not allowed: no directory is granted`},
		{"import from an unknown module", "evil", func(*testing.T) []byte { return evilImport }, nil,
			`plugin "evil": missing export flowhost_abi_v1 (func () -> ()); missing export flowhost_alloc (func i32 -> i32); ` +
				`missing export flowhost_process (func (i32, i32) -> i64); missing export memory (the guest's linear memory); ` +
				`import env.evil is not allowed: only flowhost.log and wasi_snapshot_preview1 functions can be imported`},
		{"not wasm", "junk", func(*testing.T) []byte { return []byte("#!/bin/sh\necho hi\n") }, nil,
			`plugin "junk": invalid wasm at offset 0x4: not a wasm module: missing "\0asm" magic`},
		{"minimum memory over the limit", "echo", func(t *testing.T) []byte { return guest(t, "echo") },
			func(c engine.Config) engine.Config { return c.WithMemoryLimitPages(16) },
			`plugin "echo": compile: section memory: min 32 pages (2 Mi) over limit of 16 pages (1 Mi)`},
	}
	forEachEngine(t, func(t *testing.T, k engineKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := testConfig()
				if tt.cfg != nil {
					cfg = tt.cfg(cfg)
				}
				_, err := k.engine(t, cfg).Compile(context.Background(), tt.plugin, tt.wasm(t))
				require.EqualError(t, err, tt.want)
			})
		}
	})
}

// TestEnginesMemoryLimit shows the limit refusing growth, to a Go guest
// (whose runtime then reports running out of memory and traps) and to a
// guest that grows until it cannot (and gets exactly the limit).
func TestEnginesMemoryLimit(t *testing.T) {
	req := bytes.Repeat([]byte("m"), 8<<20)
	forEachEngine(t, func(t *testing.T, k engineKind) {
		resp, err := k.instance(t, testConfig(), "echo").Process(context.Background(), req)
		require.NoError(t, err)
		require.Len(t, resp, len(req)+len("echo:"))

		const limit = 160 // pages: 10 MiB, less than the guest needs
		cfg := testConfig().WithMemoryLimitPages(limit)
		limited := k.instance(t, cfg, "echo")
		_, err = limited.Process(context.Background(), []byte("small requests fit"))
		require.NoError(t, err)
		_, err = limited.Process(context.Background(), req)
		require.ErrorIs(t, err, engine.ErrTrap)
		require.Contains(t, err.Error(), `plugin "echo": alloc: guest trapped: runtime: out of memory: cannot allocate 8388608-byte block`)
		_, err = limited.Process(context.Background(), []byte("small"))
		require.ErrorIs(t, err, engine.ErrDead)

		bomb := instantiate(t, compileBytes(t, k.engine(t, cfg), "bomb", memoryBombGuest()))
		resp, err = bomb.Process(context.Background(), nil)
		require.NoError(t, err)
		require.Equal(t, binary.LittleEndian.AppendUint32(nil, limit), resp, "the guest grew to exactly the limit")
	})
}

func TestEnginesGuestLogs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		handler := newRecordingHandler(slog.LevelInfo)
		m := compileBytes(t, k.engine(t, testConfig().WithLogger(slog.New(handler))), "log", guest(t, "log"))
		inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig().WithLogAttrs(slog.Int("partition", 7)))
		require.NoError(t, err)
		defer inst.Close(context.Background())

		resp, err := inst.Process(context.Background(), []byte("hello from the guest"))
		require.NoError(t, err)
		require.Equal(t, "logged", string(resp))
		require.Equal(t, []loggedRecord{
			{level: slog.LevelWarn, msg: "hello from the guest", attrs: "plugin=log partition=7"},
			{level: slog.LevelWarn, msg: "to stderr", attrs: "plugin=log partition=7 stream=stderr"},
		}, handler.all())
	})
}

func TestEnginesConcurrentInstances(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		m := compileBytes(t, k.engine(t, testConfig()), "echo", guest(t, "echo"))
		const workers, calls = 4, 100
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				errs <- func() error {
					inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
					if err != nil {
						return err
					}
					defer inst.Close(context.Background())
					for c := range calls {
						req := fmt.Appendf(nil, "worker %d call %d %s", w, c, bytes.Repeat([]byte{byte(w)}, c*37))
						// A deadline on every call exercises the interruption
						// machinery of all instances at once.
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						resp, err := inst.Process(ctx, req)
						cancel()
						if err != nil {
							return err
						}
						if !bytes.Equal(echoed(req), resp) {
							return fmt.Errorf("worker %d call %d: wrong response", w, c)
						}
					}
					return nil
				}()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

// TestEnginesCancelOneOfMany cancels one spinning instance while others of
// the same engine run: only it stops.
func TestEnginesCancelOneOfMany(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		e := k.engine(t, testConfig())
		spin := compileBytes(t, e, "spin", spinGuest())
		compute := compileBytes(t, e, "compute", computeGuest())
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		spinning := instantiate(t, spin)
		spinErr := make(chan error, 1)
		go func() {
			_, err := spinning.Process(ctx, nil)
			spinErr <- err
		}()
		busy := instantiate(t, compute)
		req := binary.LittleEndian.AppendUint32(nil, 200_000)
		for ctx.Err() == nil {
			resp, err := busy.Process(context.Background(), req)
			require.NoError(t, err, "a call of another instance is stopped with the cancelled one")
			require.Equal(t, computeExpected(200_000), resp)
		}
		require.ErrorIs(t, <-spinErr, engine.ErrDeadline)
	})
}

func TestEnginesClock(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		guestNow := func(cfg engine.Config) time.Time {
			resp, err := k.instance(t, cfg, "clock").Process(context.Background(), nil)
			require.NoError(t, err)
			require.Len(t, resp, 8)
			return time.Unix(0, int64(binary.LittleEndian.Uint64(resp)))
		}
		before := time.Now()
		real := guestNow(testConfig().WithCapabilities(engine.Capabilities{}.WithClock()))
		after := time.Now()
		require.False(t, real.Before(before.Truncate(time.Microsecond)) || real.After(after), "granted clock %v is outside [%v, %v]", real, before, after)

		fake := guestNow(testConfig())
		require.Equal(t, 2022, fake.UTC().Year(), "without a grant the guest sees the fake clock, not %v", fake)
	})
}

func TestEnginesReadOnlyDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("granted content"), 0o600))
	outside := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(outside, []byte("outside the grant"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "escape")))
	caps := engine.Capabilities{}.WithReadOnlyDir(dir, "/data")
	forEachEngine(t, func(t *testing.T, k engineKind) {
		inst := k.instance(t, testConfig().WithCapabilities(caps), "fs")
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

		resp, err = inst.Process(context.Background(), []byte("read:/data/escape"))
		require.NoError(t, err)
		require.Contains(t, string(resp), "error: ", "a symlink out of the granted directory leads nowhere")
		require.NotContains(t, string(resp), "outside the grant")
	})
}

func TestEnginesConfigRefusals(t *testing.T) {
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
		{"cache dir is a file", engine.NewConfig().WithCompilationCacheDir(file),
			fmt.Sprintf("engine: compilation cache %q: ", file)},
	}
	forEachEngine(t, func(t *testing.T, k engineKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := k.new(tt.cfg)
				require.ErrorContains(t, err, tt.want)
			})
		}
	})
}

func TestEnginesClosed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		e, err := k.new(testConfig())
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
		require.NoError(t, other.Close(context.Background()))
		_, err = e.Compile(context.Background(), "echo", guest(t, "echo"))
		require.ErrorIs(t, err, engine.ErrClosed)
		require.NoError(t, e.Close(context.Background()), "Close is idempotent")
	})
}

// TestEnginesCloseStopsRunningGuest closes the engine while one of its
// guests spins without a deadline: the call ends with ErrClosed.
func TestEnginesCloseStopsRunningGuest(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		e, err := k.new(testConfig())
		require.NoError(t, err)
		m, err := e.Compile(context.Background(), "spin", spinGuest())
		require.NoError(t, err)
		inst, err := m.Instantiate(context.Background(), engine.NewInstanceConfig())
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := inst.Process(context.Background(), nil)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, e.Close(context.Background()))
		select {
		case err := <-done:
			require.ErrorIs(t, err, engine.ErrClosed)
		case <-time.After(10 * time.Second):
			t.Fatal("closing the engine did not stop the running guest")
		}
		require.NoError(t, inst.Close(context.Background()))
	})
}

func TestEnginesUninterruptibleRunsGuests(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		cfg := testConfig().WithInterruptible(false)
		inst := k.instance(t, cfg, "echo")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := inst.Process(ctx, []byte("uninterruptible"))
		require.NoError(t, err)
		require.Equal(t, echoed([]byte("uninterruptible")), resp)
	})
}

// TestEnginesCompilationCache compiles with one engine, then with a fresh
// engine on the same directory: the second compile must load what the
// first wrote, leaving the files untouched (both engines write an entry
// to a temporary file and rename it into place, so a recompile would
// replace it).
func TestEnginesCompilationCache(t *testing.T) {
	forEachEngine(t, func(t *testing.T, k engineKind) {
		dir := t.TempDir()
		cfg := engine.NewConfig().WithCompilationCacheDir(dir)
		compileIn := func(cfg engine.Config) {
			m := compileBytes(t, k.engine(t, cfg), "compute", computeGuest())
			resp, err := instantiate(t, m).Process(context.Background(), binary.LittleEndian.AppendUint32(nil, 7))
			require.NoError(t, err)
			require.Equal(t, computeExpected(7), resp)
		}
		compileIn(cfg)
		before := cacheFiles(t, dir)
		require.NotEmpty(t, before, "the first compile populates the cache directory")

		compileIn(cfg)
		after := cacheFiles(t, dir)
		require.Len(t, after, len(before), "a cache hit adds no entry")
		for path, fi := range before {
			require.Truef(t, os.SameFile(fi, after[path]), "cache entry %s was rewritten: the module was recompiled", path)
		}
	})
}

// TestWasmtimeCacheEntries checks what only wasmtime's cache has to get
// right itself: interruptible and uninterruptible code are different
// entries, and an entry that cannot be loaded is replaced, not trusted.
func TestWasmtimeCacheEntries(t *testing.T) {
	k := engineKinds[1]
	k.skipIfMissing(t)
	dir := t.TempDir()
	run := func(cfg engine.Config) {
		m := compileBytes(t, k.engine(t, cfg), "compute", computeGuest())
		resp, err := instantiate(t, m).Process(context.Background(), binary.LittleEndian.AppendUint32(nil, 3))
		require.NoError(t, err)
		require.Equal(t, computeExpected(3), resp)
	}
	cfg := engine.NewConfig().WithCompilationCacheDir(dir)
	run(cfg)
	run(cfg.WithInterruptible(false))
	entries := cacheFiles(t, dir)
	require.Len(t, entries, 2, "one entry per kind of code")

	for path := range entries {
		require.NoError(t, os.WriteFile(path, []byte("not a compiled module"), 0o644))
	}
	run(cfg)
	run(cfg.WithInterruptible(false))
	after := cacheFiles(t, dir)
	require.Len(t, after, 2)
	for path, fi := range after {
		require.Greater(t, fi.Size(), int64(len("not a compiled module")), "entry %s was not replaced", path)
	}
}
