package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/ordering"
)

// countingSource counts the records the host has accepted from it.
type countingSource struct {
	n        int
	accepted *atomic.Int64
}

func (s countingSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for i := 0; i < s.n; i++ {
		payload := fmt.Appendf(nil, `{"user":"u%d","pad":"%0200d"}`, i%13, i)
		if err := emit(connect.Record{Partition: i % 2, Write: int64(i), HasWrite: true, Payload: payload}); err != nil {
			return err
		}
		s.accepted.Add(1)
	}
	return nil
}

// TestSlowComputationHoldsBackItsSource checks backpressure: however slow
// the computation, the source never gets further ahead of it than the
// buffers allow.
func TestSlowComputationHoldsBackItsSource(t *testing.T) {
	const (
		records     = 3000
		bufferBytes = 16 << 10
		sourceQueue = 8 << 10
	)
	// The buffers count footprints; a source record's is its smallest.
	recordSize := (&ordering.Message{Payload: make([]byte, 222)}).Footprint()
	var accepted, processed atomic.Int64
	var maxAhead int64
	slow := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
		for _, k := range req.Keys {
			processed.Add(int64(len(k.Messages)))
		}
		maxAhead = max(maxAhead, accepted.Load()-processed.Load())
		return identity(ctx, req)
	})
	pipe := strings.Replace(mapPipeline, "partitions: 3", fmt.Sprintf("partitions: 1\n    buffer_bytes: %d\n    batch: {max_rows: 10}", bufferBytes), 1)
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, pipe), map[string]compute.Factory{"ident": compute.Native(slow)},
		runtime.WithSource("in", countingSource{n: records, accepted: &accepted}), runtime.WithSink("sink", sink),
		runtime.WithSourceQueueBytes(sourceQueue), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Len(t, sink.records, records, "backpressure loses nothing")
	// In flight at most: the source queue, the partition's buffer (inbox
	// and merge), the batch being processed, and one record in each hand.
	bound := (sourceQueue+bufferBytes)/recordSize + 10 + 4
	require.LessOrEqual(t, maxAhead, bound, "the source ran %d records ahead", maxAhead)
	require.Greater(t, maxAhead, int64(10), "the test must let the source get ahead at all")
}

func counterValue(t *testing.T, rt *runtime.Runtime, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := rt.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metrics
				}
			}
			return metricValue(m)
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestMetricsCountWhatFlowed(t *testing.T) {
	var recs sliceSource
	for i := 0; i < 40; i++ {
		recs = append(recs, record(i%2, int64(i), int64(i), fmt.Sprintf(`{"user":"u%d"}`, i%3)))
	}
	recs = append(recs, record(0, 99, 99, `{"other":1}`))
	rt, err := runtime.New(mustSpec(t, mapPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", &captureSink{}), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Equal(t, 41.0, counterValue(t, rt, "flowhost_source_records_total", map[string]string{"source": "in"}))
	require.Equal(t, 40.0, counterValue(t, rt, "flowhost_messages_in_total", map[string]string{"computation": "ident", "stream": "events"}))
	require.Equal(t, 40.0, counterValue(t, rt, "flowhost_messages_out_total", map[string]string{"computation": "ident", "stream": "out"}))
	require.Equal(t, 40.0, counterValue(t, rt, "flowhost_sink_records_total", map[string]string{"sink": "sink"}))
	require.Equal(t, 1.0, counterValue(t, rt, "flowhost_dead_letters_total", map[string]string{"stage": "key"}))
	require.Equal(t, 0.0, counterValue(t, rt, "flowhost_stream_buffered_messages", map[string]string{"stream": "events"}), "nothing left buffered")
	require.Greater(t, counterValue(t, rt, "flowhost_batch_rows", map[string]string{"computation": "ident"}), 0.0)
	// The output stream's watermark reached the end of the data.
	require.Greater(t, counterValue(t, rt, "flowhost_stream_event_watermark_seconds", map[string]string{"stream": "out"}), 1e9)
}

// endlessSource emits records until the host stops taking them.
type endlessSource struct{ accepted *atomic.Int64 }

func (s endlessSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := emit(connect.Record{Partition: i % 2, Write: int64(i), HasWrite: true, Payload: fmt.Appendf(nil, `{"user":"u%d"}`, i%5)}); err != nil {
			return err
		}
		s.accepted.Add(1)
	}
}

// TestInterruptDeliversEverythingAccepted cancels a run whose source never
// ends: Run returns without error once every record the source had
// accepted has reached the sink.
func TestInterruptDeliversEverythingAccepted(t *testing.T) {
	var accepted atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	sink := &cancelAfter{n: 500, cancel: cancel}
	rt, err := runtime.New(mustSpec(t, mapPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", endlessSource{&accepted}), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(ctx))
	require.GreaterOrEqual(t, int64(sink.total()), int64(500))
	require.Equal(t, accepted.Load(), int64(sink.total()), "every accepted record was delivered")
}

// cancelAfter is a sink that cancels the run once it has seen n records.
type cancelAfter struct {
	captureSink
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(ctx context.Context, recs []connect.SinkRecord) error {
	if err := c.captureSink.Write(ctx, recs); err != nil {
		return err
	}
	if c.total() >= c.n {
		c.cancel()
	}
	return nil
}

func (c *cancelAfter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}
