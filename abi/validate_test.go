package abi

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func validationRequest(kind Kind) *Request {
	return &Request{ABI: Version, Computation: "c", Kind: kind, Keys: []RequestKey{
		{Key: "a", Timers: []DueTimer{{ID: "t1", TriggerTimestamp: 1}}, Messages: []Message{{ID: "m1", Stream: "in"}, {ID: "m2", Stream: "in"}}},
		{Key: "b", Messages: []Message{{ID: "m3", Stream: "in"}}},
		{Key: "c", Messages: []Message{{ID: "m4", Stream: "in"}}},
	}}
}

func TestValidateResponse(t *testing.T) {
	outputs := []string{"out", "side"}
	emit := func(stream string, parents ...uint32) Emit {
		return Emit{Stream: stream, Payload: []byte("x"), Parents: parents}
	}
	tests := []struct {
		name  string
		kind  Kind
		resp  Response
		field string // "" means valid
		msg   string
	}{
		{name: "empty", resp: Response{}},
		{name: "every effect", resp: Response{Keys: []ResponseKey{
			{Key: "a", Emits: []Emit{emit("out", 2, 0), emit("side"), {Stream: "out", Key: "k", EventTimestamp: Int64(5)}},
				TimersSet: []Timer{{TriggerTimestamp: 9}}, TimersCancel: []int64{1}, StateOp: StateReplace, State: []byte{}},
			{Key: "c", StateOp: StateDelete},
		}}},
		{name: "keys out of request order", resp: Response{Keys: []ResponseKey{{Key: "c"}, {Key: "a"}, {Key: "b"}}}},
		{name: "key not in request", resp: Response{Keys: []ResponseKey{{Key: "a"}, {Key: "zed"}}},
			field: "keys[1].key", msg: `"zed" is not a key of the request`},
		{name: "key twice in order", resp: Response{Keys: []ResponseKey{{Key: "a"}, {Key: "b"}, {Key: "b"}}},
			field: "keys[2].key", msg: `"b" repeats keys[1]`},
		{name: "key twice out of order", resp: Response{Keys: []ResponseKey{{Key: "c"}, {Key: "a"}, {Key: "c"}}},
			field: "keys[2].key", msg: `"c" repeats keys[0]`},
		{name: "undeclared stream", resp: Response{Keys: []ResponseKey{{Key: "b", Emits: []Emit{emit("out"), emit("secret")}}}},
			field: "keys[0].emits[1].stream", msg: `"secret" is not a declared output stream (declared: out, side)`},
		{name: "parent out of range", resp: Response{Keys: []ResponseKey{{Key: "a"}, {Key: "b", Emits: []Emit{emit("out", 0, 1)}}}},
			field: "keys[1].emits[0].parents[1]", msg: "input 1 out of range: the key has 1 inputs"},
		{name: "parent repeated", resp: Response{Keys: []ResponseKey{{Key: "a", Emits: []Emit{emit("out", 1, 2, 1)}}}},
			field: "keys[0].emits[0].parents[2]", msg: "input 1 repeated"},
		{name: "parents of one emit do not leak into the next", resp: Response{Keys: []ResponseKey{{Key: "a", Emits: []Emit{emit("out", 1), emit("out", 1)}}}}},
		{name: "empty parents", resp: Response{Keys: []ResponseKey{{Key: "a", Emits: []Emit{{Stream: "out", Parents: []uint32{}}}}}},
			field: "keys[0].emits[0].parents", msg: "empty; leave the field out to mean every input"},
		{name: "state with keep", resp: Response{Keys: []ResponseKey{{Key: "a", State: []byte("s")}}},
			field: "keys[0].state", msg: "present with state_op 0 (keep); only state_op 1 (replace) carries state"},
		{name: "state with delete", resp: Response{Keys: []ResponseKey{{Key: "a", StateOp: StateDelete, State: []byte{}}}},
			field: "keys[0].state", msg: "present with state_op 2 (delete); only state_op 1 (replace) carries state"},
		{name: "replace without state", resp: Response{Keys: []ResponseKey{{Key: "a", StateOp: StateReplace}}},
			field: "keys[0].state", msg: "missing; state_op 1 (replace) requires it"},
		{name: "unknown state_op", resp: Response{Keys: []ResponseKey{{Key: "a", StateOp: 3}}},
			field: "keys[0].state_op", msg: "unknown state_op 3 (want 0 keep, 1 replace or 2 delete)"},
		{name: "failed key", resp: Response{Keys: []ResponseKey{{Key: "a", Error: "boom"}, {Key: "b"}}}},
		{name: "failed key with an effect", resp: Response{Keys: []ResponseKey{{Key: "a", Error: "boom", TimersCancel: []int64{1}}}},
			field: "keys[0].timers_cancel", msg: "a failed key (error is set) has no effects"},
		{name: "failed batch", resp: Response{Error: "down"}},
		{name: "failed batch with keys", resp: Response{Error: "down", Keys: []ResponseKey{{Key: "a"}}},
			field: "keys", msg: "a failed batch (error is set) must report no keys"},
		{name: "map emits", kind: KindMap, resp: Response{Keys: []ResponseKey{{Key: "b", Emits: []Emit{emit("out", 0)}}}}},
		{name: "map with state", kind: KindMap, resp: Response{Keys: []ResponseKey{{Key: "b", StateOp: StateDelete}}},
			field: "keys[0].state_op", msg: "a map computation keeps no state"},
		{name: "map with timers", kind: KindMap, resp: Response{Keys: []ResponseKey{{Key: "b", TimersSet: []Timer{{TriggerTimestamp: 1}}}}},
			field: "keys[0].timers_set", msg: "a map computation sets no timers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := tt.kind
			if kind == "" {
				kind = KindTransform
			}
			req := validationRequest(kind)
			if kind == KindMap {
				req.Keys[0].Timers = nil
			}
			err := ValidateResponse(&tt.resp, req, outputs)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var e *Error
			require.True(t, errors.As(err, &e), "want *abi.Error, got %v", err)
			require.Equal(t, tt.field, e.Field)
			require.Equal(t, tt.msg, e.Msg)
		})
	}
}

