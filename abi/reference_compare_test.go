package abi

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// envelopeCodec is one envelope type seen through both codecs.
type envelopeCodec struct {
	name string
	// decode decodes data with the specialised codec, ref with the
	// reference; both return a pointer to the envelope type.
	decode, ref func([]byte) (any, error)
	// encode encodes a decoded value with the specialised codec.
	encode func(any) ([]byte, error)
}

var envelopeCodecs = []envelopeCodec{
	{"request",
		func(b []byte) (any, error) { return DecodeRequest(b) },
		func(b []byte) (any, error) {
			var v Request
			return &v, refDecode(b, requestSchema, ResponseLimits{}, &v)
		},
		func(v any) ([]byte, error) { return EncodeRequest(v.(*Request)) }},
	{"response",
		func(b []byte) (any, error) { return DecodeResponse(b, ResponseLimits{}) },
		func(b []byte) (any, error) {
			var v Response
			return &v, refDecode(b, responseSchema, DefaultResponseLimits(), &v)
		},
		func(v any) ([]byte, error) { return EncodeResponse(v.(*Response)) }},
	{"init",
		func(b []byte) (any, error) { return DecodeInit(b) },
		func(b []byte) (any, error) { var v Init; return &v, refDecode(b, initSchema, ResponseLimits{}, &v) },
		func(v any) ([]byte, error) { return EncodeInit(v.(*Init)) }},
	{"init_result",
		func(b []byte) (any, error) { return DecodeInitResult(b) },
		func(b []byte) (any, error) {
			var v InitResult
			return &v, refDecode(b, initResultSchema, ResponseLimits{}, &v)
		},
		func(v any) ([]byte, error) { return EncodeInitResult(v.(*InitResult)) }},
}

// requireSameAsReference decodes data with both codecs of c and requires
// the same decision, the same error text and the same value; when data is
// accepted, it requires that both encoders write the same bytes for the
// value. It reports whether data was accepted.
func requireSameAsReference(t testing.TB, c envelopeCodec, data []byte) bool {
	got, err := c.decode(data)
	want, refErr := c.ref(data)
	if refErr != nil {
		require.Error(t, err, "%s: the reference refused (%v), the specialised codec accepted", c.name, refErr)
		require.Equal(t, refErr.Error(), err.Error(), c.name)
		return false
	}
	require.NoError(t, err, "%s: the reference accepted", c.name)
	requireSameValue(t, want, got, c.name)
	b, err := c.encode(got)
	require.NoError(t, err)
	refB, err := refEncode(want)
	require.NoError(t, err)
	require.Equal(t, refB, b, "%s: encodings differ", c.name)
	return true
}

// requireSameValue is require.Equal, except that a NaN parameter equals a
// NaN of the same bits.
func requireSameValue(t testing.TB, want, got any, msg string) {
	if wantIn, ok := want.(*Init); ok {
		gotIn := got.(*Init)
		require.True(t, sameAny(wantIn.Parameters, gotIn.Parameters), "%s: parameters differ\nwant %#v\ngot  %#v", msg, wantIn.Parameters, gotIn.Parameters)
		w, g := *wantIn, *gotIn
		w.Parameters, g.Parameters = nil, nil
		want, got = &w, &g
	}
	require.Equal(t, want, got, msg)
}

