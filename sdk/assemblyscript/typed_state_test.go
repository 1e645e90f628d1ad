package assemblyscript_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	flowhost "github.com/flowhost/flowhost/sdk/go"
	"github.com/flowhost/flowhost/sdk/go/statecbor"
)

// A typed state script is what testdata/tsguest runs for each message, in
// the format of sdk/c's typed state tests: operations of one byte followed
// by fields of a one-byte length, each emitting its result to "out".
// tsRunGo runs the same script with the Go SDK, so a response of the
// AssemblyScript guest must equal the Go SDK's byte for byte.
type tsOp struct {
	op              byte // v a p d c g G l m s x r, and P (the guest only: put with an unpaired surrogate after the key)
	cell, key, data string
}

func (o tsOp) encode(b []byte) []byte {
	b = append(b, o.op)
	f := func(s string) { b = append(b, byte(len(s))); b = append(b, s...) }
	if o.op != 's' && o.op != 'x' {
		f(o.cell)
	}
	if o.op == 'p' || o.op == 'P' || o.op == 'd' || o.op == 'G' {
		f(o.key)
	}
	if o.op == 'v' || o.op == 'a' || o.op == 'p' || o.op == 'P' {
		f(o.data)
	}
	return b
}

func tsScript(ops ...tsOp) []byte {
	var b []byte
	for _, o := range ops {
		b = o.encode(b)
	}
	return b
}

// rawCodec stores elements as they are, as the AssemblyScript SDK does.
type rawCodec struct{}

func (rawCodec) Encode(v any) ([]byte, error)    { return v.([]byte), nil }
func (rawCodec) Decode(data []byte, v any) error { *v.(*[]byte) = data; return nil }

func tsResult(err error) []byte {
	if err == nil {
		return []byte("ok")
	}
	s := "error:" + err.Error()
	var qe *flowhost.QuotaError
	if errors.As(err, &qe) {
		s += fmt.Sprintf(" size=%d limit=%d", qe.Size, qe.Limit)
	}
	var se *flowhost.StateError
	if errors.As(err, &se) {
		s += fmt.Sprintf(" offset=%d", se.Offset)
	}
	return []byte(s)
}

// tsParse splits a script back into operations.
func tsParse(p []byte) ([]tsOp, error) {
	var ops []tsOp
	field := func() (string, error) {
		if len(p) < 1 || len(p) < 1+int(p[0]) {
			return "", errors.New("bad script")
		}
		s := string(p[1 : 1+int(p[0])])
		p = p[1+int(p[0]):]
		return s, nil
	}
	for len(p) > 0 {
		o := tsOp{op: p[0]}
		p = p[1:]
		var err error
		if o.op != 's' && o.op != 'x' {
			if o.cell, err = field(); err != nil {
				return nil, err
			}
		}
		if o.op == 'p' || o.op == 'd' || o.op == 'G' {
			if o.key, err = field(); err != nil {
				return nil, err
			}
		}
		if o.op == 'v' || o.op == 'a' || o.op == 'p' {
			if o.data, err = field(); err != nil {
				return nil, err
			}
		}
		ops = append(ops, o)
	}
	return ops, nil
}

func tsRunGo(k *flowhost.Key, o tsOp) []byte {
	switch o.op {
	case 'v':
		return tsResult(flowhost.Value[[]byte](k, o.cell, rawCodec{}).Set([]byte(o.data)))
	case 'a':
		return tsResult(flowhost.List[[]byte](k, o.cell, rawCodec{}).Append([]byte(o.data)))
	case 'p':
		return tsResult(flowhost.Map[[]byte](k, o.cell, rawCodec{}).Put(o.key, []byte(o.data)))
	case 'd':
		return tsResult(flowhost.Map[[]byte](k, o.cell, rawCodec{}).Delete(o.key))
	case 'c':
		return tsResult(flowhost.Value[[]byte](k, o.cell, rawCodec{}).Clear())
	case 's':
		return tsResult(flowhost.SaveState(k))
	case 'x':
		flowhost.DiscardStateChanges(k)
		return []byte("ok")
	case 'g', 'G':
		var v []byte
		var ok bool
		var err error
		if o.op == 'g' {
			v, ok, err = flowhost.Value[[]byte](k, o.cell, rawCodec{}).Get()
		} else {
			v, ok, err = flowhost.Map[[]byte](k, o.cell, rawCodec{}).Get(o.key)
		}
		switch {
		case err != nil:
			return tsResult(err)
		case !ok:
			return []byte("none")
		}
		return append([]byte("value:"), v...)
	case 'l':
		all, err := flowhost.List[[]byte](k, o.cell, rawCodec{}).All()
		if err != nil {
			return tsResult(err)
		}
		b := []byte("list")
		for _, e := range all {
			b = append(append(b, '|'), e...)
		}
		return append(b, " len="+strconv.Itoa(len(all))...)
	case 'm':
		m := flowhost.Map[[]byte](k, o.cell, rawCodec{})
		keys, err := m.Keys()
		if err != nil {
			return tsResult(err)
		}
		b := []byte("map")
		for _, key := range keys {
			v, _, _ := m.Get(key)
			b = append(append(append(append(b, '|'), key...), '='), v...)
		}
		return append(b, " len="+strconv.Itoa(len(keys))...)
	case 'r':
		k.SetState([]byte(o.cell))
		return []byte("ok")
	}
	panic("unknown op")
}