// TestValidateResponseManyKeys crosses the 64-key boundary of the matcher's
// bitset, in and out of request order.
func TestValidateResponseManyKeys(t *testing.T) {
	req := &Request{ABI: Version, Computation: "c", Kind: KindTransform}
	for i := range 200 {
		req.Keys = append(req.Keys, RequestKey{Key: "k" + strconv.Itoa(i), Messages: []Message{{ID: "m", Stream: "s"}}})
	}
	var resp Response
	for i := len(req.Keys) - 1; i >= 0; i -= 3 {
		resp.Keys = append(resp.Keys, ResponseKey{Key: req.Keys[i].Key})
	}
	require.NoError(t, ValidateResponse(&resp, req, nil))
	resp.Keys = append(resp.Keys, ResponseKey{Key: req.Keys[199].Key})
	require.EqualError(t, ValidateResponse(&resp, req, nil), `keys[67].key: "k199" repeats keys[0]`)
}

func TestRequestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Request)
		want   string
	}{
		{"valid", func(*Request) {}, ""},
		{"version", func(r *Request) { r.ABI = 2 }, "abi: version 2, want 1"},
		{"kind", func(r *Request) { r.Kind = "reduce" }, `kind: unknown kind "reduce" (want transform or map)`},
		{"computation", func(r *Request) { r.Computation = "" }, "computation: empty"},
		{"duplicate key", func(r *Request) { r.Keys[2].Key = "a" }, `keys[2].key: "a" repeats keys[0]`},
		{"key without inputs", func(r *Request) { r.Keys[1].Messages = nil }, "keys[1]: a key must have at least one timer or message"},
		{"map with timers", func(r *Request) { r.Kind = KindMap }, "keys[0]: a map computation has no state or timers"},
		{"timer id", func(r *Request) { r.Keys[0].Timers[0].ID = "" }, "keys[0].timers[0].id: empty"},
		{"message id", func(r *Request) { r.Keys[0].Messages[1].ID = "" }, "keys[0].messages[1].id: empty"},
		{"message stream", func(r *Request) { r.Keys[2].Messages[0].Stream = "" }, "keys[2].messages[0].stream: empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validationRequest(KindTransform)
			tt.mutate(r)
			err := r.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestInitValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Init)
		want   string
	}{
		{"valid", func(*Init) {}, ""},
		{"version", func(in *Init) { in.ABI = 0 }, "abi: version 0, want 1"},
		{"kind", func(in *Init) { in.Kind = "" }, `kind: unknown kind "" (want transform or map)`},
		{"computation", func(in *Init) { in.Computation = "" }, "computation: empty"},
		{"empty stream", func(in *Init) { in.OutputStreams[1] = "" }, "output_streams[1]: empty"},
		{"repeated stream", func(in *Init) { in.OutputStreams[1] = "a" }, `output_streams[1]: "a" repeats output_streams[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Init{ABI: Version, Computation: "c", Kind: KindTransform, OutputStreams: []string{"a", "b"}}
			tt.mutate(in)
			err := in.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}
