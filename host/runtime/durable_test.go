package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

const durablePipeline = `
name: durable
sources:
  - name: in
    type: generator
    stream: events
    partitions: 2
    partition_by: [key]
    generator: {count: 4000, keys: 40, seed: 3, payload_bytes: 8}
computations:
  - name: tally
    plugin: tally
    kind: transform
    partitions: 3
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 64}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// tally passes every message on as {"seq":N}, counts each key's messages
// in its state, and keeps one timer per key at the end of time, which
// fires when the input ends and emits {"key":K,"count":N}: the count is
// right only if every message changed the state exactly once.
var tally = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		var n int
		if k.State != nil {
			if err := json.Unmarshal(k.State, &n); err != nil {
				return nil, err
			}
		}
		rk := abi.ResponseKey{Key: k.Key}
		for range k.Timers {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `{"key":%q,"count":%d}`, k.Key, n)})
		}
		for j, m := range k.Messages {
			var p struct{ Seq int }
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return nil, err
			}
			n++
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `{"seq":%d}`, p.Seq), Parents: []uint32{uint32(len(k.Timers) + j)}})
		}
		if len(k.Messages) > 0 {
			rk.TimersSet = []abi.Timer{{TriggerTimestamp: math.MaxInt64 - 1}}
		}
		rk.StateOp = abi.StateReplace
		rk.State = fmt.Appendf(nil, "%d", n)
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
})

// failingSink keeps what it was given until its failAt-th Write, which
// fails: the run stops as after a crash, with the batches committed so
// far in the store.
type failingSink struct {
	mu     sync.Mutex
	writes int
	failAt int // 0: never
	kept   []connect.SinkRecord
}

var errInjected = errors.New("injected sink failure")

func (s *failingSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.writes == s.failAt {
		return errInjected
	}
	s.kept = append(s.kept, recs...)
	return nil
}

func (s *failingSink) Close() error { return nil }

// requireLaneOrder checks the derived-message guarantee on one run's trace,
// resumed or not: per computation partition and key, the records of one
// source partition are delivered in the order of their offsets.
func requireLaneOrder(t *testing.T, run int, trace []byte) {
	t.Helper()
	type lane struct {
		part      int
		key, root string
	}
	last := map[lane]uint64{}
	for i, line := range bytes.Split(bytes.TrimSpace(trace), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r runtime.TraceRecord
		require.NoError(t, json.Unmarshal(line, &r))
		if r.Kind != runtime.TraceMessage {
			continue
		}
		id, err := ordering.ParseMessageID(r.MessageID)
		require.NoError(t, err)
		root := id.Root()
		l := lane{r.Partition, r.Key, fmt.Sprintf("%s/p%d", root.Name, root.Partition)}
		if prev, ok := last[l]; ok {
			require.Greater(t, root.Seq, prev, "run %d, delivery %d: %s after offset %d on lane %+v", run, i, r.MessageID, prev, l)
		}
		last[l] = root.Seq
	}
}

// TestDurableRunResumesExactlyOnce stops a durable run several times at
// random points (a sink failing is fatal: the run ends at once, with
// batches half way through the pipeline) and restarts it on the same
// store each time. Across all runs every message reaches the sink exactly
// once, each key's count, derived from its state, is exact, and every run's
// trace, resumed or not, keeps the per-key order of each source partition.
//
// It runs on both durable storages, and each run opens the store anew, as
// a restarted process does: the embedded pebble store on its directory,
// and the store on Kafka (cluster.OpenStore), restored from its topic.
func TestDurableRunResumesExactlyOnce(t *testing.T) {
	t.Run("pebble", func(t *testing.T) {
		dir := t.TempDir()
		testResumesExactlyOnce(t, func() *store.Store {
			st, err := store.Open(dir, store.Options{})
			require.NoError(t, err)
			return st
		})
	})
	t.Run("kafka", func(t *testing.T) {
		cfg := cluster.StoreConfig{Pipeline: mustSpec(t, durablePipeline), Replication: -1,
			Opts: []kgo.Opt{kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.MetadataMinAge(10 * time.Millisecond)}}
		if os.Getenv("FLOWHOST_KAFKA_BROKERS") != "" {
			cfg.Pipeline.Name = fmt.Sprintf("durable%d", time.Now().UnixNano())
		}
		testResumesExactlyOnce(t, func() *store.Store {
			st, err := cluster.OpenStore(context.Background(), cfg)
			require.NoError(t, err)
			return st
		})
	})
}

func testResumesExactlyOnce(t *testing.T, open func() *store.Store) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	var kept []connect.SinkRecord
	failures := 0
	for run := 0; ; run++ {
		st := open()
		sink := &failingSink{}
		if run < 6 {
			sink.failAt = 1 + rng.IntN(4)
		}
		var trace bytes.Buffer
		rt, err := runtime.New(mustSpec(t, durablePipeline), map[string]compute.Factory{"tally": compute.Native(tally)},
			runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithTrace(&trace))
		require.NoError(t, err)
		err = rt.Run(context.Background())
		require.NoError(t, st.Close())
		requireLaneOrder(t, run, trace.Bytes())
		kept = append(kept, sink.kept...)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, errInjected)
		failures++
		require.Less(t, run, 10, "the run never completed")
	}
	t.Logf("%d failures before the run completed; %d records", failures, len(kept))
	require.GreaterOrEqual(t, failures, 3, "too few runs were stopped to test resuming")

	seqs := map[int]int{}
	counts := map[string]int{}
	for _, r := range kept {
		var p struct {
			Seq   *int
			Key   string
			Count int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if p.Seq != nil {
			seqs[*p.Seq]++
			continue
		}
		_, dup := counts[p.Key]
		require.False(t, dup, "key %s counted twice", p.Key)
		counts[p.Key] = p.Count
	}
	for seq := range 4000 {
		require.Equal(t, 1, seqs[seq], "message %d reached the sink %d times", seq, seqs[seq])
	}
	require.Len(t, seqs, 4000)

	// The reference: the same pipeline in memory, uninterrupted.
	ref := &failingSink{}
	rt, err := runtime.New(mustSpec(t, durablePipeline), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithSink("sink", ref), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	want := map[string]int{}
	for _, r := range ref.kept {
		var p struct {
			Key   string
			Count int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if p.Key != "" {
			want[p.Key] = p.Count
		}
	}
	require.Len(t, want, 40)
	require.Equal(t, want, counts, "state-derived counts differ from an uninterrupted run")

	// A run after completion finds nothing left to do.
	st := open()
	defer st.Close()
	again := &failingSink{}
	rt, err = runtime.New(mustSpec(t, durablePipeline), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithStore(st), runtime.WithSink("sink", again), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Empty(t, again.kept)
	require.True(t, rt.Status().Durable, "a run on a store is durable")
	require.Equal(t, 1.0, counterValue(t, rt, "flowhost_storage_durable", nil))
}

const replayPipeline = `
name: replay
sources:
  - name: in
    type: generator
    stream: events
    partitions: 2
    partition_by: [key]
    generator: {count: 500, keys: 10, seed: 5, payload_bytes: 8}
