package wat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/wat"
)

// built holds each guest's module, built and compiled once per test binary.
var built = struct {
	once    sync.Once
	err     error
	engine  engine.Engine
	wasm    map[string][]byte
	modules map[string]engine.Module
}{}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.engine != nil {
		_ = built.engine.Close(context.Background())
	}
	os.Exit(code)
}

// module returns the compiled guest called name, building every guest
// with wat2wasm on first use. A missing wat2wasm fails the test with the
// package to install.
func module(tb testing.TB, name string) engine.Module {
	tb.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "flowhost-wat-")
		if err != nil {
			built.err = err
			return
		}
		defer os.RemoveAll(dir)
		built.engine, built.err = engine.NewWazero(context.Background(), engine.NewConfig())
		if built.err != nil {
			return
		}
		built.wasm, built.modules = map[string][]byte{}, map[string]engine.Module{}
		for _, g := range []string{wat.Identity, wat.Echo, wat.Conformance} {
			path, err := wat.Build(dir, g)
			if err != nil {
				built.err = err
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				built.err = err
				return
			}
			built.wasm[g] = b
			if built.modules[g], err = built.engine.Compile(context.Background(), g, b); err != nil {
				built.err = err
				return
			}
		}
	})
	require.NoError(tb, built.err)
	return built.modules[name]
}

func instance(tb testing.TB, name string) engine.Instance {
	tb.Helper()
	inst, err := module(tb, name).Instantiate(context.Background(), engine.NewInstanceConfig())
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = inst.Close(context.Background()) })
	return inst
}

// process encodes req, runs it through inst and returns a copy of the raw
// response.
func process(tb testing.TB, inst engine.Instance, req *abi.Request) []byte {
	tb.Helper()
	b, err := abi.EncodeRequest(req)
	require.NoError(tb, err)
	out, err := inst.Process(context.Background(), b)
	require.NoError(tb, err)
	return bytes.Clone(out)
}

// nothing is the response a guest with nothing to report gives: the
// canonical encoding of {"keys": []}, built by the host's encoder.
func nothing(tb testing.TB) []byte {
	tb.Helper()
	b, err := abi.EncodeResponse(&abi.Response{Keys: []abi.ResponseKey{}})
	require.NoError(tb, err)
	return b
}

// outputs are the streams the guests' responses are validated against.
var outputs = []string{"out"}

func newRequest(keys ...abi.RequestKey) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "wat", Kind: abi.KindTransform, Partition: 3, Epoch: 42,
		Watermarks: abi.Watermarks{Event: -1, System: 1_700_000_000_000_000_000}, Keys: keys}
}

// messages returns a key's messages with the given payloads.
func messages(key string, payloads ...[]byte) abi.RequestKey {
	k := abi.RequestKey{Key: key}
	for i, p := range payloads {
		k.Messages = append(k.Messages, abi.Message{ID: key + "/" + string(rune('a'+i%26)), Stream: "in",
			EventTimestamp: int64(i), SystemTimestamp: int64(i) + 10, AlignmentTimestamp: int64(i) + 10, Payload: p})
	}
	return k
}

func timers(k abi.RequestKey, n int) abi.RequestKey {
	for i := range n {
		k.Timers = append(k.Timers, abi.DueTimer{ID: k.Key + "/t", TriggerTimestamp: int64(i), EventTimestamp: int64(i), Payload: []byte("p")})
	}
	return k
}

