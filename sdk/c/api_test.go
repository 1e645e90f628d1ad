package c_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// goParams returns the Go SDK's Params for an init envelope with params.
func goParams(t require.TestingT, params map[string]any) flowhost.Params {
	var kept flowhost.Params
	c := flowhost.Computation{
		Init:    func(p flowhost.Params) error { kept = p; return nil },
		Process: func(*flowhost.Batch) error { return nil },
	}
	_, err := flowhost.Run(c, &abi.Init{ABI: abi.Version, Computation: "params", Kind: abi.KindTransform, Parameters: params, OutputStreams: []string{"out"}},
		&abi.Request{ABI: abi.Version, Computation: "params", Kind: abi.KindTransform, Keys: []abi.RequestKey{}})
	require.NoError(t, err)
	return kept
}

var getters = []string{"string", "int", "float", "bool", "duration", "has"}

// goProbe answers a probe of the test guest's "params" computation the
// way the Go SDK's getters would.
func goProbe(p flowhost.Params, getter, name string) string {
	result := func(v any, err error) string {
		if err != nil {
			code := -2
			if pe, ok := err.(*flowhost.ParamError); ok && pe.Msg == "" {
				code = -1
			}
			return fmt.Sprintf("err:%d:%s", code, err)
		}
		return fmt.Sprintf("ok:%v", v)
	}
	switch getter {
	case "string":
		return result(p.String(name))
	case "int":
		return result(p.Int(name))
	case "float":
		f, err := p.Float(name)
		return result(fmt.Sprintf("%016x", math.Float64bits(f)), err)
	case "bool":
		return result(p.Bool(name))
	case "duration":
		d, err := p.Duration(name)
		return result(int64(d), err)
	}
	return result(p.Has(name), nil)
}

// probeParams initialises the test guest with params and returns what its
// getters say about each name, in getters order.
func probeParams(t require.TestingT, inst engine.Instance, params map[string]any, names []string) []string {
	b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "params", Kind: abi.KindTransform, Parameters: params, OutputStreams: []string{"out"}})
	require.NoError(t, err)
	res, err := inst.Init(context.Background(), b)
	require.NoError(t, err)
	require.Nil(t, res)
	var msgs []abi.Message
	for _, name := range names {
		for _, g := range getters {
			msgs = append(msgs, abi.Message{ID: fmt.Sprint(len(msgs)), Stream: "in", Payload: []byte(g + ":" + name)})
		}
	}
	b, err = abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "params", Kind: abi.KindTransform,
		Keys: []abi.RequestKey{{Key: "k", Messages: msgs}}})
	require.NoError(t, err)
	raw, err := inst.Process(context.Background(), b)
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(raw, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Len(t, resp.Keys, 1)
	require.Empty(t, resp.Keys[0].Error)
	out := make([]string, 0, len(msgs))
	for _, e := range resp.Keys[0].Emits {
		out = append(out, string(e.Payload))
	}
	return out
}

func expectProbes(t require.TestingT, params map[string]any, names []string) []string {
	p := goParams(t, params)
	var want []string
	for _, name := range names {
		for _, g := range getters {
			want = append(want, goProbe(p, g, name))
		}
	}
	return want
}

// TestParamsGetters compares the typed getters with the Go SDK's on
// values of every type, the error texts included.
func TestParamsGetters(t *testing.T) {
	params := map[string]any{
		"s": "text", "empty": "", "nul": "a\x00b", "i": int64(42), "neg": int64(-7), "max": int64(math.MaxInt64),
		"min": int64(math.MinInt64), "f": 2.5, "whole": 3.0, "big": 1e19, "edge": -9223372036854775808.0, "tiny": 5e-324,
		"half": float64(float32(0.1)), "b": true, "no": false, "d": "1m30s", "dn": int64(1500), "bad d": "soon",
		"units": "1h2m3s4ms5us6µs7μs8ns", "frac": ".5h1.25m", "neg d": "-1.5h", "plus": "+0", "zero": "0", "sign": "-",
		"unit": "5x", "nounit": "5", "overflow": "9223372036854775808ns", "max d": "9223372036854775807ns", "dot": ".s",
		"list": []any{"a", int64(1)}, "m": map[string]any{"k": "v"}, "null": nil, "bytes": []byte{1, 2},
		"quote \"me\"\t\u00ad": int64(1), "ключ": "значение",
	}
	names := []string{"missing", "d\u00e9j\u00e0"}
	for name := range params {
		names = append(names, name)
	}
	inst, logs := instance(t, testGuest)
	got := probeParams(t, inst, params, names)
	want := expectProbes(t, params, names)
	for i := range want {
		require.Equal(t, want[i], got[i], "%s of %q (logs: %s)", getters[i%len(getters)], names[i/len(getters)], logs.text())
	}
}

