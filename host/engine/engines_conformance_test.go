package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/abi/abitest"
	"github.com/flowhost/flowhost/host/engine"
)

// conformanceGuestOnce builds the Go SDK's conformance guest
// (sdk/conformance/goguest) once per test binary, and compiles it into the
// shared cache for wazero in a process without the race detector, as
// TestMain does for the engine's own guests.
var conformanceGuestOnce = sync.OnceValues(func() ([]byte, error) {
	path := filepath.Join(testDir, "goguest.wasm")
	err := goCommand(map[string]string{"GOOS": "wasip1", "GOARCH": "wasm", "CGO_ENABLED": "0"},
		"build", "-buildmode=c-shared", "-o", path, "github.com/flowhost/flowhost/sdk/conformance/goguest")
	if err != nil {
		return nil, err
	}
	if err := goCommand(nil, "test", "-count=1", "-run=^TestPrecompile$", "./testdata/precompile", "-args", "-cache", cacheDir(), path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// conformanceOutputs are the streams the conformance suite initialises
// every conformance guest with (sdk/conformance/SCRIPT.md).
var conformanceOutputs = []string{"out", "side"}

// exchange is what one engine answered to one golden case.
type exchange struct {
	initResult []byte
	initErr    string
	response   []byte
	processErr string
}

// TestEnginesConformance feeds the golden vectors of abi/testdata/vectors
// through every engine, to the Go SDK's conformance guest and to the echo
// guest, and requires byte-identical answers (and identical errors) from
// all of them. The conformance guest's responses must also decode strictly
// and validate against their requests.
func TestEnginesConformance(t *testing.T) {
	goguest, err := conformanceGuestOnce()
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join(abitest.Dir(), "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)

	type guestCase struct {
		name string
		wasm []byte
	}
	for _, g := range []guestCase{{"goguest", goguest}, {"echo", guest(t, "echo")}} {
		t.Run(g.name, func(t *testing.T) {
			modules := map[string]engine.Module{}
			for _, k := range engineKinds {
				if k.name == "wasmtime" && !engine.WasmtimeAvailable {
					continue
				}
				modules[k.name] = compileBytes(t, k.engine(t, testConfig()), g.name, g.wasm)
			}
			for _, doc := range docs {
				name := strings.TrimSuffix(filepath.Base(doc), ".json")
				t.Run(name, func(t *testing.T) {
					init := goldenInit(t, name)
					req, hasReq := abitest.Read(t, name, "request")
					answers := map[string]exchange{}
					for engineName, m := range modules {
						answers[engineName] = runExchange(t, m, init, req, hasReq)
					}
					reference := answers["wazero"]
					for engineName, got := range answers {
						require.Equalf(t, reference, got, "%s answers differently from wazero", engineName)
					}
					switch g.name {
					case "echo":
						require.Equal(t, "init:"+string(init), string(reference.initResult))
						if hasReq {
							require.Equal(t, echoed(req), reference.response)
						}
					case "goguest":
						require.Empty(t, reference.processErr)
						if hasReq {
							requireValidResponse(t, req, reference.response)
						}
					}
				})
			}
		})
	}
}

// goldenInit is the case's Init envelope when it has one, and otherwise
// the Init the conformance suite sends.
func goldenInit(t *testing.T, name string) []byte {
	if b, ok := abitest.Read(t, name, "init"); ok {
		return b
	}
	var doc abitest.Vector
	raw, err := os.ReadFile(filepath.Join(abitest.Dir(), name+".json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: doc.Name, Kind: abi.KindTransform, OutputStreams: conformanceOutputs})
	require.NoError(t, err)
	return b
}

// runExchange sends init and then, when there is one, req to a fresh
// instance of m, and copies what comes back.
func runExchange(t *testing.T, m engine.Module, init, req []byte, hasReq bool) exchange {
	inst := instantiate(t, m)
	var x exchange
	result, err := inst.Init(context.Background(), init)
	x.initResult = bytes.Clone(result)
	if err != nil {
		x.initErr = err.Error()
	}
	if hasReq && err == nil {
		resp, err := inst.Process(context.Background(), req)
		x.response = bytes.Clone(resp)
		if err != nil {
			x.processErr = err.Error()
		}
	}
	return x
}

func requireValidResponse(t *testing.T, reqBytes, respBytes []byte) {
	req, err := abi.DecodeRequest(reqBytes)
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(respBytes, abi.ResponseLimits{})
	require.NoError(t, err)
	require.NoError(t, abi.ValidateResponse(resp, req, conformanceOutputs))
}

// TestEnginesSameFakeWorld requires the fake clock that a guest without
// the clock capability sees to give the same readings on every engine (a
// Go guest's runtime reads the clocks a fixed number of times before the
// guest's own reading, so equal readings mean equal clocks), and the
// deterministic random source to give the same bytes.
func TestEnginesSameFakeWorld(t *testing.T) {
	// sameOnEveryEngine collects what read answers on each engine.
	sameOnEveryEngine := func(t *testing.T, read func(t *testing.T, k engineKind) []byte) {
		got := map[string][]byte{}
		forEachEngine(t, func(t *testing.T, k engineKind) { got[k.name] = read(t, k) })
		if len(got) > 1 {
			require.Equal(t, got["wazero"], got["wasmtime"])
		}
	}
	threeCalls := func(t *testing.T, inst engine.Instance, size int) []byte {
		var all []byte
		for range 3 {
			resp, err := inst.Process(context.Background(), nil)
			require.NoError(t, err)
			require.Len(t, resp, size)
			all = append(all, resp...)
		}
		return all
	}
	t.Run("clock", func(t *testing.T) {
		sameOnEveryEngine(t, func(t *testing.T, k engineKind) []byte {
			return threeCalls(t, k.instance(t, testConfig(), "clock"), 8)
		})
	})
	t.Run("random", func(t *testing.T) {
		sameOnEveryEngine(t, func(t *testing.T, k engineKind) []byte {
			b := threeCalls(t, instantiate(t, compileBytes(t, k.engine(t, testConfig()), "random", randomGuest())), 16)
			require.NotEqual(t, make([]byte, len(b)), b, "random_get wrote nothing")
			return b
		})
	})
}

// randomGuest's flowhost_process answers 16 bytes from WASI random_get.
func randomGuest() []byte {
	types := section(1, vec(
		functype(nil, nil),                      // 0: marker
		functype([]byte{i32}, []byte{i32}),      // 1: alloc
		functype([]byte{i32, i32}, []byte{i64}), // 2: process
		functype([]byte{i32, i32}, []byte{i32}), // 3: random_get
	))
	imports := section(2, vec(cat(str("wasi_snapshot_preview1"), str("random_get"), []byte{0x00}, leb(3))))
	funcs := section(3, vec(leb(0), leb(1), leb(2)))
	memory := section(5, vec([]byte{0x00, 0x01}))
	exports := section(7, vec(
		cat(str("flowhost_abi_v1"), []byte{0x00}, leb(1)),
		cat(str("flowhost_alloc"), []byte{0x00}, leb(2)),
		cat(str("flowhost_process"), []byte{0x00}, leb(3)),
		cat(str("memory"), []byte{0x02}, leb(0)),
	))
	body := func(code ...byte) []byte { return cat(leb(uint64(len(code)+1)), []byte{0x00}, code) }
	return wasmModule(types, imports, funcs, memory, exports, section(10, vec(
		body(0x0b),
		body(0x41, 0x80, 0x08, 0x0b), // i32.const 1024
		// random_get(0, 16); drop the errno; the region (0, 16)
		body(0x41, 0x00, 0x41, 0x10, 0x10, 0x00, 0x1a, 0x42, 0x10, 0x0b),
	)))
}
