package c_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// goldenComputations are the computation names the test guest runs a
// golden script for; every other name runs the fuzz script.
var goldenComputations = map[string]bool{
	"noop": true, "upper": true, "click-counter": true, "echo": true, "counter": true, "sessionizer": true,
	"join": true, "length": true, "doubler": true, "lookup": true, "windowed-sum": true, "params": true, "misuse": true,
}

// cutNUL cuts a text at its first NUL: the C script hands texts to the SDK
// as C strings.
func cutNUL(s string) string {
	s, _, _ = strings.Cut(s, "\x00")
	return s
}

// fuzzScript is the Go twin of the test guest's fuzz script
// (testdata/guest/main.c): every part of the API, chosen by the first
// byte of each message's payload.
var fuzzScript = flowhost.Computation{Process: func(b *flowhost.Batch) error {
	transform := b.Kind() == string(abi.KindTransform)
	for k := range b.Keys() {
		for t := range k.Timers() {
			k.Emit("out", append(fmt.Appendf(nil, "t:%d:", t.TriggerTimestamp), t.Payload...))
		}
		for m := range k.Messages() {
			k.Emit("out", m.Payload, flowhost.WithKey(cutNUL(m.Stream)))
			var op byte
			if len(m.Payload) > 0 {
				op = m.Payload[0]
			}
			if op == 'E' {
				k.Emit("out", []byte("e"), flowhost.WithEventTimestamp(m.EventTimestamp), flowhost.WithParents(m.Input, 0))
			}
			if op == 'A' {
				k.Emit("out", []byte("a"), flowhost.WithAllParents())
			}
			if transform {
				old, _ := k.State()
				k.SetState(append(append(slices.Clone(old), m.ID...), ','))
				switch op {
				case 'T':
					opts := []flowhost.TimerOption{flowhost.WithTimerPayload([]byte(m.ID))}
					if len(m.Payload) > 1 {
						opts = append(opts, flowhost.WithTimerEventTimestamp(m.AlignmentTimestamp))
					}
					k.SetTimer(m.EventTimestamp, opts...)
				case 'C':
					k.CancelTimer(m.EventTimestamp)
				case 'D':
					k.DeleteState()
				}
			}
			if op == 'F' {
				k.Fail(errors.New(cutNUL(m.ID)))
			}
			if op == 'B' {
				return errors.New(cutNUL(m.ID))
			}
		}
		k.Emit("out", fmt.Appendf(nil, "n=%d", k.Inputs()))
	}
	return nil
}}

// expectation is what the Go SDK makes of a request: a status, or (for
// computations that run the fuzz script) the exact response.
type expectation struct {
	status   int64
	req      *abi.Request
	response []byte // nil when only validity can be checked
}

// expectRequest decides what the test guest, initialised with output
// stream "out", must answer to data, from the Go SDK's decoding of it.
func expectRequest(t *testing.T, data []byte) expectation {
	if len(data) == 0 {
		return expectation{status: int64(abi.StatusBadRequest)} // passed as (0, 0): no region
	}
	req, err := abi.DecodeRequest(data)
	if err != nil {
		if v, ok := abi.PeekVersion(data); ok && v != abi.Version {
			return expectation{status: int64(abi.StatusUnsupportedVersion)}
		}
		return expectation{status: int64(abi.StatusBadRequest)}
	}
	if req.ABI != abi.Version {
		return expectation{status: int64(abi.StatusUnsupportedVersion)}
	}
	if !req.Kind.Valid() {
		return expectation{status: int64(abi.StatusBadRequest)}
	}
	if goldenComputations[req.Computation] {
		return expectation{req: req}
	}
	resp, err := flowhost.Run(fuzzScript, &abi.Init{ABI: abi.Version, Computation: "fuzz", Kind: req.Kind, OutputStreams: []string{"out"}}, req)
	require.NoError(t, err, "the Go twin of the fuzz script failed")
	b, err := abi.EncodeResponse(resp)
	require.NoError(t, err)
	return expectation{req: req, response: b}
}

// checkProcess requires the guest's answer to data to be what the Go SDK
// expects: the same status for every envelope the Go SDK refuses, and for
// the rest a response the host accepts, byte for byte the Go SDK's when
// the fuzz script ran.
func checkProcess(t *testing.T, data []byte, got []byte, gotStatus int64, callErr error) {
	want := expectRequest(t, data)
	if want.status != 0 {
		require.Equal(t, want.status, gotStatus, "status for %x (call error: %v)", data, callErr)
		return
	}
	if want.response == nil && gotStatus == int64(abi.StatusGuestFailure) {
		return // a golden script used on input it was not written for
	}
	require.NoError(t, callErr, "request %x", data)
	resp, err := abi.DecodeResponse(got, abi.ResponseLimits{})
	require.NoError(t, err, "response %x to request %x", got, data)
	if want.req.Validate() == nil {
		require.NoError(t, abi.ValidateResponse(resp, want.req, []string{"out"}), "response %x to request %x", got, data)
	}
	if want.response != nil {
		require.Equal(t, want.response, got, "request %x\n got %x\nwant %x", data, got, want.response)
	}
}

