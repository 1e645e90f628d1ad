package abi

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
)

// sortedEncMode encodes map keys in canonical order, so that which of two
// violations a test meets first does not depend on Go's map order.
var sortedEncMode, _ = cbor.CoreDetEncOptions().EncMode()

// enc encodes an arbitrary value (usually maps built by hand) to make
// envelopes the typed encoder would never produce.
func enc(t *testing.T, v any) []byte {
	t.Helper()
	b, err := sortedEncMode.Marshal(v)
	require.NoError(t, err)
	return b
}

type m = map[string]any

func emitMap(fields m) m {
	e := m{"stream": "out", "payload": []byte("p")}
	for k, v := range fields {
		if v == nil {
			delete(e, k)
			continue
		}
		e[k] = v
	}
	return e
}

func oneEmit(fields m) m {
	return m{"keys": []any{m{"key": "a", "emits": []any{emitMap(fields)}}}}
}

// cat concatenates byte pieces, for envelopes that need raw CBOR.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func text(s string) []byte {
	b, _ := cbor.Marshal(s)
	return b
}

func TestDecodeResponseRejects(t *testing.T) {
	valid, err := EncodeResponse(&Response{Keys: []ResponseKey{{Key: "a", Emits: []Emit{{Stream: "out", Payload: []byte("p")}}}}})
	require.NoError(t, err)

	tests := []struct {
		name   string
		data   []byte
		limits ResponseLimits
		field  string
		msg    string
	}{
		{"empty", nil, ResponseLimits{}, "", "empty envelope"},
		{"not a map", enc(t, []any{}), ResponseLimits{}, "", "expected map, got array"},
		{"stream is a uint", enc(t, oneEmit(m{"stream": uint64(5)})), ResponseLimits{}, "keys[0].emits[0].stream", "expected text string, got uint"},
		{"payload is text", enc(t, oneEmit(m{"payload": "p"})), ResponseLimits{}, "keys[0].emits[0].payload", "expected byte string, got text string"},
		{"unknown top-level field", enc(t, m{"keys": []any{}, "colour": "red"}), ResponseLimits{}, "colour", "unknown field"},
		{"field names are case-sensitive", enc(t, m{"Keys": []any{}}), ResponseLimits{}, "Keys", "unknown field"},
		{"unknown nested field", enc(t, oneEmit(m{"message_id": "forged"})), ResponseLimits{}, "keys[0].emits[0].message_id", "unknown field"},
		{"odd field name is quoted", enc(t, oneEmit(m{"system ts": int64(1)})), ResponseLimits{}, `keys[0].emits[0]["system ts"]`, "unknown field"},
		{"missing keys", enc(t, m{}), ResponseLimits{}, "keys", "missing required field"},
		{"missing key", enc(t, m{"keys": []any{m{"emits": []any{}}}}), ResponseLimits{}, "keys[0].key", "missing required field"},
		{"missing payload", enc(t, oneEmit(m{"payload": nil})), ResponseLimits{}, "keys[0].emits[0].payload", "missing required field"},
		{"null array", enc(t, m{"keys": []any{m{"key": "a", "emits": nil}}}), ResponseLimits{}, "keys[0].emits", "expected array, got null"},
		{"null text", enc(t, oneEmit(m{"key": cbor.RawMessage{0xf6}})), ResponseLimits{}, "keys[0].emits[0].key", "expected text string, got null"},
		{"undefined", enc(t, m{"keys": cbor.RawMessage{0xf7}}), ResponseLimits{}, "keys", "expected array, got undefined"},
		{"error is a bool", enc(t, m{"keys": []any{}, "error": true}), ResponseLimits{}, "error", "expected text string, got bool"},
		{"event_ts is a float", enc(t, oneEmit(m{"event_ts": 1.5})), ResponseLimits{}, "keys[0].emits[0].event_ts", "expected int, got float"},
		{"event_ts overflows int64", enc(t, oneEmit(m{"event_ts": uint64(math.MaxInt64) + 1})), ResponseLimits{}, "keys[0].emits[0].event_ts", "integer overflows int64"},
		{"negative event_ts below int64", cat([]byte{0xa1}, text("keys"), []byte{0x81, 0xa2}, text("key"), text("a"), text("timers_cancel"), []byte{0x81, 0x3b, 0x80, 0, 0, 0, 0, 0, 0, 0}), ResponseLimits{}, "keys[0].timers_cancel[0]", "integer overflows int64"},
		{"negative parent", enc(t, oneEmit(m{"parents": []any{int64(-1)}})), ResponseLimits{}, "keys[0].emits[0].parents[0]", "expected uint, got negative int"},
		{"parent beyond uint32", enc(t, oneEmit(m{"parents": []any{uint64(1) << 32}})), ResponseLimits{}, "keys[0].emits[0].parents[0]", "4294967296 exceeds the largest allowed value 4294967295"},
		{"empty parents", enc(t, oneEmit(m{"parents": []any{}})), ResponseLimits{}, "keys[0].emits[0].parents", "empty array; leave the field out instead"},
		{"state_op beyond uint8", enc(t, m{"keys": []any{m{"key": "a", "state_op": 300}}}), ResponseLimits{}, "keys[0].state_op", "300 exceeds the largest allowed value 255"},
		{"invalid UTF-8", enc(t, oneEmit(m{"stream": cbor.RawMessage{0x62, 0xc3, 0x28}})), ResponseLimits{}, "keys[0].emits[0].stream", "text string is not valid UTF-8"},
		{"invalid UTF-8 field name", cat([]byte{0xa1, 0x62, 0xc3, 0x28, 0x80}), ResponseLimits{}, "", "map key is not valid UTF-8"},
		{"integer map key", cat([]byte{0xa1, 0x01, 0x80}), ResponseLimits{}, "", "map key: expected text string, got uint"},
		{"duplicate field", cat([]byte{0xa2}, text("keys"), []byte{0x80}, text("keys"), []byte{0x80}), ResponseLimits{}, "keys", "duplicate field"},
		{"duplicate nested field", cat([]byte{0xa1}, text("keys"), []byte{0x81, 0xa2}, text("key"), text("a"), text("key"), text("b")), ResponseLimits{}, "keys[0].key", "duplicate field"},
		{"indefinite array", cat([]byte{0xa1}, text("keys"), []byte{0x9f, 0xff}), ResponseLimits{}, "keys", "indefinite-length array is not allowed"},
		{"indefinite map", []byte{0xbf, 0xff}, ResponseLimits{}, "", "indefinite-length map is not allowed"},
		{"indefinite text", cat([]byte{0xa1}, text("keys"), []byte{0x81, 0xa1}, text("key"), []byte{0x7f, 0x61, 0x61, 0xff}), ResponseLimits{}, "keys[0].key", "indefinite-length text string is not allowed"},
		{"tag", cat([]byte{0xa1}, text("keys"), []byte{0xc1, 0x80}), ResponseLimits{}, "keys", "expected array, got tag"},
		{"trailing bytes", append(append([]byte{}, valid...), 0x00, 0x00), ResponseLimits{}, "", "2 trailing bytes after the envelope"},
		{"truncated", valid[:len(valid)-1], ResponseLimits{}, "keys[0].emits[0].payload", "string of 1 bytes runs past the end of the data (0 bytes left)"},
		{"count beyond the data", cat([]byte{0xa1}, text("keys"), []byte{0x9a, 0xff, 0xff, 0xff, 0xff}), ResponseLimits{}, "keys", "container of 4294967295 items runs past the end of the data"},
		{"reserved head", cat([]byte{0xa1}, text("keys"), []byte{0x1c}), ResponseLimits{}, "keys", "malformed item head 0x1c"},
		{"too large", valid, ResponseLimits{MaxBytes: len(valid) - 1}, "", fmt.Sprintf("response of %d bytes exceeds the limit of %d", len(valid), len(valid)-1)},
		{"too many emits", enc(t, m{"keys": []any{
			m{"key": "a", "emits": []any{emitMap(nil), emitMap(nil)}},
			m{"key": "b", "emits": []any{emitMap(nil)}},
		}}), ResponseLimits{MaxEmits: 2}, "keys[1].emits[0]", "more than 2 emits in the response"},
		{"too many timers", enc(t, m{"keys": []any{m{"key": "a", "timers_set": []any{m{"trigger_ts": 1}}, "timers_cancel": []any{1, 2}}}}), ResponseLimits{MaxTimers: 2}, "keys[0].timers_cancel[1]", "more than 2 timers set or cancelled in the response"},
		{"state too large", enc(t, m{"keys": []any{m{"key": "a", "state_op": 1, "state": make([]byte, 11)}}}), ResponseLimits{MaxStateBytes: 10}, "keys[0].state", "11 bytes of state exceed the limit of 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := DecodeResponse(tt.data, tt.limits)
			require.Nil(t, resp)
			var e *Error
			require.True(t, errors.As(err, &e), "want *abi.Error, got %T: %v", err, err)
			require.Equal(t, tt.field, e.Field, "message: %s", e.Msg)
			require.Equal(t, tt.msg, e.Msg)
		})
	}
}

