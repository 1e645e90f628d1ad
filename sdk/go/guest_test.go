package flowhost

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/flowhost/flowhost/abi"
	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
)

func encodeRequest(t *testing.T, req *abi.Request) []byte {
	t.Helper()
	b, err := abi.EncodeRequest(req)
	require.NoError(t, err)
	return b
}

func encodeInit(t *testing.T, in *abi.Init) []byte {
	t.Helper()
	b, err := abi.EncodeInit(in)
	require.NoError(t, err)
	return b
}

func noop(*Batch) error { return nil }

func TestProcessStatuses(t *testing.T) {
	valid := encodeRequest(t, request(abi.KindTransform, inputs("k", 0, 1)))
	newer, err := cbor.Marshal(map[string]any{"abi": 2, "batch": "of another shape"})
	require.NoError(t, err)
	v2 := request(abi.KindTransform, inputs("k", 0, 1))
	v2.ABI = 2
	reduce := request("reduce", inputs("k", 0, 1))

	tests := []struct {
		name    string
		comp    *Computation
		init    bool
		data    []byte
		status  abi.Status
		logged  string
		emitted bool
	}{
		{"ok", &Computation{Process: noop}, false, valid, 0, "", true},
		{"garbage", &Computation{Process: noop}, false, []byte{0x1c}, abi.StatusBadRequest, "cannot decode the request: malformed item head 0x1c", false},
		{"empty", &Computation{Process: noop}, false, nil, abi.StatusBadRequest, "cannot decode the request: empty envelope", false},
		{"newer version, newer shape", &Computation{Process: noop}, false, newer, abi.StatusUnsupportedVersion, "request speaks ABI version 2; this SDK speaks 1", false},
		{"newer version, same shape", &Computation{Process: noop}, false, encodeRequest(t, v2), abi.StatusUnsupportedVersion, "request speaks ABI version 2", false},
		{"unknown kind", &Computation{Process: noop}, false, encodeRequest(t, reduce), abi.StatusBadRequest, `request of unknown kind "reduce"`, false},
		{"nothing registered", nil, false, valid, abi.StatusGuestFailure, "no computation registered", false},
		{"process before init", &Computation{Init: func(Params) error { return nil }, Process: noop}, false, valid, abi.StatusGuestFailure, "flowhost_process called before a successful flowhost_init", false},
		{"process after init", &Computation{Init: func(Params) error { return nil }, Process: noop}, true, valid, 0, "", true},
		{"panic", &Computation{Process: func(*Batch) error { panic("boom") }}, false, valid, abi.StatusGuestFailure, "flowhost: Process panicked: boom\ngoroutine", false},
		{"runtime error", &Computation{Process: func(b *Batch) error {
			var k *Key
			k.Emit("out", nil)
			return nil
		}}, false, valid, abi.StatusGuestFailure, "Process panicked: runtime error: invalid memory address or nil pointer dereference", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := captureLog(t)
			g := &guest{comp: tt.comp}
			if tt.init {
				_, status := g.init(encodeInit(t, declare("out")))
				require.Zero(t, status)
			}
			out, status := g.process(tt.data)
			require.Equal(t, tt.status, status)
			if tt.logged == "" {
				require.Empty(t, *lines)
			} else {
				require.Len(t, *lines, 1)
				require.Contains(t, (*lines)[0], "ERROR "+"flowhost: ")
				require.Contains(t, (*lines)[0], tt.logged)
			}
			if tt.emitted {
				_, err := abi.DecodeResponse(out, abi.ResponseLimits{})
				require.NoError(t, err)
			} else {
				require.Nil(t, out)
			}
		})
	}
}

func TestInitStatuses(t *testing.T) {
	v2 := declare("out")
	v2.ABI = 2
	noOutputs := declare("out")
	noOutputs.Computation = ""
	tests := []struct {
		name   string
		comp   *Computation
		data   []byte
		status abi.Status
		result string // the InitResult error, "" for none
		logged string
	}{
		{"no Init", &Computation{Process: noop}, encodeInit(t, declare("out")), 0, "", ""},
		{"Init accepts", &Computation{Init: func(Params) error { return nil }, Process: noop}, encodeInit(t, declare("out")), 0, "", ""},
		{"Init refuses", &Computation{Init: func(Params) error { return errors.New("no window") }, Process: noop}, encodeInit(t, declare("out")), 0, "no window", ""},
		{"Init panics", &Computation{Init: func(Params) error { panic("bad config") }, Process: noop}, encodeInit(t, declare("out")), abi.StatusGuestFailure, "", "Init panicked: bad config"},
		{"garbage", &Computation{Process: noop}, []byte{0xa0}, abi.StatusBadRequest, "", "cannot decode the init envelope: abi: missing required field"},
		{"newer version", &Computation{Process: noop}, encodeInit(t, v2), abi.StatusUnsupportedVersion, "", "init envelope speaks ABI version 2"},
		{"invalid", &Computation{Process: noop}, encodeInit(t, noOutputs), abi.StatusBadRequest, "", "invalid init envelope: computation: empty"},
		{"nothing registered", nil, encodeInit(t, declare("out")), abi.StatusGuestFailure, "", "no computation registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := captureLog(t)
			g := &guest{comp: tt.comp}
			out, status := g.init(tt.data)
			require.Equal(t, tt.status, status)
			if tt.result == "" {
				require.Nil(t, out)
			} else {
				r, err := abi.DecodeInitResult(out)
				require.NoError(t, err)
				require.Equal(t, tt.result, r.Error)
			}
			if tt.logged == "" {
				require.Empty(t, *lines)
			} else {
				require.Len(t, *lines, 1)
				require.Contains(t, (*lines)[0], tt.logged)
			}
		})
	}
}