// fuzzRequests builds requests that reach every branch of the fuzz script.
func fuzzRequests() []*abi.Request {
	msg := func(id, stream string, ts int64, payload string) abi.Message {
		return abi.Message{ID: id, Stream: stream, EventTimestamp: ts, SystemTimestamp: ts + 1, AlignmentTimestamp: ts + 2, Payload: []byte(payload)}
	}
	state := []byte("s,")
	var reqs []*abi.Request
	for _, kind := range []abi.Kind{abi.KindTransform, abi.KindMap} {
		keys := []abi.RequestKey{
			{Key: "a", Messages: []abi.Message{msg("1", "in", 5, "T"), msg("2", "in", 5, "Tx"), msg("3", "other", -7, "E"), msg("4", "in", 5, "C")}},
			{Key: "b", Timers: []abi.DueTimer{{ID: "t1", TriggerTimestamp: 10, EventTimestamp: 9, Payload: []byte("p")}}, Messages: []abi.Message{msg("5", "in", 1, "D"), msg("6", "in", 1, "A")}},
			{Key: "c", Messages: []abi.Message{msg("7", "in", 1, "F"), msg("8", "in", 1, "x")}},
			{Key: "", Messages: []abi.Message{msg("9", "in", 1, "")}},
		}
		if kind == abi.KindTransform {
			keys[1].State = state
			keys = append(keys, abi.RequestKey{Key: "d", State: []byte{}, Messages: []abi.Message{msg("10", "in", 1, "B")}})
		}
		reqs = append(reqs, &abi.Request{ABI: abi.Version, Computation: "fuzz", Kind: kind, Partition: 1, Epoch: 2,
			Watermarks: abi.Watermarks{Event: -5, System: 1 << 40}, Keys: keys})
	}
	return reqs
}

// seedRequests adds the golden requests, the fuzz-script requests, near
// misses and envelopes the host never sends to a fuzz corpus.
func seedRequests(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join(vectorDir, "*.request.cbor"))
	require.NoError(f, err)
	require.NotEmpty(f, paths)
	var seeds [][]byte
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".request.cbor")
		b, ok := readVector(f, name, "request")
		require.True(f, ok)
		seeds = append(seeds, b)
	}
	for _, req := range fuzzRequests() {
		b, err := abi.EncodeRequest(req)
		require.NoError(f, err)
		seeds = append(seeds, b)
	}
	for _, b := range seeds {
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append(bytes.Clone(b), 0))
	}
	v2, err := abi.EncodeRequest(&abi.Request{ABI: 2, Computation: "fuzz", Kind: abi.KindTransform, Keys: []abi.RequestKey{}})
	require.NoError(f, err)
	f.Add(v2)
	f.Add(append(bytes.Clone(v2[:len(v2)-1]), 0xa0)) // abi 2 with a field of the wrong type
	f.Add([]byte{})
	f.Add([]byte{0xbf, 0xff})
	f.Add([]byte{0xa1, 0x64, 'k', 'e', 'y', 's', 0x9f, 0xff})
	f.Add([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0x81}, 100))
}

// sharedInstances are instances that the inputs of a fuzz target share
// within a process, one per guest: a guest must stay usable after any
// input, and a new engine per input would make fuzzing slow. Fuzz inputs
// run one at a time in a process.
var sharedInstances = struct {
	sync.Mutex
	m map[string]engine.Instance
}{m: map[string]engine.Instance{}}

// shared returns the shared instance of a guest, creating it with setup.
func shared(t *testing.T, name string, setup func(engine.Instance)) engine.Instance {
	sharedInstances.Lock()
	defer sharedInstances.Unlock()
	inst, ok := sharedInstances.m[name]
	if !ok {
		// Not instance(): its engine would close with this input's test.
		ctx := context.Background()
		e, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(filepath.Join(workDir, "cache")))
		require.NoError(t, err)
		m, err := e.Compile(ctx, "c-"+name, guestWasm(t, name))
		require.NoError(t, err)
		inst, err = m.Instantiate(ctx, engine.NewInstanceConfig())
		require.NoError(t, err)
		setup(inst)
		sharedInstances.m[name] = inst
	}
	return inst
}

// dropShared forgets a guest's shared instance after it died.
func dropShared(name string) {
	sharedInstances.Lock()
	defer sharedInstances.Unlock()
	delete(sharedInstances.m, name)
}

// FuzzCBORReader feeds arbitrary bytes as a request to the C test guest
// running in wazero. The guest never traps; it answers every envelope the
// Go SDK refuses with the Go SDK's status (-1, or -3 for another version),
// and every other with a response the host accepts, byte for byte the Go
// SDK's for computations that run the fuzz script.
func FuzzCBORReader(f *testing.F) {
	seedRequests(f)
	guestWasm(f, testGuest) // before any input: a build takes seconds
	f.Fuzz(func(t *testing.T, data []byte) {
		inst := shared(t, testGuest, func(inst engine.Instance) {
			initWith(t, inst, "fuzz", abi.KindTransform, nil, "out")
		})
		got, err := inst.Process(context.Background(), data)
		if err != nil && status(err) == 0 {
			dropShared(testGuest)
			require.NoError(t, err, "the guest failed on %x", data)
		}
		checkProcess(t, data, bytes.Clone(got), status(err), err)
	})
}

