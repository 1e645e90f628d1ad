package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
)

// Status tells each partition's epoch, last batch, state size and
// watermarks, each stream's watermarks and the latest dead letters.
func TestStatusDetailsPartitionsStreamsAndDeadLetters(t *testing.T) {
	// keep keeps each key's last payload as its state and emits nothing;
	// a payload "bad" fails its key.
	keep := compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
		resp := &abi.Response{}
		for _, k := range req.Keys {
			rk := abi.ResponseKey{Key: k.Key}
			for _, m := range k.Messages {
				if bytes.Contains(m.Payload, []byte("bad")) {
					rk = abi.ResponseKey{Key: k.Key, Error: "refused: bad record"}
					break
				}
				rk.StateOp, rk.State = abi.StateReplace, m.Payload
			}
			resp.Keys = append(resp.Keys, rk)
		}
		return resp, nil
	})
	var recs sliceSource
	const users = 5
	for i := range 100 {
		payload := fmt.Sprintf(`{"user":"u%d","seq":"%03d"}`, i%users, i)
		if i == 50 {
			payload = `{"user":"bad","seq":999}`
		}
		recs = append(recs, record(i%2, int64(1000+i), int64(500+i), payload))
	}
	rt, err := runtime.New(mustSpec(t, strings.Replace(mapPipeline, "kind: map", "kind: transform", 1)), map[string]compute.Factory{"ident": compute.Native(keep)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", &captureSink{}), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.False(t, rt.Status().Durable, "a run without a store is in memory")
	require.Equal(t, 0.0, counterValue(t, rt, "flowhost_storage_durable", nil))

	st := rt.Status()
	require.Len(t, st.Computations, 1)
	parts := st.Computations[0].PartitionDetails
	require.Len(t, parts, 3)
	keys, stateBytes, epochs := 0, int64(0), uint64(0)
	for i, p := range parts {
		require.Equal(t, i, p.Partition)
		require.Zero(t, p.Queued, "everything was processed")
		keys += p.StateKeys
		stateBytes += p.StateBytes
		epochs += p.Epoch
		if p.Epoch > 0 {
			require.Positive(t, p.LastBatchRows)
			require.Positive(t, p.LastBatchAt)
		}
	}
	require.Equal(t, users, keys, "one state per user; the bad key has none")
	require.Equal(t, int64(users*len(`{"user":"u0","seq":"000"}`)), stateBytes)
	require.Positive(t, epochs)

	names := []string{}
	for _, s := range st.Streams {
		names = append(names, s.Name)
		require.True(t, s.Finished, s.Name)
	}
	require.Equal(t, []string{"events", "out"}, names)

	require.Len(t, st.DeadLetters, 1)
	require.Equal(t, "ident", st.DeadLetters[0].Node)
	require.Contains(t, st.DeadLetters[0].Cause, "refused: bad record")
}

// The live trace keeps, per partition, the last deliveries as the trace
// file has them.
func TestRecentDeliveriesAreTheTracesLast(t *testing.T) {
	var recs sliceSource
	for i := range 200 {
		recs = append(recs, record(i%2, int64(1000+i), int64(500+i), fmt.Sprintf(`{"user":"u%d","seq":%d}`, i%7, i)))
	}
	const keep = 5
	var trace bytes.Buffer
	rt, err := runtime.New(mustSpec(t, mapPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", &captureSink{}), runtime.WithDeadLetter(&bytes.Buffer{}),
		runtime.WithTrace(&trace), runtime.WithLiveTrace(keep))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))

	byPart := map[int][]runtime.TraceRecord{}
	dec := json.NewDecoder(&trace)
	for dec.More() {
		var r runtime.TraceRecord
		require.NoError(t, dec.Decode(&r))
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p := range 3 {
		got, err := rt.RecentDeliveries("ident", p)
		require.NoError(t, err)
		all := byPart[p]
		require.Equal(t, all[max(0, len(all)-keep):], got, "partition %d", p)
	}
	_, err = rt.RecentDeliveries("ident", 3)
	require.ErrorContains(t, err, "partitions 0 to 2, not 3")
	_, err = rt.RecentDeliveries("nope", 0)
	require.ErrorContains(t, err, `no computation "nope"`)

	off, err := runtime.New(mustSpec(t, mapPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", sliceSource{}), runtime.WithSink("sink", &captureSink{}), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	_, err = off.RecentDeliveries("ident", 0)
	require.ErrorContains(t, err, "--live-trace")
}
