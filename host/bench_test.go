package host_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// buildGuest compiles a Go guest of this repository to a .wasm file once
// per test binary run.
var buildGuest = func() func(tb testing.TB, pkg string) []byte {
	var mu sync.Mutex
	built := map[string][]byte{}
	return func(tb testing.TB, pkg string) []byte {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := built[pkg]; ok {
			return b
		}
		dir, err := os.MkdirTemp("", "flowhost-guest-")
		require.NoError(tb, err)
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "guest.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		cmd.Dir = ".."
		msg, err := cmd.CombinedOutput()
		require.NoError(tb, err, "building %s: %s", pkg, msg)
		b, err := os.ReadFile(out)
		require.NoError(tb, err)
		built[pkg] = b
		return b
	}
}()

// benchRecords is the number of records of the benchmarks that `make
// bench` tabulates (BenchmarkLimit, BenchmarkIdentityLanguages,
// BenchmarkExactlyOnce): `make bench` runs them on 1M, the same input as
// the Benthos comparison (host/internal/benthosbench).
var benchRecords = flag.Int("records", 200_000, "records per run of the tabulated benchmarks")

// memorySource emits n records of 100-byte payloads over 1000 keys.
type memorySource struct{ n int }

func (s memorySource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for i := 0; i < s.n; i++ {
		payload := appendBenchPayload(make([]byte, 0, benchPayloadSize), i)
		if err := emit(connect.Record{Write: int64(i), HasWrite: true, Payload: payload}); err != nil {
			return err
		}
	}
	return nil
}

// benchPayloadSize is the size of a memorySource payload below 10^9
// records: 100 bytes.
const benchPayloadSize = len(`{"k":"key-0000","seq":"000000000","fill":"0123456789012345678901234567890123456789012345678901"}`)

// appendBenchPayload appends record i's payload,
// {"k":"key-%04d","seq":"%09d","fill":"0123…"} with i%1000 and i, without
// fmt's boxing of its arguments: the source's only allocation per record
// is its payload, as a connector's would be.
func appendBenchPayload(b []byte, i int) []byte {
	b = append(b, `{"k":"key-`...)
	b = appendZeroPadded(b, i%1000, 4)
	b = append(b, `","seq":"`...)
	b = appendZeroPadded(b, i, 9)
	return append(b, `","fill":"0123456789012345678901234567890123456789012345678901"}`...)
}

func appendZeroPadded(b []byte, v, width int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(v), 10)
	for range width - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// countSink counts records.
type countSink struct {
	mu sync.Mutex
	n  int
}

func (c *countSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	c.mu.Lock()
	c.n += len(recs)
	c.mu.Unlock()
	return nil
}
func (c *countSink) Close() error { return nil }

