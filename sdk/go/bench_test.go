package flowhost

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/flowhost/flowhost/abi"
)

// BenchmarkProcess measures the guest side of one batch natively: decoding
// a request of 1000 messages (100-byte payloads, 100 keys), running a
// computation that emits one output per message, and encoding the
// response. In WebAssembly expect a multiple of this.
func BenchmarkProcess(b *testing.B) {
	payload := bytes.Repeat([]byte{'x'}, 100)
	req := &abi.Request{ABI: abi.Version, Computation: "bench", Kind: abi.KindTransform}
	for k := range 100 {
		rk := abi.RequestKey{Key: "user-" + strconv.Itoa(k)}
		for m := range 10 {
			rk.Messages = append(rk.Messages, abi.Message{ID: "1-in:" + strconv.Itoa(k*10+m), Stream: "in",
				EventTimestamp: 1_750_000_000_000_000_000, SystemTimestamp: 1_750_000_000_000_000_001, AlignmentTimestamp: 1_750_000_000_000_000_002, Payload: payload})
		}
		req.Keys = append(req.Keys, rk)
	}
	data, err := abi.EncodeRequest(req)
	if err != nil {
		b.Fatal(err)
	}
	g := &guest{comp: &Computation{Process: func(batch *Batch) error {
		for k := range batch.Keys() {
			for m := range k.Messages() {
				k.Emit("out", m.Payload)
			}
		}
		return nil
	}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, status := g.process(data); status != 0 {
			b.Fatal(status)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/message")
}
