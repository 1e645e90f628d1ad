package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var counter = flowhost.Computation{Init: initialize, Process: process}

const minute = int64(time.Minute)

func run(t *testing.T, window string, keys ...abi.RequestKey) *abi.Response {
	t.Helper()
	init := &abi.Init{ABI: abi.Version, Computation: "count", Kind: abi.KindTransform, OutputStreams: []string{"counts"},
		Parameters: map[string]any{"window": window}}
	resp, err := flowhost.Run(counter, init, &abi.Request{ABI: abi.Version, Computation: "count", Kind: abi.KindTransform, Keys: keys})
	require.NoError(t, err)
	require.Empty(t, resp.Error)
	return resp
}

func msgs(events ...int64) []abi.Message {
	out := make([]abi.Message, len(events))
	for i, e := range events {
		out[i] = abi.Message{ID: "clicks/p0:" + string(rune('a'+i)), Stream: "clicks", EventTimestamp: e, Payload: []byte(`{}`)}
	}
	return out
}

func TestMessagesOpenWindowsWithTimers(t *testing.T) {
	resp := run(t, "1m", abi.RequestKey{Key: `["ann"]`, Messages: msgs(10*minute+5, 10*minute+7, 11*minute, 10*minute+59)})
	k := resp.Keys[0]
	require.Empty(t, k.Emits)
	require.Equal(t, abi.StateReplace, k.StateOp)
	var st state
	require.NoError(t, json.Unmarshal(k.State, &st))
	require.Equal(t, []window{{Start: 10 * minute, Count: 3}, {Start: 11 * minute, Count: 1}}, st.Windows)
	require.Len(t, k.TimersSet, 2, "one timer per window")
	for i, end := range []int64{11 * minute, 12 * minute} {
		require.Equal(t, end, k.TimersSet[i].TriggerTimestamp)
		require.Equal(t, end-1, *k.TimersSet[i].EventTimestamp)
	}
}

func TestTimerEmitsTheEndedWindow(t *testing.T) {
	st, err := json.Marshal(state{Windows: []window{{Start: 10 * minute, Count: 3}, {Start: 11 * minute, Count: 1}}})
	require.NoError(t, err)
	timer := abi.DueTimer{ID: "count.timers/p0:0", TriggerTimestamp: 11 * minute, EventTimestamp: 11*minute - 1}
	k := run(t, "1m", abi.RequestKey{Key: `["ann"]`, State: st, Timers: []abi.DueTimer{timer}}).Keys[0]
	require.Len(t, k.Emits, 1)
	require.Equal(t, []uint32{0}, k.Emits[0].Parents)
	require.JSONEq(t, `{"key":"ann","window_start":600000000000,"window_end":660000000000,"count":3}`, string(k.Emits[0].Payload))
	var left state
	require.NoError(t, json.Unmarshal(k.State, &left))
	require.Equal(t, []window{{Start: 11 * minute, Count: 1}}, left.Windows)

	timer = abi.DueTimer{ID: "count.timers/p0:1", TriggerTimestamp: 12 * minute, EventTimestamp: 12*minute - 1}
	k = run(t, "1m", abi.RequestKey{Key: `["ann"]`, State: k.State, Timers: []abi.DueTimer{timer}}).Keys[0]
	require.Len(t, k.Emits, 1)
	require.Equal(t, abi.StateDelete, k.StateOp, "no window left open")
}

func TestWindowsBefore1970AndNumericKeys(t *testing.T) {
	k := run(t, "90s", abi.RequestKey{Key: `[12345678901234567890,"x"]`, Messages: msgs(-1)}).Keys[0]
	var st state
	require.NoError(t, json.Unmarshal(k.State, &st))
	require.Equal(t, []window{{Start: -int64(90 * time.Second), Count: 1}}, st.Windows, "floor, not truncation")
	timer := abi.DueTimer{ID: "t", TriggerTimestamp: 0, EventTimestamp: -1}
	k = run(t, "90s", abi.RequestKey{Key: `[12345678901234567890,"x"]`, State: k.State, Timers: []abi.DueTimer{timer}}).Keys[0]
	require.JSONEq(t, `{"key":[12345678901234567890,"x"],"window_start":-90000000000,"window_end":0,"count":1}`, string(k.Emits[0].Payload))
}

func TestInitRejectsBadWindows(t *testing.T) {
	for _, w := range []any{"0s", "-1m", "soon", true} {
		init := &abi.Init{ABI: abi.Version, Computation: "count", Kind: abi.KindTransform, OutputStreams: []string{"counts"},
			Parameters: map[string]any{"window": w}}
		_, err := flowhost.Run(counter, init, &abi.Request{ABI: abi.Version, Computation: "count", Kind: abi.KindTransform})
		require.ErrorContains(t, err, `parameter "window"`, "window %v", w)
	}
}

func FuzzKeyValue(f *testing.F) {
	for _, s := range []string{``, `["ann"]`, `[1,2.5,null,true,{"a":[1]}]`, `[`, `{}`, `[12345678901234567890]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := keyValue(text)
		if err != nil || text == "" {
			return
		}
		// A key value must always be encodable as the output's "key".
		_, err = json.Marshal(v)
		require.NoError(t, err)
	})
}

func FuzzFloorDiv(f *testing.F) {
	f.Add(int64(-1), int64(60))
	f.Add(int64(59), int64(60))
	f.Add(int64(-60), int64(60))
	f.Fuzz(func(t *testing.T, a, b int64) {
		if b <= 0 || b > 1<<40 || a < -(1<<60) || a > 1<<60 {
			return
		}
		q := floorDiv(a, b)
		require.LessOrEqual(t, q*b, a)
		require.Greater(t, q*b+b, a)
	})
}
