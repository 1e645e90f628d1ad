package assemblyscript_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// TestModuleInterface checks every built guest the way the host does
// (engine.CheckABI) and requires exactly the ABI's exports and nothing
// imported but flowhost.log: no env.abort, no WASI.
func TestModuleInterface(t *testing.T) {
	for name, wasm := range guestWasm {
		t.Run(name, func(t *testing.T) {
			info, err := engine.Inspect(wasm)
			require.NoError(t, err)
			require.NoError(t, engine.CheckABI(name, info, engine.Capabilities{}))
			var imports, exports []string
			for _, imp := range info.Imports {
				imports = append(imports, imp.String()+" "+imp.Func.String())
			}
			for _, exp := range info.Exports {
				exports = append(exports, exp.Kind.String()+" "+exp.Name+" "+exp.Func.String())
			}
			slices.Sort(exports)
			require.Equal(t, []string{"flowhost.log (i32, i32, i32) -> ()"}, imports)
			require.Equal(t, []string{
				"func _initialize () -> ()",
				"func flowhost_abi_v1 () -> ()",
				"func flowhost_alloc i32 -> i32",
				"func flowhost_init (i32, i32) -> i64",
				"func flowhost_process (i32, i32) -> i64",
				"memory memory () -> ()",
			}, exports)
		})
	}
}

// rawRequest encodes a request given as a generic map, so that it can
// break the envelope's rules.
func rawRequest(t *testing.T, mutate func(req map[string]any)) []byte {
	t.Helper()
	req := map[string]any{
		"abi": 1, "computation": "echo", "kind": "transform", "partition": 0, "epoch": 1,
		"watermarks": map[string]any{"event": 0, "system": 0},
		"keys": []any{map[string]any{"key": "k", "messages": []any{map[string]any{
			"id": "1-in:0", "stream": "in", "event_ts": 1, "system_ts": 2, "alignment_ts": 3, "payload": []byte("x"),
		}}}},
	}
	mutate(req)
	b, err := cbor.Marshal(req)
	require.NoError(t, err)
	return b
}

func firstMessage(req map[string]any) map[string]any {
	return req["keys"].([]any)[0].(map[string]any)["messages"].([]any)[0].(map[string]any)
}

// TestRequestErrors sends requests the guest must refuse and requires the
// status the ABI prescribes and, for envelopes that do not decode, a log
// line carrying exactly the host decoder's error, field path included.
func TestRequestErrors(t *testing.T) {
	cases := []struct {
		name   string
		req    []byte
		status int64
		log    string // "" means: the host decoder's error
	}{
		{name: "payload of the wrong type", req: rawRequest(t, func(r map[string]any) { firstMessage(r)["payload"] = 7 }), status: -1},
		{name: "unknown field", req: rawRequest(t, func(r map[string]any) { firstMessage(r)["task_id"] = "t" }), status: -1},
		{name: "missing field", req: rawRequest(t, func(r map[string]any) { delete(firstMessage(r), "stream") }), status: -1},
		{name: "null", req: rawRequest(t, func(r map[string]any) { r["computation"] = nil }), status: -1},
		{name: "int64 overflow", req: rawRequest(t, func(r map[string]any) { firstMessage(r)["event_ts"] = uint64(1) << 63 }), status: -1},
		{name: "invalid utf-8", req: rawRequest(t, func(r map[string]any) { r["kind"] = "\xff" }), status: -1},
		{name: "tag", req: rawRequest(t, func(r map[string]any) { r["epoch"] = cbor.Tag{Number: 1, Content: 5} }), status: -1},
		{name: "trailing bytes", req: append(rawRequest(t, func(map[string]any) {}), 0), status: -1},
		{name: "truncated", req: rawRequest(t, func(map[string]any) {})[:40], status: -1},
		{name: "indefinite length", req: []byte{0xbf, 0xff}, status: -1},
		{name: "newer abi", req: rawRequest(t, func(r map[string]any) { r["abi"] = 2; r["shiny"] = true }), status: -3,
			log: "flowhost: request speaks ABI version 2; this SDK speaks 1"},
		{name: "unknown kind", req: rawRequest(t, func(r map[string]any) { r["kind"] = "reduce" }), status: -1,
			log: `flowhost: request of unknown kind "reduce"`},
		{name: "empty", req: nil, status: -1, log: "flowhost: flowhost_process(0, 0) names memory that flowhost_alloc did not hand out"},
	}
	m, logs := guestModule(t, testGuest)
	inst := instantiate(t, m)
	initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "echo", Kind: abi.KindTransform, OutputStreams: []string{"echo"}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(logs.lines)
			got := call(t, inst.Process, c.req)
			require.Equal(t, outcome{status: c.status}, got)
			want := c.log
			if want == "" {
				_, err := abi.DecodeRequest(c.req)
				require.Error(t, err, "the host decoder accepts the request")
				want = "flowhost: cannot decode the request: " + err.Error()
			}
			require.Equal(t, []string{"ERROR " + want}, logs.lines[before:])
		})
	}
	// The instance is still usable after every refusal.
	resp := process(t, inst, &abi.Request{ABI: abi.Version, Computation: "echo", Kind: abi.KindTransform,
		Keys: []abi.RequestKey{{Key: "k", Messages: []abi.Message{{ID: "1", Stream: "in", Payload: []byte("still here")}}}}}, []string{"echo"})
	require.Equal(t, []byte("still here"), resp.Keys[0].Emits[0].Payload)
}

