//go:build !race

// The Go guest is a 4 MB module that wazero compiles ten times slower
// under the race detector; the conformance suite (sdk/conformance) runs
// conformance.wat against it under -race too, on its scripted cases.

package wat_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/conformance"
	"github.com/flowhost/flowhost/sdk/wat"
)

// goGuest is the Go SDK's conformance guest, the reference, built and
// compiled once per test binary.
var goGuest struct {
	once sync.Once
	err  error
	mod  engine.Module
}

func goModule(tb testing.TB) engine.Module {
	tb.Helper()
	module(tb, wat.Conformance) // the shared engine
	goGuest.once.Do(func() {
		dir, err := os.MkdirTemp("", "flowhost-wat-goguest-")
		if err != nil {
			goGuest.err = err
			return
		}
		defer os.RemoveAll(dir)
		path, err := conformance.BuildGoGuest(dir)
		if err != nil {
			goGuest.err = err
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			goGuest.err = err
			return
		}
		goGuest.mod, goGuest.err = built.engine.Compile(context.Background(), "goguest", b)
	})
	require.NoError(tb, goGuest.err)
	return goGuest.mod
}

// outcome is what a guest made of one call: a status, or the canonical
// re-encoding of its answer (nil for an Init that returned 0).
type outcome struct {
	status int64
	canon  []byte
}

func call(tb testing.TB, out []byte, err error, decode func([]byte) ([]byte, error)) outcome {
	tb.Helper()
	if err != nil {
		var ge *engine.GuestError
		require.True(tb, errors.As(err, &ge), "not a status: %v", err)
		return outcome{status: ge.Status}
	}
	if out == nil {
		return outcome{}
	}
	canon, err := decode(out)
	require.NoError(tb, err, "answer %x", out)
	return outcome{canon: canon}
}

func canonResponse(b []byte) ([]byte, error) {
	r, err := abi.DecodeResponse(b, abi.ResponseLimits{})
	if err != nil {
		return nil, err
	}
	return abi.EncodeResponse(r)
}

func canonInitResult(b []byte) ([]byte, error) {
	r, err := abi.DecodeInitResult(b)
	if err != nil {
		return nil, err
	}
	return abi.EncodeInitResult(r)
}

// converse runs init and then every request on fresh instances of the Go
// guest and of conformance.wat, and requires the same outcome of each
// call: the same status or the same canonical bytes.
func converse(t *testing.T, init *abi.Init, reqs ...*abi.Request) {
	t.Helper()
	ctx := context.Background()
	ref, err := goModule(t).Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(t, err)
	defer func() { _ = ref.Close(ctx) }()
	got := instance(t, wat.Conformance)
	payload, err := abi.EncodeInit(init)
	require.NoError(t, err)
	out, err := ref.Init(ctx, payload)
	want := call(t, out, err, canonInitResult)
	out, err = got.Init(ctx, payload)
	require.Equal(t, want, call(t, out, err, canonInitResult), "init")
	if want.status != 0 || want.canon != nil {
		return
	}
	for i, req := range reqs {
		b, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		out, err := ref.Process(ctx, b)
		want := call(t, bytes.Clone(out), err, canonResponse)
		out, err = got.Process(ctx, b)
		have := call(t, out, err, canonResponse)
		if want.status == 0 && have.status == 0 && !bytes.Equal(want.canon, have.canon) {
			w, _ := abi.DecodeResponse(want.canon, abi.ResponseLimits{})
			h, _ := abi.DecodeResponse(have.canon, abi.ResponseLimits{})
			require.Equal(t, w, h, "request %d", i)
		}
		require.Equal(t, want, have, "request %d", i)
	}
}

func scriptInit(kind abi.Kind) *abi.Init {
	return &abi.Init{ABI: abi.Version, Computation: "wat", Kind: kind, OutputStreams: []string{"out", "side"},
		Parameters: map[string]any{"s": "text ☂", "i": int64(-12), "b": true, "f": 1.5, "colon:name": "c", "": "empty name"}}
}

// scriptRequest is a request whose key "k" has a state, a due timer and
// two messages, the script and an echo, next to a key without any.
func scriptRequest(kind abi.Kind, script string) *abi.Request {
	req := newRequest(
		abi.RequestKey{Key: "k", Messages: []abi.Message{
			{ID: "m1", Stream: "in", EventTimestamp: -3, SystemTimestamp: 5, AlignmentTimestamp: 6, Payload: []byte(script)},
			{ID: "m2", Stream: "in", EventTimestamp: 4, SystemTimestamp: 7, AlignmentTimestamp: 8, Payload: []byte("echo")},
		}},
		abi.RequestKey{Key: "other", Messages: []abi.Message{{ID: "o", Stream: "in", Payload: []byte("!emit:side:o")}}},
	)
	req.Kind = kind
	if kind == abi.KindTransform {
		req.Keys[0].State = []byte("old")
		req.Keys[0].Timers = []abi.DueTimer{{ID: "t", TriggerTimestamp: -7, EventTimestamp: -7, Payload: []byte("tp")}}
	}
	return req
}