computations:
  - name: tally
    plugin: tally
    kind: transform
    partitions: 2
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
%s
`

func runReplay(t *testing.T, st *store.Store, retention string, opts ...runtime.Option) (*failingSink, error) {
	t.Helper()
	sink := &failingSink{}
	opts = append([]runtime.Option{runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{})}, opts...)
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(replayPipeline, retention)), map[string]compute.Factory{"tally": compute.Native(tally)}, opts...)
	if err != nil {
		return nil, err
	}
	return sink, rt.Run(context.Background())
}

func seqsOf(t *testing.T, recs []connect.SinkRecord) []int {
	var out []int
	for _, r := range recs {
		var p struct{ Seq *int }
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if p.Seq != nil {
			out = append(out, *p.Seq)
		}
	}
	return out
}

// TestReplayReprocessesFromAnOffset runs a pipeline to its end, then
// replays its source from offset 100 of every partition: exactly the
// records from there on are processed again (their outputs reach the sink
// once more), while the state keeps counting from where it was.
func TestReplayReprocessesFromAnOffset(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	first, err := runReplay(t, st, "")
	require.NoError(t, err)
	require.Len(t, seqsOf(t, first.kept), 500)

	want := 0
	for part := range 2 {
		_, end, err := st.SourceRange("events", part)
		require.NoError(t, err)
		want += int(end) - 100
	}
	again, err := runReplay(t, st, "", runtime.WithReplay(map[string]runtime.Replay{"in": {Offset: 100, ByOffset: true}}))
	require.NoError(t, err)
	require.Len(t, seqsOf(t, again.kept), want, "records from offset 100 of each partition are processed again")

	// By write time: from the beginning of time, everything.
	all, err := runReplay(t, st, "", runtime.WithReplay(map[string]runtime.Replay{"in": {WriteTime: 0}}))
	require.NoError(t, err)
	require.Len(t, seqsOf(t, all.kept), 500)

	// Without a replay, nothing is left to do.
	none, err := runReplay(t, st, "")
	require.NoError(t, err)
	require.Empty(t, seqsOf(t, none.kept))
}

// TestRetentionDeletesConsumedSourceRecords keeps no consumed records
// (retention.sources 0): once the run has routed them they are deleted,
// and a replay from before what is left is refused with the reason.
func TestRetentionDeletesConsumedSourceRecords(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = runReplay(t, st, "retention: {sources: 0s}")
	require.NoError(t, err)
	for part := range 2 {
		first, end, err := st.SourceRange("events", part)
		require.NoError(t, err)
		require.Equal(t, first, end, "partition %d still holds records [%d, %d)", part, first, end)
		read, _, err := st.Read("events", part)
		require.NoError(t, err)
		require.Positive(t, read.Next)
	}
	_, err = runReplay(t, st, "retention: {sources: 0s}", runtime.WithReplay(map[string]runtime.Replay{"in": {Offset: 0, ByOffset: true}}))
	require.ErrorContains(t, err, "no longer retained")
}

// idSource emits records with idempotency keys, each key twice in a row
// and every tenth key again at the end: a producer retrying.
type idSource struct{ n int }

func (s idSource) Run(_ context.Context, emit func(connect.Record) error) error {
	send := func(i int) error {
		return emit(connect.Record{ID: fmt.Sprintf("r%d", i), Write: int64(1000 + i), HasWrite: true,
			Payload: fmt.Appendf(nil, `{"key":"k%d","seq":%d}`, i%5, i)})
	}
	for i := range s.n {
		if err := send(i); err != nil {
			return err
		}
		if err := send(i); err != nil {
			return err
		}
	}
	for i := 0; i < s.n; i += 10 {
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}

// TestIdempotencyKeysAppendARecordOnce sends every record at least twice
// with its idempotency key: each is appended, processed and delivered
// once, in this run and when the same records are sent again after a
// restart.
func TestIdempotencyKeysAppendARecordOnce(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	const n = 300
	for run := range 2 {
		sink := &failingSink{}
		rt, err := runtime.New(mustSpec(t, fmt.Sprintf(replayPipeline, "")), map[string]compute.Factory{"tally": compute.Native(tally)},
			runtime.WithStore(st), runtime.WithSource("in", idSource{n: n}), runtime.WithSink("sink", sink),
			runtime.WithDeadLetter(&bytes.Buffer{}))
		require.NoError(t, err)
		require.NoError(t, rt.Run(context.Background()))
		seqs := seqsOf(t, sink.kept)
		if run == 0 {
			require.Len(t, seqs, n, "each record once")
			slices.Sort(seqs)
			for i, s := range seqs {
				require.Equal(t, i, s)
			}
		} else {
			require.Empty(t, seqs, "records sent again after a restart are still known")
		}
	}
}

// TestIdleDurationZeroTurnsIdleDetectionOff runs a source whose spec says
// idle_partitions.duration: 0, which the spec documents as "off".
func TestIdleDurationZeroTurnsIdleDetectionOff(t *testing.T) {
	p := mustSpec(t, `