// TestProcessBeforeInit: a computation with an init function refuses
// batches until init succeeded, as a guest failure.
func TestProcessBeforeInit(t *testing.T) {
	m, logs := guestModule(t, testGuest)
	inst := instantiate(t, m)
	b, err := abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "noop", Kind: abi.KindTransform, Keys: []abi.RequestKey{}})
	require.NoError(t, err)
	require.Equal(t, outcome{status: -2}, call(t, inst.Process, b))
	require.Contains(t, logs.text(), "flowhost_process called before a successful flowhost_init")

	refused := call(t, inst.Init, mustEncodeInit(t, &abi.Init{ABI: abi.Version, Computation: "windowed-sum", Kind: abi.KindTransform, OutputStreams: []string{"sums"}}))
	result, err := abi.DecodeInitResult(refused.result)
	require.NoError(t, err)
	require.Equal(t, `parameter "window" is missing`, result.Error)
	require.Equal(t, outcome{status: -2}, call(t, inst.Process, b), "a refused init does not start the computation")
}

func mustEncodeInit(t *testing.T, in *abi.Init) []byte {
	t.Helper()
	b, err := abi.EncodeInit(in)
	require.NoError(t, err)
	return b
}

// TestAbort: an exception in the computation is logged through
// flowhost.log with its message and location, then traps; the host gets
// a trap, not an import of env.abort.
func TestAbort(t *testing.T) {
	m, logs := guestModule(t, testGuest)
	inst := instantiate(t, m)
	initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "throw", Kind: abi.KindTransform, OutputStreams: []string{"out"}})
	b, err := abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "throw", Kind: abi.KindTransform,
		Keys: []abi.RequestKey{{Key: "k-7", Messages: []abi.Message{{ID: "1", Stream: "in", Payload: []byte("x")}}}}})
	require.NoError(t, err)
	require.Equal(t, outcome{trap: true}, call(t, inst.Process, b))
	require.Regexp(t, `^ERROR flowhost: abort: boom in k-7 at index\.ts:\d+:\d+$`, logs.text())
}

// TestPayloadsOutliveTheirBatch: a payload is a view of its request, which
// stays valid, through the garbage collection between batches, for as
// long as the computation keeps it.
func TestPayloadsOutliveTheirBatch(t *testing.T) {
	m, _ := guestModule(t, testGuest)
	inst := instantiate(t, m)
	outputs := []string{"out"}
	initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "remember", Kind: abi.KindTransform, OutputStreams: outputs})
	var previous []byte
	for i := range 20 {
		payload := []byte(strings.Repeat(string(rune('a'+i)), 1000*i))
		resp := process(t, inst, &abi.Request{ABI: abi.Version, Computation: "remember", Kind: abi.KindTransform,
			Keys: []abi.RequestKey{{Key: "k", Messages: []abi.Message{{ID: "m", Stream: "in", Payload: payload}}}}}, outputs)
		require.Equal(t, string(previous), string(resp.Keys[0].Emits[0].Payload), "batch %d", i)
		previous = payload
	}
}