// scriptSeeds are scripts whose answers SCRIPT.md leaves to the Go guest:
// malformed commands and numbers, quoting, text that is not UTF-8, and
// what makes the Go SDK panic.
var scriptSeeds = []string{
	"!emit:out:x;emitk:side:k:v:w;emite:out:-1:e;emitall:side:a;emitnone:out:n;showstate;append;showstate;meta",
	"!timer:5;timerp:5:1:p;cancel:5;timer:5;cancel:9;cancel:9;timerp:-9223372036854775808:9223372036854775807:",
	"!param:s;param:i;param:b;param:f;param:colon:name;param:;param:missing",
	"!emit:out", "!emitk:out:k", "!timerp:1:2", "!state", "!timer", "!failkey", "!meta:ignored;append:x",
	"!timer:x", "!timer:", "!timer:+", "!timer:-", "!timer:+5;timer:-0", "!timer:1_000", "!timer: 1",
	"!timer:9223372036854775808", "!timer:-9223372036854775809", "!timer:99999999999999999999x", "!timer:x99999999999999999999",
	"!timer:18446744073709551616", "!timerp:x:y:z", "!timerp:1:y:z", "!emite:out:1e3:x", "!cancel:0x10",
	"!emit:\x01\t\n\"\\\x7f\xff\xfeé\u00a0\u2028😀", "!timer:\a\b\f\r\v\x00é\u200b\U000E0001\uFEFF",
	"!failkey:\xff\xfeabc\xe2\x82", "!failkey:", "!failbatch:", "!failbatch:\xc0\x80x", "!emitk:out:\xffk\xfe:x",
	"!frob\xff:1", "!", "!;;", "!emit:out:a;", "!failkey:first;timer:x;failkey:second",
	"!emit:nowhere:x", "!emitk:out:k", "!state:s;delstate;append", "!emit:side:x;failbatch:stop;emit:out:y",
	"plain", "", "!emit:out:;emitk:out::;emite:out:0:",
}

// TestScriptEdges runs every seed on both guests, as a transform and as
// a map (where state and timers make the Go SDK panic: status -2).
func TestScriptEdges(t *testing.T) {
	for _, kind := range []abi.Kind{abi.KindTransform, abi.KindMap} {
		for _, script := range scriptSeeds {
			t.Run(string(kind)+"/"+script, func(t *testing.T) {
				converse(t, scriptInit(kind), scriptRequest(kind, script))
			})
		}
	}
}

// TestInitEdges compares the guests' Init outcomes and what they make of
// the parameters afterwards.
func TestInitEdges(t *testing.T) {
	probe := scriptRequest(abi.KindTransform, "!param:fail_init;param:x;emit:out:o;emit:side:s")
	tests := []struct {
		name string
		init abi.Init
	}{
		{"fail_init text", abi.Init{Parameters: map[string]any{"fail_init": "no ☹"}}},
		{"fail_init empty", abi.Init{Parameters: map[string]any{"fail_init": ""}}},
		{"fail_init not text", abi.Init{Parameters: map[string]any{"fail_init": int64(1), "x": []any{"a"}}}},
		{"no parameters", abi.Init{}},
		{"only out declared", abi.Init{OutputStreams: []string{"out"}}},
		{"big parameters", abi.Init{Parameters: map[string]any{"x": map[string]any{"a": []any{int64(1), 2.5, nil, []byte{1}}}, "fail_init": false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.init
			in.ABI, in.Computation, in.Kind = abi.Version, "wat", abi.KindTransform
			if in.OutputStreams == nil {
				in.OutputStreams = []string{"out", "side"}
			}
			converse(t, &in, probe)
		})
	}
}

// TestProcessBeforeInit: the Go SDK refuses a batch before a successful
// Init with status -2, and so does conformance.wat.
func TestProcessBeforeInit(t *testing.T) {
	b, err := abi.EncodeRequest(scriptRequest(abi.KindTransform, "!emit:out:x"))
	require.NoError(t, err)
	for name, inst := range map[string]engine.Instance{"go": func() engine.Instance {
		i, err := goModule(t).Instantiate(context.Background(), engine.NewInstanceConfig())
		require.NoError(t, err)
		t.Cleanup(func() { _ = i.Close(context.Background()) })
		return i
	}(), "wat": instance(t, wat.Conformance)} {
		_, err := inst.Process(context.Background(), b)
		require.Equal(t, int64(abi.StatusGuestFailure), statusOf(err), name)
	}
}

// FuzzConformance compares conformance.wat with the Go guest on arbitrary
// scripts, as a transform and as a map.
func FuzzConformance(f *testing.F) {
	for _, s := range scriptSeeds {
		f.Add(s, false)
	}
	f.Add("!param:i;emitall:out:x;cancel:-7;timer:-7", true)
	goModule(f)
	f.Fuzz(func(t *testing.T, script string, isMap bool) {
		kind := abi.KindTransform
		if isMap {
			kind = abi.KindMap
		}
		converse(t, scriptInit(kind), scriptRequest(kind, script))
	})
}
