package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowhost/flowhost/host/engine"
)

// BenchmarkProcess measures the per-call overhead of Process on the echo
// guest: alloc, copy in, process, and either the view Process returns or
// the copy a caller would make to keep the response past the next call.
//
// The minimal guest (no Go runtime, answers the request in place) shows the
// engine's own overhead; echo adds what a Go guest costs.
func BenchmarkProcess(b *testing.B) {
	e := newEngine(b, testConfig())
	modules := []struct {
		name     string
		module   engine.Module
		overhead int // response bytes beyond the request
	}{
		{"echo", compile(b, e, "echo"), len("echo:")},
		{"minimal", compileBytes(b, e, "minimal", minimalGuest()), 0},
	}
	for _, mod := range modules {
		for _, size := range []int{100, 100 << 10} {
			req := bytes.Repeat([]byte{'x'}, size)
			for _, mode := range []string{"view", "copy"} {
				b.Run(fmt.Sprintf("%s/%s/%s", mod.name, byteSize(size), mode), func(b *testing.B) {
					inst := instantiate(b, mod.module)
					ctx := context.Background()
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						resp, err := inst.Process(ctx, req)
						if err != nil {
							b.Fatal(err)
						}
						if mode == "copy" {
							resp = bytes.Clone(resp)
						}
						if len(resp) != size+mod.overhead {
							b.Fatalf("response of %d bytes", len(resp))
						}
					}
				})
			}
		}
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkColdStart measures Compile + Instantiate of the echo guest by a
// fresh engine, as after a restart, without a compilation cache and with a
// warm one, in the same run, and reports the speed-up as a ratio.
func BenchmarkColdStart(b *testing.B) {
	wasm := guest(b, "echo")
	ctx := context.Background()
	warm := engine.NewConfig().WithCompilationCacheDir(b.TempDir())
	coldStart := func(cfg engine.Config) time.Duration {
		start := time.Now()
		e, err := engine.NewWazero(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close(ctx)
		m, err := e.Compile(ctx, "echo", wasm)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Instantiate(ctx, engine.NewInstanceConfig()); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	coldStart(warm) // fills the cache

	b.ReportAllocs()
	var uncached, cached time.Duration
	for b.Loop() {
		uncached += coldStart(engine.NewConfig())
		cached += coldStart(warm)
	}
	n := float64(b.N)
	b.ReportMetric(float64(uncached.Nanoseconds())/n, "uncached-ns/op")
	b.ReportMetric(float64(cached.Nanoseconds())/n, "cached-ns/op")
	b.ReportMetric(float64(uncached)/float64(cached), "speedup-x")
}
