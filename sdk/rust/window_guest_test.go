package rust_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
	"github.com/flowhost/flowhost/sdk/rust"
)

// windowGuestModule builds windowguest/ once per test binary with
// BuildWindowGuest, as the conformance suite does.
var windowGuestModule = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "flowhost-rust-windowguest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path, err := rust.BuildWindowGuest(dir)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// windowGuestCompiled compiles the module once per test binary, so that
// the fuzz target does not compile it per input.
var windowGuestCompiled = sync.OnceValues(func() (engine.Module, error) {
	wasm, err := windowGuestModule()
	if err != nil {
		return nil, fmt.Errorf("rust.BuildWindowGuest: %w", err)
	}
	e, err := sharedEngine()
	if err != nil {
		return nil, err
	}
	return e.Compile(context.Background(), "rust-windowguest", wasm)
})

func compiledWindowGuest(t *testing.T) engine.Module {
	t.Helper()
	m, err := windowGuestCompiled()
	require.NoError(t, err)
	return m
}

// goCount is the window guest's aggregator written with the Go SDK: the
// reference the Rust guest must match byte for byte.
var goCount = flowhost.Aggregator{
	Add: func(acc []byte, _ flowhost.Message) []byte {
		n, _ := binary.Uvarint(acc)
		return binary.AppendUvarint(nil, n+1)
	},
	Merge: func(a, b []byte) []byte {
		x, _ := binary.Uvarint(a)
		y, _ := binary.Uvarint(b)
		return binary.AppendUvarint(nil, x+y)
	},
	Result: func(w flowhost.Window, acc []byte) []byte {
		n, _ := binary.Uvarint(acc)
		return fmt.Appendf(nil, `{"start":%d,"end":%d,"count":%d}`, w.Start, w.End, n)
	},
}

// TestWindowGuest runs the Rust window guest through the host's engine
// over scripted batches of three keys (windows before 1970, late records,
// sessions that grow) for each kind, next to the Go SDK's Windows with the
// same aggregator run natively on the same requests, and requires the
// same responses (state bytes, emits, timers); for tumbling windows it
// also requires the counts worked out by hand.
func TestWindowGuest(t *testing.T) {
	ctx := context.Background()
	m := compiledWindowGuest(t)
	type batch struct {
		wm   int64
		msgs []input
	}
	script := []batch{
		{-5, []input{{`["a"]`, -12}, {`["b"]`, 3}, {`["a"]`, -1}, {`["a"]`, 4}, {`["c"]`, 7}}},
		{0, []input{{`["a"]`, 9}, {`["b"]`, 15}, {`["a"]`, -7}}}, // -7 is late once [-10,0) fired
		{12, []input{{`["b"]`, 16}, {`["c"]`, 2}, {`["a"]`, 30}}},
		{40, []input{{`["a"]`, 31}, {`["c"]`, 38}}},
		{1000, nil},
	}
	for _, tc := range []struct {
		name   string
		params map[string]any
		spec   flowhost.WindowSpec
		lat    time.Duration
		want   []string // per batch, "key stream payload" in response order; nil: not checked by hand
	}{
		{"tumbling", map[string]any{"kind": "tumbling", "size_ns": int64(10)}, flowhost.Tumbling(10), 0, []string{
			// batch 2: the timers at -10 and 0 close a's first windows; a's -7 is late
			`["a"] windows {"start":-20,"end":-10,"count":1}`,
			`["a"] windows {"start":-10,"end":0,"count":1}`, `["a"] late {}`,
			// batch 3: the timers at 10 close [0,10) of every key; c's 2 is late
			`["a"] windows {"start":0,"end":10,"count":2}`,
			`["b"] windows {"start":0,"end":10,"count":1}`,
			`["c"] windows {"start":0,"end":10,"count":1}`, `["c"] late {}`,
			// batch 4: a's timer at 40 fires before its 31, which is late; b's at 20
			`["a"] windows {"start":30,"end":40,"count":1}`, `["a"] late {}`,
			`["b"] windows {"start":10,"end":20,"count":2}`,
			// batch 5: the end of time
			`["c"] windows {"start":30,"end":40,"count":1}`,
		}},
		{"hopping-lateness", map[string]any{"kind": "hopping", "size_ns": int64(10), "advance_ns": int64(4), "lateness_ns": int64(3)},
			flowhost.Hopping(10, 4), 3, nil},
		{"session", map[string]any{"kind": "session", "gap_ns": int64(5)}, flowhost.Session(5), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			init := &abi.Init{ABI: abi.Version, Computation: "window-count", Kind: abi.KindTransform,
				Parameters: tc.params, OutputStreams: []string{"windows", "late"}}
			h := newMiniHost(t, m, init)
			goWindows := flowhost.NewWindows(tc.spec, goCount, "windows", "late", flowhost.WithAllowedLateness(tc.lat))
			goComp := flowhost.Computation{Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					_ = goWindows.Process(k)
				}
				return nil
			}}
			var got []string
			for i, b := range script {
				req := h.request(b.wm, b.msgs)
				reqBytes, err := abi.EncodeRequest(req)
				require.NoError(t, err)
				out, err := h.inst.Process(ctx, reqBytes)
				require.NoError(t, err, "batch %d", i)
				resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
				require.NoError(t, err, "batch %d", i)
				require.NoError(t, abi.ValidateResponse(resp, req, init.OutputStreams))
				goResp, err := flowhost.Run(goComp, init, req)
				require.NoError(t, err)
				require.Equal(t, goResp, resp, "batch %d: the Rust guest and the Go helper disagree", i)
				for _, rk := range resp.Keys {
					require.Empty(t, rk.Error)
					for _, e := range rk.Emits {
						got = append(got, fmt.Sprintf("%s %s %s", rk.Key, e.Stream, e.Payload))
					}
				}
				h.apply(req, resp)
			}
			if tc.want != nil {
				require.Equal(t, tc.want, got)
			}
			require.NotEmpty(t, got)
			for k, ts := range h.timers {
				require.Empty(t, ts, "timers left for %s", k)
			}
		})
	}
}

