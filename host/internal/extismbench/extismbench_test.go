package extismbench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/engine"
)

// batchSize is the number of messages of a batch on flowhost's normal path
// and of every measured round.
const batchSize = 1000

// buildGuest compiles a Go package to a WASI reactor (the way
// host/bench_test.go builds flowhost's guests) once per test binary run.
// dir is the directory go build runs in, which picks the module.
var buildGuest = func() func(tb testing.TB, dir, pkg string) []byte {
	var mu sync.Mutex
	built := map[string][]byte{}
	return func(tb testing.TB, dir, pkg string) []byte {
		tb.Helper()
		mu.Lock()
		defer mu.Unlock()
		if b, ok := built[dir+"\x00"+pkg]; ok {
			return b
		}
		tmp, err := os.MkdirTemp("", "extismbench-guest-")
		require.NoError(tb, err)
		defer os.RemoveAll(tmp)
		out := filepath.Join(tmp, "guest.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		cmd.Dir = dir
		msg, err := cmd.CombinedOutput()
		require.NoError(tb, err, "building %s in %s: %s", pkg, dir, msg)
		b, err := os.ReadFile(out)
		require.NoError(tb, err)
		built[dir+"\x00"+pkg] = b
		return b
	}
}()

// payload returns the i-th 100-byte test payload, shaped like the records
// of host's BenchmarkIdentity.
func payload(i int) []byte {
	return fmt.Appendf(nil, `{"k":"key-%04d","seq":"%09d","fill":"%s"}`, i%batchSize, i, strings.Repeat("0123456789", 6)[:56])
}

// request returns the ABI request of a batch carrying payloads, one key per
// message, as the runtime builds it for BenchmarkIdentity's records (whose
// 1000 keys make every message of a 1000-message batch a key of its own).
func request(first int, payloads [][]byte) *abi.Request {
	req := &abi.Request{ABI: abi.Version, Computation: "identity", Kind: abi.KindTransform,
		Watermarks: abi.Watermarks{Event: 1, System: 1}, Keys: make([]abi.RequestKey, len(payloads))}
	for j, p := range payloads {
		seq := first + j
		req.Keys[j] = abi.RequestKey{Key: fmt.Sprintf("key-%04d", seq%batchSize), Messages: []abi.Message{{
			ID: fmt.Sprintf("in/p0:%d", seq), Stream: "in",
			EventTimestamp: int64(seq), SystemTimestamp: int64(seq), AlignmentTimestamp: int64(seq),
			Payload: p,
		}}}
	}
	return req
}

func newExtism(tb testing.TB) *extism.Plugin {
	tb.Helper()
	ctx := context.Background()
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: buildGuest(tb, ".", "./guest")}}}
	p, err := extism.NewPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true}, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = p.Close(ctx) })
	return p
}

// newFlowhost compiles the Go SDK identity guest with the engine settings
// of host's BenchmarkIdentity (not interruptible, as Extism without a
// timeout).
func newFlowhost(tb testing.TB) engine.Module {
	tb.Helper()
	ctx := context.Background()
	eng, err := engine.NewWazero(ctx, engine.NewConfig().WithInterruptible(false))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = eng.Close(ctx) })
	mod, err := eng.Compile(ctx, "identity", buildGuest(tb, "../../..", "./host/internal/testguests/identity"))
	require.NoError(tb, err)
	return mod
}

var identityInit = &abi.Init{ABI: abi.Version, Computation: "identity", Kind: abi.KindTransform, OutputStreams: []string{"out"}}

// newComputation is the instance the runtime uses for a partition: it
// encodes each request, calls the guest and decodes the response.
func newComputation(tb testing.TB, mod engine.Module) compute.Computation {
	tb.Helper()
	ctx := context.Background()
	c, err := (&compute.WASM{Module: mod}).Instantiate(ctx, identityInit)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = c.Close(ctx) })
	return c
}

// newInstance is a bare engine instance, initialised as the runtime would.
func newInstance(tb testing.TB, mod engine.Module) engine.Instance {
	tb.Helper()
	ctx := context.Background()
	inst, err := mod.Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = inst.Close(ctx) })
	init, err := abi.EncodeInit(identityInit)
	require.NoError(tb, err)
	_, err = inst.Init(ctx, init)
	require.NoError(tb, err)
	return inst
}

