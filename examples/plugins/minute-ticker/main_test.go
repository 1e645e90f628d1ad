package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var ticker = flowhost.Computation{Init: initialize, Process: process}

const minute = int64(time.Minute)

func run(t *testing.T, keys ...abi.RequestKey) abi.ResponseKey {
	t.Helper()
	init := &abi.Init{ABI: abi.Version, Computation: "tick", Kind: abi.KindTransform, OutputStreams: []string{"ticks"},
		Parameters: map[string]any{"every": "1m"}}
	resp, err := flowhost.Run(ticker, init, &abi.Request{ABI: abi.Version, Computation: "tick", Kind: abi.KindTransform, Keys: keys})
	require.NoError(t, err)
	require.Empty(t, resp.Error)
	require.Len(t, resp.Keys, 1)
	require.Empty(t, resp.Keys[0].Error)
	return resp.Keys[0]
}

func TestFirstMessageArmsTheEndOfItsMinute(t *testing.T) {
	k := run(t, abi.RequestKey{Key: `["ann"]`, Messages: []abi.Message{
		{ID: "a", Stream: "in", EventTimestamp: 10*minute + 5, Payload: []byte(`{}`)},
		{ID: "b", Stream: "in", EventTimestamp: 10*minute + 7, Payload: []byte(`{}`)},
	}})
	require.Len(t, k.TimersSet, 1, "one timer per key at a time")
	require.Equal(t, 11*minute, k.TimersSet[0].TriggerTimestamp)
	var st state
	require.NoError(t, json.Unmarshal(k.State, &st))
	require.Equal(t, state{Count: 2, Seen: 2, Armed: 11 * minute}, st)
}

func TestTickRearmsOnlyAfterMessages(t *testing.T) {
	raw, err := json.Marshal(state{Count: 3, Seen: 5, Armed: 11 * minute})
	require.NoError(t, err)
	k := run(t, abi.RequestKey{Key: `["ann"]`, State: raw, Timers: []abi.DueTimer{{ID: "t", TriggerTimestamp: 11 * minute, EventTimestamp: 11 * minute}}})
	require.Len(t, k.Emits, 1)
	require.JSONEq(t, `{"key":"[\"ann\"]","tick":660000000000,"count":3,"seen":5}`, string(k.Emits[0].Payload))
	require.Len(t, k.TimersSet, 1)
	require.Equal(t, 12*minute, k.TimersSet[0].TriggerTimestamp)

	raw, err = json.Marshal(state{Count: 0, Seen: 5, Armed: 12 * minute})
	require.NoError(t, err)
	k = run(t, abi.RequestKey{Key: `["ann"]`, State: raw, Timers: []abi.DueTimer{{ID: "t2", TriggerTimestamp: 12 * minute, EventTimestamp: 12 * minute}}})
	require.Len(t, k.Emits, 1)
	require.Empty(t, k.TimersSet, "an idle key stops ticking")
}
