package assemblyscript_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// windowInstance starts the window guest configured for sp.
func windowInstance(tb testing.TB, m engine.Module, sp winSpec) engine.Instance {
	tb.Helper()
	inst := instantiate(tb, m)
	initGuest(tb, inst, &abi.Init{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform,
		Parameters: sp.params(), OutputStreams: winOutputs})
	return inst
}

// stateRequest is one key with state, a due timer at trigger and a
// message at ts.
func stateRequest(state []byte, trigger, ts int64) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 1,
		Keys: []abi.RequestKey{{Key: "k", State: state,
			Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: trigger, EventTimestamp: trigger}},
			Messages: []abi.Message{{ID: "m", Stream: "in", EventTimestamp: ts, Payload: []byte("x")}}}}}
}

// TestWindowStateBytes pins the encoding on one example, before 1970:
// version 1, fired_through MinInt64 (none), one window [-10, 0) with the
// count 1.
func TestWindowStateBytes(t *testing.T) {
	m, _ := guestModule(t, windowGuest)
	inst := windowInstance(t, m, winSpec{kind: "tumbling", size: 10})
	req := stateRequest(nil, math.MinInt64, -5)
	req.Keys[0].Timers = nil
	resp := process(t, inst, req, winOutputs)
	require.Len(t, resp.Keys, 1)
	want := []byte{1}
	want = binary.AppendVarint(want, math.MinInt64)
	want = append(want, 1, 19 /* varint -10 */, 0 /* varint 0 */, 1, 1)
	require.Equal(t, abi.StateReplace, resp.Keys[0].StateOp)
	require.Equal(t, want, resp.Keys[0].State)
	require.Equal(t, []abi.Timer{{TriggerTimestamp: 0}}, resp.Keys[0].TimersSet)

	// The timer at 0 fires the window; the key keeps its fired_through.
	resp = process(t, inst, &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 2,
		Keys: []abi.RequestKey{{Key: "k", State: want, Timers: []abi.DueTimer{{ID: "t", TriggerTimestamp: 0}}}}}, winOutputs)
	require.Len(t, resp.Keys, 1)
	require.Len(t, resp.Keys[0].Emits, 1)
	e := resp.Keys[0].Emits[0]
	require.Equal(t, `{"start":-10,"end":0,"count":1}`, string(e.Payload))
	require.Equal(t, []uint32{0}, e.Parents, "the firing timer is the only parent")
	require.NotNil(t, e.EventTimestamp)
	require.Equal(t, int64(-1), *e.EventTimestamp)
	require.Equal(t, []byte{1, 0, 0}, resp.Keys[0].State)
}

// TestWindowStateRefused: a state that is not the encoding fails the key
// (nothing else is reported for it) with the Go helper's error, word for
// word, naming what is wrong.
func TestWindowStateRefused(t *testing.T) {
	m, _ := guestModule(t, windowGuest)
	inst := windowInstance(t, m, winSpec{kind: "tumbling", size: 10})
	overflow := []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0}
	for _, tc := range []struct {
		name  string
		state []byte
		want  string
	}{
		{"empty", []byte{}, "missing or unknown version byte"},
		{"unknown version", []byte{9}, "missing or unknown version byte"},
		{"truncated fired-through", []byte{1, 0x80}, "bad fired-through"},
		{"fired-through overflows 64 bits", overflow, "bad fired-through"},
		{"truncated count", []byte{1, 0}, "bad window count"},
		{"count larger than the state", []byte{1, 0, 5, 0}, "bad window count"},
		{"truncated start", []byte{1, 0, 1, 0x80}, "bad window start"},
		{"missing end", []byte{1, 0, 1, 0}, "bad window end"},
		{"accumulator past the end", []byte{1, 0, 1, 0, 2, 50}, "bad accumulator length"},
		{"trailing bytes", []byte{1, 0, 0, 0}, "trailing bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := stateRequest(tc.state, 5, 3)
			resp := process(t, inst, req, winOutputs)
			want := flowhost.ErrWindowState.Error() + ": " + tc.want
			require.Equal(t, []abi.ResponseKey{{Key: "k", Error: want}}, resp.Keys)
			goResp, err := flowhost.Run(goWindows(winSpec{kind: "tumbling", size: 10}), nil, req)
			require.NoError(t, err)
			require.Equal(t, goResp.Keys, resp.Keys, "the Go helper's answer")
		})
	}
}

