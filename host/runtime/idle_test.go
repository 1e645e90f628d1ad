package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
)

// chanSource emits what it is sent until its context is done: a live
// source that is silent when nothing is sent.
type chanSource chan connect.Record

func (s chanSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-s:
			if err := emit(r); err != nil {
				return err
			}
		}
	}
}

const idlePipeline = `
name: idle
sources:
  - {name: busy, type: http, http: {listen: "127.0.0.1:0"}, stream: a, watermark: {out_of_orderness_bound: 0s, idle_partitions: {duration: 1m}}}
  - {name: quiet, type: http, http: {listen: "127.0.0.1:0"}, stream: b, watermark: {out_of_orderness_bound: 0s, idle_partitions: {duration: 1m}}}
computations:
  # max_rows 1: on the scripted clock a batch never lingers long enough
  # to be cut by time, so each message is a batch.
  - {name: count, plugin: window-count, group_by: [user], input_streams: [a, b], output_streams: [counts], batch: {max_rows: 1}}
sinks:
  - {name: sink, type: stdout, streams: [counts]}
`

// windowCounts returns the (window start, count) pairs the sink got.
func windowCounts(t *testing.T, sink *captureSink) [][2]int64 {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var out [][2]int64
	for _, r := range sink.records {
		var p struct {
			Window int64
			Count  int64
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		out = append(out, [2]int64{p.Window, p.Count})
	}
	return out
}

// TestIdleSourceDoesNotHoldBackTimers runs two live sources into one
// window-count computation on a scripted clock: while one source is
// silent, no window closes; once it has been silent for its idle timeout,
// it is left out and the other source's event time closes the windows.
// When the silent source sends again it rejoins, and its late record is
// counted, not dropped.
func TestIdleSourceDoesNotHoldBackTimers(t *testing.T) {
	const sec = int64(time.Second)
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	var clock atomic.Int64
	clock.Store(start)
	busy, quiet := make(chanSource), make(chanSource)
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, idlePipeline), map[string]compute.Factory{"count": compute.Native(windowCount)},
		runtime.WithSource("busy", busy), runtime.WithSource("quiet", quiet), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithClock(clock.Load))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	send := func(s chanSource, event int64, user string) {
		s <- connect.Record{Write: clock.Load(), HasWrite: true, Event: event, HasEvent: true, Payload: []byte(`{"user":"` + user + `"}`)}
	}
	gauge := func(name, label, value string) float64 {
		return counterValue(t, rt, name, map[string]string{label: value})
	}
	for i := range int64(5) {
		send(busy, start+i*sec, "ann")
	}
	// 59s later the quiet source is not idle yet: nothing closes.
	clock.Store(start + 59*sec)
	send(busy, start+10*sec, "ann")
	runtime.CheckIdle(rt)
	require.Equal(t, 0.0, gauge("flowhost_source_idle_partitions", "source", "quiet"))
	require.Equal(t, 0.0, gauge("flowhost_stream_idle", "stream", "b"))
	require.Empty(t, windowCounts(t, sink))

	// At its idle timeout it is left out: windows up to 10s close.
	clock.Store(start + 60*sec)
	send(busy, start+11*sec, "ann") // the busy source stays active
	runtime.CheckIdle(rt)
	require.Equal(t, 1.0, gauge("flowhost_source_idle_partitions", "source", "quiet"))
	require.Equal(t, 0.0, gauge("flowhost_source_idle_partitions", "source", "busy"))
	require.Equal(t, 1.0, gauge("flowhost_stream_idle", "stream", "b"))
	want := [][2]int64{{start, 1}, {start + sec, 1}, {start + 2*sec, 1}, {start + 3*sec, 1}, {start + 4*sec, 1}, {start + 10*sec, 1}}
	require.Eventually(t, func() bool { return len(windowCounts(t, sink)) == len(want) }, 10*time.Second, time.Millisecond,
		"the windows closed by the busy source's watermark")
	require.Equal(t, want, windowCounts(t, sink))

	// The quiet source sends a record far behind: it rejoins, the
	// watermark does not move back, and the late record is counted in a
	// window of its own, closed at once, not dropped.
	send(quiet, start+2*sec, "bob")
	require.Eventually(t, func() bool { return len(windowCounts(t, sink)) == len(want)+1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, [2]int64{start + 2*sec, 1}, windowCounts(t, sink)[len(want)])
	require.Equal(t, 0.0, gauge("flowhost_stream_idle", "stream", "b"))
	late := map[string]string{"computation": "count", "stream": "b"}
	require.Equal(t, 1.0, counterValue(t, rt, "flowhost_late_messages_total", late), "the late record is counted")
}

