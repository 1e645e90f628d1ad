package assemblyscript_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/conformance"
)

// outcome is what a guest answered to one envelope: the result bytes, or
// the failure status (0 when it answered normally), or a trap.
type outcome struct {
	result []byte
	status int64
	trap   bool
}

func call(tb testing.TB, f func(context.Context, []byte) ([]byte, error), envelope []byte) outcome {
	tb.Helper()
	res, err := f(context.Background(), envelope)
	if err == nil {
		return outcome{result: bytes.Clone(res)}
	}
	var ge *engine.GuestError
	require.ErrorAs(tb, err, &ge)
	if errors.Is(err, engine.ErrStatus) {
		return outcome{status: ge.Status}
	}
	require.ErrorIs(tb, err, engine.ErrTrap)
	return outcome{trap: true}
}

func msg(id, stream, payload string, ts int64) abi.Message {
	return abi.Message{ID: id, Stream: stream, EventTimestamp: ts, SystemTimestamp: ts + 1, AlignmentTimestamp: ts + 2, Payload: []byte(payload)}
}

func transform(keys ...abi.RequestKey) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "conformance", Kind: abi.KindTransform, Partition: 3, Epoch: 42,
		Watermarks: abi.Watermarks{Event: 1000, System: 2000}, Keys: keys}
}

