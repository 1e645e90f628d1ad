package c_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
)

// miniHost plays the host for one instance: it keeps each key's state and
// pending timers, delivers the timers that a watermark makes due, and
// applies responses, the way the runtime does (cancels before sets).
type miniHost struct {
	t      *testing.T
	inst   engine.Instance
	state  map[string][]byte
	timers map[string]map[int64]int64 // key -> trigger -> event_ts
	seq    int
}

type input struct {
	key     string
	eventTS int64
}

// batch runs one batch: every key's due timers at watermark wm, then the
// messages, and returns the emitted payloads by key.
func (h *miniHost) batch(wm int64, msgs ...input) map[string][]string {
	t := h.t
	keys := map[string]*abi.RequestKey{}
	var order []string
	get := func(k string) *abi.RequestKey {
		if rk, ok := keys[k]; ok {
			return rk
		}
		rk := &abi.RequestKey{Key: k, State: h.state[k]}
		keys[k] = rk
		order = append(order, k)
		return rk
	}
	for k, ts := range h.timers {
		triggers := make([]int64, 0, len(ts))
		for tr := range ts {
			if tr <= wm {
				triggers = append(triggers, tr)
			}
		}
		slices.Sort(triggers)
		for _, tr := range triggers {
			rk := get(k)
			rk.Timers = append(rk.Timers, abi.DueTimer{ID: fmt.Sprintf("t-%s-%d", k, tr), TriggerTimestamp: tr, EventTimestamp: ts[tr]})
			delete(ts, tr)
		}
	}
	for _, m := range msgs {
		h.seq++
		rk := get(m.key)
		rk.Messages = append(rk.Messages, abi.Message{ID: fmt.Sprint(h.seq), Stream: "events", EventTimestamp: m.eventTS,
			SystemTimestamp: m.eventTS, AlignmentTimestamp: m.eventTS, Payload: []byte(`{"user":"x"}`)})
	}
	slices.Sort(order)
	req := &abi.Request{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform, Epoch: uint64(h.seq),
		Watermarks: abi.Watermarks{Event: wm, System: wm}}
	for _, k := range order {
		req.Keys = append(req.Keys, *keys[k])
	}
	if req.Keys == nil {
		req.Keys = []abi.RequestKey{}
	}
	resp, err := abi.DecodeResponse(process(t, h.inst, req), abi.ResponseLimits{})
	require.NoError(t, err)
	require.NoError(t, abi.ValidateResponse(resp, req, []string{"counts"}))
	require.Empty(t, resp.Error)
	out := map[string][]string{}
	for _, rk := range resp.Keys {
		require.Empty(t, rk.Error, "key %s failed", rk.Key)
		for _, e := range rk.Emits {
			out[rk.Key] = append(out[rk.Key], string(e.Payload))
		}
		switch rk.StateOp {
		case abi.StateReplace:
			h.state[rk.Key] = rk.State
		case abi.StateDelete:
			delete(h.state, rk.Key)
		}
		if h.timers[rk.Key] == nil {
			h.timers[rk.Key] = map[int64]int64{}
		}
		for _, tr := range rk.TimersCancel {
			delete(h.timers[rk.Key], tr)
		}
		for _, tm := range rk.TimersSet {
			ev := tm.TriggerTimestamp
			if tm.EventTimestamp != nil {
				ev = *tm.EventTimestamp
			}
			h.timers[rk.Key][tm.TriggerTimestamp] = ev
		}
	}
	return out
}

// TestWindowCountExample runs the C window-count example through a
// scripted sequence of batches and checks the windows it reports, the
// state it keeps and the timers it sets.
func TestWindowCountExample(t *testing.T) {
	const (
		sec = int64(1_000_000_000)
		t0  = int64(1_714_557_600) * sec // a minute boundary
	)
	inst, logs := instance(t, windowCount)
	initWith(t, inst, "window-count", abi.KindTransform, map[string]any{"window": "1m"}, "counts")
	h := &miniHost{t: t, inst: inst, state: map[string][]byte{}, timers: map[string]map[int64]int64{}}

	ann, multi, unkeyed, odd := `["ann"]`, `["bob",7]`, "", `["<a&b>"]`
	got := h.batch(t0, input{ann, t0 + 1*sec}, input{ann, t0 + 59*sec}, input{ann, t0 + 61*sec},
		input{multi, t0 + 5*sec}, input{unkeyed, t0 - 30*sec}, input{odd, t0 + 2*sec})
	require.Empty(t, got, "nothing is complete before the watermark passes a window's end")
	require.Equal(t, `{"windows":[{"start":1714557600000000000,"count":2},{"start":1714557660000000000,"count":1}]}`, string(h.state[ann]), "logs:\n%s", logs.text())
	require.Equal(t, map[int64]int64{t0 + 60*sec: t0 + 60*sec - 1, t0 + 120*sec: t0 + 120*sec - 1}, h.timers[ann])

	got = h.batch(t0+60*sec, input{ann, t0 + 30*sec})
	require.Equal(t, map[string][]string{
		ann:     {`{"key":"ann","window_start":1714557600000000000,"window_end":1714557660000000000,"count":2}`},
		multi:   {`{"key":["bob",7],"window_start":1714557600000000000,"window_end":1714557660000000000,"count":1}`},
		unkeyed: {`{"key":null,"window_start":1714557540000000000,"window_end":1714557600000000000,"count":1}`},
		odd:     {`{"key":"\u003ca\u0026b\u003e","window_start":1714557600000000000,"window_end":1714557660000000000,"count":1}`},
	}, got)
	// A late message reopened ann's first window next to the second.
	require.Equal(t, `{"windows":[{"start":1714557600000000000,"count":1},{"start":1714557660000000000,"count":1}]}`, string(h.state[ann]))
	require.NotContains(t, h.state, multi, "a key without open windows has no state")

	got = h.batch(t0 + 120*sec)
	require.Equal(t, map[string][]string{ann: {
		`{"key":"ann","window_start":1714557600000000000,"window_end":1714557660000000000,"count":1}`,
		`{"key":"ann","window_start":1714557660000000000,"window_end":1714557720000000000,"count":1}`,
	}}, got, "the reopened window and the second one, each by its timer")
	require.Empty(t, h.state)
	for k, ts := range h.timers {
		require.Empty(t, ts, "key %s has timers left", k)
	}
}

// TestWindowCountExampleRefuses checks the example's init errors.
func TestWindowCountExampleRefuses(t *testing.T) {
	for _, tt := range []struct {
		params  map[string]any
		outputs []string
		want    string
	}{
		{map[string]any{"window": "soon"}, []string{"counts"}, `parameter "window": time: invalid duration "soon"`},
		{map[string]any{"window": "-1s"}, []string{"counts"}, `parameter "window": must be positive, got -1000000000ns`},
		{map[string]any{"window": true}, []string{"counts"}, `parameter "window": expected duration, got bool`},
		{nil, []string{"a", "b"}, "window-count writes exactly one output stream; the pipeline declares 2"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			inst, _ := instance(t, windowCount)
			b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform, Parameters: tt.params, OutputStreams: tt.outputs})
			require.NoError(t, err)
			res, err := inst.Init(context.Background(), b)
			require.NoError(t, err)
			r, err := abi.DecodeInitResult(res)
			require.NoError(t, err)
			require.Equal(t, tt.want, r.Error)
		})
	}
}
