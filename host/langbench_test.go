package host_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	assdk "github.com/flowhost/flowhost/sdk/assemblyscript"
	csdk "github.com/flowhost/flowhost/sdk/c"
	rustsdk "github.com/flowhost/flowhost/sdk/rust"
)

// identityGuest is the identity transform written in one guest language.
type identityGuest struct {
	lang string
	// build returns the module's bytes, built once per test binary.
	build func(testing.TB) []byte
}

// identityGuests are the identity guests of every SDK: the Go SDK's in
// testguests, the others in internal/benchguests.
var identityGuests = []identityGuest{
	{"go", func(tb testing.TB) []byte { return buildGuest(tb, "./host/internal/testguests/identity") }},
	{"rust", func(tb testing.TB) []byte {
		return buildSDKGuest(tb, "rust", func(dir string) (string, error) {
			return rustsdk.Build(filepath.Join("internal", "benchguests", "rust"), dir)
		})
	}},
	{"c", func(tb testing.TB) []byte {
		return buildSDKGuest(tb, "c", func(dir string) (string, error) {
			out := filepath.Join(dir, "identity.wasm")
			return out, csdk.Build([]string{filepath.Join("internal", "benchguests", "c", "main.c")}, out)
		})
	}},
	{"assemblyscript", func(tb testing.TB) []byte {
		return buildSDKGuest(tb, "assemblyscript", func(dir string) (string, error) {
			out := filepath.Join(dir, "identity.wasm")
			return out, assdk.Build(filepath.Join("internal", "benchguests", "assemblyscript", "index.ts"), out)
		})
	}},
}

// sdkGuests holds, per language, the module built by buildSDKGuest. Each
// language has its own once, so that the toolchains of different
// languages may run at the same time.
var sdkGuests sync.Map // lang -> *sdkGuest

type sdkGuest struct {
	once sync.Once
	wasm []byte
	err  error
}

// buildSDKGuest builds a guest once per test binary with an SDK's build
// function, which writes the module into the directory it is given and
// returns its path. A missing toolchain fails the caller with the SDK's
// error, which names the packages to install.
func buildSDKGuest(tb testing.TB, lang string, build func(dir string) (string, error)) []byte {
	v, _ := sdkGuests.LoadOrStore(lang, &sdkGuest{})
	g := v.(*sdkGuest)
	g.once.Do(func() {
		dir, err := os.MkdirTemp("", "flowhost-"+lang+"-guest-")
		if err != nil {
			g.err = err
			return
		}
		defer os.RemoveAll(dir)
		out, err := build(dir)
		if err != nil {
			g.err = fmt.Errorf("building the %s identity guest: %w", lang, err)
			return
		}
		g.wasm, g.err = os.ReadFile(out)
	})
	require.NoError(tb, g.err)
	return g.wasm
}

// benchCacheDir is the compilation cache of the benchmark engines, shared
// with wasmIdentity's.
var benchCacheDir = filepath.Join(os.TempDir(), "flowhost-bench-cache")

// wasmFactory compiles wasm with the engine configuration of wasmIdentity:
// not interruptible, compilation cache in benchCacheDir.
func wasmFactory(tb testing.TB, wasm []byte) compute.Factory {
	ctx := context.Background()
	eng, err := engine.NewWazero(ctx, engine.NewConfig().WithInterruptible(false).WithCompilationCacheDir(benchCacheDir))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = eng.Close(ctx) })
	mod, err := eng.Compile(ctx, "identity", wasm)
	require.NoError(tb, err)
	return &compute.WASM{Module: mod}
}

