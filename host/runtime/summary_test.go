package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// poisonTrap is identity, except that a batch holding a "poison" payload
// traps.
var poisonTrap = compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	for _, k := range req.Keys {
		for _, m := range k.Messages {
			if bytes.Contains(m.Payload, []byte("poison")) {
				return nil, errors.New("trap: unreachable")
			}
		}
	}
	return identity(ctx, req)
})

// TestSummaryCountsWhatTheRunDid checks Summary against runs whose
// outcome is known: records in per source, messages in and out, dead
// letters with their most common cause whichever route they take,
// quarantines, and records out per sink.
func TestSummaryCountsWhatTheRunDid(t *testing.T) {
	rejectsRoute := func(p string) string {
		return strings.Replace(p, "output_streams: [out]", "output_streams: [out]\n    dead_letter: {stream: rejects}", 1) +
			"  - {name: rejected, type: stdout, streams: [rejects]}\n"
	}
	tests := []struct {
		name      string
		payloads  []string
		onFailure string
		spec      func(string) string
		// what the summary must say
		passed, dead, quarantined int
		rejectsOut                int // records the "rejected" sink got
	}{
		{name: "all good", payloads: []string{`{"user":"a"}`, `{"user":"b"}`, `{"user":"c"}`}, onFailure: "{retries: 0}", passed: 3},
		{name: "one poisoned", payloads: []string{`{"user":"a"}`, `{"user":"b","poison":1}`, `{"user":"c"}`}, onFailure: "{retries: 0}",
			passed: 2, dead: 1},
		{name: "quarantined", payloads: []string{`{"user":"a","poison":1}`, `{"user":"b","poison":2}`, `{"user":"c"}`},
			onFailure: "{retries: 0, quarantine_after: 2}", dead: 3, quarantined: 1},
		{name: "dead letters on a stream", payloads: []string{`{"user":"a","poison":1}`, `{"user":"b"}`}, onFailure: "{retries: 0}",
			spec: rejectsRoute, passed: 1, dead: 1, rejectsOut: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs sliceSource
			for i, p := range tt.payloads {
				recs = append(recs, record(0, int64(i+1), int64(i+1), p))
			}
			p := fmt.Sprintf(failPipeline, tt.onFailure)
			if tt.spec != nil {
				p = tt.spec(p)
			}
			sink, rejects := &captureSink{}, &captureSink{}
			var dead bytes.Buffer
			rt, err := runtime.New(mustSpec(t, p), map[string]compute.Factory{"ident": compute.Native(poisonTrap)},
				runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithSink("rejected", rejects),
				runtime.WithDeadLetter(&dead))
			require.NoError(t, err)
			runtime.SetRetryWait(rt, (&fakeWaits{}).wait)
			require.NoError(t, rt.Run(context.Background()))

			s := rt.Summary()
			require.Equal(t, "fail", s.Pipeline)
			require.False(t, s.Interrupted)
			require.Equal(t, []runtime.SourceSummary{{Name: "in", Stream: "events", Records: int64(len(tt.payloads))}}, s.Sources)
			require.Len(t, s.Computations, 1)
			c := s.Computations[0]
			require.Equal(t, "ident", c.Name)
			require.Equal(t, int64(len(tt.payloads)), c.MessagesIn)
			require.Equal(t, int64(tt.passed), c.MessagesOut)
			require.Equal(t, int64(tt.dead), c.DeadLetters)
			require.Len(t, c.Quarantined, tt.quarantined)
			require.Len(t, sink.records, tt.passed)
			if tt.dead == 0 {
				require.Nil(t, c.TopCause)
			} else {
				require.NotNil(t, c.TopCause)
				require.Contains(t, c.TopCause.Error, "trap: unreachable")
				require.LessOrEqual(t, c.TopCause.Count, int64(tt.dead))
			}
			wantSinks := []runtime.SinkSummary{{Name: "sink", Records: int64(tt.passed)}}
			if tt.spec != nil {
				wantSinks = append(wantSinks, runtime.SinkSummary{Name: "rejected", Records: int64(tt.rejectsOut)})
			}
			require.Equal(t, wantSinks, s.Sinks)
			if tt.quarantined > 0 {
				require.Contains(t, s.Quarantined(), "ident")
			} else {
				require.Empty(t, s.Quarantined())
			}
		})
	}
}

// TestStopGraceInterruptsARunningBatchWithoutCommittingIt runs a guest
// that never returns until its call's context is done (as an interrupted
// WebAssembly guest does) and cancels the run: after the grace period the
// call is interrupted, Run returns ErrInterrupted, nothing of the batch is
// committed, and a second run on the store processes it once.
func TestStopGraceInterruptsARunningBatchWithoutCommittingIt(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	p := fmt.Sprintf(retryPipeline, "{retries: 0}")

	started := make(chan struct{})
	var once sync.Once
	spin := compute.Func(func(ctx context.Context, _ *abi.Request) (*abi.Response, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	})
	var dead bytes.Buffer
	sink := &failingSink{}
	rt, err := runtime.New(mustSpec(t, p), map[string]compute.Factory{"tally": compute.Native(spin)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead),
		runtime.WithStopGrace(10*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(ctx) }()
	<-started
	cancel()
	select {
	case err = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its grace period")
	}
	require.ErrorIs(t, err, runtime.ErrInterrupted)
	require.True(t, rt.Summary().Interrupted)
	require.Empty(t, sink.kept)
	require.Empty(t, dead.String(), "an interrupted batch is not dead-lettered")
	_, ok, err := st.Partition("tally", 0)
	require.NoError(t, err)
	require.False(t, ok, "no epoch of the partition committed")
	queued := 0
	require.NoError(t, st.Queue(store.Dest{Name: "tally", Partition: 0}, func(ordering.Sender, *ordering.Message) error {
		queued++
		return nil
	}))
	require.Positive(t, queued, "the batch's inputs are still queued")

	sink = &failingSink{}
	rt, err = runtime.New(mustSpec(t, p), map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	tallied(t, sink.kept, 60, retryCounts(t))
	require.Empty(t, dead.String())
	require.False(t, rt.Summary().Interrupted)
}

// TestSummaryCountsTheTimersLeftPending sets a timer far past the input's
// event time and stops the run: the timer does not fire, and the summary
// says it is pending.
func TestSummaryCountsTheTimersLeftPending(t *testing.T) {
	const p = `
name: later
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}}
computations:
  - name: remind
    plugin: remind
    group_by: [n]
    input_streams: [events]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
`
	remind := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
		resp, err := identity(ctx, req)
		for i, k := range req.Keys {
			for _, m := range k.Messages {
				resp.Keys[i].TimersSet = append(resp.Keys[i].TimersSet, abi.Timer{TriggerTimestamp: m.EventTimestamp + int64(time.Hour)})
			}
		}
		return resp, err
	})
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, p), map[string]compute.Factory{"remind": compute.Native(remind)},
		runtime.WithSource("in", gatedSource{release: make(chan struct{})}), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(ctx) }()
	require.Eventually(t, func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.records) == 1
	}, 30*time.Second, time.Millisecond, "the first record's batch was processed")
	cancel()
	require.NoError(t, <-ran)
	s := rt.Summary()
	require.Equal(t, 1, s.Computations[0].PendingTimers)
	require.Equal(t, int64(1), s.Sources[0].Records)
	require.Equal(t, int64(1), s.Sinks[0].Records)
}
