package runtime_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// tick is what the minute ticker emits when a timer of a key fires: the
// trigger, the key's messages since its previous tick and all its
// messages so far. The counts pin where the timer fell among the key's
// messages.
type tick struct {
	Key   string `json:"key"`
	Tick  int64  `json:"tick"`
	Count int    `json:"count"`
	Seen  int    `json:"seen"`
}

// tickerState is a key's state in the minute ticker.
type tickerState struct {
	Count int   `json:"count"`
	Seen  int   `json:"seen"`
	Armed int64 `json:"armed"` // the pending timer's trigger; 0: none
}

// minuteTicker ticks every event-time minute per key while the key has
// messages: its first message arms a timer at the end of its minute; a
// fired timer emits a tick and, if messages came since the last tick, arms
// the next minute.
var minuteTicker = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		var st tickerState
		if k.State != nil {
			if err := json.Unmarshal(k.State, &st); err != nil {
				return nil, err
			}
		}
		rk := abi.ResponseKey{Key: k.Key, StateOp: abi.StateReplace}
		for i, t := range k.Timers {
			out, _ := json.Marshal(tick{Key: k.Key, Tick: t.TriggerTimestamp, Count: st.Count, Seen: st.Seen})
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "ticks", Payload: out, Parents: []uint32{uint32(i)}})
			st.Armed = 0
			if st.Count > 0 {
				st.Armed = t.TriggerTimestamp + int64(time.Minute)
				rk.TimersSet = append(rk.TimersSet, abi.Timer{TriggerTimestamp: st.Armed})
			}
			st.Count = 0
		}
		for _, m := range k.Messages {
			st.Count++
			st.Seen++
			if st.Armed == 0 {
				st.Armed = (m.EventTimestamp/int64(time.Minute) + 1) * int64(time.Minute)
				rk.TimersSet = append(rk.TimersSet, abi.Timer{TriggerTimestamp: st.Armed})
			}
		}
		rk.State, _ = json.Marshal(st)
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
})

const tickerPipeline = `
name: ticker
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}}
computations:
  - name: ticker
    plugin: ticker
    kind: transform
    partitions: %d
    group_by: [user]
    input_streams: [events]
    output_streams: [ticks]
    batch: {max_rows: %d, max_duration: %s}
sinks:
  - {name: sink, type: stdout, streams: [ticks]}
`

// tickerInput is one record of a test: its key and event time; records
// are written in slice order.
type tickerInput struct {
	user  string
	event int64
}

// runTicker runs the minute ticker over in with the given partitions and
// batch limits and returns its ticks, sorted.
func runTicker(t require.TestingT, in []tickerInput, partitions, maxRows int, linger string) []tick {
	var recs sliceSource
	for i, r := range in {
		recs = append(recs, record(0, int64(1_000_000+i), r.event, fmt.Sprintf(`{"user":%q}`, r.user)))
	}
	sink := &captureSink{}
	p, err := spec.Parse("ticker.yaml", []byte(fmt.Sprintf(tickerPipeline, partitions, maxRows, linger)))
	require.NoError(t, err)
	rt, err := runtime.New(p, map[string]compute.Factory{"ticker": compute.Native(minuteTicker)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	var ticks []tick
	for _, r := range sink.records {
		var tk tick
		require.NoError(t, json.Unmarshal(r.Payload, &tk))
		ticks = append(ticks, tk)
	}
	sortTicks(ticks)
	return ticks
}

func sortTicks(ticks []tick) {
	slices.SortFunc(ticks, func(a, b tick) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Tick, b.Tick), cmp.Compare(a.Count, b.Count), cmp.Compare(a.Seen, b.Seen))
	})
}

// modelTicks is the rule of host/spec/README.md ("When a timer fires")
// applied to the ticker by hand: before each message of the merge order
// (here the write order), every timer whose trigger is <= the smallest
// event time from that message on fires, timers set by fired timers
// included; a timer a message sets can fire from the next message on;
// after the last message every timer fires.
func modelTicks(in []tickerInput) []tick {
	type keyModel struct {
		st    tickerState
		armed bool
	}
	keys := map[string]*keyModel{}
	var ticks []tick
	fire := func(wm int64) {
		for name, k := range keys {
			for k.armed && k.st.Armed <= wm {
				ticks = append(ticks, tick{Key: name, Tick: k.st.Armed, Count: k.st.Count, Seen: k.st.Seen})
				if k.st.Count > 0 {
					k.st.Armed += int64(time.Minute)
				} else {
					k.armed, k.st.Armed = false, 0
				}
				k.st.Count = 0
			}
		}
	}
	for i, r := range in {
		wm := r.event
		for _, later := range in[i:] {
			wm = min(wm, later.event)
		}
		fire(wm)
		name := fmt.Sprintf(`[%q]`, r.user)
		k := keys[name]
		if k == nil {
			k = &keyModel{}
			keys[name] = k
		}
		k.st.Count++
		k.st.Seen++
		if !k.armed {
			k.armed = true
			k.st.Armed = (r.event/int64(time.Minute) + 1) * int64(time.Minute)
		}
	}
	fire(math.MaxInt64) // the inputs ended: the watermark is the end of time
	sortTicks(ticks)
	return ticks
}

