package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runIdentityOn runs the identity pipeline over n records, in memory when
// st is nil and exactly-once on st otherwise, and returns how long it took.
func runIdentityOn(tb testing.TB, st *store.Store, n, partitions int) time.Duration {
	p, err := spec.Parse("identity.yaml", fmt.Appendf(nil, identityPipeline, partitions))
	require.NoError(tb, err)
	sink := &countSink{}
	opts := []runtime.Option{runtime.WithSource("in", memorySource{n: n}), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet)}
	if st != nil {
		opts = append(opts, runtime.WithStore(st))
	}
	rt, err := runtime.New(p, map[string]compute.Factory{"identity": compute.Native(nativeIdentity)}, opts...)
	require.NoError(tb, err)
	start := time.Now()
	require.NoError(tb, rt.Run(context.Background()))
	elapsed := time.Since(start)
	require.Equal(tb, n, sink.n)
	return elapsed
}

// BenchmarkExactlyOnce measures the identity pipeline (native computation,
// 100-byte payloads, 1000 keys) in memory and exactly-once on a store, one
// after the other in every iteration, and reports both rates and their
// ratio: exactly-once costs the fsynced commits of ingest, routing, every
// epoch and the sink, and the queue writes and deletes between them. It
// also reports the bytes the store wrote per message (disk: WAL, flushes
// and compactions, from pebble's metrics; wal: the WAL alone) and the
// process's peak RSS. -records sets the number of messages (200,000 by
// default).
//
//	go test -run '^$' -bench 'ExactlyOnce$' -benchtime 3x ./host/
func BenchmarkExactlyOnce(b *testing.B) {
	n := *benchRecords
	for _, parts := range []int{1, 2} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			var mem, durable time.Duration
			var written store.Written
			var rssMem, rssEO int64
			for range b.N {
				mem += runIdentityOn(b, nil, n, parts)
				rssMem = max(rssMem, peakRSS())
				st, err := store.Open(b.TempDir(), store.Options{})
				require.NoError(b, err)
				durable += runIdentityOn(b, st, n, parts)
				w := st.Written()
				written.WAL += w.WAL
				written.Tables += w.Tables
				require.NoError(b, st.Close())
				rssEO = max(rssEO, peakRSS())
			}
			memRate := float64(n*b.N) / mem.Seconds()
			eoRate := float64(n*b.N) / durable.Seconds()
			b.ReportMetric(memRate, "memory-msgs/s")
			b.ReportMetric(eoRate, "exactly-once-msgs/s")
			b.ReportMetric(eoRate/memRate, "exactly-once/memory")
			b.ReportMetric(float64(written.Total())/float64(n*b.N), "disk-B/msg")
			b.ReportMetric(float64(written.WAL)/float64(n*b.N), "wal-B/msg")
			// The process's peak so far: after the first in-memory run,
			// and after the exactly-once runs (a rise is theirs).
			b.ReportMetric(float64(rssMem)/(1<<20), "peak-RSS-MB-memory")
			b.ReportMetric(float64(rssEO)/(1<<20), "peak-RSS-MB-after-exactly-once")
		})
	}
}

// pacedSource emits records at a fixed rate for a fixed time, each payload
// carrying its emit time, so a sink can measure the end-to-end latency.
type pacedSource struct {
	rate float64
	dur  time.Duration
}

func (s pacedSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / s.rate)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= s.dur {
			return nil
		}
		if wait := time.Until(due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		payload := fmt.Appendf(nil, `{"k":"key-%04d","t":%d,"fill":"0123456789012345678901234567890123456789012345678901"}`, i%1000, time.Now().UnixNano())
		if err := emit(connect.Record{Payload: payload}); err != nil {
			return err
		}
	}
}

// latencySink records, for every record, now minus the emit time in its
// payload.
type latencySink struct {
	mu  sync.Mutex
	lat []time.Duration
}

func (s *latencySink) Write(_ context.Context, recs []connect.SinkRecord) error {
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		var p struct{ T int64 }
		if err := json.Unmarshal(recs[i].Payload, &p); err != nil {
			return err
		}
		s.lat = append(s.lat, time.Duration(now-p.T))
	}
	return nil
}

func (s *latencySink) Close() error { return nil }

func (s *latencySink) quantile(q float64) time.Duration {
	slices.Sort(s.lat)
	return s.lat[min(len(s.lat)-1, int(q*float64(len(s.lat))))]
}

