package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/ordering"
)

// fillingSource emits records with 100-byte payloads until the run ends,
// counting those the host accepted.
type fillingSource struct{ accepted *atomic.Int64 }

func (s fillingSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for i := 0; ctx.Err() == nil; i++ {
		if err := emit(connect.Record{Payload: benchRecordPayload(i)}); err != nil {
			return err
		}
		s.accepted.Add(1)
	}
	return ctx.Err()
}

func benchRecordPayload(i int) []byte {
	return fmt.Appendf(nil, `{"user":"u%03d","pad":"%077d"}`, i%1000, i)
}

// BenchmarkBufferFootprint fills the source queue and a partition's
// buffer behind a computation that blocks on its first batch, then
// reports the heap they hold per buffered message beside what the
// buffers count for one (ordering.Message.Footprint), and their ratio:
// at or under 1, buffer_bytes and the source queue's bound are bounds on
// memory. It waits for the source to stop being accepted by polling
// (a benchmark may; a test may not):
//
//	go test -run '^$' -bench BufferFootprint -benchtime 1x ./host/runtime/
func BenchmarkBufferFootprint(b *testing.B) {
	const bufferBytes, sourceQueue = 32 << 20, 32 << 20
	for range b.N {
		release := make(chan struct{})
		var called atomic.Bool
		blocked := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
			if called.CompareAndSwap(false, true) {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return identity(ctx, req)
		})
		pipe := strings.Replace(mapPipeline, "partitions: 3", fmt.Sprintf("partitions: 1\n    buffer_bytes: %d\n    batch: {max_rows: 10}", bufferBytes), 1)
		var accepted atomic.Int64
		goruntime.GC()
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		rt, err := runtime.New(mustSpec(b, pipe), map[string]compute.Factory{"ident": compute.Native(blocked)},
			runtime.WithSource("in", fillingSource{&accepted}), runtime.WithSink("sink", &captureSink{}),
			runtime.WithSourceQueueBytes(sourceQueue), runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithStopGrace(0))
		require.NoError(b, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rt.Run(ctx) }()
		for last := int64(-1); ; {
			time.Sleep(300 * time.Millisecond)
			n := accepted.Load()
			if n == last && called.Load() {
				break
			}
			last = n
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		buffered := accepted.Load()
		heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		counted := (&ordering.Message{Payload: benchRecordPayload(0)}).Footprint()
		b.ReportMetric(float64(buffered), "buffered-msgs")
		b.ReportMetric(heap/float64(buffered), "heap-B/msg")
		b.ReportMetric(float64(counted), "counted-B/msg")
		b.ReportMetric(heap/float64(buffered)/float64(counted), "heap/counted")
		b.ReportMetric(heap/float64(bufferBytes+sourceQueue), "heap/bound")
		close(release)
		cancel()
		<-done
	}
}