// TestMemoryIsReclaimed runs far more data through a guest than its
// memory limit holds: the SDK collects garbage between batches.
func TestMemoryIsReclaimed(t *testing.T) {
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(cacheDir).WithMemoryLimitPages(64)) // 4 MiB
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close(ctx)) })
	m, err := e.Compile(ctx, "echo", guestWasm[testGuest])
	require.NoError(t, err)
	inst := instantiate(t, m)
	outputs := []string{"echo"}
	initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "echo", Kind: abi.KindTransform, OutputStreams: outputs})
	payload := []byte(strings.Repeat("0123456789abcdef", 16<<10)) // 256 KiB
	for i := range 100 {                                          // 25 MiB in, 25 MiB out
		resp := process(t, inst, &abi.Request{ABI: abi.Version, Computation: "echo", Kind: abi.KindTransform,
			Keys: []abi.RequestKey{{Key: "k", Messages: []abi.Message{{ID: "m", Stream: "in", Payload: payload}}}}}, outputs)
		require.Len(t, resp.Keys[0].Emits[0].Payload, len(payload), "batch %d", i)
	}
}

// TestParamsMatchGo reads parameters with each typed getter of the SDK
// and of the Go SDK, and requires the same value or the same error text.
func TestParamsMatchGo(t *testing.T) {
	cases := []struct {
		getter string
		value  any // nil with missing: the parameter is left out
		absent bool
	}{
		{getter: "string", value: "text"},
		{getter: "string", absent: true},
		{getter: "string", value: int64(3)},
		{getter: "int", value: int64(-42)},
		{getter: "int", value: 3.0},
		{getter: "int", value: 3.5},
		{getter: "int", value: "3"},
		{getter: "int", value: nil},
		{getter: "float", value: 0.25},
		{getter: "float", value: int64(7)},
		{getter: "float", value: true},
		{getter: "bool", value: false},
		{getter: "bool", value: []byte("yes")},
		{getter: "duration", value: "5m"},
		{getter: "duration", value: "1h2m3.5s"},
		{getter: "duration", value: "-1.5h"},
		{getter: "duration", value: "250ms"},
		{getter: "duration", value: "1µs"},
		{getter: "duration", value: "0"},
		{getter: "duration", value: ".5s"},
		{getter: "duration", value: int64(1500)},
		{getter: "duration", value: "abc"},
		{getter: "duration", value: "5"},
		{getter: "duration", value: "3d"},
		{getter: "duration", value: ""},
		{getter: "duration", value: "9999999999h"},
		{getter: "duration", value: 1.5},
		{getter: "strings", value: []any{"a", "b"}},
		{getter: "strings", value: []any{"a", int64(1)}},
		{getter: "strings", value: "a,b"},
		{getter: "map", value: map[string]any{"b": int64(1), "a": "x"}},
		{getter: "map", value: []any{}},
	}
	m, _ := guestModule(t, testGuest)
	for i, c := range cases {
		params := map[string]any{"getter": c.getter}
		if !c.absent {
			params["x"] = c.value
		}
		t.Run(fmt.Sprintf("%02d %s %#v", i, c.getter, c.value), func(t *testing.T) {
			in := &abi.Init{ABI: abi.Version, Computation: "params", Kind: abi.KindTransform, Parameters: params, OutputStreams: []string{"out"}}
			got := call(t, instantiate(t, m).Init, mustEncodeInit(t, in))
			result, err := abi.DecodeInitResult(got.result)
			require.NoError(t, err)
			require.Equal(t, goParam(c.getter, in), result.Error)
		})
	}
}