// BenchmarkExactlyOnceLatency measures ingest-to-sink latency of the
// identity pipeline at half of its peak rate: the peak is measured first in
// the same run (exactly-once, 2 partitions), then records are emitted at
// half that rate for 3 seconds, in memory and exactly-once.
//
//	go test -run '^$' -bench ExactlyOnceLatency -benchtime 1x ./host/
func BenchmarkExactlyOnceLatency(b *testing.B) {
	st, err := store.Open(b.TempDir(), store.Options{})
	require.NoError(b, err)
	const n = 100_000
	peak := float64(n) / runIdentityOn(b, st, n, 2).Seconds()
	require.NoError(b, st.Close())
	rate := peak / 2
	b.Logf("peak %.0f msgs/s exactly-once; measuring latency at %.0f msgs/s", peak, rate)
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "exactly-once"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				p, err := spec.Parse("identity.yaml", fmt.Appendf(nil, identityPipeline, 2))
				require.NoError(b, err)
				sink := &latencySink{}
				opts := []runtime.Option{runtime.WithSource("in", pacedSource{rate: rate, dur: 3 * time.Second}),
					runtime.WithSink("sink", sink), runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet)}
				if durable {
					st, err := store.Open(b.TempDir(), store.Options{})
					require.NoError(b, err)
					defer st.Close()
					opts = append(opts, runtime.WithStore(st))
				}
				rt, err := runtime.New(p, map[string]compute.Factory{"identity": compute.Native(nativeIdentity)}, opts...)
				require.NoError(b, err)
				require.NoError(b, rt.Run(context.Background()))
				b.ReportMetric(float64(sink.quantile(0.5).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(sink.quantile(0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(len(sink.lat))/3, "msgs/s")
			}
		})
	}
}

const retainedPipeline = `
name: retained
sources:
  - {name: in, type: generator, stream: in, partitions: 2, partition_by: [key], generator: {count: %d, keys: 1000, payload_bytes: 64}}
computations:
  - name: identity
    plugin: identity
    partitions: 2
    group_by: [key]
    input_streams: [in]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
retention: {sources: 24h}
`

// stopAfter fails the Write that would take it to n records (0: never),
// keeping count of what it took: the run stops at once, as after a kill,
// with the rest of the pipeline in flight.
type stopAfter struct {
	mu   sync.Mutex
	n, k int
}

func (s *stopAfter) Write(_ context.Context, recs []connect.SinkRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n > 0 && s.k+len(recs) >= s.n {
		return errStop // not taken: it is written again after the restart
	}
	s.k += len(recs)
	return nil
}

func (s *stopAfter) Close() error { return nil }

var errStop = fmt.Errorf("stopped")

// BenchmarkRecovery measures how long a restart takes on a store that
// retains 1M source records: a first run processes them and is stopped
// (a fatal error, like a kill) when the sink has taken 90% of them, with
// the rest queued along the pipeline; the measured part opens the store,
// restores every position, queue, state and watermark, and runs the
// pipeline to its end. "open+restore" stops the clock when the runtime is
// built and ready to run.
//
//	go test -run '^$' -bench Recovery -benchtime 1x ./host/
func BenchmarkRecovery(b *testing.B) {
	const n = 1_000_000
	p, err := spec.Parse("retained.yaml", fmt.Appendf(nil, retainedPipeline, n))
	require.NoError(b, err)
	factories := map[string]compute.Factory{"identity": compute.Native(nativeIdentity)}
	for range b.N {
		dir := b.TempDir()
		st, err := store.Open(dir, store.Options{})
		require.NoError(b, err)
		first := &stopAfter{n: n * 9 / 10}
		rt, err := runtime.New(p, factories, runtime.WithStore(st), runtime.WithSink("sink", first),
			runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet))
		require.NoError(b, err)
		require.ErrorIs(b, rt.Run(context.Background()), errStop)
		require.NoError(b, st.Close())

		start := time.Now()
		st, err = store.Open(dir, store.Options{})
		require.NoError(b, err)
		rest := &stopAfter{}
		rt, err = runtime.New(p, factories, runtime.WithStore(st), runtime.WithSink("sink", rest),
			runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet))
		require.NoError(b, err)
		ready := time.Since(start)
		require.NoError(b, rt.Run(context.Background()))
		total := time.Since(start)
		first1, end, err := st.SourceRange("in", 0)
		require.NoError(b, err)
		first2, end2, err := st.SourceRange("in", 1)
		require.NoError(b, err)
		require.Equal(b, uint64(n), end-first1+end2-first2, "every record is retained")
		require.NoError(b, st.Close())
		require.Equal(b, n, first.k+rest.k, "every record reaches the sink once across the restart")
		b.ReportMetric(float64(ready.Microseconds())/1000, "open+restore-ms")
		b.ReportMetric(float64(total.Microseconds())/1000, "resume-to-end-ms")
		b.ReportMetric(float64(rest.k), "records-after-restart")
		b.Logf("the first run delivered %d records before it stopped; the restart delivered %d", first.k, rest.k)
	}
}