func TestErrorString(t *testing.T) {
	require.Equal(t, "keys[3].emits[0].stream: expected text string, got uint",
		(&Error{Field: "keys[3].emits[0].stream", Msg: "expected text string, got uint"}).Error())
	require.Equal(t, "empty envelope", (&Error{Msg: "empty envelope"}).Error())
	wrapped := fmt.Errorf("plugin %q: %w", "enrich", &Error{Field: "keys", Msg: "x"})
	var e *Error
	require.ErrorAs(t, wrapped, &e)
	require.Equal(t, "keys", e.Field)
}

func TestDecodeInitRejects(t *testing.T) {
	deep := any("leaf")
	for range maxNesting {
		deep = []any{deep}
	}
	good := m{"abi": 1, "computation": "c", "kind": "map", "partition": 0, "output_streams": []any{}}
	with := func(params any) []byte {
		g := m{}
		for k, v := range good {
			g[k] = v
		}
		g["parameters"] = params
		return enc(t, g)
	}
	tests := []struct {
		name  string
		data  []byte
		field string
		msg   string
	}{
		{"too deep", with(m{"p": deep}), "parameters.p" + strings.Repeat("[0]", maxNesting-2), "nesting exceeds 32 levels"},
		{"integer key", with(map[any]any{1: "x"}), "parameters", "map key: expected text string, got uint"},
		{"tag", with(m{"when": cbor.Tag{Number: 1, Content: 0}}), "parameters.when", "tags are not allowed"},
		{"undefined", with(m{"u": cbor.RawMessage{0xf7}}), "parameters.u", "undefined is not allowed"},
		{"simple value", with(m{"s": cbor.RawMessage{0xf8, 0x20}}), "parameters.s", "simple value 32 is not allowed"},
		{"uint beyond int64", with(m{"n": []any{uint64(math.MaxUint64)}}), "parameters.n[0]", "integer overflows int64"},
		// A Go map cannot hold the same parameter twice.
		{"duplicate parameter", cat([]byte{0xa1}, text("parameters"), []byte{0xa2}, text("w"), text("1"), text("w"), text("2")), "parameters.w", "duplicate map key"},
		{"missing output_streams", enc(t, m{"abi": 1, "computation": "c", "kind": "map", "partition": 0}), "output_streams", "missing required field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeInit(tt.data)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tt.field, e.Field, "message: %s", e.Msg)
			require.Equal(t, tt.msg, e.Msg)
		})
	}
}