// goParam is what the Go SDK's typed getter answers for in's parameter
// x, in the words of the test guest's "params" computation: the getter's
// error, or "ok:" and the value read.
func goParam(getter string, in *abi.Init) string {
	_, err := flowhost.Run(flowhost.Computation{
		Init: func(p flowhost.Params) error {
			var got string
			var err error
			switch getter {
			case "string":
				got, err = p.String("x")
			case "int":
				var v int64
				v, err = p.Int("x")
				got = strconv.FormatInt(v, 10)
			case "float":
				var f float64
				f, err = p.Float("x")
				got = strconv.FormatInt(int64(math.Float64bits(f)), 10)
			case "bool":
				var b bool
				b, err = p.Bool("x")
				got = strconv.FormatBool(b)
			case "duration":
				var d time.Duration
				d, err = p.Duration("x")
				got = strconv.FormatInt(int64(d), 10)
			case "strings":
				var list []string
				list, err = p.Strings("x")
				got = strings.Join(list, ",")
			case "map":
				var m map[string]any
				m, err = p.Map("x")
				got = strings.Join(slices.Sorted(maps.Keys(m)), ",")
			}
			if err != nil {
				return err
			}
			return errors.New("ok:" + got)
		},
		Process: func(*flowhost.Batch) error { return nil },
	}, in, &abi.Request{ABI: abi.Version, Computation: in.Computation, Kind: in.Kind, Keys: []abi.RequestKey{}})
	text, ok := strings.CutPrefix(fmt.Sprint(err), "flowhost: Init refused to start: ")
	if !ok {
		panic("the Go SDK's init did not refuse: " + fmt.Sprint(err))
	}
	return text
}

// TestBuildErrors: what Build says when it cannot build.
func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing entry", func(t *testing.T) {
		err := assemblyscript.Build(filepath.Join(dir, "nope.ts"), filepath.Join(dir, "nope.wasm"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("compile error", func(t *testing.T) {
		entry := filepath.Join(dir, "bad.ts")
		require.NoError(t, os.WriteFile(entry, []byte("export function f(): i32 { return \"no\"; }\n"), 0o644))
		err := assemblyscript.Build(entry, filepath.Join(dir, "bad.wasm"))
		require.ErrorContains(t, err, "bad.ts")
		require.ErrorContains(t, err, "Type '~lib/string/String' is not assignable to type 'i32'")
	})
	t.Run("no node", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		err := assemblyscript.Build("conformance/index.ts", filepath.Join(dir, "x.wasm"))
		require.ErrorContains(t, err, "install node and npm")
		require.ErrorContains(t, err, "run npm install in sdk/assemblyscript")
	})
}

// TestAllocContract calls the exports directly, as the engine never does
// with these arguments: flowhost_alloc(0) still returns a region,
// impossible sizes return 0, and flowhost_process refuses a pointer that
// flowhost_alloc did not hand out.
func TestAllocContract(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { require.NoError(t, r.Close(ctx)) })
	var logged []string
	_, err := r.NewHostModuleBuilder(abi.ImportModule).NewFunctionBuilder().
		WithFunc(func(_ context.Context, m api.Module, level, ptr, size uint32) {
			b, _ := m.Memory().Read(ptr, size)
			logged = append(logged, string(b))
		}).Export(abi.ImportLog).Instantiate(ctx)
	require.NoError(t, err)
	mod, err := r.InstantiateWithConfig(ctx, guestWasm[testGuest], wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	require.NoError(t, err)
	call := func(name string, args ...uint64) int64 {
		t.Helper()
		res, err := mod.ExportedFunction(name).Call(ctx, args...)
		require.NoError(t, err)
		return int64(res[0])
	}
	alloc := func(size int32) int32 { return int32(call(abi.ExportAlloc, api.EncodeI32(size))) }

	require.NotZero(t, alloc(0))
	require.Zero(t, alloc(-1))
	require.Zero(t, alloc(1<<30))
	p := alloc(16)
	require.NotZero(t, p)
	require.Equal(t, int64(-1), call(abi.ExportProcess, api.EncodeI32(p+8), 8))
	require.Equal(t, int64(-1), call(abi.ExportProcess, api.EncodeI32(p), 17), "longer than the region")
	require.Equal(t, []string{
		fmt.Sprintf("flowhost: flowhost_process(%d, 8) names memory that flowhost_alloc did not hand out", p+8),
		fmt.Sprintf("flowhost: flowhost_process(%d, 17) names memory that flowhost_alloc did not hand out", p),
	}, logged)
}