// FuzzWindowState gives the window guest arbitrary states with a due
// timer and a message, for each window kind, and requires the Go helper's
// answer byte for byte: the same refusal of a bad state, or the same
// emits, state and timers from a good one. The guest never traps.
func FuzzWindowState(f *testing.F) {
	good := []byte{1}
	good = binary.AppendVarint(good, math.MinInt64)
	good = append(good, 2, 19, 0, 1, 1, 0, 20, 1, 3)
	f.Add(good, uint8(0), int64(0), int64(4))
	f.Add(good, uint8(2), int64(30), int64(-3))
	f.Add([]byte{1, 0, 0}, uint8(1), int64(-10), int64(-9))
	f.Add([]byte{}, uint8(0), int64(0), int64(0))
	f.Add([]byte{1, 0, 1, 0, 2, 50}, uint8(2), int64(0), int64(0))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0}, uint8(1), int64(1), int64(1))
	m, _ := guestModule(f, windowGuest)
	specs := []winSpec{
		{kind: "tumbling", size: 10, lateness: 2},
		{kind: "hopping", size: 10, advance: 3},
		{kind: "session", gap: 4, lateness: 3},
	}
	insts := make([]engine.Instance, len(specs))
	for i, sp := range specs {
		insts[i] = windowInstance(f, m, sp)
	}
	f.Fuzz(func(t *testing.T, state []byte, kind uint8, trigger, ts int64) {
		i := int(kind) % len(specs)
		req := stateRequest(state, trigger, ts)
		raw, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		out, err := insts[i].Process(context.Background(), raw)
		if err != nil {
			t.Fatalf("state %x: %v", state, err)
		}
		goResp, err := flowhost.Run(goWindows(specs[i]), nil, req)
		require.NoError(t, err)
		goBytes, err := abi.EncodeResponse(goResp)
		require.NoError(t, err)
		if !bytes.Equal(out, goBytes) {
			resp, _ := abi.DecodeResponse(out, abi.ResponseLimits{})
			t.Fatalf("state %x, %s: the AssemblyScript answer differs from the Go helper's\n as %+v\n go %+v", state, specs[i].kind, resp, goResp)
		}
	})
}