// A path is one way of getting messages through the identity guest. One
// call of round moves batchSize messages.
type path struct {
	name  string
	round func() error
}

// paths sets up every measured path over the same batchSize payloads.
func paths(tb testing.TB) []path {
	tb.Helper()
	ctx := context.Background()
	payloads := make([][]byte, batchSize)
	for i := range payloads {
		payloads[i] = payload(i)
	}
	batch := request(0, payloads)
	single := make([]*abi.Request, batchSize)
	for i := range single {
		single[i] = request(i, payloads[i:i+1])
	}
	encodedBatch, err := abi.EncodeRequest(batch)
	require.NoError(tb, err)
	encodedSingle := make([][]byte, batchSize)
	for i, r := range single {
		encodedSingle[i], err = abi.EncodeRequest(r)
		require.NoError(tb, err)
	}

	plugin := newExtism(tb)
	mod := newFlowhost(tb)
	engineSingle, engineBatch := newInstance(tb, mod), newInstance(tb, mod)
	computeSingle, computeBatch := newComputation(tb, mod), newComputation(tb, mod)

	return []path{
		{"extism", func() error {
			for _, p := range payloads {
				rc, out, err := plugin.Call("identity", p)
				if err != nil || rc != 0 || len(out) != len(p) {
					return fmt.Errorf("extism: rc %d, %d bytes out of %d: %v", rc, len(out), len(p), err)
				}
			}
			return nil
		}},
		{"flowhost-percall", func() error {
			for _, r := range single {
				resp, err := computeSingle.Process(ctx, r)
				if err != nil || len(resp.Keys) != 1 {
					return fmt.Errorf("flowhost per call: %v", err)
				}
			}
			return nil
		}},
		{"flowhost-batched", func() error {
			resp, err := computeBatch.Process(ctx, batch)
			if err != nil || len(resp.Keys) != batchSize {
				return fmt.Errorf("flowhost batched: %v", err)
			}
			return nil
		}},
		{"engine-percall", func() error {
			for _, r := range encodedSingle {
				if _, err := engineSingle.Process(ctx, r); err != nil {
					return err
				}
			}
			return nil
		}},
		{"engine-batched", func() error {
			_, err := engineBatch.Process(ctx, encodedBatch)
			return err
		}},
	}
}

// BenchmarkPerMessage measures each path on its own: ns, allocations and
// bytes allocated per message. One op is a round of 1000 messages.
//
//	extism            plugin.Call("identity", payload), once per message
//	flowhost-percall  compute.WASM's Process (encode request, call, decode
//	                  response) with one message per batch
//	flowhost-batched  the same with 1000 messages per batch: the normal path
//	engine-percall    engine.Instance.Process on a pre-encoded one-message
//	                  request; the response is left undecoded in guest memory
//	engine-batched    the same with a 1000-message request
//
// The whole runtime (routing, merge, batching, sinks) around the batched
// path is host's BenchmarkIdentity.
func BenchmarkPerMessage(b *testing.B) {
	for _, p := range paths(b) {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			cpuBefore, cpuOK := cpuTime()
			for b.Loop() {
				if err := p.round(); err != nil {
					b.Fatal(err)
				}
			}
			cpuAfter, _ := cpuTime()
			goruntime.ReadMemStats(&after)
			msgs := float64(b.N) * batchSize
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
			if cpuOK {
				b.ReportMetric(float64((cpuAfter-cpuBefore).Nanoseconds())/msgs, "cpu-ns/msg")
			}
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/msgs, "allocs/msg")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/msgs, "B/msg")
		})
	}
}

