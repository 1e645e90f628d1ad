package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// sliceSource emits fixed records, then ends.
type sliceSource []connect.Record

func (s sliceSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for _, r := range s {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

// captureSink keeps every record it is given.
type captureSink struct {
	mu      sync.Mutex
	records []connect.SinkRecord
	closed  bool
}

func (c *captureSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, recs...)
	return nil
}

func (c *captureSink) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func mustSpec(t testing.TB, yaml string) *spec.Pipeline {
	t.Helper()
	// In a temporary directory, so that paths the spec leaves relative
	// (the default dead-letter file) do not land in the source tree.
	p, err := spec.Parse(filepath.Join(t.TempDir(), "test.yaml"), []byte(yaml))
	require.NoError(t, err)
	return p
}

// identity emits every message unchanged on stream out, naming it as the
// only parent.
var identity = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		rk := abi.ResponseKey{Key: k.Key}
		for j, m := range k.Messages {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: m.Payload, Parents: []uint32{uint32(len(k.Timers) + j)}})
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
})

func record(part int, write, event int64, payload string) connect.Record {
	return connect.Record{Partition: part, Write: write, HasWrite: true, Event: event, HasEvent: true, Payload: []byte(payload)}
}

const mapPipeline = `
name: ident
sources:
  - {name: in, type: generator, stream: events, partitions: 2, generator: {count: 1}}
computations:
  - name: ident
    plugin: identity
    kind: map
    partitions: 3
    group_by: [user]
    input_streams: [events]
    output_streams: [out]
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

func TestMapInheritsTimestampsAndKeepsPerKeyOrder(t *testing.T) {
	var recs sliceSource
	for i := 0; i < 300; i++ {
		recs = append(recs, record(i%2, int64(1000+i), int64(500+i), fmt.Sprintf(`{"user":"u%d","seq":%d}`, i%7, i)))
	}
	sink := &captureSink{}
	var trace bytes.Buffer
	rt, err := runtime.New(mustSpec(t, mapPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithTrace(&trace),
		runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))

	require.True(t, sink.closed)
	require.Len(t, sink.records, len(recs))
	lastSeq := map[string]int{}
	for _, r := range sink.records {
		var p struct {
			User string
			Seq  int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		src := recs[p.Seq]
		// A map output inherits every timestamp but Write from its parent.
		require.Equal(t, src.Event, r.EventTS)
		require.Equal(t, src.Write, r.AlignmentTS, "alignment = parent's = its write ts")
		require.Equal(t, int64(0), r.WriteTS)
		require.Len(t, r.Parents, 1)
		parent, err := ordering.ParseMessageID(r.Parents[0])
		require.NoError(t, err)
		require.Equal(t, parent.Derive("out", 0).String(), r.MessageID, "a map output's id derives from its parent's")
		// Messages of one source partition and one key keep their order.
		lane := fmt.Sprintf("%d/%s", p.Seq%2, p.User)
		if prev, ok := lastSeq[lane]; ok {
			require.Less(t, prev, p.Seq, "lane %s out of order", lane)
		}
		lastSeq[lane] = p.Seq
	}
	lines := strings.Split(strings.TrimSpace(trace.String()), "\n")
	require.Len(t, lines, len(recs), "one trace line per delivery")
}

// windowCount counts messages per key in tumbling windows of one second of
// event time and emits each window's count when its timer fires: the
// keyed-state-plus-timers pattern Flow builds windows from.
var windowCount = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	const window = int64(1e9)
	resp := &abi.Response{}
	for _, k := range req.Keys {
		counts := map[int64]int{}
		if k.State != nil {
			if err := json.Unmarshal(k.State, &counts); err != nil {
				return nil, err
			}
		}
		rk := abi.ResponseKey{Key: k.Key}
		for i, tm := range k.Timers {
			start := tm.TriggerTimestamp - window
			out, _ := json.Marshal(map[string]any{"key": k.Key, "window": start, "count": counts[start]})
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "counts", Payload: out, Parents: []uint32{uint32(i)}})
			delete(counts, start)
		}
		for _, m := range k.Messages {
			start := m.EventTimestamp / window * window
			if counts[start] == 0 {
				rk.TimersSet = append(rk.TimersSet, abi.Timer{TriggerTimestamp: start + window})
			}
			counts[start]++
		}
		if len(counts) == 0 {
			if k.State != nil {
				rk.StateOp = abi.StateDelete
			}
		} else {
			st, _ := json.Marshal(counts)
			rk.StateOp, rk.State = abi.StateReplace, st
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
})

const windowPipeline = `
name: windows
sources:
  - name: in
    type: generator
    stream: events
    partitions: 2
    generator: {count: 1}
    watermark: {out_of_orderness_bound: 0s}