// expectInit decides what the conformance guest must answer to an init
// envelope, and the parameters it then holds.
func expectInit(data []byte) (status int64, result []byte, in *abi.Init) {
	if len(data) == 0 {
		return int64(abi.StatusBadRequest), nil, nil
	}
	in, err := abi.DecodeInit(data)
	if err != nil {
		if v, ok := abi.PeekVersion(data); ok && v != abi.Version {
			return int64(abi.StatusUnsupportedVersion), nil, nil
		}
		return int64(abi.StatusBadRequest), nil, nil
	}
	if in.ABI != abi.Version {
		return int64(abi.StatusUnsupportedVersion), nil, nil
	}
	// The C SDK holds the names as C strings, cut at their first NUL (a
	// spec never names a stream with one), and validates what it holds.
	cut := *in
	cut.Computation, cut.Kind = cutNUL(in.Computation), abi.Kind(cutNUL(string(in.Kind)))
	cut.OutputStreams = make([]string, len(in.OutputStreams))
	for i, s := range in.OutputStreams {
		cut.OutputStreams[i] = cutNUL(s)
	}
	if cut.Validate() != nil {
		return int64(abi.StatusBadRequest), nil, nil
	}
	if s, ok := in.Parameters["fail_init"].(string); ok {
		if s = cutNUL(s); s == "" {
			s = "failed (the error has no message)"
		}
		b, err := abi.EncodeInitResult(&abi.InitResult{Error: s})
		if err != nil {
			panic(err)
		}
		return 0, b, in
	}
	return 0, nil, in
}

// paramText is SCRIPT.md's rendering of a parameter for `param:`.
func paramText(v any, ok bool) string {
	if !ok {
		return "missing"
	}
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return fmt.Sprint(x)
	case bool:
		return fmt.Sprint(x)
	}
	return "?"
}

// FuzzInitEnvelope feeds arbitrary bytes as an init envelope to the C
// conformance guest. The guest answers with the Go SDK's status; when it
// starts, it reports every parameter (through the script's param:
// command) exactly as the Go SDK decoded it.
func FuzzInitEnvelope(f *testing.F) {
	for _, name := range []string{"init_parameters", "init_error"} {
		b, ok := readVector(f, name, "init")
		require.True(f, ok)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	for _, params := range []map[string]any{
		{"fail_init": "no"}, {"fail_init": ""}, {"fail_init": 3},
		{"s": "x", "i": int64(-9), "f": 1.5, "b": false, "n": nil, "l": []any{int64(1), "a"}, "m": map[string]any{"k": []byte{1}}},
	} {
		b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "c", Kind: abi.KindTransform, Parameters: params, OutputStreams: []string{"out", "side"}})
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{0xa0})
	guestWasm(f, conformanceGuest)
	f.Fuzz(func(t *testing.T, data []byte) {
		// flowhost_init starts the instance over, so one serves every input.
		inst := shared(t, conformanceGuest, func(engine.Instance) {})
		ctx := context.Background()
		wantStatus, wantResult, in := expectInit(data)
		got, err := inst.Init(ctx, data)
		if err != nil && status(err) == 0 {
			dropShared(conformanceGuest)
		}
		require.Equal(t, wantStatus, status(err), "init %x: %v", data, err)
		if wantStatus != 0 {
			return
		}
		require.NoError(t, err)
		require.Equal(t, wantResult, bytes.Clone(got), "init result for %x", data)
		if wantResult != nil || !slices.Contains(in.OutputStreams, "out") {
			return
		}
		var msgs []abi.Message
		var want []string
		for name, v := range in.Parameters {
			if strings.ContainsAny(name, ";\x00") {
				continue
			}
			msgs = append(msgs, abi.Message{ID: fmt.Sprint(len(msgs)), Stream: "in", Payload: []byte("!param:" + name)})
			want = append(want, "param:"+name+"="+paramText(v, true))
		}
		v, ok := in.Parameters["no such parameter"]
		msgs = append(msgs, abi.Message{ID: "missing", Stream: "in", Payload: []byte("!param:no such parameter")})
		want = append(want, "param:no such parameter="+paramText(v, ok))
		out := process(t, inst, &abi.Request{ABI: abi.Version, Computation: in.Computation, Kind: in.Kind,
			Keys: []abi.RequestKey{{Key: "k", Messages: msgs}}})
		resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
		require.NoError(t, err)
		require.Len(t, resp.Keys, 1)
		require.Empty(t, resp.Keys[0].Error)
		var got2 []string
		for _, e := range resp.Keys[0].Emits {
			got2 = append(got2, string(e.Payload))
		}
		require.Equal(t, want, got2, "parameters of init %x", data)
	})
}