var tsGo = flowhost.Computation{Process: func(b *flowhost.Batch) error {
	for k := range b.Keys() {
		for m := range k.Messages() {
			ops, err := tsParse(m.Payload)
			if err != nil {
				k.Fail(err)
				break
			}
			for _, o := range ops {
				k.Emit("out", tsRunGo(k, o))
			}
		}
	}
	return nil
}}

func tsInit(limit int64) *abi.Init {
	in := &abi.Init{ABI: abi.Version, Computation: "ts", Kind: abi.KindTransform, OutputStreams: []string{"out"}}
	if limit != 0 {
		in.Parameters = map[string]any{flowhost.MaxStateParam: limit}
	}
	return in
}

// tsInstance starts the typed state guest with the limit parameter (0: none).
func tsInstance(tb testing.TB, limit int64) engine.Instance {
	tb.Helper()
	m, _ := guestModule(tb, tsGuest)
	inst := instantiate(tb, m)
	initGuest(tb, inst, tsInit(limit))
	return inst
}

// tsBoth runs req through the guest and the Go SDK and requires the same
// response bytes.
func tsBoth(t require.TestingT, inst engine.Instance, limit int64, req *abi.Request) *abi.Response {
	b, err := abi.EncodeRequest(req)
	require.NoError(t, err)
	out, err := inst.Process(context.Background(), b)
	require.NoError(t, err)
	got, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	require.NoError(t, err)
	require.NoError(t, abi.ValidateResponse(got, req, []string{"out"}))
	want, err := flowhost.Run(tsGo, tsInit(limit), req)
	require.NoError(t, err)
	wantB, err := abi.EncodeResponse(want)
	require.NoError(t, err)
	gotB, err := abi.EncodeResponse(got)
	require.NoError(t, err)
	if string(wantB) != string(gotB) {
		require.Equal(t, want, got, "the AssemblyScript SDK's response differs from the Go SDK's")
		require.Equal(t, wantB, gotB)
	}
	return got
}

func tsRequest(state []byte, hasState bool, scripts ...[]byte) *abi.Request {
	rk := abi.RequestKey{Key: "k"}
	if hasState {
		rk.State = state
		if rk.State == nil {
			rk.State = []byte{}
		}
	}
	for i, s := range scripts {
		rk.Messages = append(rk.Messages, abi.Message{ID: "m" + strconv.Itoa(i), Stream: "in", Payload: s})
	}
	return &abi.Request{ABI: abi.Version, Computation: "ts", Kind: abi.KindTransform, Keys: []abi.RequestKey{rk}}
}

func tsEmits(r *abi.Response) []string {
	var out []string
	for _, k := range r.Keys {
		for _, e := range k.Emits {
			out = append(out, string(e.Payload))
		}
	}
	return out
}

