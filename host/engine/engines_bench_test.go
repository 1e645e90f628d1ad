package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/flowhost/flowhost/host/engine"
)

// BenchmarkEngines runs the same batches through wazero and wasmtime in
// one loop, alternating, and reports each engine's time per batch and
// wasmtime's speed-up over wazero (wazero-ns / wasmtime-ns), so the ratio
// comes from one run on one machine. Workloads: the echo guest (a Go
// guest that reverses the request byte by byte) at 100 B and 100 KB, the
// raw minimal guest (the engine's own per-call cost) and the raw compute
// guest (a tight arithmetic loop of 1M iterations, no memory traffic);
// each with interruptible guests (the default: a context can stop them)
// and uninterruptible ones.
func BenchmarkEngines(b *testing.B) {
	if !engine.WasmtimeAvailable {
		b.Skip("this build has no wasmtime")
	}
	const computeN = 1 << 20
	workloads := []struct {
		name    string
		module  string
		wasm    func(testing.TB) []byte
		request []byte
		check   func([]byte) bool
	}{
		{"echo/100B", "echo", func(tb testing.TB) []byte { return guest(tb, "echo") }, bytes.Repeat([]byte{'x'}, 100),
			func(r []byte) bool { return len(r) == 105 }},
		{"echo/100KB", "echo", func(tb testing.TB) []byte { return guest(tb, "echo") }, bytes.Repeat([]byte{'x'}, 100<<10),
			func(r []byte) bool { return len(r) == 100<<10+5 }},
		{"minimal/100B", "minimal", func(testing.TB) []byte { return minimalGuest() }, bytes.Repeat([]byte{'x'}, 100),
			func(r []byte) bool { return len(r) == 100 }},
		{"compute/1M", "compute", func(testing.TB) []byte { return computeGuest() }, binary.LittleEndian.AppendUint32(nil, computeN),
			func(r []byte) bool { return bytes.Equal(r, computeExpected(computeN)) }},
	}
	for _, mode := range []struct {
		name          string
		interruptible bool
	}{{"interruptible", true}, {"uninterruptible", false}} {
		engines := make([]engine.Engine, len(engineKinds))
		for i, k := range engineKinds {
			engines[i] = k.engine(b, testConfig().WithInterruptible(mode.interruptible))
		}
		for _, w := range workloads {
			b.Run(w.name+"/"+mode.name, func(b *testing.B) {
				insts := make([]engine.Instance, len(engines))
				for i, e := range engines {
					insts[i] = instantiate(b, compileBytes(b, e, w.module, w.wasm(b)))
				}
				ctx := context.Background()
				if mode.interruptible {
					// A deadline, as the runtime sets for a batch timeout:
					// the engines then arm their interruption per call.
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Hour)
					defer cancel()
				}
				spent := make([]time.Duration, len(insts))
				b.SetBytes(int64(len(w.request)))
				for b.Loop() {
					for i, inst := range insts {
						start := time.Now()
						resp, err := inst.Process(ctx, w.request)
						spent[i] += time.Since(start)
						if err != nil || !w.check(resp) {
							b.Fatalf("%s: %d bytes, %v", engineKinds[i].name, len(resp), err)
						}
					}
				}
				n := float64(b.N)
				for i, k := range engineKinds {
					b.ReportMetric(float64(spent[i].Nanoseconds())/n, k.name+"-ns/batch")
				}
				b.ReportMetric(float64(spent[0])/float64(spent[1]), "wasmtime-speedup-x")
			})
		}
	}
}

func init() {
	// engineKinds[0] must be wazero and [1] wasmtime for the ratio above.
	if engineKinds[0].name != "wazero" || engineKinds[1].name != "wasmtime" {
		panic(fmt.Sprintf("engineKinds order changed: %v", engineKinds))
	}
}
