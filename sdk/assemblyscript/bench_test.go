package assemblyscript_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
)

// benchRequest is a batch of keys×perKey messages of size bytes for the
// test guest's computation.
func benchRequest(b *testing.B, computation string, keys, perKey, size int) []byte {
	b.Helper()
	req := &abi.Request{ABI: abi.Version, Computation: computation, Kind: abi.KindTransform, Epoch: 1, Keys: make([]abi.RequestKey, keys)}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	for k := range req.Keys {
		req.Keys[k].Key = fmt.Sprintf(`["user-%d"]`, k)
		req.Keys[k].State = []byte("41")
		for m := range perKey {
			req.Keys[k].Messages = append(req.Keys[k].Messages, abi.Message{ID: fmt.Sprintf("1-in:%d", k*perKey+m), Stream: "in",
				EventTimestamp: int64(m), SystemTimestamp: int64(m), AlignmentTimestamp: int64(m), Payload: payload})
		}
	}
	out, err := abi.EncodeRequest(req)
	require.NoError(b, err)
	return out
}

// BenchmarkProcess measures one flowhost_process call of the test guest
// through the host's engine: decoding the request, the computation, and
// encoding the response.
func BenchmarkProcess(b *testing.B) {
	cases := []struct {
		name, computation, output string
		keys, perKey, size        int
	}{
		{"echo/1x1x100B", "echo", "echo", 1, 1, 100},
		{"echo/10x100x100B", "echo", "echo", 10, 100, 100},
		{"echo/1x10x100KB", "echo", "echo", 1, 10, 100 << 10},
		{"counter/100x10x20B", "counter", "out", 100, 10, 20},
	}
	m, _ := guestModule(b, testGuest)
	ctx := context.Background()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			inst := instantiate(b, m)
			initGuest(b, inst, &abi.Init{ABI: abi.Version, Computation: c.computation, Kind: abi.KindTransform, OutputStreams: []string{c.output}})
			req := benchRequest(b, c.computation, c.keys, c.perKey, c.size)
			b.SetBytes(int64(len(req)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := inst.Process(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