// TestParamsGettersProperty compares the getters with the Go SDK's on
// random parameters, with durations drawn from their own alphabet.
func TestParamsGettersProperty(t *testing.T) {
	inst, _ := instance(t, testGuest)
	durationText := rapid.OneOf(
		rapid.StringMatching(`[-+]?([0-9]{0,20}(\.[0-9]{0,20})?(ns|us|µs|μs|ms|s|m|h|x|)){1,3}`),
		rapid.StringOf(rapid.SampledFrom([]rune("0123456789.+-nsuµμmh "))),
	)
	value := rapid.OneOf(
		rapid.Map(durationText, func(s string) any { return s }),
		rapid.Map(rapid.Int64(), func(i int64) any { return i }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.Int64Range(-1<<53, 1<<53), func(i int64) any { return float64(i) }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) any { return b }),
	)
	rapid.Check(t, func(rt *rapid.T) {
		params := rapid.MapOf(rapid.StringMatching(`[a-z\x01-\x1f é"\\]{1,6}`), value).Draw(rt, "params")
		names := []string{"absent"}
		for name := range params {
			names = append(names, name)
		}
		got := probeParams(rt, inst, params, names)
		want := expectProbes(rt, params, names)
		for i := range want {
			if want[i] != got[i] {
				rt.Fatalf("%s of %q = %v: C says %q, Go %q", getters[i%len(getters)], names[i/len(getters)], params[names[i/len(getters)]], got[i], want[i])
			}
		}
	})
}

// misuseBatch runs the test guest's "misuse" computation with one payload
// per key.
func misuseBatch(t *testing.T, inst engine.Instance, kind abi.Kind, payloads ...string) ([]byte, error) {
	var keys []abi.RequestKey
	for i, p := range payloads {
		keys = append(keys, abi.RequestKey{Key: fmt.Sprint("k", i), Messages: []abi.Message{{ID: fmt.Sprint(i), Stream: "in", Payload: []byte(p)}}})
	}
	b, err := abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "misuse", Kind: kind, Keys: keys})
	require.NoError(t, err)
	out, err := inst.Process(context.Background(), b)
	return bytes.Clone(out), err
}

// TestMisuseFailsTheBatch breaks each rule of the API and requires status
// -2 with a log line that names the mistake; the instance stays usable.
func TestMisuseFailsTheBatch(t *testing.T) {
	inst, logs := instance(t, testGuest)
	initWith(t, inst, "misuse", abi.KindTransform, nil, "out")
	for _, tt := range []struct {
		kind     abi.Kind
		payloads []string
		log      string
	}{
		{abi.KindTransform, []string{"parent"}, `fh_emit parent 99: key "k0" has 1 inputs`},
		{abi.KindTransform, []string{"no parents"}, "parents without inputs"},
		{abi.KindTransform, []string{"both parents"}, "both parents and all_parents"},
		{abi.KindTransform, []string{"null stream"}, "NULL stream"},
		{abi.KindTransform, []string{"null payload"}, "NULL payload"},
		{abi.KindTransform, []string{"bad key"}, "key is not valid UTF-8"},
		{abi.KindMap, []string{"timer in map"}, "fh_set_timer in a map computation"},
		{abi.KindTransform, []string{"keep", "stale"}, "fh_emit on a key that is not being processed"},
	} {
		t.Run(tt.log, func(t *testing.T) {
			_, err := misuseBatch(t, inst, tt.kind, tt.payloads...)
			require.Equal(t, int64(abi.StatusGuestFailure), status(err), "%v", err)
			require.Contains(t, logs.text(), tt.log)
			out, err := misuseBatch(t, inst, abi.KindTransform, "fine")
			require.NoError(t, err)
			require.Equal(t, []byte{0xa1, 0x64, 'k', 'e', 'y', 's', 0x80}, out)
		})
	}
}

// TestKeyFailures checks the failure texts of a key: a nonzero return, the
// first of several failures, invalid UTF-8 replaced.
func TestKeyFailures(t *testing.T) {
	inst, _ := instance(t, testGuest)
	initWith(t, inst, "misuse", abi.KindTransform, nil, "out")
	out, err := misuseBatch(t, inst, abi.KindTransform, "return", "fail then return", "invalid utf8 failure", "state roundtrip")
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Equal(t, []abi.ResponseKey{
		{Key: "k0", Error: "flowhost_process_key returned 42"},
		{Key: "k1", Error: "first"},
		{Key: "k2", Error: "bad \ufffd byte"},
		{Key: "k3", Emits: []abi.Emit{{Stream: "out", Payload: []byte("cdef"), Parents: []uint32{0}}}, StateOp: abi.StateDelete},
	}, resp.Keys)
}

