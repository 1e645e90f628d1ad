package benthosbench_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// The flowhost side below repeats, for this module, what host's
// BenchmarkIdentityLanguages/native runs (host/bench_test.go's
// identityPipeline, memorySource, nativeIdentity, countSink), which a test
// file of another package cannot import.

const identityPipeline = `
name: identity
sources:
  - {name: in, type: generator, stream: in, generator: {count: 1}}
computations:
  - name: identity
    plugin: identity
    partitions: 1
    group_by: [k]
    input_streams: [in]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

type memorySource struct{ n int }

func (s memorySource) Run(_ context.Context, emit func(connect.Record) error) error {
	for i := range s.n {
		if err := emit(connect.Record{Write: int64(i), HasWrite: true, Payload: payload(i)}); err != nil {
			return err
		}
	}
	return nil
}

type countSink struct{ n atomic.Int64 }

func (c *countSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	c.n.Add(int64(len(recs)))
	return nil
}
func (c *countSink) Close() error { return nil }

func nativeIdentity(_ context.Context, req *abi.Request) (*abi.Response, error) {
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
}

// runFlowhost runs n records through flowhost's in-memory identity
// pipeline (native computation, one partition) and checks all arrive.
func runFlowhost(tb testing.TB, n int) {
	tb.Helper()
	p, err := spec.Parse("identity.yaml", []byte(identityPipeline))
	must(tb, err)
	sink := &countSink{}
	rt, err := runtime.New(p, map[string]compute.Factory{"identity": compute.Native(nativeIdentity)},
		runtime.WithSource("in", memorySource{n: n}), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(io.Discard), runtime.WithLogger(slog.New(slog.DiscardHandler)))
	must(tb, err)
	must(tb, rt.Run(context.Background()))
	if got := sink.n.Load(); got != int64(n) {
		tb.Fatalf("flowhost delivered %d records, want %d", got, n)
	}
}

func runBenthos(tb testing.TB, proc string, n int) {
	tb.Helper()
	var total atomic.Int64
	run(tb, proc, n, func(b service.MessageBatch) error {
		total.Add(int64(len(b)))
		return nil
	})
	if got := total.Load(); got != int64(n) {
		tb.Fatalf("%s delivered %d records, want %d", proc, got, n)
	}
}

func TestFlowhostSideDeliversEveryRecord(t *testing.T) {
	runFlowhost(t, 2500)
}

// BenchmarkSameProcess runs flowhost's native identity pipeline and both
// Benthos paths on the same records in one process, one after the other
// in every iteration (so a machine busy with other work slows them
// alike), and reports per path msgs/s and cpu-ns/msg, and each Benthos
// path's speed over flowhost's, by wall and by CPU time:
//
//	go test -run '^$' -bench SameProcess -benchtime 1x
func BenchmarkSameProcess(b *testing.B) {
	type path struct {
		name string
		run  func(n int)
	}
	paths := []path{
		{"flowhost-native", func(n int) { runFlowhost(b, n) }},
		{"benthos-noop", func(n int) { runBenthos(b, "flowhost_noop", n) }},
		{"benthos-wazero", func(n int) { runBenthos(b, "flowhost_wazero_identity", n) }},
	}
	for _, p := range paths {
		p.run(50 * batchSize) // warm-up
	}
	n := *records
	wall := make([]time.Duration, len(paths))
	cpu := make([]time.Duration, len(paths))
	b.ResetTimer()
	for range b.N {
		for i, p := range paths {
			c0, _ := cpuTime()
			start := time.Now()
			p.run(n)
			wall[i] += time.Since(start)
			c1, _ := cpuTime()
			cpu[i] += c1 - c0
		}
	}
	b.StopTimer()
	msgs := float64(n * b.N)
	_, cpuOK := cpuTime()
	for i, p := range paths {
		b.ReportMetric(msgs/wall[i].Seconds(), p.name+"-msgs/s")
		if cpuOK {
			b.ReportMetric(float64(cpu[i].Nanoseconds())/msgs, p.name+"-cpu-ns/msg")
		}
	}
	for i := 1; i < len(paths); i++ {
		b.ReportMetric(wall[0].Seconds()/wall[i].Seconds(), fmt.Sprintf("%s/flowhost-speed", paths[i].name))
		if cpuOK && cpu[i] > 0 {
			b.ReportMetric(float64(cpu[0])/float64(cpu[i]), fmt.Sprintf("%s/flowhost-cpu-speed", paths[i].name))
		}
	}
}