func sameAny(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !sameAny(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameAny(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b) && reflect.TypeOf(a) == reflect.TypeOf(b)
}

// TestCodecMatchesReferenceOnVectors: every golden vector decodes to the
// reference's value and encodes back to its own bytes, byte for byte what
// the reference writes.
func TestCodecMatchesReferenceOnVectors(t *testing.T) {
	matches, err := filepath.Glob(filepath.Join(vectorDir, "*.cbor"))
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	for _, name := range matches {
		part := strings.TrimSuffix(filepath.Base(name), ".cbor")
		part = part[strings.IndexByte(part, '.')+1:]
		var c *envelopeCodec
		for i := range envelopeCodecs {
			if envelopeCodecs[i].name == part {
				c = &envelopeCodecs[i]
			}
		}
		require.NotNil(t, c, "%s: no codec for part %q", name, part)
		t.Run(filepath.Base(name), func(t *testing.T) {
			b, err := os.ReadFile(name)
			require.NoError(t, err)
			require.True(t, requireSameAsReference(t, *c, b), "the vector does not decode")
			v, err := c.decode(b)
			require.NoError(t, err)
			again, err := c.encode(v)
			require.NoError(t, err)
			require.Equal(t, b, again, "the vector does not encode back to its bytes")
		})
	}
}

// FuzzCodecMatchesReference: on any input, each of the four specialised
// decoders accepts exactly what the reference accepts, refuses with the
// same error text, decodes the same value, and encodes it to the same
// bytes as the reference encoder.
func FuzzCodecMatchesReference(f *testing.F) {
	for _, suffix := range []string{"request", "response", "init", "init_result"} {
		seedFiles(f, suffix)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range envelopeCodecs {
			requireSameAsReference(t, c, data)
		}
	})
}

// TestEncodeMatchesReferenceProperty: envelope values built in Go,
// including the shapes a decoder never produces (nil required slices, empty
// optional ones), encode to the reference's bytes.
func TestEncodeMatchesReferenceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		resp := genResponse(t)
		if rapid.Bool().Draw(t, "nil keys") && len(resp.Keys) == 0 {
			resp.Keys = nil
		}
		for i := range resp.Keys {
			if len(resp.Keys[i].Emits) == 0 && rapid.Bool().Draw(t, "empty emits") {
				resp.Keys[i].Emits = []Emit{}
			}
			for j := range resp.Keys[i].Emits {
				if rapid.Bool().Draw(t, "nil payload") {
					resp.Keys[i].Emits[j].Payload = nil
				}
			}
			if rapid.Bool().Draw(t, "error") {
				resp.Keys[i].Error = genText(t, "key error")
			}
		}
		want, err := refEncode(resp)
		require.NoError(t, err)
		got, err := EncodeResponse(resp)
		require.NoError(t, err)
		require.Equal(t, want, got)

		req := genRequest(t)
		if rapid.Bool().Draw(t, "nil request keys") && len(req.Keys) == 0 {
			req.Keys = nil
		}
		want, err = refEncode(req)
		require.NoError(t, err)
		got, err = EncodeRequest(req)
		require.NoError(t, err)
		require.Equal(t, want, got)

		ir := &InitResult{Error: genText(t, "init error")}
		want, err = refEncode(ir)
		require.NoError(t, err)
		got, err = EncodeInitResult(ir)
		require.NoError(t, err)
		require.Equal(t, want, got)

		in := &Init{ABI: Version, Computation: genText(t, "computation"), Kind: KindMap,
			Partition: rapid.Uint64().Draw(t, "partition"), Parameters: genParameters(t, 0),
			OutputStreams: rapid.SliceOfN(rapid.StringN(0, 5, -1), 0, 3).Draw(t, "outputs")}
		want, err = refEncode(in)
		require.NoError(t, err)
		got, err = EncodeInit(in)
		if refErr := check(want, initSchema, ResponseLimits{}); refErr != nil {
			require.Equal(t, refErr, err) // a uint64 parameter beyond int64
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}

// genParameters draws parameters of the Go types a spec or a caller may
// hold, not only the ones the decoder produces.
func genParameters(t *rapid.T, depth int) map[string]any {
	n := rapid.IntRange(0, 4).Draw(t, "parameters")
	if n == 0 && rapid.Bool().Draw(t, "nil parameters") {
		return nil
	}
	m := make(map[string]any, n)
	for range n {
		m[rapid.StringN(0, 30, -1).Draw(t, "name")] = genParameter(t, depth)
	}
	return m
}