name: idle-off
sources:
  - {name: in, type: generator, stream: events, partitions: 2, generator: {count: 10}, watermark: {idle_partitions: {duration: 0s}}}
sinks:
  - {name: sink, type: stdout, streams: [events]}
`)
	sink := &failingSink{}
	rt, err := runtime.New(p, nil, runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Len(t, sink.kept, 10)
}

// TestHTTPIngestIsDurableWhenAcknowledged posts records to an HTTP source
// of a durable run: when the answer arrives, the records are in the store,
// so a client that got its answer never needs to send them again.
func TestHTTPIngestIsDurableWhenAcknowledged(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	src, err := connect.NewHTTPSource(connect.HTTPSourceConfig{Addr: "127.0.0.1:0", Path: "/in", Stream: "events", Partitions: 1})
	require.NoError(t, err)
	p := mustSpec(t, `
name: http-durable
sources:
  - {name: in, type: http, stream: events, http: {listen: "127.0.0.1:0", path: /in}}
sinks:
  - {name: sink, type: stdout, streams: [events]}
`)
	rt, err := runtime.New(p, nil, runtime.WithStore(st), runtime.WithSource("in", src),
		runtime.WithSink("sink", &failingSink{}), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	url := "http://" + src.Addr().String() + "/in"
	total := 0
	for req := 1; req <= 5; req++ {
		var body bytes.Buffer
		for i := range req * 10 {
			fmt.Fprintf(&body, `{"payload":{"n":%d}}`+"\n", i)
		}
		resp, err := http.Post(url, "application/x-ndjson", &body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp.Body.Close()
		total += req * 10
		ip, ok, err := st.Ingest("events", 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, uint64(total), ip.Next, "after request %d's answer, its records are committed", req)
	}
	cancel()
	require.NoError(t, <-done)
}

// TestStreamNamedLikeAComputation names a source stream and a computation
// alike: both send to the same partition, and their messages must neither
// collide in the queues nor break each other's TaskId order.
func TestStreamNamedLikeAComputation(t *testing.T) {
	p := mustSpec(t, `
