package c_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/conformance"
)

// answer is what a guest returned for one envelope.
type answer struct {
	status int64
	bytes  []byte
}

func (a answer) String() string {
	if a.status != 0 {
		return fmt.Sprintf("status %d", a.status)
	}
	if r, err := abi.DecodeResponse(a.bytes, abi.ResponseLimits{}); err == nil {
		return fmt.Sprintf("%+v", *r)
	}
	return fmt.Sprintf("%x", a.bytes)
}

func call(inst engine.Instance, init bool, data []byte) answer {
	var out []byte
	var err error
	if init {
		out, err = inst.Init(context.Background(), data)
	} else {
		out, err = inst.Process(context.Background(), data)
	}
	if err != nil {
		if s := status(err); s != 0 {
			return answer{status: s}
		}
		return answer{status: 1, bytes: []byte(err.Error())}
	}
	return answer{bytes: bytes.Clone(out)}
}

func conformanceRequest(kind abi.Kind, keys ...abi.RequestKey) []byte {
	b, err := abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "script", Kind: kind, Partition: 3, Epoch: 1 << 33,
		Watermarks: abi.Watermarks{Event: -42, System: 1_750_000_000_000_000_000}, Keys: keys})
	if err != nil {
		panic(err)
	}
	return b
}

func scriptKey(key string, state []byte, timers []abi.DueTimer, payloads ...string) abi.RequestKey {
	k := abi.RequestKey{Key: key, State: state, Timers: timers}
	for i, p := range payloads {
		k.Messages = append(k.Messages, abi.Message{ID: fmt.Sprintf("%s-%d", key, i), Stream: "in",
			EventTimestamp: int64(i) - 1, SystemTimestamp: 1000 + int64(i), AlignmentTimestamp: 2000 + int64(i), Payload: []byte(p)})
	}
	return k
}

