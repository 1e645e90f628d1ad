package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
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

// countsOf returns the final count per key of tally's outputs.
func countsOf(t *testing.T, sink *failingSink) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range sink.kept {
		var p struct {
			Key   string
			Count *int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if p.Count != nil {
			out[p.Key] = *p.Count
		}
	}
	return out
}

// payloadsOf returns the payloads sink was given, in no particular order.
func payloadsOf(sink *failingSink) []string {
	var out []string
	for _, r := range sink.kept {
		out = append(out, string(r.Payload))
	}
	return out
}

// TestResetStateReplaysAsAFirstRun replays a finished run's source from
// offset 0: without a reset the counts go on from the first run's
// (doubled); with WithResetState the replay gives exactly the first run's
// outputs and counts.
func TestResetStateReplaysAsAFirstRun(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	first, err := runReplay(t, st, "")
	require.NoError(t, err)
	want := countsOf(t, first)
	require.Len(t, want, 10)
	total := 0
	for _, n := range want {
		total += n
	}
	require.Equal(t, 500, total)

	fromZero := runtime.WithReplay(map[string]runtime.Replay{"in": {Offset: 0, ByOffset: true}})
	reset, err := runReplay(t, st, "", fromZero, runtime.WithResetState())
	require.NoError(t, err)
	require.Equal(t, want, countsOf(t, reset))
	// The same outputs, not necessarily with the same ids: a transform's
	// ids count its outputs and timers in the order its partition merged
	// its inputs and cut its batches, which depends on when the records of
	// the two source partitions arrived (examples/cli_replay_test.go checks
	// the ids of a replay whose order is fixed).
	require.ElementsMatch(t, payloadsOf(first), payloadsOf(reset), "the replay derives the same outputs")

	doubled, err := runReplay(t, st, "", fromZero)
	require.NoError(t, err)
	for k, n := range countsOf(t, doubled) {
		require.Equal(t, 2*want[k], n, "without a reset, key %s counts on from the state of the run before", k)
	}
}

func TestResetStateNeedsAReplay(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = runReplay(t, st, "", runtime.WithResetState())
	require.ErrorContains(t, err, "--from")
}

func TestResetComputationsAreThoseDownstreamOfTheReplayedSources(t *testing.T) {
	p := mustSpec(t, `
name: reset
sources:
  - {name: a-in, type: generator, stream: a, generator: {count: 1}}
  - {name: b-in, type: generator, stream: b, generator: {count: 1}}
computations:
  - {name: only-b, plugin: p, kind: transform, input_streams: [b], output_streams: [bb]}
  - {name: from-a, plugin: p, kind: transform, input_streams: [a], output_streams: [aa]}
  - {name: joins, plugin: p, kind: transform, input_streams: [aa, bb], output_streams: [j]}
  - {name: after-b, plugin: p, kind: transform, input_streams: [bb], output_streams: [bbb]}
sinks:
  - {name: out, type: stdout, streams: [j, bbb]}
`)
	for _, tc := range []struct {
		replayed []string
		want     []string
	}{
		{nil, nil},
		{[]string{"a-in"}, []string{"from-a", "joins"}},
		{[]string{"b-in"}, []string{"only-b", "after-b", "joins"}},
		{[]string{"a-in", "b-in"}, []string{"only-b", "from-a", "joins", "after-b"}},
	} {
		require.ElementsMatch(t, tc.want, runtime.ResetComputations(p, tc.replayed), "replaying %v", tc.replayed)
	}
}