func genParameter(t *rapid.T, depth int) any {
	floats := rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 0.5, 1.0 / 3, 65504, 65505, 1e-7, 5.960464477539063e-08,
		6.103515625e-05, 3.4028234663852886e+38, 1e300, math.Inf(1), math.Inf(-1), math.NaN(), 1.401298464324817e-45})
	choices := []*rapid.Generator[any]{
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(v bool) any { return v }),
		rapid.Map(rapid.Int64(), func(v int64) any { return v }),
		rapid.Map(rapid.Int(), func(v int) any { return v }),
		rapid.Map(rapid.Uint64(), func(v uint64) any { return v }),
		rapid.Map(rapid.Uint8(), func(v uint8) any { return v }),
		rapid.Map(rapid.Int16(), func(v int16) any { return v }),
		rapid.Map(rapid.Float64(), func(v float64) any { return v }),
		rapid.Map(floats, func(v float64) any { return v }),
		rapid.Map(floats, func(v float64) any { return float32(v) }),
		rapid.Map(rapid.Float32(), func(v float32) any { return v }),
		rapid.Map(rapid.StringN(0, 30, -1), func(v string) any { return v }),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 30), func(v []byte) any { return v }),
		rapid.Map(rapid.SliceOfN(rapid.String(), 0, 3), func(v []string) any { return v }),
	}
	if depth < 3 {
		choices = append(choices,
			rapid.Custom(func(t *rapid.T) any {
				var s []any
				for range rapid.IntRange(0, 3).Draw(t, "list") {
					s = append(s, genParameter(t, depth+1))
				}
				return s
			}),
			rapid.Custom(func(t *rapid.T) any { return genParameters(t, depth+1) }))
	}
	return rapid.OneOf(choices...).Draw(t, "value")
}

// TestEncodeParameterEdgesMatchReference pins the values where the
// shortest-float and integer-width rules change, each encoded alone and as
// float32 and float64, against the reference.
func TestEncodeParameterEdgesMatchReference(t *testing.T) {
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1.0 / 3, 65504, 65505, 65536, -65504, 1e-7,
		5.960464477539063e-08, 2 * 5.960464477539063e-08, 3 * 5.960464477539063e-08, 6.103515625e-05, 6.097555160522461e-05,
		2.9802322387695312e-08, 3.4028234663852886e+38, 1e300, 1.401298464324817e-45, math.SmallestNonzeroFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), -math.NaN(), math.Float64frombits(0x7ff8000000000001)}
	ints := []int64{0, 1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -24, -25, -256, -257, -65536, -65537, math.MinInt64}
	var values []any
	for _, f := range floats {
		values = append(values, f, float32(f))
	}
	for _, i := range ints {
		values = append(values, i, uint64(i))
	}
	values = append(values, nil, true, false, "", "x", []byte(nil), []byte{}, []any(nil), map[string]any(nil),
		[]int{1, 2}, [2]string{"a", "b"}, [3]byte{1, 2, 3}, map[string]int{"b": 1, "aa": 2, "a": 3},
		map[string]any{strings.Repeat("k", 24): 1, strings.Repeat("j", 23): 2, "": 3}, (*int)(nil), Int64(5))
	for _, v := range values {
		in := &Init{ABI: Version, Computation: "c", Kind: KindMap, OutputStreams: []string{}, Parameters: map[string]any{"v": v}}
		want, err := refEncode(in)
		require.NoError(t, err)
		got, err := EncodeInit(in)
		if refErr := check(want, initSchema, ResponseLimits{}); refErr != nil {
			require.Equal(t, refErr, err, "%T %v", v, v)
			continue
		}
		require.NoError(t, err, "%T %v", v, v)
		require.Equal(t, want, got, "%T %v", v, v)
		requireSameAsReference(t, envelopeCodecs[2], got)
	}
}

// FuzzPeekVersionMatchesReference: PeekVersion finds the same version as
// the lax reference decoder on any input.
func FuzzPeekVersionMatchesReference(f *testing.F) {
	for _, suffix := range []string{"request", "init"} {
		seedFiles(f, suffix)
	}
	f.Add([]byte{0xbf, 0x63, 'a', 'b', 'i', 0x02, 0xff})
	f.Add([]byte{0xa1, 0x63, 'A', 'B', 'I', 0xc1, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok := PeekVersion(data)
		refV, refOK := refPeekVersion(data)
		require.Equal(t, refOK, ok)
		require.Equal(t, refV, v)
	})
}