// TestConformanceGuestMatchesGo runs the C conformance guest and the Go
// one (sdk/conformance/goguest, the reference) through the engine with the
// same init envelopes and scripted batches, covering every command of
// SCRIPT.md and its error texts, and requires identical answers.
func TestConformanceGuestMatchesGo(t *testing.T) {
	goWasm, err := conformance.BuildGoGuest(t.TempDir())
	require.NoError(t, err)
	params := map[string]any{"s": "text", "i": int64(42), "neg": int64(-7), "b": true, "f": 1.5, "l": []any{int64(1)}, "n": nil}
	initBytes := func(params map[string]any) []byte {
		b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "script", Kind: abi.KindTransform, Parameters: params, OutputStreams: []string{"out", "side"}})
		require.NoError(t, err)
		return b
	}
	timers := []abi.DueTimer{{ID: "t1", TriggerTimestamp: 100, EventTimestamp: 90, Payload: []byte("p:q")}, {ID: "t2", TriggerTimestamp: -200, EventTimestamp: -300}}
	batches := []struct {
		name string
		init []byte // the instance's init envelope
		req  []byte // nil: only the init is compared
	}{
		{"refused", initBytes(map[string]any{"fail_init": "not today"}), nil},
		{"refused without text", initBytes(map[string]any{"fail_init": ""}), nil},
		{"fail_init not text", initBytes(map[string]any{"fail_init": int64(1)}), nil},
		{"process after refusal", initBytes(map[string]any{"fail_init": "no"}), conformanceRequest(abi.KindTransform, scriptKey("k", nil, nil, "x"))},
		{"echo and timers", initBytes(params), conformanceRequest(abi.KindTransform,
			scriptKey("a", []byte("old"), timers, "plain", "", "\xff\x00binary", "!emit:side:hello;emitk:side:K1:with:colons;emite:out:-5:early;emitall:side:all;emitnone:out:none"),
			scriptKey("b", nil, nil, "!state:abc;showstate;append;showstate;delstate;showstate;append;showstate"),
			scriptKey("c", []byte{}, nil, "!showstate;delstate"),
			scriptKey("d", nil, nil, "!timer:1000;timer:2000;timerp:3000:2500:pay;cancel:1000;timer:1000;cancel:4000;cancel:4000;timerp:5:6:"),
		)},
		{"params and meta", initBytes(params), conformanceRequest(abi.KindTransform,
			scriptKey("ключ", nil, nil, "!param:s;param:i;param:neg;param:b;param:f;param:l;param:n;param:missing", "!meta"),
		)},
		{"failures", initBytes(params), conformanceRequest(abi.KindTransform,
			scriptKey("fail", nil, nil, "!failkey:boom;emit:out:after;failkey:second"),
			scriptKey("unknown", nil, nil, "!nope:1;emit:out:x"),
			scriptKey("empty", nil, nil, "!"),
			scriptKey("arity", nil, nil, "!emit:out"),
			scriptKey("syntax", nil, nil, "!timer:12a"),
			scriptKey("range", nil, nil, "!cancel:99999999999999999999x"),
			scriptKey("range2", nil, nil, "!timer:9223372036854775808"),
			scriptKey("sign", nil, nil, "!emite:out:+:x"),
			scriptKey("quote", nil, nil, "!timerp:1:\"\t\u00ad\xff:y"),
			scriptKey("blank", nil, nil, "!failkey:"),
			scriptKey("ok", nil, nil, "!emit:out:fine"),
		)},
		{"failbatch", initBytes(params), conformanceRequest(abi.KindTransform,
			scriptKey("first", nil, nil, "!emit:out:dropped"),
			scriptKey("second", nil, nil, "!failbatch:stop here;emit:out:never"),
			scriptKey("third", nil, nil, "!emit:out:never"),
		)},
		{"undeclared stream", initBytes(params), conformanceRequest(abi.KindTransform, scriptKey("k", nil, nil, "!emit:nowhere:x"))},
		{"map kind", initBytes(params), conformanceRequest(abi.KindMap, scriptKey("m", nil, nil, "echo", "!emitall:out:x;meta"))},
		{"state in a map", initBytes(params), conformanceRequest(abi.KindMap, scriptKey("m", nil, nil, "!state:x"))},
		{"no keys", initBytes(params), conformanceRequest(abi.KindTransform)},
	}
	ctx := context.Background()
	cache := filepath.Join(workDir, "cache")
	precompile(t, cache, goWasm)
	goEngine, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(cache))
	require.NoError(t, err)
	defer goEngine.Close(ctx)
	goModule, err := goEngine.Compile(ctx, "go-conformance", mustRead(t, goWasm))
	require.NoError(t, err)
	for _, b := range batches {
		t.Run(b.name, func(t *testing.T) {
			goInst, err := goModule.Instantiate(ctx, engine.NewInstanceConfig())
			require.NoError(t, err)
			defer goInst.Close(ctx)
			cInst, logs := instance(t, conformanceGuest)
			wantInit, gotInit := call(goInst, true, b.init), call(cInst, true, b.init)
			require.Equal(t, wantInit, gotInit, "init: want %v, got %v", wantInit, gotInit)
			if b.req == nil {
				return
			}
			want, got := call(goInst, false, b.req), call(cInst, false, b.req)
			require.Equal(t, want, got, "want %v\n got %v\nC guest logs:\n%s", want, got, logs.text())
		})
	}
}

// precompile fills the compilation cache with a Go guest's native code in
// a test process without the race detector, through the engine tests'
// precompiler: wazero compiles a Go guest about ten times slower under
// -race, and the engine then loads the code from the cache.
func precompile(t *testing.T, cache string, wasm string) {
	cmd := exec.Command("go", "test", "-count=1", "../../host/engine/testdata/precompile", "-args", "-cache", cache, wasm)
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.Join(slices.DeleteFunc(strings.Fields(os.Getenv("GOFLAGS")), func(f string) bool { return f == "-race" }), " "))
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