// conformanceCases are scripted batches covering every verb of SCRIPT.md
// and the choices it leaves to the Go guest.
func conformanceCases() map[string]*abi.Request {
	big := strings.Repeat("\x00\xffbig", 25_000)
	mapReq := func(script string) *abi.Request {
		r := transform(abi.RequestKey{Key: "m", Messages: []abi.Message{msg("1-in:0", "in", script, 10)}})
		r.Kind = abi.KindMap
		return r
	}
	return map[string]*abi.Request{
		"empty": transform(),
		"echo": transform(
			abi.RequestKey{Key: "a", Messages: []abi.Message{msg("1-in:0", "in", "plain", 5), msg("1-in:1", "in", "", 6), msg("1-in:2", "in", big, 7)}},
			abi.RequestKey{Key: "", Messages: []abi.Message{msg("1-in:3", "in", "\xfe\xff not utf-8", -5)}},
		),
		"emits": transform(abi.RequestKey{Key: `["k"]`, Messages: []abi.Message{
			msg("2-in:0", "in", "first", 1),
			msg("2-in:1", "in", "!emit:side:hello;emitk:out:k1:v:with:colons;emite:out:-5:neg;emite:side:0:zero;emitall:side:all;emitnone:out:none;emit:out:", 2),
		}}),
		"state": transform(
			abi.RequestKey{Key: "new", Messages: []abi.Message{msg("3-in:0", "in", "!state:abc;append;showstate", 1), msg("3-in:1", "in", "!append;showstate", 2)}},
			abi.RequestKey{Key: "empty", State: []byte{}, Messages: []abi.Message{msg("3-in:2", "in", "!showstate;append;append;showstate", 1)}},
			abi.RequestKey{Key: "gone", State: []byte("old"), Messages: []abi.Message{msg("3-in:3", "in", "!showstate;delstate;showstate", 1)}},
			abi.RequestKey{Key: "back", State: []byte("old"), Messages: []abi.Message{msg("3-in:4", "in", "!delstate;state:;showstate", 1)}},
			abi.RequestKey{Key: "keep", State: []byte("old"), Messages: []abi.Message{msg("3-in:5", "in", "!showstate", 1)}},
		),
		"timers": transform(abi.RequestKey{
			Key: "t",
			Timers: []abi.DueTimer{
				{ID: "t:1", TriggerTimestamp: 900, EventTimestamp: 899, Payload: []byte("p:1")},
				{ID: "t:2", TriggerTimestamp: 950, EventTimestamp: 950},
			},
			Messages: []abi.Message{msg("4-in:0", "in", "!timer:100;timerp:200:150:pay:load;cancel:100;timer:100;cancel:300;cancel:300;timer:-7;timerp:400:-1:", 3)},
		}),
		"params": transform(abi.RequestKey{Key: "p", Messages: []abi.Message{msg("5-in:0", "in", "!param:s;param:i;param:b;param:f;param:n;param:l;param:missing;param:", 1)}}),
		"meta": transform(abi.RequestKey{Key: `["x",1]`, Timers: []abi.DueTimer{{ID: "t:9", TriggerTimestamp: 5, EventTimestamp: 5}},
			Messages: []abi.Message{msg("6-in:0", "clicks", "!meta", -123)}}),
		"failkey": transform(
			abi.RequestKey{Key: "bad", Messages: []abi.Message{msg("7-in:0", "in", "!emit:out:x;state:s;timer:5;failkey:boom;failkey:second", 1)}},
			abi.RequestKey{Key: "good", Messages: []abi.Message{msg("7-in:1", "in", "!emit:out:y", 1)}},
			abi.RequestKey{Key: "silent", Messages: []abi.Message{msg("7-in:2", "in", "!failkey:", 1)}},
		),
		"failbatch": transform(
			abi.RequestKey{Key: "a", Messages: []abi.Message{msg("8-in:0", "in", "!emit:out:x", 1)}},
			abi.RequestKey{Key: "b", Messages: []abi.Message{msg("8-in:1", "in", "!failbatch:stop here;failbatch:later", 1)}},
		),
		"bad commands": transform(
			abi.RequestKey{Key: "unknown", Messages: []abi.Message{msg("9-in:0", "in", "!bogus:1;emit:out:after", 1)}},
			abi.RequestKey{Key: "empty", Messages: []abi.Message{msg("9-in:1", "in", "!", 1)}},
			abi.RequestKey{Key: "arity", Messages: []abi.Message{msg("9-in:2", "in", "!emit", 1)}},
			abi.RequestKey{Key: "arity2", Messages: []abi.Message{msg("9-in:3", "in", "!emitk:out:k", 1)}},
			abi.RequestKey{Key: "nan", Messages: []abi.Message{msg("9-in:4", "in", "!timer:abc", 1)}},
			abi.RequestKey{Key: "range", Messages: []abi.Message{msg("9-in:5", "in", "!timer:99999999999999999999", 1)}},
			abi.RequestKey{Key: "range2", Messages: []abi.Message{msg("9-in:6", "in", "!cancel:-9223372036854775809", 1)}},
			abi.RequestKey{Key: "quoted", Messages: []abi.Message{msg("9-in:7", "in", "!emite:out:1x:\"t\"\t\xff\u00e9\u200b", 1)}},
			abi.RequestKey{Key: "sign", Messages: []abi.Message{msg("9-in:8", "in", "!timer:+;timerp:1:+2:x", 1)}},
			abi.RequestKey{Key: "colon", Messages: []abi.Message{msg("9-in:9", "in", "!;;:x", 1)}},
		),
		"map":               mapReq("!emit:out:m;emitnone:side:n;param:s"),
		"map state":         mapReq("!state:x"),
		"map timer":         mapReq("!timer:5"),
		"undeclared stream": transform(abi.RequestKey{Key: "u", Messages: []abi.Message{msg("10-in:0", "in", "!emit:nope:x", 1)}}),
	}
}

// TestConformanceGuestMatchesGo runs the scripted batches through this
// SDK's conformance guest and the Go SDK's (the reference) and requires
// the same answers: the same response bytes, or the same status.
func TestConformanceGuestMatchesGo(t *testing.T) {
	goModule := goConformanceModule(t)
	asModule, asLogs := guestModule(t, conformanceGuest)
	params := map[string]any{"s": "text", "i": int64(-42), "b": true, "f": 1.5, "n": nil, "l": []any{"x"}, "fail_init": int64(1)}
	outputs := []string{"out", "side"}

	for name, req := range conformanceCases() {
		t.Run(name, func(t *testing.T) {
			init, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: req.Computation, Kind: req.Kind, Partition: req.Partition,
				Parameters: params, OutputStreams: outputs})
			require.NoError(t, err)
			reqBytes, err := abi.EncodeRequest(req)
			require.NoError(t, err)
			var got [2]outcome
			for i, m := range []engine.Module{goModule, asModule} {
				inst := instantiate(t, m)
				require.Equal(t, outcome{}, call(t, inst.Init, init))
				got[i] = call(t, inst.Process, reqBytes)
			}
			require.False(t, got[1].trap, "the AssemblyScript guest trapped; log:\n%s", asLogs.text())
			if got[0].status == 0 {
				resp, err := abi.DecodeResponse(got[0].result, abi.ResponseLimits{})
				require.NoError(t, err)
				require.NoError(t, abi.ValidateResponse(resp, req, outputs))
			}
			if !bytes.Equal(got[0].result, got[1].result) && got[0].status == 0 && got[1].status == 0 {
				goResp, err := abi.DecodeResponse(got[0].result, abi.ResponseLimits{})
				require.NoError(t, err)
				asResp, err := abi.DecodeResponse(got[1].result, abi.ResponseLimits{})
				require.NoError(t, err)
				require.Equal(t, goResp, asResp)
			}
			require.Equal(t, got[0], got[1], "Go guest (expected) vs AssemblyScript guest")
		})
	}
}

