package rust_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/rust"
)

func ptr(v int64) *int64 { return &v }

// conformanceInit is the init the suite of sdk/conformance gives every
// guest, with parameters for `param:`.
var conformanceInit = abi.Init{
	ABI: abi.Version, Computation: "conform", Kind: abi.KindTransform, Partition: 3,
	Parameters:    map[string]any{"greeting": "hi", "n": int64(42), "flag": true, "ratio": 0.5, "nothing": nil},
	OutputStreams: []string{"out", "side"},
}

// msg is a message of a conformance request; its timestamps derive from n
// so that every field of `meta` is distinct.
func msg(id string, n int64, payload string) abi.Message {
	return abi.Message{ID: id, Stream: "in", EventTimestamp: n, SystemTimestamp: n + 1, AlignmentTimestamp: n + 2, Payload: []byte(payload)}
}

func conformanceRequest(kind abi.Kind, keys ...abi.RequestKey) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "conform", Kind: kind, Partition: 3, Epoch: 9,
		Watermarks: abi.Watermarks{Event: -5, System: 77}, Keys: keys}
}

func emit(stream, payload string, parents ...uint32) abi.Emit {
	e := abi.Emit{Stream: stream, Payload: []byte(payload)}
	if len(parents) > 0 {
		e.Parents = parents
	}
	return e
}

