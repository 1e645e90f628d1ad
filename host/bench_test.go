package host_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sync"
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

// memorySource emits n records of 100-byte payloads over 1000 keys.
type memorySource struct{ n int }

func (s memorySource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for i := 0; i < s.n; i++ {
		payload := fmt.Appendf(nil, `{"k":"key-%04d","seq":"%09d","fill":"%s"}`, i%1000, i, "0123456789012345678901234567890123456789012345678901")
		if err := emit(connect.Record{Write: int64(i), HasWrite: true, Payload: payload}); err != nil {
			return err
		}
	}
	return nil
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

var nativeIdentity = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{Keys: make([]abi.ResponseKey, len(req.Keys))}
	for i := range req.Keys {
		k := &req.Keys[i]
		rk := &resp.Keys[i]
		rk.Key = k.Key
		rk.Emits = make([]abi.Emit, len(k.Messages))
		for j := range k.Messages {
			rk.Emits[j] = abi.Emit{Stream: "out", Payload: k.Messages[j].Payload, Parents: []uint32{uint32(len(k.Timers) + j)}}
		}
	}
	return resp, nil
})

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
