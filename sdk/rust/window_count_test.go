package rust_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
)

// miniHost plays the host's part for one guest over a sequence of
// batches: it keeps each key's state and pending timers, hands due timers
// to the guest with the batch's messages, and applies the responses as
// the host does (cancels before sets; one timer per trigger, the smallest
// event_ts kept).
type miniHost struct {
	inst   engine.Instance
	state  map[string][]byte
	timers map[string]map[int64]abi.Timer
	seq    int
}

func newMiniHost(tb testing.TB, m engine.Module, init *abi.Init) *miniHost {
	inst := instantiate(tb, m)
	initWith(tb, inst, init)
	return &miniHost{inst: inst, state: map[string][]byte{}, timers: map[string]map[int64]abi.Timer{}}
}

// input is one message of a scripted batch.
type input struct {
	key   string
	event int64
}

// request builds the batch of the messages with the timers due at
// watermark wm, keys in sorted order.
func (h *miniHost) request(wm int64, msgs []input) *abi.Request {
	byKey := map[string]*abi.RequestKey{}
	get := func(k string) *abi.RequestKey {
		if byKey[k] == nil {
			byKey[k] = &abi.RequestKey{Key: k, State: h.state[k]}
		}
		return byKey[k]
	}
	for k, ts := range h.timers {
		for _, tr := range slices.Sorted(maps.Keys(ts)) {
			if tr <= wm {
				t := ts[tr]
				ev := tr
				if t.EventTimestamp != nil {
					ev = *t.EventTimestamp
				}
				rk := get(k)
				rk.Timers = append(rk.Timers, abi.DueTimer{ID: fmt.Sprintf("t-%s-%d", k, tr), TriggerTimestamp: tr, EventTimestamp: ev, Payload: t.Payload})
			}
		}
	}
	for _, m := range msgs {
		h.seq++
		rk := get(m.key)
		rk.Messages = append(rk.Messages, abi.Message{ID: fmt.Sprintf("m%d", h.seq), Stream: "clicks",
			EventTimestamp: m.event, SystemTimestamp: m.event, AlignmentTimestamp: m.event, Payload: []byte("{}")})
	}
	req := &abi.Request{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform, Epoch: uint64(h.seq),
		Watermarks: abi.Watermarks{Event: wm, System: wm}}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		req.Keys = append(req.Keys, *byKey[k])
	}
	return req
}

// apply commits a validated response: fired timers go, state and timer
// changes apply.
func (h *miniHost) apply(req *abi.Request, resp *abi.Response) {
	for _, rk := range req.Keys {
		for _, t := range rk.Timers {
			delete(h.timers[rk.Key], t.TriggerTimestamp)
		}
	}
	for _, rk := range resp.Keys {
		switch rk.StateOp {
		case abi.StateReplace:
			h.state[rk.Key] = bytes.Clone(rk.State)
		case abi.StateDelete:
			delete(h.state, rk.Key)
		}
		if h.timers[rk.Key] == nil {
			h.timers[rk.Key] = map[int64]abi.Timer{}
		}
		for _, tr := range rk.TimersCancel {
			delete(h.timers[rk.Key], tr)
		}
		for _, t := range rk.TimersSet {
			if old, ok := h.timers[rk.Key][t.TriggerTimestamp]; ok && old.EventTimestamp != nil && t.EventTimestamp != nil && *old.EventTimestamp < *t.EventTimestamp {
				continue
			}
			h.timers[rk.Key][t.TriggerTimestamp] = t
		}
	}
}

// windowOutput is one emitted count, with the key entry and the input it
// derives from.
type windowOutput struct {
	text   string
	key    string
	parent abi.DueTimer
}

