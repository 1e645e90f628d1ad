package c_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
)

// BenchmarkProcess measures whole flowhost_process calls of C guests in
// wazero: copy in, decode, the computation, encode. "script" is the test
// guest's fuzz script (every API call, 100 keys of 10 messages), "echo" the
// conformance guest echoing one large payload; each with the engine's
// default, interruptible guests, and without (see
// engine.Config.WithInterruptible).
func BenchmarkProcess(b *testing.B) {
	script := &abi.Request{ABI: abi.Version, Computation: "bench", Kind: abi.KindTransform, Keys: []abi.RequestKey{}}
	for k := range 100 {
		rk := abi.RequestKey{Key: fmt.Sprint("key-", k), State: []byte("1,2,3,")}
		for m := range 10 {
			rk.Messages = append(rk.Messages, abi.Message{ID: fmt.Sprint(k, "-", m), Stream: "in", EventTimestamp: int64(m),
				Payload: append([]byte("T"), bytes.Repeat([]byte{'x'}, 99)...)})
		}
		script.Keys = append(script.Keys, rk)
	}
	echo := &abi.Request{ABI: abi.Version, Computation: "bench", Kind: abi.KindTransform, Keys: []abi.RequestKey{
		{Key: "k", Messages: []abi.Message{{ID: "1", Stream: "in", Payload: bytes.Repeat([]byte{'y'}, 100_000)}}},
	}}
	for _, bc := range []struct {
		name, guest string
		req         *abi.Request
	}{
		{"script/100x10", testGuest, script},
		{"echo/100KB", conformanceGuest, echo},
	} {
		for _, interruptible := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/interruptible=%v", bc.name, interruptible), func(b *testing.B) {
				benchmarkProcess(b, bc.guest, bc.req, engine.NewConfig().WithInterruptible(interruptible))
			})
		}
	}
}

func benchmarkProcess(b *testing.B, guest string, request *abi.Request, cfg engine.Config) {
	ctx := context.Background()
	inst, _ := instanceWith(b, guest, cfg)
	initWith(b, inst, "bench", abi.KindTransform, nil, "out", "side")
	req, err := abi.EncodeRequest(request)
	require.NoError(b, err)
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inst.Process(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