func TestProcessAfterRefusedInit(t *testing.T) {
	captureLog(t)
	g := &guest{comp: &Computation{Init: func(Params) error { return errors.New("no") }, Process: noop}}
	out, status := g.init(encodeInit(t, declare("out")))
	require.Zero(t, status)
	require.NotNil(t, out)
	_, status = g.process(encodeRequest(t, request(abi.KindTransform, inputs("k", 0, 1))))
	require.Equal(t, abi.StatusGuestFailure, status)
}

func TestAlloc(t *testing.T) {
	var g guest
	require.Nil(t, g.alloc(-1))
	zero := g.alloc(0)
	require.Len(t, zero, 1, "a zero-size region still has an address")

	big := g.alloc(100)
	require.Len(t, big, 100)
	small := g.alloc(10)
	require.Len(t, small, 10)
	require.Equal(t, unsafe.SliceData(big), unsafe.SliceData(small), "a smaller request reuses the region")

	huge := g.alloc(4 << 20)
	require.Len(t, huge, 4<<20)
	shrunk := g.alloc(1000)
	require.Len(t, shrunk, 1000)
	require.Less(t, cap(shrunk), 4<<20, "a region far larger than needed is given back")
}

// TestRegion drives the address-based entry points the exports use.
func TestRegion(t *testing.T) {
	lines := captureLog(t)
	g := &guest{comp: &Computation{Process: noop}}
	data := encodeRequest(t, request(abi.KindTransform, inputs("k", 0, 1)))
	buf := g.alloc(int32(len(data)))
	copy(buf, data)
	ptr := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))

	out, status := g.processAt(ptr, int32(len(data)))
	require.Zero(t, status)
	require.NotEmpty(t, out)
	require.Empty(t, *lines)

	_, status = g.processAt(ptr+1, int32(len(data)))
	require.Equal(t, abi.StatusBadRequest, status)
	require.Contains(t, (*lines)[0], "names memory that flowhost_alloc did not hand out")

	_, status = g.processAt(ptr, int32(len(data)+1))
	require.Equal(t, abi.StatusBadRequest, status)

	initData := encodeInit(t, declare("out"))
	buf = g.alloc(int32(len(initData)))
	copy(buf, initData)
	_, status = g.initAt(uintptr(unsafe.Pointer(unsafe.SliceData(buf))), int32(len(initData)))
	require.Zero(t, status)
	_, status = g.initAt(0, 1)
	require.Equal(t, abi.StatusBadRequest, status)
}

func TestRegister(t *testing.T) {
	saved := instance.comp
	t.Cleanup(func() { instance.comp = saved })
	instance.comp = nil

	require.PanicsWithValue(t, "flowhost: Register with a nil Process", func() { Register(Computation{}) })
	Register(Computation{Process: noop})
	require.NotNil(t, instance.comp)
	require.PanicsWithValue(t, "flowhost: Register called twice", func() { Register(Computation{Process: noop}) })
}

func TestRunReportsStatusesAndRefusals(t *testing.T) {
	captureLog(t)
	req := request(abi.KindTransform, inputs("k", 0, 1))
	_, err := Run(Computation{Process: func(*Batch) error { panic("x") }}, nil, req)
	require.ErrorIs(t, err, abi.StatusGuestFailure)

	_, err = Run(Computation{Init: func(Params) error { return errors.New("no window") }, Process: noop}, declare("out"), req)
	require.EqualError(t, err, "flowhost: Init refused to start: no window")

	_, err = Run(Computation{Process: noop}, &abi.Init{Parameters: map[string]any{"bad": map[any]any{1: 1}}}, req)
	var e *abi.Error
	require.ErrorAs(t, err, &e)
}

// TestBatchesReuseNothingVisible: a guest reuses its output and its emit
// chunks from one batch to the next; each batch's response must still
// carry exactly its own payloads, whether the chunks fit or must grow.
func TestBatchesReuseNothingVisible(t *testing.T) {
	g := &guest{comp: &Computation{Process: func(b *Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				k.Emit("out", append([]byte(k.Key()+":"), m.Payload...))
			}
		}
		return nil
	}}}
	for i, size := range []int{3, 1, chunkSize + 7, 2, 2 * chunkSize} {
		key := "k" + string(rune('a'+i))
		req := request(abi.KindTransform, inputs(key, 0, 3))
		for m := range req.Keys[0].Messages {
			req.Keys[0].Messages[m].Payload = bytes.Repeat([]byte{byte('0' + m)}, size)
		}
		out, status := g.process(encodeRequest(t, req))
		require.Zero(t, status)
		resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
		require.NoError(t, err)
		require.Len(t, resp.Keys, 1)
		require.Len(t, resp.Keys[0].Emits, 3)
		for m, e := range resp.Keys[0].Emits {
			require.Equal(t, append([]byte(key+":"), bytes.Repeat([]byte{byte('0' + m)}, size)...), e.Payload, "batch %d, emit %d", i, m)
			require.Equal(t, []uint32{uint32(m)}, e.Parents)
		}
	}
}
