package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var join = flowhost.Computation{Init: initialize, Process: process}

const (
	t0     = int64(1_714_557_600_000_000_000)
	expire = int64(30 * time.Minute)
)

func initEnvelope(params map[string]any, outputs ...string) *abi.Init {
	if params == nil {
		params = map[string]any{"expire": "30m"}
	}
	return &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Parameters: params, OutputStreams: outputs}
}

func order(id string, event int64) abi.Message {
	return abi.Message{ID: "orders/p0:" + id, Stream: "orders", EventTimestamp: event,
		Payload: []byte(`{"order_id":"` + id + `","customer":"ann","amount":"1.00"}`)}
}

func payment(id string, event int64) abi.Message {
	return abi.Message{ID: "payments/p0:" + id, Stream: "payments", EventTimestamp: event,
		Payload: []byte(`{"order_id":"` + id + `","payment_id":"p-1","method":"card"}`)}
}

func request(keys ...abi.RequestKey) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform, Keys: keys}
}

func runJoin(t *testing.T, req *abi.Request) abi.ResponseKey {
	t.Helper()
	resp, err := flowhost.Run(join, initEnvelope(nil, "joined", "unmatched"), req)
	require.NoError(t, err)
	require.Empty(t, resp.Error)
	require.Len(t, resp.Keys, 1)
	require.Empty(t, resp.Keys[0].Error)
	return resp.Keys[0]
}

// waiting returns the state of a key after its messages arrived alone.
func waiting(t *testing.T, key string, ms ...abi.Message) []byte {
	t.Helper()
	k := runJoin(t, request(abi.RequestKey{Key: key, Messages: ms}))
	require.Equal(t, abi.StateReplace, k.StateOp)
	return k.State
}

func decode(t *testing.T, payload []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(payload, &m))
	return m
}

func TestBothSidesInOneBatch(t *testing.T) {
	o, p := order("o-1", t0), payment("o-1", t0+int64(20*time.Second))
	k := runJoin(t, request(abi.RequestKey{Key: `["o-1"]`, Messages: []abi.Message{o, p}}))
	require.Len(t, k.Emits, 1)
	e := k.Emits[0]
	require.Equal(t, "joined", e.Stream)
	require.Equal(t, []uint32{0, 1}, e.Parents, "both sides are inputs of this batch")
	require.Equal(t, p.EventTimestamp, *e.EventTimestamp)
	got := decode(t, e.Payload)
	require.Equal(t, "ann", got["customer"])
	require.Equal(t, "p-1", got["payment_id"])
	require.Equal(t, "2024-05-01T10:00:00Z", got["ordered_at"])
	require.Equal(t, "2024-05-01T10:00:20Z", got["paid_at"])
	require.Equal(t, o.ID, got["order_message"])
	require.Equal(t, p.ID, got["payment_message"])
	// Both sides stay until their expiry: another side may still match.
	require.Equal(t, abi.StateReplace, k.StateOp)
	var triggers []int64
	for _, ts := range k.TimersSet {
		triggers = append(triggers, ts.TriggerTimestamp)
	}
	require.Equal(t, []int64{o.EventTimestamp + expire + 1, p.EventTimestamp + expire + 1}, triggers)
	require.Empty(t, k.TimersCancel)
}

func TestPaymentMeetsOrderInState(t *testing.T) {
	o, p := order("o-2", t0), payment("o-2", t0+int64(time.Minute))
	k := runJoin(t, request(abi.RequestKey{Key: `["o-2"]`, State: waiting(t, `["o-2"]`, o), Messages: []abi.Message{p}}))
	require.Len(t, k.Emits, 1)
	require.Equal(t, []uint32{0}, k.Emits[0].Parents, "the order is in state, not an input: only the payment is a parent")
	require.Equal(t, o.ID, decode(t, k.Emits[0].Payload)["order_message"], "the payload keeps the order's id")
	require.Equal(t, "ann", decode(t, k.Emits[0].Payload)["customer"])
}

func TestFirstSideWaitsWithATimer(t *testing.T) {
	p := payment("o-3", t0)
	k := runJoin(t, request(abi.RequestKey{Key: `["o-3"]`, Messages: []abi.Message{p}}))
	require.Empty(t, k.Emits)
	require.Equal(t, abi.StateReplace, k.StateOp)
	require.Len(t, k.TimersSet, 1)
	require.Equal(t, t0+expire+1, k.TimersSet[0].TriggerTimestamp, "past the last order time that could match")
	require.Equal(t, t0, *k.TimersSet[0].EventTimestamp, "the pending timer holds the watermark at the payment's time")
}