computations:
  - name: count
    plugin: window-count
    partitions: 2
    group_by: [user]
    input_streams: [events]
    output_streams: [counts]
    batch: {max_rows: 7}
sinks:
  - {name: sink, type: stdout, streams: [counts]}
`

func TestWindowCountClosesEveryWindowOnce(t *testing.T) {
	var recs sliceSource
	want := map[string]int{}
	for i := 0; i < 500; i++ {
		event := int64(i) * 37e6 // 37 ms apart: about 27 per second
		user := fmt.Sprintf("u%d", i%5)
		recs = append(recs, record(i%2, event, event, fmt.Sprintf(`{"user":%q}`, user)))
		want[fmt.Sprintf(`["%s"]/%d`, user, event/1e9*1e9)]++
	}
	sink := &captureSink{}
	var trace bytes.Buffer
	rt, err := runtime.New(mustSpec(t, windowPipeline), map[string]compute.Factory{"count": compute.Native(windowCount)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithTrace(&trace),
		runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))

	got := map[string]int{}
	for _, r := range sink.records {
		var p struct {
			Key    string
			Window int64
			Count  int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		id := fmt.Sprintf("%s/%d", p.Key, p.Window)
		_, dup := got[id]
		require.False(t, dup, "window %s closed twice", id)
		got[id] = p.Count
	}
	require.Equal(t, want, got)

	// Timers fire at TriggerTimestamp <= watermark and, per key, in
	// trigger order; within a batch a key's timers precede its messages.
	type delivery struct {
		Kind, Key string
		TriggerTS int64 `json:"trigger_ts"`
		Epoch     uint64
		Partition int
	}
	lastTrigger := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(trace.String()), "\n") {
		var d delivery
		require.NoError(t, json.Unmarshal([]byte(line), &d))
		if d.Kind == runtime.TraceTimer {
			require.Greater(t, d.TriggerTS, lastTrigger[d.Key], "timers of %s out of order", d.Key)
			lastTrigger[d.Key] = d.TriggerTS
		}
	}
}

func TestKeyErrorsGoToDeadLetterAndNothingIsLost(t *testing.T) {
	recs := sliceSource{
		record(0, 1, 1, `{"user":"a"}`),
		record(0, 2, 2, `{"nouser":true}`),
		record(1, 3, 3, `not json`),
		record(1, 4, 4, `{"user":"b"}`),
	}
	sink := &captureSink{}
	var dead bytes.Buffer
	rt, err := runtime.New(mustSpec(t, mapPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Len(t, sink.records, 2)
	lines := strings.Split(strings.TrimSpace(dead.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], `payload lacks group_by field`)
	require.Contains(t, lines[0], `"record":{"nouser":true}`)
	require.Contains(t, lines[1], `"record":"not json"`)
}

func TestGuestFailureDeadLettersTheBatchAndReplacesTheInstance(t *testing.T) {
	var instances int
	var mu sync.Mutex
	factory := compute.FactoryFunc(func(context.Context, *abi.Init) (compute.Computation, error) {
		mu.Lock()
		instances++
		mu.Unlock()
		return compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
			for _, k := range req.Keys {
				for _, m := range k.Messages {
					if strings.Contains(string(m.Payload), "poison") {
						return nil, fmt.Errorf("trap: unreachable")
					}
				}
			}
			return identity(ctx, req)
		}), nil
	})
	// Without retries (on_failure.retries 0): the poisoned batch fails
	// once and the next batch runs on the one replacement.
	p := mustSpec(t, strings.Replace(mapPipeline, "partitions: 3", "partitions: 1\n    batch: {max_rows: 1}\n    on_failure: {retries: 0}", 1))
	recs := sliceSource{record(0, 1, 1, `{"user":"a"}`), record(0, 2, 2, `{"user":"a","poison":1}`), record(0, 3, 3, `{"user":"a"}`)}
	sink := &captureSink{}
	var dead bytes.Buffer
	rt, err := runtime.New(p, map[string]compute.Factory{"ident": factory},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Len(t, sink.records, 2)
	require.Contains(t, dead.String(), "poison")
	require.Contains(t, dead.String(), "trap: unreachable")
	require.Equal(t, 2, instances, "the failed instance was replaced")
}

const joinPipeline = `
name: join
sources:
  - {name: orders-in, type: generator, stream: orders, generator: {count: 1}}
  - {name: payments-in, type: generator, stream: payments, generator: {count: 1}}
computations:
  - name: join
    plugin: join
    group_by: [id]
    input_streams: [orders, payments]
    output_streams: [out]
    input_ordering: {stream_delays: {payments: 2s}}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// TestTraceShowsCrossStreamPriority checks the trace's priority fields:
