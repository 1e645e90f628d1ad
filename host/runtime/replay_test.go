package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
)

// roundRobinPipeline is a source without partition_by, read directly by a
// sink: the sink sees every source record's message id.
const roundRobinPipeline = `
name: round-robin
sources:
  - name: in
    type: generator
    stream: events
    partitions: 3
    generator: {count: %d, keys: 4, seed: 9}
sinks:
  - {name: sink, type: stdout, streams: [events]}
`

// idsBySeq runs roundRobinPipeline for count records on st and returns the
// message id the sink saw for each generator seq.
func idsBySeq(t *testing.T, st *store.Store, count int) map[int]string {
	t.Helper()
	sink := &failingSink{}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(roundRobinPipeline, count)), map[string]compute.Factory{},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	out := map[int]string{}
	for _, r := range sink.kept {
		var p struct{ Seq int }
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		out[p.Seq] = r.MessageID
	}
	return out
}

// TestRoundRobinResumesItsTurnAfterARestart stops a round-robin source
// after 7 records (not a multiple of its 3 partitions) and runs it on to
// 20: every record gets the partition and message id it gets in an
// uninterrupted run of 20.
func TestRoundRobinResumesItsTurnAfterARestart(t *testing.T) {
	whole, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer whole.Close()
	want := idsBySeq(t, whole, 20)
	require.Len(t, want, 20)

	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	got := idsBySeq(t, st, 7)
	require.Len(t, got, 7)
	for seq, id := range idsBySeq(t, st, 20) {
		require.NotContains(t, got, seq, "record %d delivered twice", seq)
		got[seq] = id
	}
	require.Equal(t, want, got)
}