// BenchmarkCompare runs a round of every path in each iteration, so that
// all of them see the same machine load, and reports ns per message of
// each and how many times slower Extism's call is than flowhost's path:
// extism/flowhost-batched against the normal batched path and
// extism/flowhost-percall against a batch of one message, both including
// the host's request encoding and response decoding; extism/engine-*
// against the bare engine call. One op is a round of every path.
//
// Each figure comes in wall time (…-ns/msg, extism/…) and in the process's
// CPU time (…-cpu-ns/msg, extism/…-cpu). On a machine shared with other
// work the CPU-time ratios are the steadier ones: they do not count the
// time a path spent waiting for a core.
//
// The paths share one Go heap, so a path may pay for garbage collection of
// another's allocations; the order rotates every iteration to spread that.
// Extism allocates by far the most, which makes the ratios conservative.
func BenchmarkCompare(b *testing.B) {
	ps := paths(b)
	spent := make([]time.Duration, len(ps))
	spentCPU := make([]time.Duration, len(ps))
	_, cpuOK := cpuTime()
	for iter := 0; b.Loop(); iter++ {
		for k := range ps {
			i := (iter + k) % len(ps)
			cpuStart, _ := cpuTime()
			start := time.Now()
			if err := ps[i].round(); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
			cpuEnd, _ := cpuTime()
			spentCPU[i] += cpuEnd - cpuStart
		}
	}
	wall, cpu := map[string]time.Duration{}, map[string]time.Duration{}
	for i, p := range ps {
		wall[p.name], cpu[p.name] = spent[i], spentCPU[i]
		b.ReportMetric(float64(spent[i].Nanoseconds())/(float64(b.N)*batchSize), p.name+"-ns/msg")
		if cpuOK {
			b.ReportMetric(float64(spentCPU[i].Nanoseconds())/(float64(b.N)*batchSize), p.name+"-cpu-ns/msg")
		}
	}
	// Every path moved the same number of messages, so the ratio of the
	// totals is the ratio per message.
	for _, against := range []string{"flowhost-batched", "flowhost-percall", "engine-batched", "engine-percall"} {
		b.ReportMetric(float64(wall["extism"])/float64(wall[against]), "extism/"+against)
		if cpuOK {
			b.ReportMetric(float64(cpu["extism"])/float64(cpu[against]), "extism/"+against+"-cpu")
		}
	}
}

// TestIdentityAgrees checks that both hosts hand back exactly the bytes
// they were given, through every path the benchmarks measure, including
// the lengths around the Extism guest's 8-byte copy loop.
func TestIdentityAgrees(t *testing.T) {
	ctx := context.Background()
	plugin := newExtism(t)
	mod := newFlowhost(t)
	comp := newComputation(t, mod)
	inst := newInstance(t, mod)

	var payloads [][]byte
	for _, n := range []int{0, 1, 7, 8, 9, 100, 4097} {
		payloads = append(payloads, []byte(strings.Repeat("abcdefghijklm", n/13+1)[:n]))
	}
	for i := 0; i < 3; i++ {
		p := payload(i)
		require.Len(t, p, 100)
		payloads = append(payloads, p)
	}

	for i, p := range payloads {
		rc, fromExtism, err := plugin.Call("identity", p)
		require.NoError(t, err, "payload %d", i)
		require.Zero(t, rc, "payload %d", i)
		require.Equal(t, p, fromExtism, "extism, payload %d", i)

		resp, err := comp.Process(ctx, request(i, [][]byte{p}))
		require.NoError(t, err, "payload %d", i)
		require.Len(t, resp.Keys, 1, "payload %d", i)
		require.Len(t, resp.Keys[0].Emits, 1, "payload %d", i)
		require.Equal(t, fromExtism, resp.Keys[0].Emits[0].Payload, "flowhost per call, payload %d", i)
	}

	batch := request(0, payloads)
	check := func(name string, resp *abi.Response) {
		t.Helper()
		require.Len(t, resp.Keys, len(payloads), name)
		for i, k := range resp.Keys {
			require.Equal(t, batch.Keys[i].Key, k.Key, "%s, key %d", name, i)
			require.Len(t, k.Emits, 1, "%s, key %d", name, i)
			require.Equal(t, "out", k.Emits[0].Stream, "%s, key %d", name, i)
			require.Equal(t, payloads[i], k.Emits[0].Payload, "%s, key %d", name, i)
		}
	}
	resp, err := comp.Process(ctx, batch)
	require.NoError(t, err)
	check("flowhost batched", resp)

	encoded, err := abi.EncodeRequest(batch)
	require.NoError(t, err)
	view, err := inst.Process(ctx, encoded)
	require.NoError(t, err)
	resp, err = abi.DecodeResponse(view, abi.ResponseLimits{})
	require.NoError(t, err)
	check("engine batched", resp)
}
