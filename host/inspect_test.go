package host_test

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

const inspectPipeline = `
name: inspected
sources:
  - {name: in, type: generator, stream: in, partitions: 2, partition_by: [key], generator: {count: 3000, keys: 7, payload_bytes: 8}}
computations:
  - name: keep
    plugin: keep
    partitions: 2
    group_by: [key]
    input_streams: [in]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// keep stores each key's last payload as its state, sets a timer far in
// the future, and passes messages on.
var keep = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		rk := abi.ResponseKey{Key: k.Key}
		for j, m := range k.Messages {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: m.Payload, Parents: []uint32{uint32(len(k.Timers) + j)}})
			rk.StateOp, rk.State = abi.StateReplace, m.Payload
		}
		if len(k.Messages) > 0 {
			rk.TimersSet = []abi.Timer{{TriggerTimestamp: 1 << 62}}
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
})

// TestInspectShowsPositionsQueuesEpochsTimersAndState stops a durable run
// with messages still queued (a failing sink) and inspects its data
// directory.
func TestInspectShowsPositionsQueuesEpochsTimersAndState(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	p, err := spec.Parse("inspected.yaml", []byte(inspectPipeline))
	require.NoError(t, err)
	rt, err := runtime.New(p, map[string]compute.Factory{"keep": compute.Native(keep)}, runtime.WithStore(st),
		runtime.WithSink("sink", &stopAfter{n: 1}), runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet))
	require.NoError(t, err)
	require.ErrorIs(t, rt.Run(context.Background()), errStop)
	require.NoError(t, st.Close())

	var out bytes.Buffer
	require.NoError(t, host.Inspect(&out, dir, true))
	text := out.String()
	t.Log(text)
	require.Regexp(t, `(?m)^  in\s+p0\s+\[0, \d+\)\s+\d+\s+\d+`, text, "source partition positions")
	require.Regexp(t, `(?m)^  sink:sink\s+[1-9]\d* messages`, text, "the sink's queue holds what it did not take")
	require.Regexp(t, `(?m)^  keep/p[01]\s+[1-9]\d*\s+[1-7]\s+[1-7]\s+\d+ B`, text, "a partition that committed shows its epoch, pending timers and state")

	// Resumed to the end: the queues are empty, every partition has
	// committed, the sink has its position, and each key its state.
	st, err = store.Open(dir, store.Options{})
	require.NoError(t, err)
	rt, err = runtime.New(p, map[string]compute.Factory{"keep": compute.Native(keep)}, runtime.WithStore(st),
		runtime.WithSink("sink", &stopAfter{}), runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.NoError(t, st.Close())
	out.Reset()
	require.NoError(t, host.Inspect(&out, dir, true))
	text = out.String()
	t.Log(text)
	require.Contains(t, text, "queues (committed, not yet consumed)\n  all empty")
	require.Regexp(t, `(?m)^  sink\s+3000 records committed`, text, "the sink's position")
	require.Len(t, regexp.MustCompile(`(?m)^  keep/p[01]\s+[1-9]\d*\s+0\s+[1-7]\s+\d+ B`).FindAllString(text, -1), 2, "epoch, no timers left, keys and state size of both partitions")
	require.Len(t, regexp.MustCompile(`(?m)^  \["k\d"\]\s+\d+ bytes$`).FindAllString(text, -1), 7, "every key's state size")

	missing := t.TempDir() + "/missing"
	err = host.Inspect(io.Discard, missing, false)
	require.ErrorIs(t, err, store.ErrNoStore, "a directory without a store is refused, not created")
	require.NoDirExists(t, missing)
}

func TestInspectShowsAKafkaSinksBatches(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	b.SetSink("k", store.SinkPosition{Records: 40, Batch: 3, Pending: &store.SinkBatch{N: 4, Last: []store.SinkBatchSender{{Computation: "c", Task: 9}}}})
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())
	var out bytes.Buffer
	require.NoError(t, host.Inspect(&out, dir, false))
	require.Regexp(t, `(?m)^  k\s+40 records committed\s+kafka batch 3 committed\s+kafka batch 4 pending`, out.String())
}
