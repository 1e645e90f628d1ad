package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// The failure policy (spec.OnFailure). No test sleeps: the wait between
// attempts is replaced by fakeWaits, which records what was asked.

// fakeWaits records the waits before retries and returns at once.
type fakeWaits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *fakeWaits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, d)
	return ctx.Err()
}

func (w *fakeWaits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// seriesValue returns the value of the counter or gauge name{labels} in
// rt's registry, and whether the series exists.
func seriesValue(t *testing.T, rt *runtime.Runtime, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := rt.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func counter(t *testing.T, rt *runtime.Runtime, name, computation, cause string) float64 {
	t.Helper()
	v, _ := seriesValue(t, rt, name, map[string]string{"computation": computation, "cause": cause})
	return v
}

const retryPipeline = `
name: retry
sources:
  - name: in
    type: generator
    stream: events
    generator: {count: 60, keys: 6, seed: 1, payload_bytes: 4}
computations:
  - name: tally
    plugin: tally
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 16}
    on_failure: %s
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// flaky is tally (durable_test.go) failing the first two attempts of the
// batch that pick chooses: the first attempt answers with a response that
// would change every key's state, set a timer and emit, but breaks the
// ABI's rules (cause validate); the second traps (cause call). It records
// every request it is given, by epoch, and counts its instances.
type flaky struct {
	pick      func(req *abi.Request) bool
	mu        sync.Mutex
	target    uint64 // the epoch picked (0: none yet)
	requests  map[uint64][]string
	instances int
}

func newFlaky(pick func(req *abi.Request) bool) *flaky {
	return &flaky{pick: pick, requests: map[uint64][]string{}}
}

func (f *flaky) factory() compute.Factory {
	return compute.FactoryFunc(func(context.Context, *abi.Init) (compute.Computation, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.instances++
		return compute.Func(f.process), nil
	})
}

func (f *flaky) process(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	enc, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.requests[req.Epoch] = append(f.requests[req.Epoch], string(enc))
	attempt := len(f.requests[req.Epoch])
	if f.target == 0 && f.pick(req) {
		f.target = req.Epoch
	}
	failing := f.target == req.Epoch && attempt <= 2
	f.mu.Unlock()
	resp, err := tally(ctx, req)
	if err != nil || !failing {
		return resp, err
	}
	if attempt == 2 {
		return nil, errors.New("trap: unreachable")
	}
	for i := range resp.Keys {
		rk := &resp.Keys[i]
		rk.StateOp, rk.State = abi.StateReplace, []byte("1000")
		rk.TimersSet = append(rk.TimersSet, abi.Timer{TriggerTimestamp: 12345})
		rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: []byte(`{"ghost":true}`)})
	}
	last := &resp.Keys[len(resp.Keys)-1]
	last.Emits = append(last.Emits, abi.Emit{Stream: "undeclared", Payload: []byte(`{}`)})
	return resp, nil
}

// tallied checks tally's output: every one of n messages once, and each
// key counted once, with its count in want.
func tallied(t *testing.T, recs []connect.SinkRecord, n int, want map[string]int) {
	t.Helper()
	seqs := map[int]int{}
	counts := map[string]int{}
	for _, r := range recs {
		var p struct {
			Seq   *int
			Key   string
			Count int
			Ghost bool
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		require.False(t, p.Ghost, "an emit of a failed attempt reached the sink")
		if p.Seq != nil {
			seqs[*p.Seq]++
			continue
		}
		_, dup := counts[p.Key]
		require.False(t, dup, "key %s counted twice", p.Key)
		counts[p.Key] = p.Count
	}
	require.Len(t, seqs, n)
	for seq, times := range seqs {
		require.Equal(t, 1, times, "message %d reached the sink %d times", seq, times)
	}
	require.Equal(t, want, counts, "the keys' counts, from their state")
}

// retryCounts are the keys' counts of retryPipeline run without failures.
func retryCounts(t *testing.T) map[string]int {
	t.Helper()
	sink := &failingSink{}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(retryPipeline, "{}")), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	counts := map[string]int{}
	total := 0
	for _, r := range sink.kept {
		var p struct {
			Key   string
			Count int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if p.Key != "" {
			counts[p.Key] = p.Count
			total += p.Count
		}
	}
	require.Equal(t, 60, total)
	return counts
}

// TestFailedBatchIsRetriedAndCommitsOnce fails the first two attempts of
// one batch, a batch of messages or the batch firing the timers, in
// memory and with a store: the third attempt gets the same request (same
// epoch, inputs, state and due timers), and the epoch commits once, with
// only that attempt's effects: every output once, every key's count
// exact, no timer or output of the failed attempts.
func TestFailedBatchIsRetriedAndCommitsOnce(t *testing.T) {
	picks := map[string]func(req *abi.Request) bool{
		"first batch": func(req *abi.Request) bool { return req.Epoch == 1 },
		"timer batch": func(req *abi.Request) bool {
			return slices.ContainsFunc(req.Keys, func(k abi.RequestKey) bool { return len(k.Timers) > 0 })
		},
	}
	want := retryCounts(t)
	for _, durable := range []bool{false, true} {
		for name, pick := range picks {
			t.Run(fmt.Sprintf("%s, store %v", name, durable), func(t *testing.T) {
				g := newFlaky(pick)
				sink := &failingSink{}
				var dead bytes.Buffer
				opts := []runtime.Option{runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead)}
				var st *store.Store
				if durable {
					var err error
					st, err = store.Open(t.TempDir(), store.Options{})
					require.NoError(t, err)
					defer st.Close()
					opts = append(opts, runtime.WithStore(st))
				}
				rt, err := runtime.New(mustSpec(t, fmt.Sprintf(retryPipeline, "{retries: 3, backoff: 100ms, max_backoff: 150ms}")),
					map[string]compute.Factory{"tally": g.factory()}, opts...)
				require.NoError(t, err)
				waits := &fakeWaits{}
				runtime.SetRetryWait(rt, waits.wait)
				require.NoError(t, rt.Run(context.Background()))

				tallied(t, sink.kept, 60, want)
				require.Empty(t, dead.String())
				require.NotZero(t, g.target, "no batch was picked")
				attempts := g.requests[g.target]
				require.Len(t, attempts, 3, "the picked batch is tried three times")
				require.Equal(t, attempts[0], attempts[1], "a retry is the same request")
				require.Equal(t, attempts[0], attempts[2], "a retry is the same request")
				for epoch, reqs := range g.requests {
					if epoch != g.target {
						require.Len(t, reqs, 1, "epoch %d", epoch)
					}
				}
				require.Equal(t, 3, g.instances, "each retry runs on a fresh instance")
				require.Equal(t, []time.Duration{100 * time.Millisecond, 150 * time.Millisecond}, waits.all(),
					"backoff doubles, capped by max_backoff")

				require.Equal(t, 1.0, counter(t, rt, "flowhost_batch_retries_total", "tally", "validate"))
				require.Equal(t, 1.0, counter(t, rt, "flowhost_batch_retries_total", "tally", "call"))
				require.Equal(t, 1.0, counter(t, rt, "flowhost_guest_errors_total", "tally", "validate"))
				require.Equal(t, 1.0, counter(t, rt, "flowhost_guest_errors_total", "tally", "call"))
				q, ok := seriesValue(t, rt, "flowhost_computation_quarantined", map[string]string{"computation": "tally"})
				require.True(t, ok)
				require.Zero(t, q)

				if durable {
					// Epochs are numbered 1, 2, ... one per batch: the retries
					// committed no epoch of their own.
					meta, ok, err := st.Partition("tally", 0)
					require.NoError(t, err)
					require.True(t, ok)
					require.Len(t, g.requests, int(meta.Epoch))
					for e := uint64(1); e <= meta.Epoch; e++ {
						require.Contains(t, g.requests, e)
					}
					timers, err := st.Timers("tally", 0)
					require.NoError(t, err)
					require.Empty(t, timers, "a timer of a failed attempt was kept")
				}
			})
		}
	}
}

const failPipeline = `
name: fail
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}}
computations:
  - name: ident
    plugin: identity
    kind: map
    group_by: [user]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 1}
    on_failure: %s
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// deadLetterLines decodes a dead-letter buffer.
func deadLetterLines(t *testing.T, dead *bytes.Buffer) []struct{ Stage, Error, Record string } {
	t.Helper()
	var out []struct{ Stage, Error, Record string }
	for _, line := range strings.Split(strings.TrimSpace(dead.String()), "\n") {
		if line == "" {
			continue
		}
		var d struct {
			Stage, Error string
			Record       json.RawMessage
		}
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		out = append(out, struct{ Stage, Error, Record string }{d.Stage, d.Error, string(d.Record)})
	}
	return out
}