const relayPipeline = `
name: relay
sources:
  - {name: busy, type: http, http: {listen: "127.0.0.1:0"}, stream: a, watermark: {out_of_orderness_bound: 0s, idle_partitions: {duration: 1m}}}
  - {name: quiet, type: http, http: {listen: "127.0.0.1:0"}, stream: b, partitions: 3, watermark: {out_of_orderness_bound: 0s, idle_partitions: {duration: 1m, max_ratio: 0}}}
computations:
  # max_rows 1: on the scripted clock a batch never lingers long enough
  # to be cut by time, so each message is a batch.
  - {name: relay, plugin: identity, kind: map, partitions: 2, input_streams: [b], output_streams: [out], batch: {max_rows: 1}}
  - {name: count, plugin: window-count, group_by: [user], input_streams: [a, out], output_streams: [counts], batch: {max_rows: 1}}
sinks:
  - {name: sink, type: stdout, streams: [counts]}
`

// TestIdlenessTravelsDownTheGraph feeds the window counter from a busy
// source and, through a relay computation, from a quiet source of three
// partitions (max_ratio 0: no partition alone is ever left out). Once
// every partition of the quiet source is idle, the relay's inputs are all
// idle and its output stream is idle too, so the counter's windows close.
func TestIdlenessTravelsDownTheGraph(t *testing.T) {
	const sec = int64(time.Second)
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	var clock atomic.Int64
	clock.Store(start)
	busy, quiet := make(chanSource), make(chanSource)
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, relayPipeline),
		map[string]compute.Factory{"count": compute.Native(windowCount), "relay": compute.Native(identity)},
		runtime.WithSource("busy", busy), runtime.WithSource("quiet", quiet), runtime.WithSink("sink", sink),
		runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithClock(clock.Load))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	gauge := func(name, label, value string) float64 {
		return counterValue(t, rt, name, map[string]string{label: value})
	}

	rec := func(part int, event int64, user string) connect.Record {
		return connect.Record{Partition: part, Write: clock.Load(), HasWrite: true, Event: event, HasEvent: true, Payload: []byte(`{"user":"` + user + `"}`)}
	}
	// The clock moves only once what was sent has been taken (or, for a
	// read, is a moment from being taken): the checks below hold whether a
	// record is read before or after the next move.
	busy <- rec(0, start+5*sec, "ann")
	clock.Store(start + 30*sec)
	busy <- rec(0, start+6*sec, "ann")
	quiet <- rec(1, start, "bob")
	require.Eventually(t, func() bool { return gauge("flowhost_messages_in_total", "computation", "relay") == 1 }, 10*time.Second, time.Millisecond)

	clock.Store(start + 60*sec)
	busy <- rec(0, start+7*sec, "ann")
	runtime.CheckIdle(rt)
	require.Equal(t, 2.0, gauge("flowhost_source_idle_partitions", "source", "quiet"), "partitions 0 and 2 never had a record")
	require.Equal(t, 0.0, gauge("flowhost_stream_idle", "stream", "b"))
	require.Equal(t, 0.0, gauge("flowhost_stream_idle", "stream", "out"))
	require.Empty(t, windowCounts(t, sink), "partition 1 of the quiet source still holds the watermark back")

	clock.Store(start + 100*sec)
	busy <- rec(0, start+8*sec, "ann")
	clock.Store(start + 121*sec)
	busy <- rec(0, start+8*sec, "ann") // the busy source stays active
	runtime.CheckIdle(rt)
	require.Equal(t, 3.0, gauge("flowhost_source_idle_partitions", "source", "quiet"))
	require.Equal(t, 1.0, gauge("flowhost_stream_idle", "stream", "b"))
	require.Eventually(t, func() bool { return gauge("flowhost_stream_idle", "stream", "out") == 1 }, 10*time.Second, time.Millisecond,
		"the relay, all of whose inputs are idle and with nothing queued, makes its output idle")
	// The busy source's watermark, 8s, closes every window ending by
	// then, bob's too: the relay passed his record on before it turned
	// idle.
	want := [][2]int64{{start, 1}, {start + 5*sec, 1}, {start + 6*sec, 1}, {start + 7*sec, 1}}
	require.Eventually(t, func() bool { return len(windowCounts(t, sink)) == len(want) }, 10*time.Second, time.Millisecond)
	require.ElementsMatch(t, want, windowCounts(t, sink))
}
