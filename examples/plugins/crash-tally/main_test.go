package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var tally = flowhost.Computation{Init: initialize, Process: process}

const second = int64(time.Second)

func run(t *testing.T, keys ...abi.RequestKey) *abi.Response {
	t.Helper()
	init := &abi.Init{ABI: abi.Version, Computation: "tally", Kind: abi.KindTransform, OutputStreams: []string{"tally"}}
	resp, err := flowhost.Run(tally, init, &abi.Request{ABI: abi.Version, Computation: "tally", Kind: abi.KindTransform, Keys: keys})
	require.NoError(t, err)
	require.Empty(t, resp.Error)
	return resp
}

// msg is an input message of key k123 at event time event.
func msg(stream string, seq, value, event int64) abi.Message {
	return abi.Message{
		ID: fmt.Sprintf("%s/p0:%d", stream, seq), Stream: stream, EventTimestamp: event,
		Payload: fmt.Appendf(nil, `{"key":"k123","seq":%d,"value":%d,"stream":%q}`, seq, value, stream),
	}
}

func TestMessagesAreEchoedAndTallied(t *testing.T) {
	k := run(t, abi.RequestKey{Key: `["k123"]`, Messages: []abi.Message{
		msg("a", 1, 5, 20*second+1), msg("b", 1, 7, 29*second), msg("a", 2, 100, 30*second),
	}}).Keys[0]
	require.Len(t, k.Emits, 3)
	require.JSONEq(t, `{"kind":"msg","stream":"a","seq":1,"key":"k123"}`, string(k.Emits[0].Payload))
	require.JSONEq(t, `{"kind":"msg","stream":"b","seq":1,"key":"k123"}`, string(k.Emits[1].Payload))
	for i, e := range k.Emits {
		require.Equal(t, []uint32{uint32(i)}, e.Parents, "a msg record derives from its message")
	}
	var st state
	require.NoError(t, json.Unmarshal(k.State, &st))
	require.Equal(t, []window{{Start: 20 * second, Count: 2, Sum: 12}, {Start: 30 * second, Count: 1, Sum: 100}}, st.Windows)
	require.Len(t, k.TimersSet, 2, "one timer per window")
	for i, end := range []int64{30 * second, 40 * second} {
		require.Equal(t, end, k.TimersSet[i].TriggerTimestamp)
		require.Equal(t, end-1, *k.TimersSet[i].EventTimestamp)
	}
}

func TestTimerEmitsTheEndedWindowAndForgetsIt(t *testing.T) {
	st, err := json.Marshal(state{Windows: []window{{Start: 20 * second, Count: 2, Sum: 12}, {Start: 30 * second, Count: 1, Sum: 100}}})
	require.NoError(t, err)
	timer := abi.DueTimer{ID: "tally.timers/p0:0", TriggerTimestamp: 30 * second, EventTimestamp: 30*second - 1}
	k := run(t, abi.RequestKey{Key: `["k123"]`, State: st, Timers: []abi.DueTimer{timer}}).Keys[0]
	require.Len(t, k.Emits, 1)
	require.Equal(t, []uint32{0}, k.Emits[0].Parents)
	require.JSONEq(t, `{"kind":"window","key":"k123","window_start":20000000000,"count":2,"sum":12}`, string(k.Emits[0].Payload))
	var left state
	require.NoError(t, json.Unmarshal(k.State, &left))
	require.Equal(t, []window{{Start: 30 * second, Count: 1, Sum: 100}}, left.Windows)

	timer = abi.DueTimer{ID: "tally.timers/p0:1", TriggerTimestamp: 40 * second, EventTimestamp: 40*second - 1}
	k = run(t, abi.RequestKey{Key: `["k123"]`, State: k.State, Timers: []abi.DueTimer{timer}}).Keys[0]
	require.Len(t, k.Emits, 1)
	require.Equal(t, abi.StateDelete, k.StateOp, "no window left open")
}

func TestBadInputFailsOnlyItsKey(t *testing.T) {
	good := abi.RequestKey{Key: `["k123"]`, Messages: []abi.Message{msg("a", 1, 5, 0)}}
	for _, payload := range []string{`{"key":"k9","seq":1,"stream":"a"}`, `[1]`, `{"key":"k9","seq":"1","value":2,"stream":"a"}`} {
		bad := abi.RequestKey{Key: `["k9"]`, Messages: []abi.Message{{ID: "a/p0:9", Stream: "a", Payload: []byte(payload)}}}
		resp := run(t, good, bad)
		require.Len(t, resp.Keys, 2, "payload %s", payload)
		require.Empty(t, resp.Keys[0].Error)
		require.NotEmpty(t, resp.Keys[1].Error, "payload %s", payload)
	}
	resp := run(t, abi.RequestKey{Key: `["k1","k2"]`, Messages: []abi.Message{msg("a", 1, 5, 0)}})
	require.Contains(t, resp.Keys[0].Error, "exactly one group_by field")
}

func TestInitRejectsBadWindows(t *testing.T) {
	for _, w := range []any{"0s", "-1m", "soon", true} {
		init := &abi.Init{ABI: abi.Version, Computation: "tally", Kind: abi.KindTransform, OutputStreams: []string{"tally"},
			Parameters: map[string]any{"window": w}}
		_, err := flowhost.Run(tally, init, &abi.Request{ABI: abi.Version, Computation: "tally", Kind: abi.KindTransform})
		require.ErrorContains(t, err, `parameter "window"`, "window %v", w)
	}
}

// FuzzMessagePayload feeds arbitrary payloads: the key either fails or
// emits exactly one msg record and keeps a state it can read back, whose
// window holds the message (for event times far from the int64 limits,
// where window arithmetic cannot overflow).
func FuzzMessagePayload(f *testing.F) {
	for _, s := range []string{`{"key":"k1","seq":1,"value":2,"stream":"a"}`, `{"key":[1,{"x":null}],"seq":-1,"value":0,"stream":""}`, `{}`, `null`, `{"key":"k1","seq":1e3,"value":2,"stream":"a"}`} {
		f.Add(s, int64(12345))
	}
	f.Fuzz(func(t *testing.T, payload string, event int64) {
		resp := run(t, abi.RequestKey{Key: `["k1"]`, Messages: []abi.Message{{ID: "a/p0:0", Stream: "a", EventTimestamp: event, Payload: []byte(payload)}}})
		k := resp.Keys[0]
		if k.Error != "" {
			return
		}
		require.Len(t, k.Emits, 1)
		var st state
		require.NoError(t, json.Unmarshal(k.State, &st))
		require.Len(t, st.Windows, 1)
		if event > -(1<<60) && event < 1<<60 {
			require.LessOrEqual(t, st.Windows[0].Start, event)
			require.Greater(t, st.Windows[0].Start+10*second, event)
		}
	})
}