name: clash
sources:
  - {name: in, type: generator, stream: tally, generator: {count: 300, keys: 5, payload_bytes: 4}}
computations:
  - name: tally
    plugin: tally
    kind: transform
    group_by: [key]
    input_streams: [tally]
    output_streams: [mid]
  - name: both
    plugin: identity
    input_streams: [mid, tally]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
`)
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	sink := &failingSink{}
	midTally := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
		resp, err := tally(ctx, req)
		for i := range resp.Keys {
			for j := range resp.Keys[i].Emits {
				resp.Keys[i].Emits[j].Stream = "mid"
			}
		}
		return resp, err
	})
	rt, err := runtime.New(p, map[string]compute.Factory{"tally": compute.Native(midTally), "both": compute.Native(identity)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Len(t, seqsOf(t, sink.kept), 600, "300 records through tally, and the same 300 read directly")
}

// TestFullDownstreamDoesNotStarveTheWorkerPool runs two levels of
// computations on one worker with a tiny buffer downstream: upstream
// partitions blocked on the full buffer must not hold the only worker
// token the downstream partition needs to drain it.
func TestFullDownstreamDoesNotStarveTheWorkerPool(t *testing.T) {
	p := mustSpec(t, `
name: starve
sources:
  - {name: in, type: generator, stream: events, partitions: 2, partition_by: [key], generator: {count: 3000, keys: 20, payload_bytes: 64}}
computations:
  - name: up
    plugin: identity
    partitions: 2
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 500}
  - name: down
    plugin: identity2
    input_streams: [out]
    output_streams: [out2]
    buffer_bytes: 2KiB
    batch: {max_rows: 4}
sinks:
  - {name: sink, type: stdout, streams: [out2]}
`)
	to := func(stream string) compute.Factory {
		return compute.Native(compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
			resp, err := identity(ctx, req)
			for i := range resp.Keys {
				for j := range resp.Keys[i].Emits {
					resp.Keys[i].Emits[j].Stream = stream
				}
			}
			return resp, err
		}))
	}
	sink := &failingSink{}
	rt, err := runtime.New(p, map[string]compute.Factory{"up": to("out"), "down": to("out2")},
		runtime.WithWorkers(1), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- rt.Run(context.Background()) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the pipeline made no progress: deadlocked on the worker pool")
	}
	require.Len(t, sink.kept, 3000)
}