func TestTooFarApartIsNotJoined(t *testing.T) {
	o, p := order("o-8", t0), payment("o-8", t0+expire+1)
	k := runJoin(t, request(abi.RequestKey{Key: `["o-8"]`, Messages: []abi.Message{o, p}}))
	require.Empty(t, k.Emits, "event times more than expire apart")
}

func TestExpiredSideGoesToUnmatched(t *testing.T) {
	o := order("o-4", t0)
	timer := abi.DueTimer{ID: "join.timers/p0:0", TriggerTimestamp: t0 + expire + 1, EventTimestamp: t0}
	k := runJoin(t, request(abi.RequestKey{Key: `["o-4"]`, State: waiting(t, `["o-4"]`, o), Timers: []abi.DueTimer{timer}}))
	require.Len(t, k.Emits, 1)
	e := k.Emits[0]
	require.Equal(t, "unmatched", e.Stream)
	require.Equal(t, []uint32{0}, e.Parents, "its parent is the timer")
	require.Equal(t, t0, *e.EventTimestamp)
	got := decode(t, e.Payload)
	require.Equal(t, "expired", got["reason"])
	require.Equal(t, "order", got["side"])
	require.Equal(t, "o-4", got["order_id"])
	require.Equal(t, o.ID, got["message"])
	require.Equal(t, "ann", got["record"].(map[string]any)["customer"])
	require.Equal(t, abi.StateDelete, k.StateOp)
}

func TestJoinedSidesLeaveSilently(t *testing.T) {
	o, p := order("o-6", t0), payment("o-6", t0+1)
	first := runJoin(t, request(abi.RequestKey{Key: `["o-6"]`, Messages: []abi.Message{o, p}}))
	timers := []abi.DueTimer{
		{ID: "join.timers/p0:1", TriggerTimestamp: t0 + expire + 1, EventTimestamp: t0},
		{ID: "join.timers/p0:2", TriggerTimestamp: t0 + expire + 2, EventTimestamp: t0 + 1},
	}
	k := runJoin(t, request(abi.RequestKey{Key: `["o-6"]`, State: first.State, Timers: timers}))
	require.Empty(t, k.Emits, "both sides were joined: nothing to report")
	require.Equal(t, abi.StateDelete, k.StateOp)
}

func TestSecondOrderJoinsToo(t *testing.T) {
	o, p := order("o-5", t0), payment("o-5", t0+1)
	again := order("o-5", t0+2)
	again.ID = "orders/p0:again"
	k := runJoin(t, request(abi.RequestKey{Key: `["o-5"]`, State: waiting(t, `["o-5"]`, o, p), Messages: []abi.Message{again}}))
	require.Len(t, k.Emits, 1, "an interval join is many-to-many")
	got := decode(t, k.Emits[0].Payload)
	require.Equal(t, again.ID, got["order_message"])
	require.Equal(t, p.ID, got["payment_message"])
}

func TestBadInputFailsTheKey(t *testing.T) {
	for name, m := range map[string]abi.Message{
		"not json":       {ID: "orders/p0:1", Stream: "orders", Payload: []byte("nope")},
		"unknown stream": {ID: "refunds/p0:1", Stream: "refunds", Payload: []byte(`{"order_id":"o-7"}`)},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := flowhost.Run(join, initEnvelope(nil, "joined", "unmatched"), request(abi.RequestKey{Key: `["o-7"]`, Messages: []abi.Message{m}}))
			require.NoError(t, err)
			require.Len(t, resp.Keys, 1)
			require.Contains(t, resp.Keys[0].Error, m.ID)
		})
	}
}

func TestInitChecksStreamsAndExpire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		params  map[string]any
		outputs []string
		err     string
	}{
		{"joined missing", nil, []string{"out", "unmatched"}, `output stream "joined" (parameter "joined") is not declared`},
		{"unmatched missing", map[string]any{"expire": "5m"}, []string{"joined"}, `output stream "unmatched" (parameter "unmatched") is not declared`},
		{"negative expire", map[string]any{"expire": "-5m"}, []string{"joined", "unmatched"}, "must be positive"},
		{"no expire", map[string]any{"expire": "0s"}, []string{"joined", "unmatched"}, "must be positive"},
		{"one stream twice", map[string]any{"payments": "orders"}, []string{"joined", "unmatched"}, `name the same stream "orders"`},
		{"default expire", map[string]any{}, []string{"joined", "unmatched"}, ""},
		{"renamed streams", map[string]any{"joined": "pairs", "unmatched": "alone", "expire": "1m"}, []string{"pairs", "alone"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := flowhost.Run(join, initEnvelope(tc.params, tc.outputs...), request())
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}
