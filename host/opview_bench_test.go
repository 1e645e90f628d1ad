package host_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// BenchmarkOperatorView measures what the operator's view costs a run:
// the identity pipeline of BenchmarkIdentity (native, 2 partitions) alone,
// with the view sampling every 10 ms (100 times its default rate), and
// with a live trace of 100 deliveries per partition, in the same run.
// Compare each msgs/s to the baseline's (the ratio is reported too):
//
//	go test -run '^$' -bench OperatorView -benchtime 3x ./host/
func BenchmarkOperatorView(b *testing.B) {
	const n = 200_000
	var baseline float64
	for _, mode := range []string{"baseline", "sampling", "live-trace"} {
		b.Run(mode, func(b *testing.B) {
			p, err := spec.Parse("identity.yaml", fmt.Appendf(nil, identityPipeline, 2))
			require.NoError(b, err)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				reg := prometheus.NewRegistry()
				sink := &countSink{}
				opts := []runtime.Option{runtime.WithSource("in", memorySource{n: n}), runtime.WithSink("sink", sink),
					runtime.WithDeadLetter(io.Discard), runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), runtime.WithRegistry(reg)}
				if mode == "live-trace" {
					opts = append(opts, runtime.WithLiveTrace(100))
				}
				rt, err := runtime.New(p, map[string]compute.Factory{"identity": compute.Native(nativeIdentity)}, opts...)
				require.NoError(b, err)
				stop := func() {}
				if mode == "sampling" {
					view := opview.New(opview.Config{Pipeline: p, Status: rt.Status, Gatherer: reg, Interval: 10 * time.Millisecond})
					stop = view.Start(context.Background())
				}
				require.NoError(b, rt.Run(context.Background()))
				stop()
				require.Equal(b, n, sink.n)
			}
			rate := float64(n*b.N) / time.Since(start).Seconds()
			b.ReportMetric(rate, "msgs/s")
			if mode == "baseline" {
				baseline = rate
			} else if baseline > 0 {
				b.ReportMetric(rate/baseline, "x-baseline")
			}
		})
	}
}