// TestWindowGuestInit: the window guest refuses a missing or bad
// parameter with an error that names it.
func TestWindowGuestInit(t *testing.T) {
	m, _ := guestModule(t, windowGuest)
	for _, tc := range []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"no kind", map[string]any{"size_ns": 10}, `parameter "kind" is missing`},
		{"unknown kind", map[string]any{"kind": "sliding"}, `parameter "kind": must be tumbling, hopping or session, got "sliding"`},
		{"no size", map[string]any{"kind": "tumbling"}, `parameter "size_ns" is missing`},
		{"size not an integer", map[string]any{"kind": "tumbling", "size_ns": "10s"}, `parameter "size_ns": expected integer, got string`},
		{"size zero", map[string]any{"kind": "tumbling", "size_ns": 0}, `parameter "size_ns": must be positive, got 0`},
		{"no advance", map[string]any{"kind": "hopping", "size_ns": 10}, `parameter "advance_ns" is missing`},
		{"advance over size", map[string]any{"kind": "hopping", "size_ns": 10, "advance_ns": 11}, `parameter "advance_ns": must not exceed size_ns (10), got 11`},
		{"no gap", map[string]any{"kind": "session"}, `parameter "gap_ns" is missing`},
		{"negative lateness", map[string]any{"kind": "session", "gap_ns": 4, "lateness_ns": -1}, `parameter "lateness_ns": must not be negative, got -1`},
		{"lateness not an integer", map[string]any{"kind": "session", "gap_ns": 4, "lateness_ns": true}, `parameter "lateness_ns": expected integer, got bool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := call(t, instantiate(t, m).Init, mustEncodeInit(t, &abi.Init{ABI: abi.Version, Computation: "win",
				Kind: abi.KindTransform, Parameters: tc.params, OutputStreams: winOutputs}))
			result, err := abi.DecodeInitResult(got.result)
			require.NoError(t, err)
			require.Equal(t, tc.want, result.Error)
		})
	}
	// Every kind starts with its parameters, lateness_ns optional.
	for _, sp := range winSpecs {
		windowInstance(t, m, sp)
	}
}

// TestWindowsKeepTimerSetInCall: two records of one session in one call.
// The first sets the timer at 104; the second grows the session to end at
// 105, and the timer at 104, set in this very call, is not cancelled (the
// host re-cuts a batch only for the timers its response sets, so
// cancelling it would make the result depend on the cut). A timer of an
// earlier call is cancelled when its session grows.
func TestWindowsKeepTimerSetInCall(t *testing.T) {
	m, _ := guestModule(t, windowGuest)
	inst := windowInstance(t, m, winSpec{kind: "session", gap: 4})
	msg := func(id string, ts int64) abi.Message {
		return abi.Message{ID: id, Stream: "in", EventTimestamp: ts, Payload: []byte(id)}
	}
	resp := process(t, inst, &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 1,
		Keys: []abi.RequestKey{{Key: "k", Messages: []abi.Message{msg("a", 100), msg("b", 101)}}}}, winOutputs)
	require.Len(t, resp.Keys, 1)
	require.Equal(t, []abi.Timer{{TriggerTimestamp: 104}, {TriggerTimestamp: 105}}, resp.Keys[0].TimersSet)
	require.Empty(t, resp.Keys[0].TimersCancel)

	resp = process(t, inst, &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 2,
		Keys: []abi.RequestKey{{Key: "k", State: resp.Keys[0].State, Messages: []abi.Message{msg("c", 103)}}}}, winOutputs)
	require.Len(t, resp.Keys, 1)
	require.Equal(t, []int64{105}, resp.Keys[0].TimersCancel, "the earlier call's timer moves")
	require.Equal(t, []abi.Timer{{TriggerTimestamp: 107}}, resp.Keys[0].TimersSet)
}

// TestBuildWindowGuest builds the window guest with BuildWindowGuest (the
// other tests may take it from the build cache) and runs a batch on it:
// one tumbling window fired by its timer, one late record.
func TestBuildWindowGuest(t *testing.T) {
	path, err := assemblyscript.BuildWindowGuest(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, "assemblyscript-windowguest.wasm", filepath.Base(path))
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close(ctx)) })
	m, err := e.Compile(ctx, "as-windowguest-fresh", wasm)
	require.NoError(t, err)
	inst := windowInstance(t, m, winSpec{kind: "tumbling", size: 10})
	state := []byte{1}
	state = binary.AppendVarint(state, math.MinInt64)
	state = append(state, 1, 0 /* start 0 */, 20 /* end 10 */, 1, 2 /* count 2 */)
	resp := process(t, inst, &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Epoch: 1,
		Keys: []abi.RequestKey{{Key: "k", State: state, Timers: []abi.DueTimer{{ID: "t", TriggerTimestamp: 10}},
			Messages: []abi.Message{{ID: "m", Stream: "in", EventTimestamp: 9, Payload: []byte("late one")}}}}}, winOutputs)
	require.Len(t, resp.Keys, 1)
	rk := resp.Keys[0]
	require.Len(t, rk.Emits, 2)
	require.Equal(t, "windows", rk.Emits[0].Stream)
	require.Equal(t, `{"start":0,"end":10,"count":2}`, string(rk.Emits[0].Payload))
	require.Equal(t, "late", rk.Emits[1].Stream)
	require.Equal(t, "late one", string(rk.Emits[1].Payload))
	require.Equal(t, []uint32{1}, rk.Emits[1].Parents, "a late record is its own parent")
	require.Equal(t, append([]byte{1}, binary.AppendVarint(nil, 10)[0], 0), rk.State, "fired_through 10, no window open")
}