func TestTypedStateCells(t *testing.T) {
	inst := tsInstance(t, 0)
	r := tsBoth(t, inst, 0, tsRequest(nil, false, tsScript(
		tsOp{op: 'v', cell: "total", data: "42"},
		tsOp{op: 'a', cell: "items", data: "a"}, tsOp{op: 'a', cell: "items", data: "b"},
		tsOp{op: 'p', cell: "m", key: "z", data: "1.5"}, tsOp{op: 'p', cell: "m", key: "a", data: "2"},
		tsOp{op: 'p', cell: "m", key: "\uff21", data: "3"}, tsOp{op: 'p', cell: "m", key: "😀", data: "4"},
	)))
	require.Equal(t, abi.StateReplace, r.Keys[0].StateOp, "saved at the end of the key")
	r = tsBoth(t, inst, 0, tsRequest(r.Keys[0].State, true, tsScript(
		tsOp{op: 'g', cell: "total"}, tsOp{op: 'l', cell: "items"}, tsOp{op: 'm', cell: "m"},
		tsOp{op: 'G', cell: "m", key: "z"}, tsOp{op: 'G', cell: "m", key: "nope"}, tsOp{op: 'g', cell: "missing"},
		tsOp{op: 'l', cell: "total"}, tsOp{op: 'g', cell: "items"}, tsOp{op: 'p', cell: "items", key: "x", data: "1"},
	)))
	// Keys sort by their UTF-8 bytes, so U+FF21 before U+1F600, unlike UTF-16.
	require.Equal(t, []string{"value:42", "list|a|b len=2", "map|a=2|z=1.5|\uff21=3|😀=4 len=4", "value:1.5", "none", "none",
		`error:state cell "total": is a value, used as a list`, `error:state cell "items": is a list, used as a value`,
		`error:state cell "items": is a list, used as a map`},
		tsEmits(r))
	require.Equal(t, abi.StateKeep, r.Keys[0].StateOp, "reads and failed writes change nothing")
}

func TestTypedStateSaveDeleteAndQuota(t *testing.T) {
	inst := tsInstance(t, 50)
	stored := tsBoth(t, inst, 50, tsRequest(nil, false, tsScript(tsOp{op: 'v', cell: "s", data: "small"}, tsOp{op: 's'}))).Keys[0].State
	big := string(make([]byte, 100))
	r := tsBoth(t, inst, 50, tsRequest(stored, true, tsScript(tsOp{op: 'v', cell: "s", data: big}, tsOp{op: 's'}, tsOp{op: 'x'}, tsOp{op: 'g', cell: "s"})))
	require.Equal(t, []string{"ok", `error:key "k": typed state of 105 bytes exceeds the limit of 50 bytes; its state stays as it was size=105 limit=50`, "ok", "value:small"}, tsEmits(r))
	require.Equal(t, abi.StateKeep, r.Keys[0].StateOp)
	// Unsaved over the limit at the end fails the key.
	r = tsBoth(t, inst, 50, tsRequest(stored, true, tsScript(tsOp{op: 'v', cell: "s", data: big})))
	require.Equal(t, `saving typed state at the end of the batch: key "k": typed state of 105 bytes exceeds the limit of 50 bytes; its state stays as it was`, r.Keys[0].Error)
	// Clearing the last cell deletes the state.
	r = tsBoth(t, inst, 50, tsRequest(stored, true, tsScript(tsOp{op: 'c', cell: "s"})))
	require.Equal(t, abi.StateDelete, r.Keys[0].StateOp)
	// A map emptied in the batch leaves no state to delete.
	r = tsBoth(t, inst, 50, tsRequest(nil, false, tsScript(tsOp{op: 'p', cell: "m", key: "x", data: "1"}, tsOp{op: 'd', cell: "m", key: "x"}, tsOp{op: 'm', cell: "m"})))
	require.Equal(t, abi.StateKeep, r.Keys[0].StateOp)
}

func TestTypedStateRawWriteOverUnsavedCellsIsMisuse(t *testing.T) {
	m, logs := guestModule(t, tsGuest)
	inst := instantiate(t, m)
	initGuest(t, inst, tsInit(0))
	b, err := abi.EncodeRequest(tsRequest(nil, false, tsScript(tsOp{op: 'v', cell: "a", data: "1"}, tsOp{op: 'r', cell: "raw"})))
	require.NoError(t, err)
	require.Equal(t, outcome{status: -2}, call(t, inst.Process, b))
	require.Contains(t, logs.text(), "flowhost: setState with unsaved typed state changes")
	// After saving, a raw write is fine and the next typed use reads it.
	tsBoth(t, inst, 0, tsRequest(nil, false, tsScript(tsOp{op: 'v', cell: "a", data: "1"}, tsOp{op: 's'}, tsOp{op: 'r', cell: "raw"}, tsOp{op: 'g', cell: "a"})))
}