// wasmtimeFactory compiles wasm on wasmtime as flowhost run gives a
// plugin that names no engine: interruptible, with the operator's default
// CPU limit per batch (host.DefaultCPUPerBatch), compilation cache in
// benchCacheDir. It skips, saying so, in a build without wasmtime.
func wasmtimeFactory(tb testing.TB, wasm []byte) compute.Factory {
	if !engine.WasmtimeAvailable {
		tb.Skip("this build has no wasmtime engine (cgo disabled or -tags nowasmtime)")
	}
	ctx := context.Background()
	eng, err := engine.NewWasmtime(engine.NewConfig().WithInterruptible(true).WithCompilationCacheDir(benchCacheDir))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = eng.Close(ctx) })
	mod, err := eng.Compile(ctx, "identity", wasm)
	require.NoError(tb, err)
	return &compute.WASM{Module: mod, BatchTimeout: host.DefaultCPUPerBatch}
}

// startup is what a fresh engine takes from a module's bytes to an
// instance ready for its first batch: creating the engine, compiling the
// module (or loading it from cacheDir, when not empty), instantiating it
// (with _initialize) and flowhost_init, as a partition starts.
func startup(tb testing.TB, wasm []byte, cacheDir string) time.Duration {
	ctx := context.Background()
	cfg := engine.NewConfig().WithInterruptible(false)
	if cacheDir != "" {
		cfg = cfg.WithCompilationCacheDir(cacheDir)
	}
	start := time.Now()
	eng, err := engine.NewWazero(ctx, cfg)
	require.NoError(tb, err)
	defer eng.Close(ctx)
	mod, err := eng.Compile(ctx, "identity", wasm)
	require.NoError(tb, err)
	inst, err := (&compute.WASM{Module: mod}).Instantiate(ctx, &abi.Init{
		ABI: abi.Version, Computation: "identity", Kind: abi.KindTransform, OutputStreams: []string{"out"},
	})
	elapsed := time.Since(start)
	require.NoError(tb, err)
	require.NoError(tb, inst.Close(ctx))
	return elapsed
}

// medianStartup is the median of runs startups, in milliseconds: one
// start is at the mercy of the scheduler.
func medianStartup(tb testing.TB, wasm []byte, cacheDir string, runs int) float64 {
	ms := make([]float64, runs)
	for i := range ms {
		ms[i] = float64(startup(tb, wasm, cacheDir).Microseconds()) / 1000
	}
	slices.Sort(ms)
	return ms[runs/2]
}

// BenchmarkIdentityLanguages runs the identity transform of every guest
// language through the full runtime path of BenchmarkIdentity (one
// partition, so that one instance does all the guest work), after native
// Go in the same run, and reports per language:
//
//   - msgs/s, and x-native: msgs/s over native Go's msgs/s of this run,
//     on wazero without a CPU limit (LANG/wazero) and on wasmtime with
//     the default one (LANG/wasmtime, what flowhost run gives a plugin
//     that names no engine);
//   - wasm-bytes: the size of the module (wazero rows);
//   - cold-ms: a fresh engine compiling the module without a compilation
//     cache, instantiating and initialising it (median of three);
//   - warm-ms: the same with the module already in the compilation cache.
//
// Run it with (-records sets the number of messages, 200,000 by default)
//
//	go test -run '^$' -bench IdentityLanguages -benchtime 1x ./host/ -args -records 1000000
func BenchmarkIdentityLanguages(b *testing.B) {
	const (
		partitions = 1
		startups   = 3
	)
	n := *benchRecords
	throughput := func(b *testing.B, f compute.Factory) float64 {
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			runIdentity(b, f, n, partitions)
		}
		rate := float64(n*b.N) / time.Since(start).Seconds()
		b.StopTimer()
		b.ReportMetric(rate, "msgs/s")
		return rate
	}

	// The first run of a process pays for what later ones find ready
	// (the heap grown to its working size, goroutines' stacks): a short
	// one first, so that the native reference every ratio divides by
	// does not carry it alone.
	runIdentity(b, compute.Native(nativeIdentity), 20_000, partitions)
	var native float64
	b.Run("native", func(b *testing.B) {
		native = throughput(b, compute.Native(nativeIdentity))
		b.ReportMetric(1, "x-native")
	})
	for _, g := range identityGuests {
		reference := func(b *testing.B) {
			if native == 0 { // the native sub-benchmark was filtered out
				start := time.Now()
				runIdentity(b, compute.Native(nativeIdentity), n, partitions)
				native = float64(n) / time.Since(start).Seconds()
			}
		}
		// wazero without a CPU limit, its fastest; startups are
		// wazero's.
		b.Run(g.lang+"/wazero", func(b *testing.B) {
			reference(b)
			wasm := g.build(b)
			f := wasmFactory(b, wasm) // also fills the cache for warm-ms
			rate := throughput(b, f)
			b.ReportMetric(rate/native, "x-native")
			b.ReportMetric(float64(len(wasm)), "wasm-bytes")
			b.ReportMetric(medianStartup(b, wasm, "", startups), "cold-ms")
			b.ReportMetric(medianStartup(b, wasm, benchCacheDir, startups), "warm-ms")
		})
		// What flowhost run gives a plugin that names no engine: the
		// default engine with the default CPU limit.
		b.Run(g.lang+"/wasmtime", func(b *testing.B) {
			reference(b)
			rate := throughput(b, wasmtimeFactory(b, g.build(b)))
			b.ReportMetric(rate/native, "x-native")
		})
	}
}

