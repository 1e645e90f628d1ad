//go:build unix

package host_test

import (
	"bytes"
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
)

// BenchmarkGoGuestAgainstNative runs the identity pipeline of
// BenchmarkIdentityLanguages (one partition, 200,000 messages) with the
// native Go computation and with the Go SDK's identity guest, alternating
// the two in every iteration so that both see the same load, and reports
// the Go guest's speed as a ratio of native's: x-native over wall time,
// cpu-x-native over the process's CPU time (which a shared machine's
// waiting for a core does not inflate), and the module's size. Run it with
//
//	go test -run '^$' -bench GoGuestAgainstNative -benchtime 3x ./host/
func BenchmarkGoGuestAgainstNative(b *testing.B) {
	const n = 200_000
	wasm := buildGuest(b, "./host/internal/testguests/identity")
	guest := wasmFactory(b, wasm)
	native := compute.Native(nativeIdentity)
	runIdentity(b, guest, 1000, 1) // warm the instance pool and the caches alike
	var wall, cpu [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, f := range []compute.Factory{native, guest} {
			start, startCPU := time.Now(), cpuTime()
			runIdentity(b, f, n, 1)
			wall[j] += time.Since(start)
			cpu[j] += cpuTime() - startCPU
		}
	}
	b.StopTimer()
	perSecond := func(d time.Duration) float64 { return float64(n*b.N) / d.Seconds() }
	b.ReportMetric(perSecond(wall[0]), "native-msgs/s")
	b.ReportMetric(perSecond(wall[1]), "go-msgs/s")
	b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "x-native")
	if cpu[1] > 0 {
		b.ReportMetric(cpu[0].Seconds()/cpu[1].Seconds(), "cpu-x-native")
	}
	b.ReportMetric(float64(len(wasm)), "wasm-bytes")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGoGuestBatch calls the Go SDK's identity guest directly, without
// the pipeline around it: one batch of 1000 messages (100 keys, 100-byte
// payloads) per iteration, request encoding, the WebAssembly call and
// response decoding included. It isolates the guest's cost per message
// from the runtime's:
//
//	go test -run '^$' -bench GoGuestBatch -count 3 ./host/
func BenchmarkGoGuestBatch(b *testing.B) {
	ctx := context.Background()
	comp, err := wasmFactory(b, buildGuest(b, "./host/internal/testguests/identity")).Instantiate(ctx,
		&abi.Init{ABI: abi.Version, Computation: "identity", Kind: abi.KindTransform, OutputStreams: []string{"out"}})
	require.NoError(b, err)
	b.Cleanup(func() { _ = comp.Close(ctx) })
	payload := bytes.Repeat([]byte{'x'}, 100)
	req := &abi.Request{ABI: abi.Version, Computation: "identity", Kind: abi.KindTransform}
	for k := range 100 {
		rk := abi.RequestKey{Key: "user-" + strconv.Itoa(k)}
		for m := range 10 {
			rk.Messages = append(rk.Messages, abi.Message{ID: "1-in:" + strconv.Itoa(k*10+m), Stream: "in",
				EventTimestamp: 1_750_000_000_000_000_000, SystemTimestamp: 1_750_000_000_000_000_001,
				AlignmentTimestamp: 1_750_000_000_000_000_002, Payload: payload})
		}
		req.Keys = append(req.Keys, rk)
	}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		resp, err := comp.Process(ctx, req)
		if err != nil || len(resp.Keys) != 100 {
			b.Fatal(err, len(resp.Keys))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/message")
	b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N)/1000, "cpu-ns/message")
}