// tickerRecords draws a replay: event times that advance with the write
// order and jitter by less than the source's out_of_orderness_bound, so no
// record is late, over a few minutes and keys.
func tickerRecords(t *rapid.T) []tickerInput {
	n := rapid.IntRange(1, 80).Draw(t, "records")
	users := rapid.IntRange(1, 4).Draw(t, "users")
	base := int64(1_714_557_600) * int64(time.Second)
	var in []tickerInput
	at := base
	for i := 0; i < n; i++ {
		at += rapid.Int64Range(0, int64(20*time.Second)).Draw(t, "step")
		jitter := rapid.Int64Range(0, int64(40*time.Second)).Draw(t, "jitter")
		in = append(in, tickerInput{
			user:  fmt.Sprintf("u%d", rapid.IntRange(0, users-1).Draw(t, "user")),
			event: at - jitter,
		})
	}
	return in
}

// TestTimersFireWhereTheWatermarkPassesThemWhateverTheBatchLimits is the
// tick test of issue 11 in the runtime: a per-key minute ticker over a
// replay gives the ticks of the documented rule, with the same counts,
// whatever batch.max_rows and linger, where it used to fire timers only
// when a batch was cut.
func TestTimersFireWhereTheWatermarkPassesThemWhateverTheBatchLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := tickerRecords(t)
		partitions := rapid.IntRange(1, 3).Draw(t, "partitions")
		maxRows := rapid.SampledFrom([]int{1, 2, 3, 7, 1000}).Draw(t, "max_rows")
		linger := rapid.SampledFrom([]string{"1ms", "10ms", "1s"}).Draw(t, "max_duration")
		// Each computation partition has its own merge order and
		// watermark: the rule applies to each.
		var want []tick
		for part := range partitions {
			var mine []tickerInput
			for _, r := range in {
				if ordering.PartitionOf(fmt.Sprintf(`[%q]`, r.user), partitions) == part {
					mine = append(mine, r)
				}
			}
			want = append(want, modelTicks(mine)...)
		}
		sortTicks(want)
		require.Equal(t, want, runTicker(t, in, partitions, maxRows, linger), "partitions %d, max_rows %d, max_duration %s", partitions, maxRows, linger)
	})
}

// TestTimerSetBeforeALaterMessageOfTheBatchFiresBeforeIt pins the case
// the old code got wrong with a batch of 1000: one key's messages over
// five minutes, one batch, and a tick per minute with the minute's count.
func TestTimerSetBeforeALaterMessageOfTheBatchFiresBeforeIt(t *testing.T) {
	base := int64(1_714_557_600) * int64(time.Second)
	var in []tickerInput
	for i := 0; i < 50; i++ {
		in = append(in, tickerInput{user: "ann", event: base + int64(i)*int64(6*time.Second)})
	}
	got := runTicker(t, in, 1, 1000, "1s")
	require.Equal(t, modelTicks(in), got)
	require.Len(t, got, 6, "a tick at each of the five minute ends, and one with nothing new after the end")
	for _, tk := range got[:5] {
		require.Equal(t, 10, tk.Count, "tick %+v", tk)
	}
}

const restampPipeline = `
name: restamped
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}, watermark: {out_of_orderness_bound: 10s}}
computations:
  - name: restamp
    plugin: restamp
    kind: transform
    input_streams: [events]
    output_streams: [happened]
    batch: {max_rows: 1}
    watermark_strategy: {out_of_orderness_bound: 20s}
  - name: ticker
    plugin: ticker
    kind: transform
    group_by: [user]
    input_streams: [happened]
    output_streams: [ticks]
    batch: {max_rows: 1}
sinks:
  - {name: sink, type: stdout, streams: [ticks]}
`

// TestWatermarkStrategyKeepsDownstreamTimersOnTime: restamp sets each
// output's EventTimestamp from the payload, five minutes before the
// input's and out of order by up to 6s, and its watermark_strategy holds
// its output watermark at the newest output minus 20s, so the minute
// ticker downstream ticks exactly as the rule gives for the restamped
// times. Passing the input watermark on (the old behaviour) ran five
// minutes ahead of the restamped messages, and timers fired before the
// messages they should have followed.
func TestWatermarkStrategyKeepsDownstreamTimersOnTime(t *testing.T) {
	restamp := compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
		resp := &abi.Response{}
		for _, k := range req.Keys {
			rk := abi.ResponseKey{Key: k.Key}
			for j, m := range k.Messages {
				var p struct{ At int64 }
				if err := json.Unmarshal(m.Payload, &p); err != nil {
					return nil, err
				}
				rk.Emits = append(rk.Emits, abi.Emit{Stream: "happened", Payload: m.Payload, EventTimestamp: &p.At, Parents: []uint32{uint32(len(k.Timers) + j)}})
			}
			resp.Keys = append(resp.Keys, rk)
		}
		return resp, nil
	})
	base := int64(1_714_557_600) * int64(time.Second)
	var recs sliceSource
	var restamped []tickerInput
	for i := range 300 {
		write := base + int64(i)*int64(time.Second)
		at := write - int64(5*time.Minute) - int64(i%7)*int64(time.Second)
		user := fmt.Sprintf("u%d", i%3)
		recs = append(recs, record(0, write, write, fmt.Sprintf(`{"at":%d,"user":%q}`, at, user)))
		restamped = append(restamped, tickerInput{user: user, event: at})
	}
	p, err := spec.Parse("restamped.yaml", []byte(restampPipeline))
	require.NoError(t, err)
	sink := &captureSink{}
	rt, err := runtime.New(p, map[string]compute.Factory{"restamp": compute.Native(restamp), "ticker": compute.Native(minuteTicker)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	var ticks []tick
	for _, r := range sink.records {
		var tk tick
		require.NoError(t, json.Unmarshal(r.Payload, &tk))
		ticks = append(ticks, tk)
	}
	sortTicks(ticks)
	require.Equal(t, modelTicks(restamped), ticks)
}