// priority_ts = alignment_ts + bias + delay, with the configured delay.
func TestTraceShowsCrossStreamPriority(t *testing.T) {
	var orders, payments sliceSource
	for i := 0; i < 50; i++ {
		orders = append(orders, record(0, int64(i)*1e9, int64(i)*1e9, fmt.Sprintf(`{"id":%d}`, i)))
		payments = append(payments, record(0, int64(i)*1e9+5e9, int64(i)*1e9, fmt.Sprintf(`{"id":%d}`, i)))
	}
	var trace bytes.Buffer
	rt, err := runtime.New(mustSpec(t, joinPipeline), map[string]compute.Factory{"join": compute.Native(identity)},
		runtime.WithSource("orders-in", orders), runtime.WithSource("payments-in", payments),
		runtime.WithSink("sink", &captureSink{}), runtime.WithTrace(&trace), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	var recs []runtime.TraceRecord
	for _, line := range strings.Split(strings.TrimSpace(trace.String()), "\n") {
		var r runtime.TraceRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		recs = append(recs, r)
	}
	require.Len(t, recs, 100)
	for _, r := range recs {
		require.Equal(t, r.AlignmentTS+r.Bias+r.Delay, r.PriorityTS)
		if r.Stream == "payments" {
			require.Equal(t, int64(2e9), r.Delay)
			require.LessOrEqual(t, r.Bias, int64(0), "payments' events precede their writes")
		} else {
			require.Equal(t, int64(0), r.Delay)
		}
	}
	// Inside one stream, deliveries follow (alignment_ts, message_id).
	byStream := map[string][]runtime.TraceRecord{}
	for _, r := range recs {
		byStream[r.Stream] = append(byStream[r.Stream], r)
	}
	for s, rs := range byStream {
		require.True(t, sort.SliceIsSorted(rs, func(i, j int) bool { return rs[i].AlignmentTS < rs[j].AlignmentTS }), "stream %s", s)
	}
}

func TestDeadLetterStreamCarriesRejectsAsMessages(t *testing.T) {
	p := mustSpec(t, strings.Replace(mapPipeline, "output_streams: [out]", "output_streams: [out]\n    dead_letter: {stream: rejects}", 1)+
		"  - {name: rejects-sink, type: stdout, streams: [rejects]}\n")
	recs := sliceSource{record(0, 1, 1, `{"user":"a"}`), record(0, 2, 2, `{"nouser":1}`)}
	sink, rejects := &captureSink{}, &captureSink{}
	var dead bytes.Buffer
	rt, err := runtime.New(p, map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithSink("rejects-sink", rejects),
		runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Len(t, sink.records, 1)
	require.Len(t, rejects.records, 1)
	require.Empty(t, dead.String(), "a computation with a dead-letter stream uses it")
	r := rejects.records[0]
	require.Equal(t, []string{"events/p0:1"}, r.Parents)
	var rej struct {
		Stage, Origin, Error string
		Record               json.RawMessage
	}
	require.NoError(t, json.Unmarshal(r.Payload, &rej))
	require.Equal(t, "key", rej.Stage)
	require.Contains(t, rej.Error, `payload lacks group_by field "user"`)
	require.JSONEq(t, `{"nouser":1}`, string(rej.Record))
}

const twoSourcesPipeline = `
name: two
sources:
  - {name: a-in, type: generator, stream: a, generator: {count: 1}}
  - {name: b-in, type: generator, stream: b, generator: {count: 1}}
computations:
  - name: both
    plugin: identity
    input_streams: [a, b]
    output_streams: [out]
    input_ordering: {time_type: alignment}
    batch: {max_rows: 1}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// TestSourceStreamsAreReadInStep checks the source gate: two source
// streams replayed as fast as they can be read still reach a reader in
// AlignmentTimestamp order across both, because no source stream may send
// a record while another has an earlier one waiting.
func TestSourceStreamsAreReadInStep(t *testing.T) {
	var a, b sliceSource
	for i := 0; i < 400; i++ {
		a = append(a, record(0, int64(2*i), int64(2*i), `{}`))
		b = append(b, record(0, int64(2*i+1), int64(2*i+1), `{}`))
	}
	var trace bytes.Buffer
	rt, err := runtime.New(mustSpec(t, twoSourcesPipeline), map[string]compute.Factory{"both": compute.Native(identity)},
		runtime.WithSource("a-in", a), runtime.WithSource("b-in", b), runtime.WithSink("sink", &captureSink{}),
		runtime.WithTrace(&trace), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	var got []int64
	for _, line := range strings.Split(strings.TrimSpace(trace.String()), "\n") {
		var r runtime.TraceRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		got = append(got, r.AlignmentTS)
	}
	require.Len(t, got, 800)
	for i := range got {
		require.Equal(t, int64(i), got[i], "delivery %d", i)
	}
}