// The same table as sdk/go's TestDecodeTypedStateErrors: each blob is
// refused with Go's text, through the guest.
func TestTypedStateBadBlobs(t *testing.T) {
	inst := tsInstance(t, 0)
	for _, c := range []struct{ blob, want string }{
		{"\xa1\x61\x61\x80", `typed state: byte 3: cell "a": an empty list is not stored (a cell exists only while it holds something)`},
		{"\xa1\x61\x61\xa0", `typed state: byte 3: cell "a": an empty map is not stored (a cell exists only while it holds something)`},
		{"\xa2\x61\x61\x40\x61\x61\x40", `typed state: byte 4: cell "a": the cell appears twice`},
		{"\xbf", "typed state: byte 0: indefinite lengths are not canonical"},
		{"\xbc", "typed state: byte 0: reserved additional information 28"},
		{"\xa1\x61\x61\x01", `typed state: byte 3: cell "a": expected a cell (a byte string, an array or a map), got an unsigned integer`},
		{"\xa0\x00", "typed state: byte 1: 1 bytes after the map of cells"},
		{"\xa1\x61\x61\xa1\x61\x6b\x01", `typed state: byte 6: cell "a": expected map entry "k" to be a byte string, got an unsigned integer`},
		{"\xa1\x61\x61\xa2\x61\x6b\x40\x61\x6b\x40", `typed state: byte 7: cell "a": map key "k" appears twice`},
		{"\xa1\x61\x61\x5a\xff\xff\xff\xff", `typed state: byte 3: cell "a": a length of 4294967295 exceeds the 0 bytes left`},
		{"\xa1\x61\x61\x5b\xff\xff\xff\xff\xff\xff\xff\xff", `typed state: byte 3: cell "a": a length of 18446744073709551615 exceeds the 0 bytes left`},
		{"\xa1\x61\x61\x59\x01", `typed state: byte 3: cell "a": unexpected end of the state in an item's head`},
		{"\xa1\x61\xff\x40", "typed state: byte 1: text is not valid UTF-8"},
		{"\xa1\x61\x61\x81\x01", `typed state: byte 4: cell "a": expected list element 0 to be a byte string, got an unsigned integer`},
		{"\xa1\x61\x61", `typed state: byte 3: cell "a": unexpected end of the state`},
		{"17", "typed state: byte 0: expected the state to be a map of cells, got a negative integer"},
	} {
		goWant := ""
		if _, err := flowhost.DecodeTypedState([]byte(c.blob)); err != nil {
			goWant = err.Error()
		}
		require.Equal(t, c.want, goWant, "the table follows the Go SDK (% x)", c.blob)
		r := tsBoth(t, inst, 0, tsRequest([]byte(c.blob), true, tsScript(tsOp{op: 'g', cell: "a"})))
		require.Len(t, tsEmits(r), 1)
		require.Contains(t, tsEmits(r)[0], "error:"+c.want+" offset=", "% x", c.blob)
	}
}

// TestTypedStateMatchesGo runs random scripts over several batches through
// the guest and the Go SDK: every response, so every state blob, emit and
// error text, is the same.
func TestTypedStateMatchesGo(t *testing.T) {
	limits := []int64{0, 60}
	insts := map[int64]engine.Instance{}
	for _, l := range limits {
		insts[l] = tsInstance(t, l)
	}
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.SampledFrom(limits).Draw(rt, "limit")
		tsRandomBatches(rt, insts[limit], limit)
	})
}