func TestEncodeInitRejectsParametersWithoutWireForm(t *testing.T) {
	_, err := EncodeInit(&Init{ABI: Version, Computation: "c", Kind: KindMap, OutputStreams: []string{"o"},
		Parameters: map[string]any{"limits": map[any]any{1: 2}}})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "parameters.limits", e.Field)
	require.Equal(t, "map key: expected text string, got uint", e.Msg)
}

func TestDecodeInitParameterTypes(t *testing.T) {
	b, err := EncodeInit(&Init{ABI: Version, Computation: "c", Kind: KindTransform, OutputStreams: []string{},
		Parameters: map[string]any{"i": 7, "u": uint8(8), "f": float32(0.5), "s": "x", "b": []byte{1}, "l": []string{"a"}, "n": nil}})
	require.NoError(t, err)
	in, err := DecodeInit(b)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"i": int64(7), "u": int64(8), "f": 0.5, "s": "x", "b": []byte{1}, "l": []any{"a"}, "n": nil}, in.Parameters)
}

// TestEncodingIsCanonical pins the encoding rules an SDK in another
// language must follow to produce identical bytes.
func TestEncodingIsCanonical(t *testing.T) {
	b, err := EncodeResponse(&Response{Keys: []ResponseKey{{
		Key:     "k",
		StateOp: StateReplace,
		State:   []byte{},
		Emits:   []Emit{{Stream: "s", Payload: nil, EventTimestamp: Int64(-1), Parents: []uint32{0, 500}}},
	}}})
	require.NoError(t, err)
	want := cat(
		[]byte{0xa1}, text("keys"), []byte{0x81},
		[]byte{0xa4}, // key, emits, state, state_op: shortest key first, then bytewise
		text("key"), text("k"),
		text("emits"), []byte{0x81},
		[]byte{0xa4}, // stream, parents, payload, event_ts
		text("stream"), text("s"),
		text("parents"), []byte{0x82, 0x00, 0x19, 0x01, 0xf4},
		text("payload"), []byte{0x40}, // a nil payload is an empty byte string
		text("event_ts"), []byte{0x20},
		text("state"), []byte{0x40}, // present and empty
		text("state_op"), []byte{0x01},
	)
	require.Equal(t, want, b)
}