// TestWindowGuestRefusesBadParameters checks through the engine that a
// bad parameter refuses init with an error naming it, and that a key
// whose state is not a window state fails alone with the precise error.
func TestWindowGuestRefusesBadParameters(t *testing.T) {
	ctx := context.Background()
	m := compiledWindowGuest(t)
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{}, `parameter "kind" is missing`},
		{map[string]any{"kind": "tumbling"}, `parameter "size_ns" is missing`},
		{map[string]any{"kind": "hopping", "size_ns": int64(5), "advance_ns": int64(0)}, `parameter "advance_ns": must be positive, got 0`},
		{map[string]any{"kind": "session", "gap_ns": "1s"}, `parameter "gap_ns": expected integer, got string`},
	} {
		inst := instantiate(t, m)
		b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "w", Kind: abi.KindTransform,
			Parameters: tc.params, OutputStreams: []string{"windows", "late"}})
		require.NoError(t, err)
		res, err := inst.Init(ctx, b)
		require.NoError(t, err)
		require.NotNil(t, res, "%v should refuse init", tc.params)
		r, err := abi.DecodeInitResult(res)
		require.NoError(t, err)
		require.Equal(t, tc.want, r.Error)
	}

	init := &abi.Init{ABI: abi.Version, Computation: "w", Kind: abi.KindTransform,
		Parameters: map[string]any{"kind": "tumbling", "size_ns": int64(10)}, OutputStreams: []string{"windows", "late"}}
	h := newMiniHost(t, m, init)
	h.state[`["bad"]`] = []byte{1, 0, 2, 0, 2, 0, 0}
	req := h.request(0, []input{{`["bad"]`, 1}, {`["good"]`, 2}})
	reqBytes, err := abi.EncodeRequest(req)
	require.NoError(t, err)
	out, err := h.inst.Process(ctx, reqBytes)
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Len(t, resp.Keys, 2)
	require.Equal(t, abi.ResponseKey{Key: `["bad"]`,
		Error: "flowhost: the key's state is not a window state: bad window end of window 1 at byte 7"}, resp.Keys[0])
	require.Empty(t, resp.Keys[1].Error)
	require.Len(t, resp.Keys[1].TimersSet, 1)
}