// tsRandomBatches draws scripts over cells and map keys that collide, for
// one to four batches of up to three keys, each batch starting from the
// state the previous one left. Names are valid UTF-8: an AssemblyScript
// string cannot hold anything else.
func tsRandomBatches(rt *rapid.T, inst engine.Instance, limit int64) {
	cells := []string{"a", "b", "cc", "é", "long-cell-name", "😀", "\uff21"}
	keys := []string{"x", "y", "zz", "", "é", "😀", "\uff21"}
	genOp := rapid.Custom(func(t *rapid.T) tsOp {
		return tsOp{op: rapid.SampledFrom([]byte("vvaappddcgGlmsx")).Draw(t, "op"),
			cell: rapid.SampledFrom(cells).Draw(t, "cell"), key: rapid.SampledFrom(keys).Draw(t, "key"),
			data: rapid.StringN(0, 30, -1).Draw(t, "data")}
	})
	type kstate struct {
		state []byte
		has   bool
	}
	states := map[string]*kstate{}
	names := []string{"k", "j", "h"}
	for batch := range rapid.IntRange(1, 4).Draw(rt, "batches") {
		req := &abi.Request{ABI: abi.Version, Computation: "ts", Kind: abi.KindTransform}
		for _, name := range names[:rapid.IntRange(1, len(names)).Draw(rt, fmt.Sprintf("keys%d", batch))] {
			ks := states[name]
			if ks == nil {
				ks = &kstate{}
				states[name] = ks
			}
			var scripts [][]byte
			for range rapid.IntRange(1, 3).Draw(rt, "messages") {
				scripts = append(scripts, tsScript(rapid.SliceOfN(genOp, 0, 12).Draw(rt, "ops")...))
			}
			rk := tsRequest(ks.state, ks.has, scripts...).Keys[0]
			rk.Key = name
			for i := range rk.Messages {
				rk.Messages[i].ID = name + rk.Messages[i].ID
			}
			req.Keys = append(req.Keys, rk)
		}
		r := tsBoth(rt, inst, limit, req)
		for _, rk := range r.Keys {
			ks := states[rk.Key]
			switch rk.StateOp {
			case abi.StateReplace:
				ks.state, ks.has = rk.State, true
				_, err := flowhost.DecodeTypedState(rk.State)
				require.NoError(rt, err)
			case abi.StateDelete:
				ks.state, ks.has = nil, false
			}
		}
	}
}

// FuzzTypedStateDecoder feeds any blob to the AssemblyScript decoder and
// the Go one: both accept it with the same cells or refuse it with the
// same text.
func FuzzTypedStateDecoder(f *testing.F) {
	for _, seed := range []string{"", "a0", "a1617602182a", "a1616c8241614162", "a1616da1617841ff", "a2616101616101",
		"a1617f", "5f", "a161618140", "a1616180", "a1616a1617841", "a1616ca16178410a", "a1616c824161"} {
		p, _ := hex.DecodeString(seed)
		f.Add(p)
	}
	inst := tsInstance(f, 0)
	f.Fuzz(func(t *testing.T, blob []byte) {
		for _, r := range string(blob) {
			if r != utf8.RuneError && strconv.IsPrint(r) != asQuotePrintable(r) {
				t.Skipf("%U: the AssemblyScript SDK's quote approximates strconv.IsPrint (text.ts isPrint)", r)
			}
		}
		var ops []tsOp
		for _, n := range []string{"a", "v", "l", "m"} {
			ops = append(ops, tsOp{op: 'g', cell: n}, tsOp{op: 'l', cell: n}, tsOp{op: 'm', cell: n})
		}
		// Rewriting a cell re-encodes the blob canonically.
		ops = append(ops, tsOp{op: 'v', cell: "zz", data: "1"}, tsOp{op: 'c', cell: "zz"})
		tsBoth(t, inst, 0, tsRequest(blob, true, tsScript(ops...)))
	})
}

// asQuotePrintable mirrors text.ts isPrint, which takes unassigned code
// points for printable where Go escapes them.
func asQuotePrintable(r rune) bool {
	c := uint32(r)
	switch {
	case c < 0x80:
		return c >= 0x20 && c < 0x7f
	case c <= 0xa0 || c == 0xad, c == 0x61c || c == 0x1680 || c == 0x180e,
		c >= 0x2000 && c <= 0x200f, c >= 0x2028 && c <= 0x202f, c >= 0x205f && c <= 0x206f,
		c == 0x3000 || c == 0xfeff, c >= 0xd800 && c <= 0xf8ff, c >= 0xfff9 && c <= 0xfffb, c >= 0xf0000:
		return false
	}
	return true
}