// payloadSink keeps every record it is given.
type payloadSink struct {
	mu   sync.Mutex
	recs []connect.SinkRecord
}

func (s *payloadSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	s.mu.Lock()
	s.recs = append(s.recs, recs...)
	s.mu.Unlock()
	return nil
}
func (s *payloadSink) Close() error { return nil }

// runIdentityRecords runs the identity pipeline of runIdentity on n
// messages of memorySource and returns what reached the sink.
func runIdentityRecords(tb testing.TB, f compute.Factory, n, partitions int) []connect.SinkRecord {
	p, err := spec.Parse("identity.yaml", fmt.Appendf(nil, identityPipeline, partitions))
	require.NoError(tb, err)
	sink := &payloadSink{}
	rt, err := runtime.New(p, map[string]compute.Factory{"identity": f},
		runtime.WithSource("in", memorySource{n: n}), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(io.Discard), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(tb, err)
	require.NoError(tb, rt.Run(context.Background()))
	return sink.recs
}

// TestIdentityLanguagesAgree runs the same messages through the identity
// guest of every language, and native Go, and checks that each delivers
// exactly the input payloads (as a multiset: partitions interleave), each
// on stream out with one parent, no two outputs with the same parent.
func TestIdentityLanguagesAgree(t *testing.T) {
	const n = 2000
	var want []string
	require.NoError(t, memorySource{n: n}.Run(context.Background(), func(r connect.Record) error {
		want = append(want, string(r.Payload))
		return nil
	}))
	sort.Strings(want)

	check := func(t *testing.T, f compute.Factory) {
		recs := runIdentityRecords(t, f, n, goruntime.GOMAXPROCS(0))
		got := make([]string, len(recs))
		parents := map[string]bool{}
		for i, r := range recs {
			require.Equal(t, "out", r.Stream, "record %d", i)
			require.Empty(t, r.PayloadEncoding, "record %d", i)
			require.Len(t, r.Parents, 1, "record %d: %s", i, r.Payload)
			require.False(t, parents[r.Parents[0]], "record %d: parent %s has two outputs", i, r.Parents[0])
			parents[r.Parents[0]] = true
			got[i] = string(r.Payload)
		}
		sort.Strings(got)
		require.Equal(t, want, got)
	}
	t.Run("native", func(t *testing.T) {
		t.Parallel()
		check(t, compute.Native(nativeIdentity))
	})
	for _, g := range identityGuests {
		t.Run(g.lang, func(t *testing.T) {
			t.Parallel()
			check(t, wasmFactory(t, g.build(t)))
		})
	}
}
