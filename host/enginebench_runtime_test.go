package host_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/engine"
)

// runtimeBenchGuest is a guest of BenchmarkEnginesThroughRuntime and the
// number of messages one run of the pipeline gives it.
type runtimeBenchGuest struct {
	name string
	pkg  string
	n    int
}

// runtimeBenchGuests: the identity guest, whose time goes to the runtime
// and the ABI, and the compute-heavy one, whose time goes to its own code
// (64 chained SHA-256 sums per message). Each n keeps the slowest
// configuration's run (wazero with limits) at two or three seconds and the
// fastest's (wasmtime) above 0.2 s, where the start of the partition's
// instance (2 ms on wasmtime, 10 ms on wazero, with the compilation
// cache) is 1 to 2% of it.
var runtimeBenchGuests = []runtimeBenchGuest{
	{"identity", "./host/internal/testguests/identity", 20_000},
	{"computeheavy", "./host/internal/testguests/computeheavy", 5_000},
}

// runtimeBenchLimitsTimeout is the batch timeout of the limits=on
// configurations: long enough never to pass, so that it costs what arming
// it costs and nothing more.
const runtimeBenchLimitsTimeout = 10 * time.Second

// runtimeBenchEngines are the engines of this build, wazero first.
func runtimeBenchEngines() []string {
	if engine.WasmtimeAvailable {
		return []string{"wazero", "wasmtime"}
	}
	return []string{"wazero"}
}

// runtimeBenchConfig is one engine with CPU limits on or off.
type runtimeBenchConfig struct {
	engine string
	limits bool
}

func (c runtimeBenchConfig) String() string {
	return fmt.Sprintf("engine=%s/limits=%s", c.engine, runtimeBenchOnOff(c.limits))
}

func runtimeBenchOnOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// runtimeBenchFactory compiles wasm as host.compilePlugin would for a
// plugin on engineName with a batch timeout (limits: interruptible guests
// and compute.WASM's BatchTimeout) or without one (neither), with the
// compilation cache of the other benchmarks.
func runtimeBenchFactory(tb testing.TB, c runtimeBenchConfig, name string, wasm []byte) compute.Factory {
	ctx := context.Background()
	cfg := engine.NewConfig().WithInterruptible(c.limits).WithCompilationCacheDir(benchCacheDir)
	var eng engine.Engine
	var err error
	switch c.engine {
	case "wazero":
		eng, err = engine.NewWazero(ctx, cfg)
	case "wasmtime":
		eng, err = engine.NewWasmtime(cfg)
	default:
		tb.Fatalf("unknown engine %q", c.engine)
	}
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = eng.Close(ctx) })
	mod, err := eng.Compile(ctx, name, wasm)
	require.NoError(tb, err)
	w := &compute.WASM{Module: mod}
	if c.limits {
		w.BatchTimeout = runtimeBenchLimitsTimeout
	}
	return w
}

// runtimeBenchRate runs n messages through the identity pipeline of
// runIdentity on one partition, which checks that all n reach the sink,
// and returns messages per second.
func runtimeBenchRate(tb testing.TB, f compute.Factory, n int) float64 {
	start := time.Now()
	runIdentity(tb, f, n, 1)
	return float64(n) / time.Since(start).Seconds()
}