// TestTypedStateGolden replays the operations of sdk/go's golden cases,
// with the elements encoded by the Go codecs, in the guest: it must write
// the blobs of sdk/rust/tests/testdata/typed_state.golden byte for byte.
func TestTypedStateGolden(t *testing.T) {
	enc := func(c flowhost.Codec, v any) string {
		b, err := c.Encode(v)
		require.NoError(t, err)
		return string(b)
	}
	j, cb := flowhost.JSON, statecbor.Codec
	cases := map[string][]tsOp{
		"value_json": {{op: 'v', cell: "total", data: enc(j, 42)}},
		"value_cbor": {{op: 'v', cell: "name", data: enc(cb, "ada")}},
		"list_json":  {{op: 'a', cell: "items", data: enc(j, "a")}, {op: 'a', cell: "items", data: enc(j, "b")}, {op: 'a', cell: "items", data: enc(j, "")}},
		"map_cbor": {{op: 'p', cell: "seen", key: "zz", data: enc(cb, int64(1))}, {op: 'p', cell: "seen", key: "b", data: enc(cb, int64(-2))},
			{op: 'p', cell: "seen", key: "aa", data: enc(cb, int64(300))}, {op: 'p', cell: "seen", key: "", data: enc(cb, int64(0))},
			{op: 'd', cell: "seen", key: "b"}},
		"mixed": {{op: 'v', cell: "total", data: enc(j, 7)}, {op: 'a', cell: "ts", data: enc(cb, int64(1_700_000_000_000_000_000))},
			{op: 'p', cell: "tags", key: "env", data: enc(j, "prod")}, {op: 'v', cell: "a", data: enc(j, true)},
			{op: 'v', cell: "gone", data: enc(j, 1)}, {op: 'c', cell: "gone"}},
	}
	raw, err := os.ReadFile(filepath.Join("..", "rust", "tests", "testdata", "typed_state.golden"))
	require.NoError(t, err)
	inst := tsInstance(t, 0)
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, want, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		ops, ok := cases[name]
		require.True(t, ok, "golden case %q has no twin here", name)
		r := tsBoth(t, inst, 0, tsRequest(nil, false, tsScript(ops...)))
		require.Equal(t, abi.StateReplace, r.Keys[0].StateOp, name)
		require.Equal(t, want, hex.EncodeToString(r.Keys[0].State), name)
		seen++
	}
	require.Equal(t, len(cases), seen)
}

// In a map computation typed state reads as empty and a write is misuse,
// as a panic is in the Go SDK: the batch fails with status -2.
func TestTypedStateInAMapComputation(t *testing.T) {
	m, logs := guestModule(t, tsGuest)
	inst := instantiate(t, m)
	initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: "ts", Kind: abi.KindMap, OutputStreams: []string{"out"}})
	req := func(ops ...tsOp) *abi.Request {
		r := tsRequest(nil, false, tsScript(ops...))
		r.Kind = abi.KindMap
		r.Keys[0].Key = ""
		return r
	}
	got := process(t, inst, req(tsOp{op: 'g', cell: "a"}, tsOp{op: 'm', cell: "a"}), []string{"out"})
	require.Equal(t, []string{"none", "map len=0"}, tsEmits(got))
	// Each write is misuse, named as the Go SDK's panic names it.
	for _, c := range []struct {
		op   tsOp
		call string
	}{
		{tsOp{op: 'v', cell: "a", data: "1"}, "Value.Set"},
		{tsOp{op: 'a', cell: "a", data: "1"}, "List.Append"},
		{tsOp{op: 'p', cell: "a", key: "k", data: "1"}, "Map.Put"},
		{tsOp{op: 'd', cell: "a", key: "k"}, "Map.Delete"},
		{tsOp{op: 'c', cell: "a"}, "clearing a state cell"},
	} {
		b, err := abi.EncodeRequest(req(c.op))
		require.NoError(t, err)
		require.Equal(t, outcome{status: -2}, call(t, inst.Process, b), c.call)
		require.Contains(t, logs.text(), "flowhost: "+c.call+" in a map computation; only a transform keeps state and timers")
	}
	_, err := flowhost.Run(tsGo, &abi.Init{ABI: abi.Version, Computation: "ts", Kind: abi.KindMap, OutputStreams: []string{"out"}}, req(tsOp{op: 'v', cell: "a", data: "1"}))
	require.ErrorIs(t, err, abi.StatusGuestFailure)
}

// The limit parameter is refused at start with the Go SDK's text.
func TestTypedStateLimitParameterRefused(t *testing.T) {
	m, _ := guestModule(t, tsGuest)
	for _, v := range []any{"big", int64(0), int64(-5), true} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			in := tsInit(0)
			in.Parameters = map[string]any{flowhost.MaxStateParam: v}
			_, goErr := flowhost.Run(tsGo, in, &abi.Request{ABI: abi.Version, Computation: "ts", Kind: abi.KindTransform})
			require.Error(t, goErr)
			inst := instantiate(t, m)
			b, err := abi.EncodeInit(in)
			require.NoError(t, err)
			o := call(t, inst.Init, b)
			require.Zero(t, o.status)
			r, err := abi.DecodeInitResult(o.result)
			require.NoError(t, err)
			require.NotEmpty(t, r.Error)
			require.Contains(t, goErr.Error(), r.Error)
		})
	}
}

