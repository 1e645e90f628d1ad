package assemblyscript_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
)

// windowHost plays the host for the window-count example: it keeps each
// key's state and timers, fires due timers before a batch's messages, and
// applies the responses as the host does (cancels before sets, one timer
// per trigger with the smallest event_ts).
type windowHost struct {
	t       require.TestingT
	inst    engine.Instance
	outputs []string
	state   map[string][]byte
	timers  map[string]map[int64]int64 // key -> trigger -> event_ts
	epoch   uint64
	counts  []windowCount // every emit, in order
}

type windowCount struct {
	Key         json.RawMessage `json:"key"`
	WindowStart int64           `json:"window_start"`
	WindowEnd   int64           `json:"window_end"`
	Count       int64           `json:"count"`
}

type timedMessage struct {
	key   string
	event int64
}

// batch delivers messages (already grouped into the batch) at watermark
// wm: every key's timers with trigger <= wm fire first.
func (h *windowHost) batch(tb testing.TB, wm int64, messages []timedMessage) {
	h.epoch++
	req := &abi.Request{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform, Epoch: h.epoch,
		Watermarks: abi.Watermarks{Event: wm, System: wm}, Keys: []abi.RequestKey{}}
	index := map[string]int{}
	entry := func(key string) *abi.RequestKey {
		i, ok := index[key]
		if !ok {
			i = len(req.Keys)
			index[key] = i
			req.Keys = append(req.Keys, abi.RequestKey{Key: key, State: h.state[key]})
		}
		return &req.Keys[i]
	}
	for _, key := range slices.Sorted(mapKeys(h.timers)) {
		var due []int64
		for trigger := range h.timers[key] {
			if trigger <= wm {
				due = append(due, trigger)
			}
		}
		slices.Sort(due)
		for _, trigger := range due {
			k := entry(key)
			k.Timers = append(k.Timers, abi.DueTimer{ID: fmt.Sprintf("t-%s:%d", key, trigger), TriggerTimestamp: trigger, EventTimestamp: h.timers[key][trigger]})
			delete(h.timers[key], trigger)
		}
	}
	for i, m := range messages {
		k := entry(m.key)
		k.Messages = append(k.Messages, abi.Message{ID: fmt.Sprintf("%d-clicks:%d", h.epoch, i), Stream: "clicks",
			EventTimestamp: m.event, SystemTimestamp: wm, AlignmentTimestamp: wm, Payload: []byte(`{"user":"x"}`)})
	}
	if len(req.Keys) == 0 {
		return
	}
	resp := process(tb, h.inst, req, h.outputs)
	require.Empty(tb, resp.Error)
	for _, rk := range resp.Keys {
		require.Empty(tb, rk.Error)
		in := req.Keys[index[rk.Key]]
		for _, e := range rk.Emits {
			require.Equal(tb, "counts", e.Stream)
			require.Nil(tb, e.EventTimestamp, "a count inherits its timer's event time")
			require.Len(tb, e.Parents, 1)
			require.Less(tb, int(e.Parents[0]), len(in.Timers), "a count derives from a fired timer")
			var c windowCount
			require.NoError(tb, json.Unmarshal(e.Payload, &c))
			require.Equal(tb, in.Timers[e.Parents[0]].TriggerTimestamp, c.WindowEnd, "the timer of the window's end emits it")
			h.counts = append(h.counts, c)
		}
		switch rk.StateOp {
		case abi.StateReplace:
			h.state[rk.Key] = rk.State
		case abi.StateDelete:
			delete(h.state, rk.Key)
		}
		for _, trigger := range rk.TimersCancel {
			delete(h.timers[rk.Key], trigger)
		}
		for _, tm := range rk.TimersSet {
			require.NotNil(tb, tm.EventTimestamp)
			require.Equal(tb, tm.TriggerTimestamp-1, *tm.EventTimestamp, "a window's timer carries its last instant")
			if h.timers[rk.Key] == nil {
				h.timers[rk.Key] = map[int64]int64{}
			}
			if old, ok := h.timers[rk.Key][tm.TriggerTimestamp]; !ok || *tm.EventTimestamp < old {
				h.timers[rk.Key][tm.TriggerTimestamp] = *tm.EventTimestamp
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// TestWindowCount feeds random clicks of a few users, in event-time order
// and in batches of random sizes, to the AssemblyScript window-count with
// a random window length, plays the host's part with state and timers,
// and requires exactly the per-user, per-window counts computed here from
// the input, each window once, and nothing left behind.
func TestWindowCount(t *testing.T) {
	m, logs := guestModule(t, windowCountGuest)
	rapid.Check(t, func(rt *rapid.T) {
		window := rapid.SampledFrom([]time.Duration{time.Second, 7 * time.Second, time.Minute}).Draw(rt, "window")
		var param any = window.String()
		if rapid.Bool().Draw(rt, "nanos") {
			param = int64(window)
		}
		users := []string{`["ann"]`, `["bob"]`, `["cy",2]`, `[3]`}
		n := rapid.IntRange(1, 60).Draw(rt, "clicks")
		clicks := make([]timedMessage, n)
		for i := range clicks {
			// Around the epoch, so that windows before 1970 are aligned too.
			clicks[i] = timedMessage{
				key:   rapid.SampledFrom(users).Draw(rt, "user"),
				event: rapid.Int64Range(-int64(3*time.Minute), int64(5*time.Minute)).Draw(rt, "event"),
			}
		}
		slices.SortStableFunc(clicks, func(a, b timedMessage) int { return cmp.Compare(a.event, b.event) })

		inst := instantiate(t, m)
		outputs := []string{"counts"}
		initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform,
			Parameters: map[string]any{"window": param}, OutputStreams: outputs})
		h := &windowHost{t: rt, inst: inst, outputs: outputs, state: map[string][]byte{}, timers: map[string]map[int64]int64{}}
		for rest := clicks; len(rest) > 0; {
			size := rapid.IntRange(1, len(rest)).Draw(rt, "batch")
			// The watermark never passes a click still to come: no late data.
			h.batch(t, rest[0].event, rest[:size])
			rest = rest[size:]
		}
		h.batch(t, math.MaxInt64, nil)

		type win struct {
			key   string
			start int64
		}
		size := int64(window)
		want := map[win]int64{}
		for _, c := range clicks {
			var v any
			require.NoError(t, json.Unmarshal([]byte(c.key), &v))
			values := v.([]any)
			key := string(mustJSON(t, values))
			if len(values) == 1 {
				key = string(mustJSON(t, values[0]))
			}
			want[win{key, floorDiv(c.event, size) * size}]++
		}
		got := map[win]int64{}
		for _, c := range h.counts {
			w := win{string(c.Key), c.WindowStart}
			_, dup := got[w]
			require.False(t, dup, "window %v emitted twice", w)
			require.Equal(t, c.WindowStart+size, c.WindowEnd)
			got[w] = c.Count
		}
		require.Equal(t, want, got, "guest log:\n%s", logs.text())
		require.Empty(t, h.state, "every window is closed")
		for key, timers := range h.timers {
			require.Empty(t, timers, "key %s has timers left", key)
		}
	})
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestWindowCountReadsGoState: the state is the Go plugin's
// (examples/plugins/window-count), so that either plugin can take over
// the other's keys. The state here is what encoding/json writes for the Go
// plugin's state type.
func TestWindowCountReadsGoState(t *testing.T) {
	type window struct {
		Start int64 `json:"start"`
		Count int64 `json:"count"`
	}
	type state struct {
		Windows []window `json:"windows"`
	}
	minute := int64(time.Minute)
	goState := mustJSON(t, state{Windows: []window{{Start: -minute, Count: 4}, {Start: 0, Count: 2}}})

	m, _ := guestModule(t, windowCountGuest)
	inst := instantiate(t, m)
	outputs := []string{"counts"}
	initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform, OutputStreams: outputs})
	resp := process(t, inst, &abi.Request{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform,
		Keys: []abi.RequestKey{{Key: `["ann"]`, State: goState,
			Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: 0, EventTimestamp: -1}},
			Messages: []abi.Message{{ID: "m", Stream: "clicks", EventTimestamp: 30 * int64(time.Second), Payload: []byte("{}")}}}}}, outputs)
	require.Len(t, resp.Keys, 1)
	rk := resp.Keys[0]
	require.Len(t, rk.Emits, 1)
	require.JSONEq(t, `{"key":"ann","window_start":`+strconv.FormatInt(-minute, 10)+`,"window_end":0,"count":4}`, string(rk.Emits[0].Payload))
	require.Equal(t, abi.StateReplace, rk.StateOp)
	var after state
	require.NoError(t, json.Unmarshal(rk.State, &after))
	require.Equal(t, state{Windows: []window{{Start: 0, Count: 3}}}, after, "the Go plugin reads the state back")
	require.Empty(t, rk.TimersSet, "the open window already has its timer")
}

// TestWindowCountInit: the parameters the example refuses.
func TestWindowCountInit(t *testing.T) {
	m, _ := guestModule(t, windowCountGuest)
	cases := []struct {
		name    string
		params  map[string]any
		outputs []string
		want    string
	}{
		{"bad duration", map[string]any{"window": "soon"}, []string{"counts"}, `parameter "window": time: invalid duration "soon"`},
		{"wrong type", map[string]any{"window": true}, []string{"counts"}, `parameter "window": expected duration, got bool`},
		{"not positive", map[string]any{"window": "0s"}, []string{"counts"}, `parameter "window": must be positive, got 0ns`},
		{"two outputs", nil, []string{"counts", "more"}, "window-count writes exactly one output stream; the pipeline declares 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := call(t, instantiate(t, m).Init, mustEncodeInit(t, &abi.Init{ABI: abi.Version, Computation: "window-count",
				Kind: abi.KindTransform, Parameters: c.params, OutputStreams: c.outputs}))
			result, err := abi.DecodeInitResult(got.result)
			require.NoError(t, err)
			require.Equal(t, c.want, result.Error)
		})
	}
}