// TestLog checks that fh_log, fh_log_n and fh_logf reach the host's log
// at their levels, a long formatted line whole.
func TestLog(t *testing.T) {
	inst, logs := instance(t, testGuest)
	initWith(t, inst, "misuse", abi.KindTransform, nil, "out")
	_, err := misuseBatch(t, inst, abi.KindTransform, "log")
	require.NoError(t, err)
	require.Equal(t, "DEBUG debug line\nWARN warn line\nERROR error 7 of k0\nINFO+3 "+strings.Repeat("0", 599)+"1", logs.text())
}

// TestEnvelopeRefusals checks the statuses of envelopes the guest cannot
// serve and the log lines that say why.
func TestEnvelopeRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("process before init", func(t *testing.T) {
		inst, logs := instance(t, testGuest)
		_, err := inst.Process(ctx, conformanceRequest(abi.KindTransform))
		require.Equal(t, int64(abi.StatusGuestFailure), status(err))
		require.Contains(t, logs.text(), "flowhost_process called before a successful flowhost_init")
	})
	t.Run("newer version", func(t *testing.T) {
		inst, logs := instance(t, testGuest)
		initWith(t, inst, "fuzz", abi.KindTransform, nil, "out")
		b, err := abi.EncodeRequest(&abi.Request{ABI: 2, Computation: "fuzz", Kind: abi.KindTransform, Keys: []abi.RequestKey{}})
		require.NoError(t, err)
		// Version 2 adds a field, which version 1 cannot decode.
		require.Equal(t, byte(0xa7), b[0])
		newer := append(append([]byte{0xa8}, b[1:]...), 0x63, 'n', 'e', 'w', 0x01)
		_, err = inst.Process(ctx, newer)
		require.Equal(t, int64(abi.StatusUnsupportedVersion), status(err))
		require.Contains(t, logs.text(), "request speaks ABI version 2")
	})
	t.Run("bad request", func(t *testing.T) {
		inst, logs := instance(t, testGuest)
		initWith(t, inst, "fuzz", abi.KindTransform, nil, "out")
		req := conformanceRequest(abi.KindTransform, scriptKey("k", nil, nil, "x"))
		bad := bytes.Replace(req, []byte("stream"), []byte("strean"), 1)
		_, err := inst.Process(ctx, bad)
		require.Equal(t, int64(abi.StatusBadRequest), status(err))
		require.Contains(t, logs.text(), "cannot decode the request: keys[0].messages[0].strean: unknown field")
	})
	t.Run("unknown kind", func(t *testing.T) {
		inst, logs := instance(t, testGuest)
		initWith(t, inst, "fuzz", abi.KindTransform, nil, "out")
		_, err := inst.Process(ctx, conformanceRequest("reduce"))
		require.Equal(t, int64(abi.StatusBadRequest), status(err))
		require.Contains(t, logs.text(), `request of unknown kind "reduce"`)
	})
}

// TestLargeBatches runs batches far larger than the SDK's initial buffers,
// then a small one, through the fuzz script and compares each response
// with the Go SDK's.
func TestLargeBatches(t *testing.T) {
	inst, _ := instance(t, testGuest)
	initWith(t, inst, "fuzz", abi.KindTransform, nil, "out")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<12)
	for _, size := range []struct{ keys, msgs int }{{3000, 3}, {5, 400}, {1, 1}} {
		req := &abi.Request{ABI: abi.Version, Computation: "fuzz", Kind: abi.KindTransform, Keys: []abi.RequestKey{}}
		for k := range size.keys {
			rk := abi.RequestKey{Key: fmt.Sprint("key-", k), State: big[:k%100]}
			for m := range size.msgs {
				payload := big[:(k*size.msgs+m)%2000]
				if m%3 == 0 {
					payload = append([]byte("T"), payload...)
				}
				rk.Messages = append(rk.Messages, abi.Message{ID: fmt.Sprint(k, "-", m), Stream: "in", EventTimestamp: int64(m), Payload: payload})
			}
			req.Keys = append(req.Keys, rk)
		}
		b, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		got, err := inst.Process(context.Background(), b)
		require.NoError(t, err)
		want := expectRequest(t, b)
		require.True(t, bytes.Equal(want.response, got), "%d keys of %d messages: responses differ", size.keys, size.msgs)
	}
}