// TestConformanceInit compares the two guests' answers to init envelopes:
// fail_init as text refuses to start with that text, of another type it
// is ignored; a bad envelope is a status.
func TestConformanceInit(t *testing.T) {
	goModule := goConformanceModule(t)
	asModule, _ := guestModule(t, conformanceGuest)
	encode := func(in *abi.Init) []byte {
		b, err := abi.EncodeInit(in)
		require.NoError(t, err)
		return b
	}
	base := abi.Init{ABI: abi.Version, Computation: "c", Kind: abi.KindTransform, OutputStreams: []string{"out", "side"}}
	with := func(f func(*abi.Init)) []byte {
		in := base
		f(&in)
		return encode(&in)
	}
	cases := map[string][]byte{
		"plain":             encode(&base),
		"fail_init text":    with(func(in *abi.Init) { in.Parameters = map[string]any{"fail_init": "no database"} }),
		"fail_init empty":   with(func(in *abi.Init) { in.Parameters = map[string]any{"fail_init": ""} }),
		"fail_init int":     with(func(in *abi.Init) { in.Parameters = map[string]any{"fail_init": int64(3)} }),
		"newer abi":         with(func(in *abi.Init) { in.ABI = 2 }),
		"unknown kind":      with(func(in *abi.Init) { in.Kind = "reduce" }),
		"repeated outputs":  with(func(in *abi.Init) { in.OutputStreams = []string{"out", "out"} }),
		"empty computation": with(func(in *abi.Init) { in.Computation = "" }),
		"not cbor":          []byte("\xff\x00"),
		"trailing bytes":    append(encode(&base), 0),
	}
	for name, init := range cases {
		t.Run(name, func(t *testing.T) {
			var got [2]outcome
			for i, m := range []engine.Module{goModule, asModule} {
				got[i] = call(t, instantiate(t, m).Init, init)
			}
			require.Equal(t, got[0], got[1], "Go guest (expected) vs AssemblyScript guest")
		})
	}
}

var goGuest struct {
	once   sync.Once
	module engine.Module
	err    error
}

// goConformanceModule builds and compiles the Go SDK's conformance guest
// once per test binary. Its native code is cached across runs in the user
// cache directory, keyed by the module's hash: compiling a Go guest takes
// seconds, and half a minute under the race detector.
func goConformanceModule(t *testing.T) engine.Module {
	t.Helper()
	goGuest.once.Do(func() {
		goGuest.module, goGuest.err = buildGoConformance()
	})
	require.NoError(t, goGuest.err)
	return goGuest.module
}

func buildGoConformance() (engine.Module, error) {
	dir, err := os.MkdirTemp("", "goguest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path, err := conformance.BuildGoGuest(dir)
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(cacheDir, "go")
	if userCache, err := os.UserCacheDir(); err == nil {
		sum := sha256.Sum256(wasm)
		root := filepath.Join(userCache, "flowhost", "assemblyscript-test-go")
		cache = filepath.Join(root, hex.EncodeToString(sum[:12]))
		// Native code of older Go guests is never used again.
		old, _ := filepath.Glob(filepath.Join(root, "*"))
		for _, d := range old {
			if d != cache {
				_ = os.RemoveAll(d)
			}
		}
	}
	ctx := context.Background()
	// The engine lives as long as the test binary.
	e, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(cache))
	if err != nil {
		return nil, err
	}
	return e.Compile(ctx, "go-conformance", wasm)
}