// attemptCounter is a map guest that counts its calls per epoch and fails
// every attempt at a batch holding a payload with "poison" (reporting the
// batch failed, with the attempt number), and the key of a payload with
// "badkey".
type attemptCounter struct {
	mu    sync.Mutex
	calls map[uint64]int
}

func (a *attemptCounter) process(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	a.mu.Lock()
	a.calls[req.Epoch]++
	n := a.calls[req.Epoch]
	a.mu.Unlock()
	resp, err := identity(ctx, req)
	if err != nil {
		return nil, err
	}
	for i, k := range req.Keys {
		for _, m := range k.Messages {
			switch {
			case bytes.Contains(m.Payload, []byte("poison")):
				return &abi.Response{Error: fmt.Sprintf("boom on attempt %d", n)}, nil
			case bytes.Contains(m.Payload, []byte("badkey")):
				resp.Keys[i] = abi.ResponseKey{Key: k.Key, Error: "bad key"}
			}
		}
	}
	return resp, nil
}

// TestExhaustedBatchIsDeadLetteredWithTheLastError fails two batches on
// every attempt (then: dead_letter): each of their inputs is dead-lettered
// once, after retries+1 attempts, with the last attempt's error, while the
// other batches go through; a failed key is dead-lettered at once, never
// retried.
func TestExhaustedBatchIsDeadLetteredWithTheLastError(t *testing.T) {
	g := &attemptCounter{calls: map[uint64]int{}}
	recs := sliceSource{
		record(0, 1, 1, `{"user":"a","n":1}`),
		record(0, 2, 2, `{"user":"a","poison":1}`),
		record(0, 3, 3, `{"user":"b","badkey":1}`),
		record(0, 4, 4, `{"user":"a","n":2}`),
		record(0, 5, 5, `{"user":"c","poison":2}`),
		record(0, 6, 6, `{"user":"a","n":3}`),
	}
	sink := &captureSink{}
	var dead bytes.Buffer
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(failPipeline, "{retries: 2, backoff: 10ms, max_backoff: 1s, then: dead_letter, quarantine_after: 0}")),
		map[string]compute.Factory{"ident": compute.Native(g.process)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	waits := &fakeWaits{}
	runtime.SetRetryWait(rt, waits.wait)
	require.NoError(t, rt.Run(context.Background()))

	require.Len(t, sink.records, 3)
	lines := deadLetterLines(t, &dead)
	require.Len(t, lines, 3, "each refused input once")
	require.JSONEq(t, `{"user":"a","poison":1}`, lines[0].Record)
	require.JSONEq(t, `{"user":"b","badkey":1}`, lines[1].Record)
	require.JSONEq(t, `{"user":"c","poison":2}`, lines[2].Record)
	for _, i := range []int{0, 2} {
		require.Equal(t, "guest", lines[i].Stage)
		require.Equal(t, `computation "ident" (plugin "identity") failed the batch: boom on attempt 3 (failed all 3 attempts)`, lines[i].Error)
	}
	require.Contains(t, lines[1].Error, `failed key`)
	require.Contains(t, lines[1].Error, `bad key`)

	// Calls: 3 for each poisoned batch, 1 for every other (the failed key
	// among them).
	var perEpoch []int
	for e := uint64(1); e <= uint64(len(g.calls)); e++ {
		perEpoch = append(perEpoch, g.calls[e])
	}
	require.Equal(t, []int{1, 3, 1, 1, 3, 1}, perEpoch)
	require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}, waits.all())
	require.Equal(t, 4.0, counter(t, rt, "flowhost_batch_retries_total", "ident", "batch"))
	require.Equal(t, 6.0, counter(t, rt, "flowhost_guest_errors_total", "ident", "batch"), "every failed attempt counts")
	require.Equal(t, 1.0, counter(t, rt, "flowhost_guest_errors_total", "ident", "key"))
	_, retriedKey := seriesValue(t, rt, "flowhost_batch_retries_total", map[string]string{"computation": "ident", "cause": "key"})
	require.False(t, retriedKey, "a failed key is not retried")
}