// TestConformanceGuest drives the conformance guest (conformance/) with
// scripted batches and requires the responses SCRIPT.md prescribes,
// worked out by hand from it; the suite in sdk/conformance compares the
// same guest with the other languages' byte for byte.
func TestConformanceGuest(t *testing.T) {
	cases := []struct {
		name string
		req  *abi.Request
		want *abi.Response
	}{{
		name: "no keys",
		req:  conformanceRequest(abi.KindTransform),
		want: &abi.Response{Keys: []abi.ResponseKey{}},
	}, {
		name: "echo, including non-text payloads",
		req: conformanceRequest(abi.KindTransform,
			abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{msg("m1", 1, "hello"), msg("m2", 2, "\x00\xff!")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{{Key: `["a"]`, Emits: []abi.Emit{emit("out", "hello", 0), emit("out", "\x00\xff!", 1)}}}},
	}, {
		name: "timers come first in input numbering",
		req: conformanceRequest(abi.KindTransform, abi.RequestKey{Key: `["a"]`,
			Timers:   []abi.DueTimer{{ID: "t1", TriggerTimestamp: 100, EventTimestamp: 90, Payload: []byte("p:q")}, {ID: "t2", TriggerTimestamp: -7, EventTimestamp: -7}},
			Messages: []abi.Message{msg("m1", 1, "!emit:side:x")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{{Key: `["a"]`, Emits: []abi.Emit{
			emit("out", "timer:100:p:q", 0), emit("out", "timer:-7:", 1), emit("side", "x", 2)}}}},
	}, {
		name: "emit variants",
		req: conformanceRequest(abi.KindTransform, abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{
			msg("m1", 1, "plain"), msg("m2", 2, "!emitk:out:K:a:b;emite:side:-5:t;emitall:out:all;emitnone:out:none;emit:out:")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{{Key: `["a"]`, Emits: []abi.Emit{
			emit("out", "plain", 0),
			{Stream: "out", Key: "K", Payload: []byte("a:b"), Parents: []uint32{1}},
			{Stream: "side", Payload: []byte("t"), EventTimestamp: ptr(-5), Parents: []uint32{1}},
			emit("out", "all", 0, 1),
			emit("out", "none"),
			emit("out", "", 1),
		}}}},
	}, {
		name: "state is the net effect",
		req: conformanceRequest(abi.KindTransform,
			abi.RequestKey{Key: `["a"]`, State: []byte("old"), Messages: []abi.Message{msg("m1", 1, "!showstate;append;showstate;delstate;showstate;state:new")}},
			abi.RequestKey{Key: `["b"]`, State: []byte("x"), Messages: []abi.Message{msg("m2", 2, "!state:y;delstate")}},
			abi.RequestKey{Key: `["c"]`, Messages: []abi.Message{msg("m3", 3, "!showstate;append"), msg("m4", 4, "!append;showstate")}},
			abi.RequestKey{Key: `["d"]`, State: []byte{}, Messages: []abi.Message{msg("m5", 5, "!showstate")}},
		),
		want: &abi.Response{Keys: []abi.ResponseKey{
			{Key: `["a"]`, Emits: []abi.Emit{emit("out", "state:old", 0), emit("out", "state:oldm1,", 0), emit("out", "state:none", 0)},
				StateOp: abi.StateReplace, State: []byte("new")},
			{Key: `["b"]`, StateOp: abi.StateDelete},
			{Key: `["c"]`, Emits: []abi.Emit{emit("out", "state:none", 0), emit("out", "state:m3,m4,", 1)},
				StateOp: abi.StateReplace, State: []byte("m3,m4,")},
			{Key: `["d"]`, Emits: []abi.Emit{emit("out", "state:", 0)}},
		}},
	}, {
		name: "timers are reported as the Go SDK does",
		req: conformanceRequest(abi.KindTransform, abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{
			msg("m1", 1, "!timer:10;timerp:20:15:pay:load;timer:10;cancel:10;timer:10;cancel:30;cancel:10;timerp:40:-1:")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{{Key: `["a"]`,
			TimersSet:    []abi.Timer{{TriggerTimestamp: 20, EventTimestamp: ptr(15), Payload: []byte("pay:load")}, {TriggerTimestamp: 40, EventTimestamp: ptr(-1)}},
			TimersCancel: []int64{10, 30}}}},
	}, {
		name: "parameters",
		req: conformanceRequest(abi.KindTransform, abi.RequestKey{Key: "", Messages: []abi.Message{
			msg("m1", 1, "!param:greeting;param:n;param:flag;param:ratio;param:nothing;param:absent")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{{Key: "", Emits: []abi.Emit{
			emit("out", "param:greeting=hi", 0), emit("out", "param:n=42", 0), emit("out", "param:flag=true", 0),
			emit("out", "param:ratio=?", 0), emit("out", "param:nothing=?", 0), emit("out", "param:absent=missing", 0)}}}},
	}, {
		name: "meta",
		req:  conformanceRequest(abi.KindMap, abi.RequestKey{Key: `["a",1]`, Messages: []abi.Message{msg("x", 1, "echo"), msg("m1", -1000, "!meta")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{{Key: `["a",1]`, Emits: []abi.Emit{emit("out", "echo", 0), emit("out",
			`meta:key=["a",1],stream=in,id=m1,event=-1000,system=-999,alignment=-998,wm=-5/77,partition=3,epoch=9,computation=conform,kind=map`, 1)}}}},
	}, {
		name: "a failed key reports only its first error",
		req: conformanceRequest(abi.KindTransform,
			abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{msg("m1", 1, "!emit:out:a;state:s;timer:5;failkey:bad;failkey:worse")}},
			abi.RequestKey{Key: `["b"]`, Messages: []abi.Message{msg("m2", 2, "!failkey:")}},
			abi.RequestKey{Key: `["c"]`, Messages: []abi.Message{msg("m3", 3, "fine")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{
			{Key: `["a"]`, Error: "bad"},
			{Key: `["b"]`, Error: "failed (the error has no message)"},
			{Key: `["c"]`, Emits: []abi.Emit{emit("out", "fine", 0)}},
		}},
	}, {
		name: "malformed commands fail the key with the Go guest's words",
		req: conformanceRequest(abi.KindTransform,
			abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{msg("m1", 1, "!frob:x;emit:out:late")}},
			abi.RequestKey{Key: `["b"]`, Messages: []abi.Message{msg("m2", 2, "!emit:out")}},
			abi.RequestKey{Key: `["c"]`, Messages: []abi.Message{msg("m3", 3, "!timer:1e3")}},
			abi.RequestKey{Key: `["d"]`, Messages: []abi.Message{msg("m4", 4, "!emite:out:99999999999999999999:x")}},
			abi.RequestKey{Key: `["e"]`, Messages: []abi.Message{msg("m5", 5, "!")}},
			abi.RequestKey{Key: `["f"]`, Messages: []abi.Message{msg("m6", 6, "!emitk:out:k")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{
			{Key: `["a"]`, Error: "unknown command frob"},
			{Key: `["b"]`, Error: `bad command "emit:out": emit takes 2 arguments`},
			{Key: `["c"]`, Error: `bad command "timer:1e3": strconv.ParseInt: parsing "1e3": invalid syntax`},
			{Key: `["d"]`, Error: `bad command "emite:out:99999999999999999999:x": strconv.ParseInt: parsing "99999999999999999999": value out of range`},
			{Key: `["e"]`, Error: "unknown command "},
			{Key: `["f"]`, Error: `bad command "emitk:out:k": emitk takes 3 arguments`},
		}},
	}, {
		name: "failbatch drops everything",
		req: conformanceRequest(abi.KindTransform,
			abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{msg("m1", 1, "echoed")}},
			abi.RequestKey{Key: `["b"]`, Messages: []abi.Message{msg("m2", 2, "!failkey:first;failbatch:boom:really"), msg("m3", 3, "!failbatch:later")}}),
		want: &abi.Response{Keys: []abi.ResponseKey{}, Error: "boom:really"},
	}}

	m := compiledModule(t, "conformance")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inst := instantiate(t, m)
			initWith(t, inst, &conformanceInit)
			reqBytes, err := abi.EncodeRequest(c.req)
			require.NoError(t, err)
			got, err := inst.Process(context.Background(), reqBytes)
			require.NoError(t, err)
			resp, err := abi.DecodeResponse(got, abi.ResponseLimits{})
			require.NoError(t, err)
			require.Equal(t, c.want, resp)
			require.NoError(t, abi.ValidateResponse(resp, c.req, conformanceInit.OutputStreams))
			canonical, err := abi.EncodeResponse(resp)
			require.NoError(t, err)
			require.Equal(t, canonical, bytes.Clone(got), "the guest's encoding is not canonical")
		})
	}
}

// syncBuffer collects a guest's log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConformanceGuestFailures covers what the guest answers with a
// status or an init result instead of a response: a misuse of the SDK
// (status -2, with a log line naming the call's source location, where
// the Go SDK panics into the same status), and fail_init.
func TestConformanceGuestFailures(t *testing.T) {
	var logs syncBuffer
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig().WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(ctx) })
	m, err := e.Compile(ctx, "rust-conformance", module(t, "conformance"))
	require.NoError(t, err)

	misuses := []struct {
		name   string
		kind   abi.Kind
		script string
		log    string
	}{
		{"undeclared stream", abi.KindTransform, "!emit:nope:x", `emit to \"nope\", which is not a declared output stream (declared: out, side) (at conformance/src/lib.rs:`},
		{"state in a map", abi.KindMap, "!state:x", "set_state in a map computation; only a transform keeps state and timers (at conformance/src/lib.rs:"},
		{"timer in a map", abi.KindMap, "!emit:out:fine;cancel:5", "cancel_timer in a map computation"},
	}
	for _, c := range misuses {
		t.Run(c.name, func(t *testing.T) {
			inst := instantiate(t, m)
			initWith(t, inst, &conformanceInit)
			req, err := abi.EncodeRequest(conformanceRequest(c.kind, abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{msg("m1", 1, c.script)}}))
			require.NoError(t, err)
			_, err = inst.Process(ctx, req)
			var ge *engine.GuestError
			require.ErrorAs(t, err, &ge)
			require.ErrorIs(t, err, engine.ErrStatus)
			require.Equal(t, int64(abi.StatusGuestFailure), ge.Status)
			require.Contains(t, logs.String(), c.log)
			// The instance survives a misuse.
			req, err = abi.EncodeRequest(conformanceRequest(c.kind, abi.RequestKey{Key: `["a"]`, Messages: []abi.Message{msg("m2", 2, "ok")}}))
			require.NoError(t, err)
			_, err = inst.Process(ctx, req)
			require.NoError(t, err)
		})
	}

	t.Run("fail_init", func(t *testing.T) {
		inst := instantiate(t, m)
		in := conformanceInit
		in.Parameters = map[string]any{"fail_init": "not today"}
		b, err := abi.EncodeInit(&in)
		require.NoError(t, err)
		res, err := inst.Init(ctx, b)
		require.NoError(t, err)
		want, err := abi.EncodeInitResult(&abi.InitResult{Error: "not today"})
		require.NoError(t, err)
		require.Equal(t, want, bytes.Clone(res))
		_, err = inst.Process(ctx, []byte("\xa0"))
		require.ErrorIs(t, err, engine.ErrStatus, "a refused guest processes nothing")
		require.True(t, strings.Contains(logs.String(), "before a successful flowhost_init"), logs.String())
	})

	t.Run("fail_init of another type is ignored", func(t *testing.T) {
		inst := instantiate(t, m)
		in := conformanceInit
		in.Parameters = map[string]any{"fail_init": int64(1)}
		initWith(t, inst, &in)
	})
}

// TestBuildConformanceGuest checks the entry point the conformance suite
// registers.
func TestBuildConformanceGuest(t *testing.T) {
	path, err := rust.BuildConformanceGuest(t.TempDir())
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(path, "flowhost_conformance.wasm"), path)
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	info, err := engine.Inspect(wasm)
	require.NoError(t, err)
	require.NoError(t, engine.CheckABI("conformance", info, engine.Capabilities{}))
}