const identityPipeline = `
name: identity
sources:
  - {name: in, type: generator, stream: in, generator: {count: 1}}
computations:
  - name: identity
    plugin: identity
    partitions: %d
    group_by: [k]
    input_streams: [in]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// nativeIdentity is the native identity computation, emitting on out.
var nativeIdentity = identityFunc("out")

// identityFunc emits every message unchanged on stream, naming it as the
// only parent. Like a native computation written for speed, it allocates
// per response, not per message: one array of emits and one of parent
// indexes, shared by the keys.
func identityFunc(stream string) compute.Func {
	return func(_ context.Context, req *abi.Request) (*abi.Response, error) {
		resp := &abi.Response{Keys: make([]abi.ResponseKey, len(req.Keys))}
		n := 0
		for i := range req.Keys {
			n += len(req.Keys[i].Messages)
		}
		emits, parents := make([]abi.Emit, n), make([]uint32, n)
		for i := range req.Keys {
			k := &req.Keys[i]
			rk := &resp.Keys[i]
			rk.Key = k.Key
			rk.Emits, emits = emits[:len(k.Messages):len(k.Messages)], emits[len(k.Messages):]
			for j := range k.Messages {
				parents[0] = uint32(len(k.Timers) + j)
				rk.Emits[j] = abi.Emit{Stream: stream, Payload: k.Messages[j].Payload, Parents: parents[:1:1]}
				parents = parents[1:]
			}
		}
		return resp, nil
	}
}

func wasmIdentity(tb testing.TB) compute.Factory {
	return wasmFactory(tb, buildGuest(tb, "./host/internal/testguests/identity"))
}

func runIdentity(tb testing.TB, f compute.Factory, n, partitions int) {
	p, err := spec.Parse("identity.yaml", fmt.Appendf(nil, identityPipeline, partitions))
	require.NoError(tb, err)
	sink := &countSink{}
	rt, err := runtime.New(p, map[string]compute.Factory{"identity": f},
		runtime.WithSource("in", memorySource{n: n}), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(io.Discard), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(tb, err)
	require.NoError(tb, rt.Run(context.Background()))
	require.Equal(tb, n, sink.n)
}

// BenchmarkIdentity measures the full runtime path (source queue, routing,
// merge, batching, the call, stamping, sink) with the identity transform on
// 100-byte payloads, native Go against the Go SDK guest on wazero, in the
// same run. Compare msgs/s between the two sub-benchmarks:
//
//	go test -run '^$' -bench Identity -benchtime 3x ./host/
func BenchmarkIdentity(b *testing.B) {
	const n = 200_000
	for _, impl := range []struct {
		name string
		f    func(testing.TB) compute.Factory
	}{
		{"native", func(testing.TB) compute.Factory { return compute.Native(nativeIdentity) }},
		{"wasm", wasmIdentity},
	} {
		for _, parts := range []int{1, goruntime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/partitions=%d", impl.name, parts), func(b *testing.B) {
				f := impl.f(b)
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					runIdentity(b, f, n, parts)
				}
				elapsed := time.Since(start).Seconds()
				b.ReportMetric(float64(n*b.N)/elapsed, "msgs/s")
				b.ReportMetric(float64(n*b.N)/elapsed/float64(goruntime.GOMAXPROCS(0)), "msgs/s/core")
			})
		}
	}
}

func TestIdentityWASMAndNativeAgree(t *testing.T) {
	runIdentity(t, compute.Native(nativeIdentity), 5000, 2)
	runIdentity(t, wasmIdentity(t), 5000, 2)
}

// identityTo is the native identity computation emitting on stream.
func identityTo(stream string) compute.Factory { return compute.Native(identityFunc(stream)) }

// chainPipeline is a chain of identity computations in memory: in -> s1
// -> ... -> out, each keyed by k.
func chainPipeline(tb testing.TB, length, partitions int) (*spec.Pipeline, map[string]compute.Factory) {
	var b strings.Builder
	b.WriteString("name: chain\nsources:\n  - {name: in, type: generator, stream: in, generator: {count: 1}}\ncomputations:\n")
	factories := map[string]compute.Factory{}
	in := "in"
	for i := range length {
		out := fmt.Sprintf("s%d", i+1)
		if i == length-1 {
			out = "out"
		}
		name := fmt.Sprintf("c%d", i+1)
		fmt.Fprintf(&b, "  - {name: %s, plugin: %s, partitions: %d, group_by: [k], input_streams: [%s], output_streams: [%s]}\n", name, name, partitions, in, out)
		factories[name] = identityTo(out)
		in = out
	}
	b.WriteString("sinks:\n  - {name: sink, type: stdout, streams: [out]}\n")
	p, err := spec.Parse("chain.yaml", []byte(b.String()))
	require.NoError(tb, err)
	return p, factories
}

// runChain runs n records through a chain and checks all reach the sink.
func runChain(tb testing.TB, n, length, partitions int) {
	p, factories := chainPipeline(tb, length, partitions)
	sink := &countSink{}
	rt, err := runtime.New(p, factories,
		runtime.WithSource("in", memorySource{n: n}), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(io.Discard), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(tb, err)
	require.NoError(tb, rt.Run(context.Background()))
	require.Equal(tb, n, sink.n)
}

// hostCost is what one run cost the process: wall time, CPU time (user
// and system, every goroutine's) and heap allocations.
type hostCost struct {
	wall, cpu time.Duration
	allocs    uint64
}

func measureRun(run func()) hostCost {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	run()
	c := hostCost{wall: time.Since(start), cpu: cpuTime() - cpu0}
	goruntime.ReadMemStats(&after)
	c.allocs = after.Mallocs - before.Mallocs
	return c
}

// BenchmarkNativeHost measures, in one run, the native in-memory path of
// issue 13: msg/s with 1 and 4 partitions of one identity computation and
// with a chain of 3 (1 partition each), heap allocations and process CPU
// time per message (getrusage: every goroutine, GC included), and the
// ratios 4 partitions / 1 and chain-of-3 cost / one. The variants run
// alternately in every iteration, so a machine busy with other work
// slows them alike:
//
//	go test -run '^$' -bench NativeHost -benchtime 3x ./host/
//
// Allocations count everything the process allocated during the run: the
// benchmark's source (one payload per record) and the native identity
// (its response, one Parents slice per emit) included.
func BenchmarkNativeHost(b *testing.B) {
	const n = 200_000
	variants := []struct {
		name   string
		length int
		parts  int
	}{{"p1", 1, 1}, {"p4", 1, 4}, {"chain3", 3, 1}}
	runChain(b, 1000, 1, 1) // warm up
	costs := make([]hostCost, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, v := range variants {
			c := measureRun(func() { runChain(b, n, v.length, v.parts) })
			costs[j].wall += c.wall
			costs[j].cpu += c.cpu
			costs[j].allocs += c.allocs
		}
	}
	b.StopTimer()
	msgs := float64(n * b.N)
	for j, v := range variants {
		c := costs[j]
		b.ReportMetric(msgs/c.wall.Seconds(), v.name+"-msgs/s")
		b.ReportMetric(float64(c.allocs)/msgs, v.name+"-allocs/msg")
		b.ReportMetric(float64(c.cpu.Nanoseconds())/msgs, v.name+"-cpu-ns/msg")
	}
	b.ReportMetric(costs[0].wall.Seconds()/costs[1].wall.Seconds(), "p4/p1-speed")
	b.ReportMetric(costs[2].wall.Seconds()/costs[0].wall.Seconds(), "chain3/p1-time")
	b.ReportMetric(float64(costs[2].cpu)/float64(costs[0].cpu), "chain3/p1-cpu")
}

// BenchmarkLimit is the limit baseline: the irreducible work of every
// figure of `make bench`, generating the records of memorySource and
// handing each to a function that counts it and its bytes, with no host
// in between. No pipeline over the same records can go faster:
//
//	go test -run '^$' -bench '^BenchmarkLimit$' -benchtime 1x ./host/
func BenchmarkLimit(b *testing.B) {
	n := *benchRecords
	var count, size int
	start := time.Now()
	for range b.N {
		require.NoError(b, memorySource{n: n}.Run(context.Background(), func(r connect.Record) error {
			count++
			size += len(r.Payload)
			return nil
		}))
	}
	elapsed := time.Since(start)
	require.Equal(b, n*b.N, count)
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(size)/float64(count), "B/msg")
}

// peakRSS returns the process's peak resident set size so far, in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}

// sampleLiveHeap samples the live heap (as of each GC) every 50 ms until
// the returned function is called, which returns the largest seen: what
// the run really held, apart from the garbage the GC lets accumulate.
func sampleLiveHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	done, finished := make(chan struct{}), make(chan struct{})
	var peak atomic.Uint64
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak.Load() }
}

// BenchmarkNativeHostRSS runs the identity pipeline in memory over 1M and
// then 10M records and reports the process's peak RSS after each: with
// the default buffers (64 MiB source queue, 64 MiB computation buffer) it
// must not grow with the input. The peak only ever rises, so the 10M
// figure includes the 1M run's; a bounded host shows the same figure for
// both:
//
//	go test -run '^$' -bench NativeHostRSS -benchtime 1x ./host/
func BenchmarkNativeHostRSS(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			start := time.Now()
			stop := sampleLiveHeap()
			for i := 0; i < b.N; i++ {
				runChain(b, n, 1, 1)
			}
			live := stop()
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "msgs/s")
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
			b.ReportMetric(float64(live)/(1<<20), "peak-live-heap-MiB")
		})
	}
}

// TestBenchPayloadIsWhatFmtWrites: the benchmark source's hand-written
// payload is byte for byte the fmt format it stands for.
func TestBenchPayloadIsWhatFmtWrites(t *testing.T) {
	for _, i := range []int{0, 7, 999, 1000, 123456, 999_999_999, 1_000_000_001} {
		want := fmt.Sprintf(`{"k":"key-%04d","seq":"%09d","fill":"%s"}`, i%1000, i, "0123456789012345678901234567890123456789012345678901")
		require.Equal(t, want, string(appendBenchPayload(nil, i)))
	}
	require.Len(t, appendBenchPayload(nil, 5), benchPayloadSize)
}