// TestThenStopFailsTheRunAndARestartRetriesTheBatch fails every attempt
// with then: stop: the run stops with an error that says what failed,
// nothing of the batch is committed (its inputs are still queued, no
// state, no timers, no epoch), and a second run on the same store, with a
// guest that now works, processes everything exactly once.
func TestThenStopFailsTheRunAndARestartRetriesTheBatch(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	p := fmt.Sprintf(retryPipeline, "{retries: 1, backoff: 1s, then: stop}")

	var mu sync.Mutex
	var calls int
	var first []string // the message ids of the first request
	broken := compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if first == nil {
			for _, k := range req.Keys {
				for _, m := range k.Messages {
					first = append(first, m.ID)
				}
			}
		}
		return nil, errors.New("trap: out of bounds memory access")
	})
	sink := &failingSink{}
	var dead bytes.Buffer
	rt, err := runtime.New(mustSpec(t, p), map[string]compute.Factory{"tally": compute.Native(broken)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	waits := &fakeWaits{}
	runtime.SetRetryWait(rt, waits.wait)
	err = rt.Run(context.Background())
	require.Error(t, err)
	for _, want := range []string{`computation "tally"`, `plugin "tally"`, `partition 0`, `epoch 1`, `cause call`,
		`all 2 attempts`, `on_failure.then is stop`, `trap: out of bounds memory access`} {
		require.Contains(t, err.Error(), want)
	}
	require.Equal(t, 2, calls)
	require.Equal(t, []time.Duration{time.Second}, waits.all())
	require.Empty(t, sink.kept)
	require.Empty(t, dead.String(), "then: stop dead-letters nothing")

	// Nothing of the batch committed.
	_, ok, err := st.Partition("tally", 0)
	require.NoError(t, err)
	require.False(t, ok, "no epoch of the partition committed")
	timers, err := st.Timers("tally", 0)
	require.NoError(t, err)
	require.Empty(t, timers)
	require.NoError(t, st.States("tally", 0, func(key string, _ []byte) error {
		return fmt.Errorf("state of key %s committed", key)
	}))
	var queued []string
	require.NoError(t, st.Queue(store.Dest{Name: "tally", Partition: 0}, func(_ ordering.Sender, m *ordering.Message) error {
		queued = append(queued, m.ID.String())
		return nil
	}))
	require.NotEmpty(t, first)
	for _, id := range first {
		require.Contains(t, queued, id, "an input of the failed batch left its queue")
	}

	// The guest works again: the restart processes everything once.
	sink = &failingSink{}
	rt, err = runtime.New(mustSpec(t, p), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	tallied(t, sink.kept, 60, retryCounts(t))
	require.Empty(t, dead.String())

	// And a third run finds nothing left.
	sink = &failingSink{}
	rt, err = runtime.New(mustSpec(t, p), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Empty(t, sink.kept)
}

// TestQuarantineStopsCallingTheGuest runs a guest that traps on every
// batch with quarantine_after 2: after two batches failed all their
// attempts the partition is quarantined, the gauge is 1, and the remaining
// batches are dead-lettered without calling the guest. A batch that
// succeeds in between starts the count again.
func TestQuarantineStopsCallingTheGuest(t *testing.T) {
	tests := []struct {
		name     string
		payloads []string
		// calls to the guest, inputs that reach the sink
		calls, passed int
		// the dead-letter errors' telling parts, in order
		dead        []string
		quarantined float64
	}{
		{
			name:     "always failing",
			payloads: []string{`{"user":"a","poison":1}`, `{"user":"a","poison":2}`, `{"user":"a","poison":3}`, `{"user":"b","poison":4}`, `{"user":"a","poison":5}`},
			calls:    4,
			dead: []string{
				`trap: unreachable (failed all 2 attempts)`,
				`trap: unreachable (failed all 2 attempts)`,
				`partition 0 is quarantined: 2 batches in a row failed on every input`,
				`partition 0 is quarantined: 2 batches in a row failed on every input`,
				`partition 0 is quarantined: 2 batches in a row failed on every input`,
			},
			quarantined: 1,
		},
		{
			name:     "a success in between",
			payloads: []string{`{"user":"a","poison":1}`, `{"user":"a"}`, `{"user":"a","poison":2}`, `{"user":"a"}`, `{"user":"a","poison":3}`},
			calls:    8,
			passed:   2,
			dead: []string{
				`trap: unreachable (failed all 2 attempts)`,
				`trap: unreachable (failed all 2 attempts)`,
				`trap: unreachable (failed all 2 attempts)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			calls, instances := 0, 0
			factory := compute.FactoryFunc(func(context.Context, *abi.Init) (compute.Computation, error) {
				mu.Lock()
				instances++
				mu.Unlock()
				return compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
					mu.Lock()
					calls++
					mu.Unlock()
					for _, k := range req.Keys {
						for _, m := range k.Messages {
							if bytes.Contains(m.Payload, []byte("poison")) {
								return nil, errors.New("trap: unreachable")
							}
						}
					}
					return identity(ctx, req)
				}), nil
			})
			var recs sliceSource
			for i, p := range tt.payloads {
				recs = append(recs, record(0, int64(i+1), int64(i+1), p))
			}
			sink := &captureSink{}
			var dead bytes.Buffer
			rt, err := runtime.New(mustSpec(t, fmt.Sprintf(failPipeline, "{retries: 1, backoff: 0s, quarantine_after: 2}")),
				map[string]compute.Factory{"ident": factory},
				runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
			require.NoError(t, err)
			waits := &fakeWaits{}
			runtime.SetRetryWait(rt, waits.wait)
			require.NoError(t, rt.Run(context.Background()))

			require.Equal(t, tt.calls, calls, "calls to the guest")
			require.Len(t, sink.records, tt.passed)
			lines := deadLetterLines(t, &dead)
			require.Len(t, lines, len(tt.dead), "each refused input once")
			for i, want := range tt.dead {
				require.Equal(t, "guest", lines[i].Stage)
				require.Contains(t, lines[i].Error, want, "dead letter %d", i)
				if strings.Contains(want, "quarantined") {
					require.Contains(t, lines[i].Error, `until the run restarts; last error: computation "ident" (plugin "identity"): trap: unreachable`)
				}
			}
			q, ok := seriesValue(t, rt, "flowhost_computation_quarantined", map[string]string{"computation": "ident"})
			require.True(t, ok)
			require.Equal(t, tt.quarantined, q)
			if tt.quarantined == 1 {
				// 1, one per retry (2), one replacing the instance that
				// trapped on the first exhausted batch; none after the
				// quarantine.
				require.Equal(t, 4, instances)
				require.Equal(t, 2.0, counter(t, rt, "flowhost_batch_retries_total", "ident", "call"))
				require.Equal(t, 4.0, counter(t, rt, "flowhost_guest_errors_total", "ident", "call"))
			}
		})
	}
}

// gatedSource emits one record, waits until released, then emits another.
type gatedSource struct{ release <-chan struct{} }

func (s gatedSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	if err := emit(record(0, 1, 1, `{"n":1}`)); err != nil {
		return err
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return emit(record(0, 2, 2, `{"n":2}`))
}

// TestRetryWaitLetsOtherPartitionsRun has one worker for two computations
// reading one stream: while "bad" waits to retry its first batch, "good"
// must be able to process a batch, which it could not if the waiting
// partition kept the worker.
func TestRetryWaitLetsOtherPartitionsRun(t *testing.T) {
	p := mustSpec(t, `
name: two
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}}
computations:
  - {name: bad, plugin: identity, kind: map, input_streams: [events], output_streams: [out], batch: {max_rows: 1}}
  - {name: good, plugin: identity, kind: map, input_streams: [events], output_streams: [good-out], batch: {max_rows: 1}}
sinks:
  - {name: sink, type: stdout, streams: [out]}
  - {name: good-sink, type: stdout, streams: [good-out]}
`)
	waiting := make(chan struct{})    // bad waits to retry
	progressed := make(chan struct{}) // good processed a batch meanwhile
	var badCalls int
	bad := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
		badCalls++ // one partition: never called concurrently
		if badCalls == 1 {
			return nil, errors.New("trap: unreachable")
		}
		return identity(ctx, req)
	})
	var once sync.Once
	good := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
		select {
		case <-waiting:
			once.Do(func() { close(progressed) })
		default:
		}
		resp, err := identity(ctx, req)
		for i := range resp.Keys {
			for j := range resp.Keys[i].Emits {
				resp.Keys[i].Emits[j].Stream = "good-out"
			}
		}
		return resp, err
	})
	sink, goodSink := &captureSink{}, &captureSink{}
	rt, err := runtime.New(p, map[string]compute.Factory{"bad": compute.Native(bad), "good": compute.Native(good)},
		runtime.WithWorkers(1), runtime.WithSource("in", gatedSource{release: waiting}),
		runtime.WithSink("sink", sink), runtime.WithSink("good-sink", goodSink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	runtime.SetRetryWait(rt, func(ctx context.Context, _ time.Duration) error {
		close(waiting) // the source sends its second record, for both
		select {
		case <-progressed:
			return nil
		case <-time.After(10 * time.Second): // a guard against a hang, not a synchronisation
			t.Error("the other computation did not run while a partition waited to retry")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	require.NoError(t, rt.Run(context.Background()))
	require.Equal(t, 3, badCalls, "bad: a failed attempt, its retry, the second record")
	require.Len(t, sink.records, 2)
	require.Len(t, goodSink.records, 2)
}

func TestRetryWaitIsATimerThatStopsWithTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, runtime.WaitRetry(ctx, time.Hour), context.Canceled, "a stopped run ends the wait")
	require.NoError(t, runtime.WaitRetry(context.Background(), 0))
	require.NoError(t, runtime.WaitRetry(context.Background(), time.Microsecond))
}

func TestRetryDelayDoublesUpToMaxBackoff(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		policy spec.OnFailure
		want   []time.Duration // for retries 1, 2, ...
	}{
		{"defaults", spec.OnFailure{Backoff: spec.DefaultBackoff, MaxBackoff: spec.DefaultMaxBackoff},
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}},
		{"capped at once", spec.OnFailure{Backoff: 100 * ms, MaxBackoff: 100 * ms}, []time.Duration{100 * ms, 100 * ms, 100 * ms}},
		{"no wait", spec.OnFailure{}, []time.Duration{0, 0, 0}},
		{"backoff above max (not parsed)", spec.OnFailure{Backoff: time.Second, MaxBackoff: 10 * ms}, []time.Duration{10 * ms, 10 * ms}},
		{"the longest durations", spec.OnFailure{Backoff: 1 << 61, MaxBackoff: 1<<63 - 1}, []time.Duration{1 << 61, 1 << 62, 1<<63 - 1, 1<<63 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				require.Equal(t, want, runtime.RetryDelay(tt.policy, i+1), "retry %d", i+1)
			}
		})
	}
	// A retry far out neither overflows nor takes long to compute.
	require.Equal(t, 5*time.Second, runtime.RetryDelay(spec.OnFailure{Backoff: ms, MaxBackoff: 5 * time.Second}, 1<<40))
}