func TestResponseLimitsDefaults(t *testing.T) {
	require.Equal(t, DefaultResponseLimits(), ResponseLimits{}.withDefaults())
	l := ResponseLimits{MaxEmits: 3}.withDefaults()
	require.Equal(t, 3, l.MaxEmits)
	require.Equal(t, DefaultResponseLimits().MaxBytes, l.MaxBytes)
}

func TestEncodeToAppends(t *testing.T) {
	req := vectors()[1].request
	want, err := EncodeRequest(req)
	require.NoError(t, err)
	buf := bytes.NewBufferString("prefix")
	require.NoError(t, EncodeRequestTo(buf, req))
	require.Equal(t, append([]byte("prefix"), want...), buf.Bytes())

	resp := vectors()[1].response
	want, err = EncodeResponse(resp)
	require.NoError(t, err)
	buf.Reset()
	require.NoError(t, EncodeResponseTo(buf, resp))
	require.Equal(t, want, buf.Bytes())
}

func TestPeekVersion(t *testing.T) {
	v, ok := PeekVersion(enc(t, m{"abi": 2, "keys": "a newer shape", "extra": []any{1}}))
	require.True(t, ok)
	require.Equal(t, uint64(2), v)
	_, ok = PeekVersion(enc(t, m{"keys": []any{}}))
	require.False(t, ok)
	_, ok = PeekVersion(enc(t, m{"abi": "one"}))
	require.False(t, ok)
	_, ok = PeekVersion([]byte{0xff})
	require.False(t, ok)
}

func TestEncodeInitRefusesKindsWithoutWireForm(t *testing.T) {
	for _, tt := range []struct {
		value any
		field string
		msg   string
	}{
		{struct{ A int }{1}, "parameters.p", "a value of type struct { A int } has no envelope form"},
		{[]any{1, make(chan int)}, "parameters.p[1]", "a value of type chan int has no envelope form"},
		{map[string]any{"q": complex(1, 2)}, "parameters.p.q", "a value of type complex128 has no envelope form"},
	} {
		_, err := EncodeInit(&Init{ABI: Version, Computation: "c", Kind: KindMap, OutputStreams: []string{"o"},
			Parameters: map[string]any{"p": tt.value}})
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, tt.field, e.Field)
		require.Equal(t, tt.msg, e.Msg)
	}
}