func runtimeBenchMedian(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkEnginesThroughRuntime measures messages per second through
// the full runtime path of BenchmarkIdentity (source, routing, batching,
// the call, sink; one partition, so that one instance does all the guest
// work), per engine, per guest (identity and a compute-heavy one), with
// CPU limits on (interruptible guests and a 10 s batch timeout that never
// passes, as a plugin with limits.batch_timeout gets) and off
// (uninterruptible guests, no timeout, as a plugin without one gets).
//
// The engine=E/guest=G/limits=L sub-benchmarks measure one configuration
// each. The interleaved/guest=G ones run every configuration of a guest
// in turn, rotating the order, for at least interleavedRounds rounds
// (b.N rounds when more) and report each configuration's median msgs/s,
// and the median over rounds of the ratios measured in the same round:
// on/off per engine (the cost of limits: below 1 is slower) and
// wasmtime/wazero per limits setting (above 1: wasmtime is faster).
// Every run checks that every message reached the sink. Run it with
//
//	go test -run '^$' -bench EnginesThroughRuntime -benchtime 1x ./host/
func BenchmarkEnginesThroughRuntime(b *testing.B) {
	const interleavedRounds = 5
	engines := runtimeBenchEngines()
	if len(engines) < 2 {
		b.Log("this build has no wasmtime: wazero only")
	}
	var configs []runtimeBenchConfig
	for _, e := range engines {
		for _, limits := range []bool{true, false} {
			configs = append(configs, runtimeBenchConfig{e, limits})
		}
	}

	for _, g := range runtimeBenchGuests {
		for _, c := range configs {
			b.Run(fmt.Sprintf("engine=%s/guest=%s/limits=%s", c.engine, g.name, runtimeBenchOnOff(c.limits)), func(b *testing.B) {
				f := runtimeBenchFactory(b, c, g.name, buildGuest(b, g.pkg))
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					runIdentity(b, f, g.n, 1)
				}
				b.ReportMetric(float64(g.n*b.N)/time.Since(start).Seconds(), "msgs/s")
			})
		}
	}

	for _, g := range runtimeBenchGuests {
		b.Run("interleaved/guest="+g.name, func(b *testing.B) {
			wasm := buildGuest(b, g.pkg)
			factories := make([]compute.Factory, len(configs))
			for i, c := range configs {
				factories[i] = runtimeBenchFactory(b, c, g.name, wasm)
			}
			rounds := max(b.N, interleavedRounds)
			rates := make([][]float64, len(configs)) // [config][round]
			b.ResetTimer()
			for r := 0; r < rounds; r++ {
				for j := range configs {
					i := (r + j) % len(configs)
					rates[i] = append(rates[i], runtimeBenchRate(b, factories[i], g.n))
				}
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op") // a round is not an op of this benchmark

			index := func(e string, limits bool) int {
				return slices.Index(configs, runtimeBenchConfig{e, limits})
			}
			// pairedRatio is the median over rounds of a's rate over b's
			// in the same round.
			pairedRatio := func(a, b int) float64 {
				rs := make([]float64, rounds)
				for r := range rs {
					rs[r] = rates[a][r] / rates[b][r]
				}
				return runtimeBenchMedian(rs)
			}
			for i, c := range configs {
				m := runtimeBenchMedian(rates[i])
				b.ReportMetric(m, fmt.Sprintf("%s-%s-msgs/s", c.engine, runtimeBenchOnOff(c.limits)))
				b.Logf("guest=%s %s: median %.0f msgs/s (min %.0f, max %.0f, %d rounds of %d messages)",
					g.name, c, m, slices.Min(rates[i]), slices.Max(rates[i]), rounds, g.n)
			}
			for _, e := range engines {
				on, off := index(e, true), index(e, false)
				x := pairedRatio(on, off)
				b.ReportMetric(x, e+"-on/off-x")
				b.Logf("guest=%s engine=%s: limits on/off %.3f (ratio of medians %.3f)",
					g.name, e, x, runtimeBenchMedian(rates[on])/runtimeBenchMedian(rates[off]))
			}
			if len(engines) > 1 {
				for _, limits := range []bool{true, false} {
					wt, wz := index("wasmtime", limits), index("wazero", limits)
					x := pairedRatio(wt, wz)
					b.ReportMetric(x, runtimeBenchOnOff(limits)+"-wasmtime/wazero-x")
					b.Logf("guest=%s limits=%s: wasmtime/wazero %.3f (ratio of medians %.3f)",
						g.name, runtimeBenchOnOff(limits), x, runtimeBenchMedian(rates[wt])/runtimeBenchMedian(rates[wz]))
				}
			}
		})
	}
}