// TestWorkspaceKey checks that the crates of one workspace share a target
// directory and two checkouts of it do not (cargo would take one's build
// for the other's).
func TestWorkspaceKey(t *testing.T) {
	sdk, err := rust.SDKDir()
	require.NoError(t, err)
	key := rust.WorkspaceKey(sdk)
	require.Equal(t, key, rust.WorkspaceKey(filepath.Join(sdk, "windowguest")))
	require.Equal(t, key, rust.WorkspaceKey(filepath.Join(sdk, "examples", "window-count")))
	other := t.TempDir()
	for _, d := range []string{"a/sdk/rust/windowguest", "b/sdk/rust/windowguest"} {
		require.NoError(t, os.MkdirAll(filepath.Join(other, d), 0o755))
	}
	for _, d := range []string{"a/sdk/rust", "b/sdk/rust"} {
		require.NoError(t, os.WriteFile(filepath.Join(other, d, "Cargo.toml"), []byte("[package]\nname = \"x\"\n\n[workspace]\n"), 0o644))
	}
	a := rust.WorkspaceKey(filepath.Join(other, "a/sdk/rust/windowguest"))
	require.Equal(t, a, rust.WorkspaceKey(filepath.Join(other, "a/sdk/rust")))
	require.NotEqual(t, a, rust.WorkspaceKey(filepath.Join(other, "b/sdk/rust/windowguest")))
	require.NotEqual(t, key, a)
}

// FuzzWindowGuestState feeds arbitrary key states (with a due timer and a
// message) to the Rust window guest through the engine and to the Go
// SDK's Windows: both refuse the state, each failing the key alone with
// an error of the shared prefix, or both accept it and answer the same
// response, so the Rust decoder accepts exactly what Go's does.
func FuzzWindowGuestState(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{1, 0, 0},
		{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01, 0x00, 0x14, 0x01, 0x05},
		{1, 20, 2, 0, 20, 1, 3, 20, 40, 0},
		{1, 0, 2, 0, 2, 0, 0},
		{2},
		{1, 0x80, 0x80, 0x00, 0x00},
		{1, 0, 1, 0, 2, 50},
	} {
		f.Add(seed, int64(5), int64(10))
	}
	init := &abi.Init{ABI: abi.Version, Computation: "w", Kind: abi.KindTransform,
		Parameters: map[string]any{"kind": "tumbling", "size_ns": int64(10)}, OutputStreams: []string{"windows", "late"}}
	goWindows := flowhost.NewWindows(flowhost.Tumbling(10), goCount, "windows", "late")
	goComp := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = goWindows.Process(k)
		}
		return nil
	}}
	f.Fuzz(func(t *testing.T, state []byte, ts, trigger int64) {
		inst := instantiate(t, compiledWindowGuest(t))
		initWith(t, inst, init)
		req := &abi.Request{ABI: abi.Version, Computation: "w", Kind: abi.KindTransform, Keys: []abi.RequestKey{{
			Key: "k", State: state,
			Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: trigger, EventTimestamp: trigger}},
			Messages: []abi.Message{{ID: "m", Stream: "in", EventTimestamp: ts, SystemTimestamp: ts, AlignmentTimestamp: ts, Payload: []byte("p")}},
		}}}
		reqBytes, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		out, err := inst.Process(context.Background(), reqBytes)
		require.NoError(t, err, "the guest must answer any state")
		resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
		require.NoError(t, err)
		goResp, err := flowhost.Run(goComp, init, req)
		require.NoError(t, err)
		require.Len(t, resp.Keys, 1)
		require.Len(t, goResp.Keys, 1)
		const prefix = "flowhost: the key's state is not a window state: "
		rustErr, goErr := resp.Keys[0].Error, goResp.Keys[0].Error
		if rustErr != "" || goErr != "" {
			require.Truef(t, strings.HasPrefix(rustErr, prefix) && strings.HasPrefix(goErr, prefix),
				"state %x: Rust %q, Go %q", state, rustErr, goErr)
			require.Equal(t, abi.ResponseKey{Key: "k", Error: rustErr}, resp.Keys[0])
			return
		}
		require.Equal(t, goResp, resp, "state %x", state)
	})
}