func payloadOf(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestBuildUnknownGuest(t *testing.T) {
	_, err := wat.Build(t.TempDir(), "nope")
	require.ErrorContains(t, err, `no guest "nope"`)
}

// TestInterface checks that every guest exports exactly the ABI's required
// exports (and the conformance guest flowhost_init) and imports nothing.
func TestInterface(t *testing.T) {
	for _, g := range []string{wat.Identity, wat.Echo, wat.Conformance} {
		t.Run(g, func(t *testing.T) {
			module(t, g)
			info, err := engine.Inspect(built.wasm[g])
			require.NoError(t, err)
			require.NoError(t, engine.CheckABI(g, info, engine.Capabilities{}))
			require.Empty(t, info.Imports)
			var names []string
			for _, e := range info.Exports {
				names = append(names, e.Name)
			}
			slices.Sort(names)
			want := []string{abi.ExportVersionMarker, abi.ExportAlloc, abi.ExportProcess, abi.ExportMemory}
			if g == wat.Conformance {
				want = []string{abi.ExportVersionMarker, abi.ExportAlloc, abi.ExportInit, abi.ExportProcess, abi.ExportMemory}
			}
			require.Equal(t, want, names)
		})
	}
}

// TestIdentity requires the no-op guest to answer every batch, whatever
// it holds, with the valid response that reports nothing.
func TestIdentity(t *testing.T) {
	want := nothing(t)
	require.Equal(t, []byte{0xa1, 0x64, 'k', 'e', 'y', 's', 0x80}, want, "the response identity.wat hard-codes")
	inst := instance(t, wat.Identity)
	tests := []struct {
		name string
		req  *abi.Request
	}{
		{"empty batch", newRequest()},
		{"one key", newRequest(messages("k", []byte("v")))},
		{"timers and messages", newRequest(timers(messages("k", []byte("v")), 2), timers(abi.RequestKey{Key: "t"}, 1))},
		{"map kind", func() *abi.Request { r := newRequest(messages("k", []byte("v"))); r.Kind = abi.KindMap; return r }()},
		{"4 MiB payload grows memory", newRequest(messages("big", payloadOf(4<<20)))},
		{"small again", newRequest(messages("k", nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := process(t, inst, tt.req)
			require.Equal(t, want, out)
			resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
			require.NoError(t, err)
			require.NoError(t, abi.ValidateResponse(resp, tt.req, outputs))
		})
	}
}

// requireEchoed requires out to be exactly the canonical encoding of the
// echo of req, and valid.
func requireEchoed(t *testing.T, req *abi.Request, out []byte) {
	t.Helper()
	want, err := abi.EncodeResponse(wat.EchoResponse(req))
	require.NoError(t, err)
	if !bytes.Equal(want, out) {
		got, err := abi.DecodeResponse(out, abi.ResponseLimits{})
		require.NoError(t, err, "echo.wat's response does not decode")
		require.Equal(t, wat.EchoResponse(req), got)
		require.Fail(t, "same response, different bytes", "got  %x\nwant %x", out, want)
	}
	resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	require.NoError(t, err)
	require.NoError(t, abi.ValidateResponse(resp, req, outputs))
}

func manyKeys(n int) []abi.RequestKey {
	keys := make([]abi.RequestKey, n)
	for i := range keys {
		keys[i] = messages(strings.Repeat("k", i%40)+string(rune('a'+i%26))+string(rune('0'+i/26%10))+string(rune('A'+i/260)), []byte{byte(i)})
	}
	return keys
}

// TestEcho runs echo.wat on requests chosen to cross every head-size
// boundary of its encoder and every shape of its input.
func TestEcho(t *testing.T) {
	inst := instance(t, wat.Echo)
	many := make([][]byte, 30)
	for i := range many {
		many[i] = []byte{byte('a' + i%26)}
	}
	tests := []struct {
		name string
		req  *abi.Request
	}{
		{"empty batch", newRequest()},
		{"one message", newRequest(messages("k", []byte("hello")))},
		{"empty payload and empty key", newRequest(messages("", []byte{}))},
		{"timers shift the parents", newRequest(timers(messages("k", []byte("a"), []byte("b")), 2))},
		{"a key with only timers is left out", newRequest(timers(abi.RequestKey{Key: "t"}, 3), messages("m", []byte("x")))},
		{"30 timers: a parent index above 23", newRequest(timers(messages("k", []byte("x")), 30))},
		{"30 messages: an emits array above 23", newRequest(messages("k", many...))},
		{"unicode", newRequest(messages("ключ 鍵 🔑", []byte("héllo 😀 𝄞"), []byte{0xff, 0xfe, 0x00}), messages("e\u0301", []byte("!not a script here")))},
		{"payloads around head sizes", newRequest(messages("k", payloadOf(23), payloadOf(24), payloadOf(255), payloadOf(256), payloadOf(65535), payloadOf(65536)))},
		{"1 MiB payload", newRequest(messages("big", payloadOf(1<<20)))},
		{"23 keys", newRequest(manyKeys(23)...)},
		{"24 keys", newRequest(manyKeys(24)...)},
		{"300 keys", newRequest(manyKeys(300)...)},
		{"map kind", func() *abi.Request { r := newRequest(messages("k", []byte("v"))); r.Kind = abi.KindMap; return r }()},
		{"small after large", newRequest(messages("k", []byte("v")))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireEchoed(t, tt.req, process(t, inst, tt.req))
		})
	}
}

// TestEchoFieldOrder sends requests whose maps are not in canonical order
// (the host always sends canonical ones, but ABI.md lets map keys appear in
// any order): messages before the key and the timers, abi last.
func TestEchoFieldOrder(t *testing.T) {
	inst := instance(t, wat.Echo)
	msg := func(id, payload string) item {
		return mapOf(p("payload", bstr([]byte(payload))), p("alignment_ts", uint_(3)), p("stream", text("in")),
			p("system_ts", uint_(2)), p("id", text(id)), p("event_ts", neg(4)))
	}
	timer := mapOf(p("trigger_ts", uint_(5)), p("payload", bstr([]byte("p"))), p("event_ts", uint_(5)), p("id", text("t")))
	key := mapOf(p("messages", arr(msg("1", "first"), msg("2", "second"))), p("state", bstr(nil)), p("timers", arr(timer)), p("key", text("k")))
	b := mapOf(p("computation", text("c")), p("watermarks", mapOf(p("system", uint_(0)), p("event", neg(0)))),
		p("partition", uint_(0)), p("epoch", uint_(1)), p("kind", text("map")), p("keys", arr(key)), p("abi", uint_(1)))
	req, err := abi.DecodeRequest(b)
	require.NoError(t, err, "the host's decoder accepts any key order")
	out, err := inst.Process(context.Background(), b)
	require.NoError(t, err)
	requireEchoed(t, req, out)
}

// TestEchoRejects requires status -1 for every envelope the host's strict
// decoder refuses, and -3 for another ABI version.
func TestEchoRejects(t *testing.T) {
	inst := instance(t, wat.Echo)
	tests := []struct {
		name   string
		req    []byte
		status int64
	}{
		{"empty", nil, -1},
		{"not a map", arr(), -1},
		{"truncated", validRequest()[:40], -1},
		{"trailing byte", append(validRequest(), 0), -1},
		{"unknown field", top(fields.with("extra", uint_(1))), -1},
		{"missing field", top(fields.without("computation")), -1},
		{"duplicate field", top(fields.with("kind", text("map"))), -1},
		{"wrong type", top(fields.set("epoch", text("1"))), -1},
		{"unknown kind", top(fields.set("kind", text("reduce"))), -1},
		{"indefinite array", top(fields.set("keys", []byte{0x9f, 0xff})), -1},
		{"tag", top(fields.set("epoch", append([]byte{0xc1}, uint_(1)...))), -1},
		{"null", top(fields.set("computation", []byte{0xf6})), -1},
		{"reserved head", top(fields.set("epoch", []byte{0x1c})), -1},
		{"integer beyond int64", top(fields.set("watermarks", mapOf(p("event", uint_(1<<63)), p("system", uint_(0))))), -1},
		{"negative beyond int64", top(fields.set("watermarks", mapOf(p("event", neg(1<<63)), p("system", uint_(0))))), -1},
		{"overlong UTF-8", key(keyFields.set("key", rawText([]byte{0xc0, 0x80}))), -1},
		{"surrogate", key(keyFields.set("key", rawText([]byte{0xed, 0xa0, 0x80}))), -1},
		{"beyond U+10FFFF", key(keyFields.set("key", rawText([]byte{0xf4, 0x90, 0x80, 0x80}))), -1},
		{"truncated UTF-8", key(keyFields.set("key", rawText([]byte{'a', 0xe2, 0x82}))), -1},
		{"name with a NUL", top(append(fields.without("abi"), p("abi\x00", uint_(1)))), -1},
		{"map key not text", mapOf(append(slices.Clone(fields), pair{uint_(1), uint_(1)})...), -1},
		{"message without payload", message(messageFields.without("payload")), -1},
		{"message with trigger_ts", message(messageFields.with("trigger_ts", uint_(1))), -1},
		{"text payload", message(messageFields.set("payload", text("x"))), -1},
		{"timer without id", key(keyFields.with("timers", arr(mapOf(p("trigger_ts", uint_(1)), p("event_ts", uint_(1)))))), -1},
		{"key without key", key(keyFields.without("key")), -1},
		{"watermarks without system", top(fields.set("watermarks", mapOf(p("event", uint_(0))))), -1},
		{"array count beyond the envelope", top(fields.set("keys", []byte{0x9a, 0xff, 0xff, 0xff, 0xff})), -1},
		{"abi 2", top(fields.set("abi", uint_(2))), -3},
		{"abi 2 of another shape", mapOf(p("abi", uint_(2)), p("batch", text("new"))), -3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The input really is what the host's decoder refuses.
			if req, err := abi.DecodeRequest(tt.req); err == nil {
				require.True(t, req.ABI != abi.Version || !req.Kind.Valid(), "the host's decoder accepts this request")
			}
			_, err := inst.Process(context.Background(), tt.req)
			var ge *engine.GuestError
			require.ErrorAs(t, err, &ge)
			require.ErrorIs(t, err, engine.ErrStatus)
			require.Equal(t, tt.status, ge.Status)
		})
	}
	// A refusal leaves the instance usable.
	req := newRequest(messages("k", []byte("after")))
	requireEchoed(t, req, process(t, inst, req))
}