// TestResetReplayStoppedHalfWayResumesTheReplay stops a reset replay at
// its second sink write (as a crash would) and runs again without --from:
// the reset and the replay's progress are committed like any run's, so
// the run goes on with the replay (not from empty state again, not from
// the old state) and the two lives deliver the first run's counts.
func TestResetReplayStoppedHalfWayResumesTheReplay(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	first, err := runReplay(t, st, "")
	require.NoError(t, err)
	want := countsOf(t, first)

	broken := &failingSink{failAt: 2}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(replayPipeline, "")), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithStore(st), runtime.WithSink("sink", broken), runtime.WithDeadLetter(&bytes.Buffer{}),
		runtime.WithReplay(map[string]runtime.Replay{"in": {Offset: 0, ByOffset: true}}), runtime.WithResetState())
	require.NoError(t, err)
	require.ErrorIs(t, rt.Run(context.Background()), errInjected)
	require.Less(t, len(seqsOf(t, broken.kept))+len(countsOf(t, broken)), 500+len(want), "the second write failed, so the first life did not deliver everything")

	rest, err := runReplay(t, st, "")
	require.NoError(t, err)
	// One computation partition may have fired its counts before the
	// failing write (how far each got depends on scheduling): the two lives
	// together give each key's count once, and it is the first run's.
	both := &failingSink{kept: append(broken.kept, rest.kept...)}
	require.Equal(t, want, countsOf(t, both))
	require.Len(t, seqsOf(t, both.kept), 500, "every replayed record reaches the sink once")
	require.Len(t, both.kept, 500+len(want), "and every count once")
}

// TestRetentionCountsFromIngestNotWriteTime ingests records written in
// 1970 and runs the pipeline again at later clock readings: they are kept
// for retention.sources from when they were ingested, then deleted.
func TestRetentionCountsFromIngestNotWriteTime(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	var clock atomic.Int64
	run := func(at time.Duration, records int) {
		t.Helper()
		clock.Store(base + int64(at))
		rt, err := runtime.New(mustSpec(t, fmt.Sprintf(replayPipeline, "retention: {sources: 1h}")), map[string]compute.Factory{"tally": compute.Native(tally)},
			runtime.WithStore(st), runtime.WithSource("in", idSource{n: records}), runtime.WithSink("sink", &failingSink{}),
			runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithClock(clock.Load))
		require.NoError(t, err)
		require.NoError(t, rt.Run(context.Background()))
	}
	retained := func() uint64 {
		first, end, err := st.SourceRange("events", 0)
		require.NoError(t, err)
		return end - first
	}
	run(0, 50)
	require.Equal(t, uint64(50), retained(), "records written in 1970 are kept after the run that ingested them")
	run(59*time.Minute, 0)
	require.Equal(t, uint64(50), retained(), "and for an hour from their ingest")
	run(61*time.Minute, 0)
	require.Zero(t, retained(), "then deleted")
}

// TestRecordsOfAStoreWithoutIngestTimesAreKept opens a store whose source
// records were stored without ingest times (by an earlier flowhost, with
// 1970 write times): the first run gives them its time, so they are still
// there to replay afterwards instead of being deleted at once.
func TestRecordsOfAStoreWithoutIngestTimesAreKept(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	b := st.NewBatch()
	for off := range uint64(10) {
		b.AppendSource("events", 0, off, &ordering.Message{
			ID: ordering.SourceID("events", 0, off), Stream: "events",
			Time:    ordering.Timestamps{Event: 1000, System: 1000, Write: 1000, Alignment: 1000},
			Payload: fmt.Appendf(nil, `{"key":"k%d","seq":%d}`, off%3, off),
		})
	}
	b.SetIngest("events", 0, store.IngestPosition{Next: 10, Clock: 1000})
	b.SetRead("events", 0, store.ReadPosition{Next: 10})
	require.NoError(t, b.Commit())

	run := func(opts ...runtime.Option) *failingSink {
		t.Helper()
		sink := &failingSink{}
		opts = append([]runtime.Option{runtime.WithStore(st), runtime.WithSource("in", idSource{}), runtime.WithSink("sink", sink),
			runtime.WithDeadLetter(&bytes.Buffer{})}, opts...)
		rt, err := runtime.New(mustSpec(t, fmt.Sprintf(replayPipeline, "retention: {sources: 1h}")), map[string]compute.Factory{"tally": compute.Native(tally)}, opts...)
		require.NoError(t, err)
		require.NoError(t, rt.Run(context.Background()))
		return sink
	}
	require.Empty(t, seqsOf(t, run().kept), "everything was routed before")
	replayed := run(runtime.WithReplay(map[string]runtime.Replay{"in": {Offset: 0, ByOffset: true}}))
	require.Len(t, seqsOf(t, replayed.kept), 10)
}