// TestTypedStateReadmeExample builds the example of README.md's typed
// state section and runs it: the state it leaves is typed state with the
// cells the example describes.
func TestTypedStateReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	section := string(readme)[strings.Index(string(readme), "## Typed state cells"):]
	_, code, ok := strings.Cut(section, "For example:\n\n```ts\n")
	require.True(t, ok, "no example in the typed state section")
	code, _, _ = strings.Cut(code, "```")
	dir := t.TempDir()
	src, out := filepath.Join(dir, "index.ts"), filepath.Join(dir, "example.wasm")
	require.NoError(t, os.WriteFile(src, []byte(code), 0o644))
	require.NoError(t, assemblyscript.Build(src, out))
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	guestWasm["readme-typed-state"] = wasm
	m, _ := guestModule(t, "readme-typed-state")
	inst := instantiate(t, m)
	in := tsInit(1000)
	in.Computation = "ex"
	initGuest(t, inst, in)
	req := &abi.Request{ABI: abi.Version, Computation: "ex", Kind: abi.KindTransform, Keys: []abi.RequestKey{{Key: "k",
		Messages: []abi.Message{{ID: "1", Stream: "a", Payload: []byte("x")}, {ID: "2", Stream: "a", Payload: []byte("y")}}}}}
	resp := process(t, inst, req, []string{"out"})
	require.Len(t, resp.Keys, 1)
	cells, err := flowhost.DecodeTypedState(resp.Keys[0].State)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"last": map[string][]byte{"a": []byte("y")}, "all": [][]byte{[]byte("x"), []byte("y")}}, cells)
}

// TestTypedStateManyEntriesMatchesGo puts and deletes many random keys and
// cells, in random order, so that the canonical order the guest keeps
// (and encodes without sorting) is checked against Go's sort on every
// length and byte.
func TestTypedStateManyEntriesMatchesGo(t *testing.T) {
	inst := tsInstance(t, 0)
	rapid.Check(t, func(rt *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.StringN(0, 6, -1), 1, 150, rapid.ID[string]).Draw(rt, "keys")
		var ops []tsOp
		for i, k := range keys {
			ops = append(ops, tsOp{op: 'p', cell: "m", key: k, data: strconv.Itoa(i)}, tsOp{op: 'v', cell: k, data: "v"})
		}
		for _, k := range rapid.SliceOfN(rapid.SampledFrom(keys), 0, 50).Draw(rt, "deleted") {
			ops = append(ops, tsOp{op: 'd', cell: "m", key: k}, tsOp{op: 'c', cell: k})
		}
		ops = append(ops, tsOp{op: 'm', cell: "m"}, tsOp{op: 's'})
		r := tsBoth(rt, inst, 0, tsRequest(nil, false, tsScript(ops...)))
		// And read back from the blob it saved.
		if r.Keys[0].StateOp == abi.StateReplace {
			tsBoth(rt, inst, 0, tsRequest(r.Keys[0].State, true, tsScript(tsOp{op: 'm', cell: "m"}, tsOp{op: 'v', cell: "new", data: "1"})))
		}
	})
}

// A map key with an unpaired surrogate has no UTF-8: put refuses it, as
// the Go SDK refuses a key that is not valid UTF-8, and changes nothing.
// The quoted key shows the surrogate as U+FFFD, as quote does.
func TestTypedStateLoneSurrogateKeyRefused(t *testing.T) {
	inst := tsInstance(t, 0)
	r := process(t, inst, tsRequest(nil, false, tsScript(tsOp{op: 'P', cell: "m", key: "x", data: "1"}, tsOp{op: 'm', cell: "m"})), []string{"out"})
	require.Equal(t, []string{"error:state cell \"m\": entry \"x\ufffd\": the key is not valid UTF-8", "map len=0"}, tsEmits(r))
	require.Equal(t, abi.StateKeep, r.Keys[0].StateOp)
}