// FuzzEcho compares echo.wat's decoder with the host's on arbitrary
// envelopes: what the host decodes as a version 1 request of a known
// kind, echo.wat must echo exactly; what it refuses, echo.wat must refuse
// with a status, never with a response or a trap.
func FuzzEcho(f *testing.F) {
	f.Add(validRequest())
	f.Add(top(fields.set("keys", arr())))
	f.Add(top(fields.set("abi", uint_(2))))
	for _, req := range []*abi.Request{
		newRequest(timers(messages("k", []byte("a"), []byte("b")), 2)),
		newRequest(messages("ключ", []byte("😀"), nil)),
	} {
		b, err := abi.EncodeRequest(req)
		require.NoError(f, err)
		f.Add(b)
	}
	inst := instance(f, wat.Echo)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := inst.Process(context.Background(), b)
		req, derr := abi.DecodeRequest(b)
		switch {
		case derr == nil && req.ABI != abi.Version:
			require.ErrorIs(t, err, engine.ErrStatus)
			require.Equal(t, int64(abi.StatusUnsupportedVersion), statusOf(err))
		case derr == nil && req.Kind.Valid():
			require.NoError(t, err)
			requireEchoed(t, req, out)
		default:
			require.ErrorIs(t, err, engine.ErrStatus, "the host refuses it (%v); the guest must too", derr)
			require.Contains(t, []int64{int64(abi.StatusBadRequest), int64(abi.StatusUnsupportedVersion)}, statusOf(err))
		}
	})
}

func statusOf(err error) int64 {
	var ge *engine.GuestError
	if errors.As(err, &ge) {
		return ge.Status
	}
	return 0
}

// ExampleBuild builds the no-op guest and lists what it exports.
func ExampleBuild() {
	dir, err := os.MkdirTemp("", "wat-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path, err := wat.Build(dir, wat.Identity)
	if err != nil {
		panic(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	info, err := engine.Inspect(b)
	if err != nil {
		panic(err)
	}
	for _, e := range info.Exports {
		fmt.Println(e.Name, e.Kind)
	}
	// Output:
	// memory memory
	// flowhost_abi_v1 func
	// flowhost_alloc func
	// flowhost_process func
}
