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

func stateOf(t *testing.T, o, p *abi.Message, expireAt int64) []byte {
	t.Helper()
	st := joinState{Expire: expireAt}
	for _, s := range []struct {
		m   *abi.Message
		dst **side
	}{{o, &st.Order}, {p, &st.Payment}} {
		if s.m == nil {
			continue
		}
		var rec map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(s.m.Payload, &rec))
		*s.dst = &side{Message: s.m.ID, Event: s.m.EventTimestamp, Record: rec}
	}
	b, err := json.Marshal(&st)
	require.NoError(t, err)
	return b
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
	require.Equal(t, abi.StateKeep, k.StateOp, "no state before, none after")
	require.Empty(t, k.TimersSet, "the timer set for the order is withdrawn in the same batch")
	require.Equal(t, []int64{o.EventTimestamp + expire}, k.TimersCancel)
}

func TestPaymentMeetsOrderInState(t *testing.T) {
	o, p := order("o-2", t0), payment("o-2", t0+int64(time.Minute))
	k := runJoin(t, request(abi.RequestKey{Key: `["o-2"]`, State: stateOf(t, &o, nil, t0+expire), Messages: []abi.Message{p}}))
	require.Len(t, k.Emits, 1)
	require.Equal(t, []uint32{0}, k.Emits[0].Parents, "the order is in state, not an input: only the payment is a parent")
	require.Equal(t, o.ID, decode(t, k.Emits[0].Payload)["order_message"], "the payload keeps the order's id")
	require.Equal(t, abi.StateDelete, k.StateOp)
	require.Equal(t, []int64{t0 + expire}, k.TimersCancel)
}

func TestFirstSideWaitsWithATimer(t *testing.T) {
	p := payment("o-3", t0)
	k := runJoin(t, request(abi.RequestKey{Key: `["o-3"]`, Messages: []abi.Message{p}}))
	require.Empty(t, k.Emits)
	require.Equal(t, abi.StateReplace, k.StateOp)
	require.Len(t, k.TimersSet, 1)
	require.Equal(t, t0+expire, k.TimersSet[0].TriggerTimestamp)
	require.Equal(t, t0, *k.TimersSet[0].EventTimestamp, "the pending timer holds the watermark at the payment's time")
	var st joinState
	require.NoError(t, json.Unmarshal(k.State, &st))
	require.Nil(t, st.Order)
	require.Equal(t, p.ID, st.Payment.Message)
	require.Equal(t, t0+expire, st.Expire)
}

func TestExpiredSideGoesToUnmatched(t *testing.T) {
	o := order("o-4", t0)
	timer := abi.DueTimer{ID: "join.timers/p0:0", TriggerTimestamp: t0 + expire, EventTimestamp: t0}
	k := runJoin(t, request(abi.RequestKey{Key: `["o-4"]`, State: stateOf(t, &o, nil, t0+expire), Timers: []abi.DueTimer{timer}}))
	require.Len(t, k.Emits, 1)
	e := k.Emits[0]
	require.Equal(t, "unmatched", e.Stream)
	require.Equal(t, []uint32{0}, e.Parents, "its parent is the timer")
	got := decode(t, e.Payload)
	require.Equal(t, "expired", got["reason"])
	require.Equal(t, "order", got["side"])
	require.Equal(t, "o-4", got["order_id"])
	require.Equal(t, abi.StateDelete, k.StateOp)
}

func TestDuplicateIsReportedNotJoinedTwice(t *testing.T) {
	o := order("o-5", t0)
	again := order("o-5", t0+1)
	again.ID = "orders/p0:dup"
	k := runJoin(t, request(abi.RequestKey{Key: `["o-5"]`, State: stateOf(t, &o, nil, t0+expire), Messages: []abi.Message{again}}))
	require.Len(t, k.Emits, 1)
	got := decode(t, k.Emits[0].Payload)
	require.Equal(t, "duplicate", got["reason"])
	require.Equal(t, again.ID, got["message"])
	require.Equal(t, abi.StateKeep, k.StateOp, "the first order keeps waiting")
}

func TestStaleTimerDoesNothing(t *testing.T) {
	timer := abi.DueTimer{ID: "join.timers/p0:9", TriggerTimestamp: t0, EventTimestamp: t0}
	resp, err := flowhost.Run(join, initEnvelope(nil, "joined", "unmatched"), request(abi.RequestKey{Key: `["o-6"]`, Timers: []abi.DueTimer{timer}}))
	require.NoError(t, err)
	require.Empty(t, resp.Keys, "a timer of a pair joined since has nothing to report")
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
		{"joined missing", nil, []string{"out"}, `output stream "joined"`},
		{"expire without unmatched", map[string]any{"expire": "5m"}, []string{"joined"}, `"unmatched" (parameter "unmatched") is not declared`},
		{"negative expire", map[string]any{"expire": "-5m"}, []string{"joined", "unmatched"}, "must not be negative"},
		{"expire off without unmatched", map[string]any{"expire": "0s"}, []string{"joined"}, ""},
		{"renamed streams", map[string]any{"joined": "pairs", "expire": "0s"}, []string{"pairs"}, ""},
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
