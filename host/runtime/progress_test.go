package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
)

// A replay reports its progress from 0 to the records that were stored
// past its start position when it started, never backwards, and ends
// finished; the operator view shows the same figures from the gauges.
func TestReplayProgress(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = runReplay(t, st, "")
	require.NoError(t, err)
	var want int64
	for part := range 2 {
		_, end, err := st.SourceRange("events", part)
		require.NoError(t, err)
		want += int64(end) - 100
	}

	var mu sync.Mutex
	var reports []runtime.WorkProgress
	reg := prometheus.NewRegistry()
	pipe := mustSpec(t, fmt.Sprintf(replayPipeline, ""))
	rt, err := runtime.New(pipe, map[string]compute.Factory{"tally": compute.Native(tally)},
		runtime.WithStore(st), runtime.WithSink("sink", &failingSink{}), runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithRegistry(reg),
		runtime.WithReplay(map[string]runtime.Replay{"in": {Offset: 100, ByOffset: true}}),
		runtime.WithWorkProgress(func(p runtime.WorkProgress) { mu.Lock(); reports = append(reports, p); mu.Unlock() }))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(reports), 1)
	require.Equal(t, runtime.WorkProgress{Kind: runtime.WorkReplay, Name: "in", Total: want}, reports[0])
	require.Equal(t, runtime.WorkProgress{Kind: runtime.WorkReplay, Name: "in", Done: want, Total: want, Finished: true}, reports[len(reports)-1])
	for i := 1; i < len(reports); i++ {
		require.Greater(t, reports[i].Done, reports[i-1].Done, "report %d", i)
		require.Equal(t, want, reports[i].Total)
		require.Equal(t, i == len(reports)-1, reports[i].Finished, "report %d", i)
	}

	snap := opview.New(opview.Config{Pipeline: pipe, Status: rt.Status, Gatherer: reg}).Latest()
	require.Len(t, snap.Progress, 1)
	p := snap.Progress[0]
	require.Equal(t, runtime.WorkReplay, p.Kind)
	require.Equal(t, "in", p.Name)
	require.Equal(t, want, p.Done)
	require.Equal(t, want, p.Total)
	require.True(t, p.Finished)
	require.Equal(t, int64(0), *p.ETANanos)
}

// A run without a replay reports no replay.
func TestNoReplayNoProgress(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	var reports []runtime.WorkProgress
	_, err = runReplay(t, st, "", runtime.WithWorkProgress(func(p runtime.WorkProgress) { reports = append(reports, p) }))
	require.NoError(t, err)
	require.Empty(t, reports)
}

// A Kafka source's backlog is the records its topic held when it started,
// and it reaches done: the runtime reports it as kind backlog, named by
// the source.
func TestKafkaBacklogProgress(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, 2, nil)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	kafkatest.Produce(t, brokers, recs...)
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	var mu sync.Mutex
	var reports []runtime.WorkProgress
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, kafkaPipeline(brokers, topic, "")), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}),
		runtime.WithWorkProgress(func(p runtime.WorkProgress) { mu.Lock(); reports = append(reports, p); mu.Unlock() }))
	require.NoError(t, err)
	last := func() runtime.WorkProgress {
		mu.Lock()
		defer mu.Unlock()
		if len(reports) == 0 {
			return runtime.WorkProgress{}
		}
		return reports[len(reports)-1]
	}
	runUntil(t, rt, sink, 5, func() {
		// The source reports after handing its records over, which the
		// sink may see first.
		require.Eventually(t, func() bool { return last().Finished }, 30*time.Second, time.Millisecond)
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, runtime.WorkProgress{Kind: runtime.WorkBacklog, Name: "in", Total: 5}, reports[0])
	require.Equal(t, runtime.WorkProgress{Kind: runtime.WorkBacklog, Name: "in", Done: 5, Total: 5, Finished: true}, reports[len(reports)-1])
	require.Equal(t, 5.0, counterValue(t, rt, runtime.ProgressDoneMetric, map[string]string{"kind": runtime.WorkBacklog, "name": "in"}))
	require.Equal(t, 5.0, counterValue(t, rt, runtime.ProgressTotalMetric, map[string]string{"kind": runtime.WorkBacklog, "name": "in"}))
}