// TestWindowCount runs the Rust window-count (examples/window-count) and
// the Go one (examples/plugins/window-count) side by side through the
// host's engine over a short scripted sequence of batches — windows of
// several keys, a window before 1970, a late message that reopens a
// window — and requires byte-identical responses from both, and the
// counts worked out by hand, each emitted by the timer of its window.
func TestWindowCount(t *testing.T) {
	ctx := context.Background()
	e, err := sharedEngine()
	require.NoError(t, err)
	goModule, err := e.Compile(ctx, "go-window-count", buildGoPlugin(t, "./examples/plugins/window-count"))
	require.NoError(t, err)
	init := &abi.Init{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform,
		Parameters: map[string]any{"window": "1m"}, OutputStreams: []string{"counts"}}
	rustHost := newMiniHost(t, compiledModule(t, "window-count"), init)
	goHost := newMiniHost(t, goModule, init)

	const minute = int64(time.Minute)
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	before1970 := int64(-90 * time.Second) // window [-2m, -1m)
	batches := []struct {
		wm   int64
		msgs []input
	}{
		{t0 + 10*int64(time.Second), []input{
			{`["ann"]`, t0 + int64(time.Second)}, {`["bob"]`, t0 + 2*int64(time.Second)}, {`["ann"]`, t0 + 5*int64(time.Second)},
			{`["o-1",3]`, t0 + 59*int64(time.Second)}, {`["<&>"]`, t0 - 30*int64(time.Second)}, {`["old"]`, before1970},
		}},
		{t0 + 61*int64(time.Second), []input{{`["ann"]`, t0 + 62*int64(time.Second)}}},
		{t0 + 70*int64(time.Second), []input{{`["ann"]`, t0 + 3*int64(time.Second)}}}, // late: its window was emitted
		{t0 + 200*int64(time.Second), nil},
	}
	var outputs []windowOutput
	for i, b := range batches {
		req := rustHost.request(b.wm, b.msgs)
		require.Equal(t, req, goHost.request(b.wm, b.msgs), "both hosts are in the same state")
		reqBytes, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		rustOut, err := rustHost.inst.Process(ctx, reqBytes)
		require.NoError(t, err, "batch %d", i)
		rustOut = bytes.Clone(rustOut)
		goOut, err := goHost.inst.Process(ctx, reqBytes)
		require.NoError(t, err, "batch %d", i)
		resp, err := abi.DecodeResponse(rustOut, abi.ResponseLimits{})
		require.NoError(t, err)
		goResp, err := abi.DecodeResponse(goOut, abi.ResponseLimits{})
		require.NoError(t, err)
		require.Equal(t, goResp, resp, "batch %d: the Rust and Go window-counts disagree", i)
		require.Equal(t, bytes.Clone(goOut), rustOut, "batch %d: same value, different bytes", i)
		require.NoError(t, abi.ValidateResponse(resp, req, init.OutputStreams))
		for _, rk := range resp.Keys {
			reqKey := req.Keys[slices.IndexFunc(req.Keys, func(k abi.RequestKey) bool { return k.Key == rk.Key })]
			for _, e := range rk.Emits {
				require.Len(t, e.Parents, 1, "a count derives from its window's timer")
				require.Less(t, int(e.Parents[0]), len(reqKey.Timers))
				outputs = append(outputs, windowOutput{text: string(e.Payload), key: rk.Key, parent: reqKey.Timers[e.Parents[0]]})
			}
			for _, tm := range rk.TimersSet {
				require.NotNil(t, tm.EventTimestamp)
				require.Equal(t, tm.TriggerTimestamp-1, *tm.EventTimestamp, "a window's timer carries its last instant")
			}
		}
		goHost.apply(req, goResp)
		rustHost.apply(req, resp)
	}

	count := func(key string, start, n int64) string {
		return fmt.Sprintf(`{"key":%s,"window_start":%d,"window_end":%d,"count":%d}`, key, start, start+minute, n)
	}
	want := []string{
		count(`"\u003c\u0026\u003e"`, t0-minute, 1),
		count(`"old"`, -2*minute, 1),
		count(`"ann"`, t0, 2),
		count(`"bob"`, t0, 1),
		count(`["o-1",3]`, t0, 1),
		count(`"ann"`, t0+minute, 1),
		count(`"ann"`, t0, 1), // the late message, counted again on its own
	}
	var got []string
	for _, o := range outputs {
		got = append(got, o.text)
		var p struct {
			WindowEnd int64 `json:"window_end"`
		}
		require.NoError(t, json.Unmarshal([]byte(o.text), &p), o.text)
		require.Equal(t, p.WindowEnd, o.parent.TriggerTimestamp, "%s was emitted by the timer of another window", o.text)
	}
	require.ElementsMatch(t, want, got)
	require.Empty(t, rustHost.state, "every window was emitted, so no state is left")
	for k, ts := range rustHost.timers {
		require.Empty(t, ts, "timers left for %s", k)
	}
	// Outputs of one key come in window order.
	annStarts := []int64{}
	for _, o := range outputs {
		if o.key == `["ann"]` {
			var p struct {
				WindowStart int64 `json:"window_start"`
			}
			require.NoError(t, json.Unmarshal([]byte(o.text), &p))
			annStarts = append(annStarts, p.WindowStart)
		}
	}
	// Batch 4 fires the reopened window's timer before the next one's.
	require.Equal(t, []int64{t0, t0, t0 + minute}, annStarts)
}
