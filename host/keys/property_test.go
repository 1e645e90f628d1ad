package keys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestEqualValuesEqualKeys: however a value is spelled in JSON or encoded in
// CBOR, it gets one key, and that key reads back as the same value (so
// different values get different keys).
func TestEqualValuesEqualKeys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(t, "fields")
		values := make([]any, n)
		fields := make([]string, n)
		for i := range values {
			values[i] = genValue(3).Draw(t, fmt.Sprint("value", i))
			fields[i] = fmt.Sprintf("f%d", i)
		}
		// Nest the last field to exercise paths.
		fields[n-1] = "nested.f"

		jsonA := spellPayload(t, fields, values)
		jsonB := spellPayload(t, fields, values)
		keyA, err := Extract([]byte(jsonA), fields)
		require.NoError(t, err, jsonA)
		keyB, err := Extract([]byte(jsonB), fields)
		require.NoError(t, err, jsonB)
		require.Equal(t, keyA, keyB, "%s\n%s", jsonA, jsonB)

		keyC, err := Extract(encodePayload(t, fields, values), fields)
		require.NoError(t, err)
		require.Equal(t, keyA, keyC, "JSON %s", jsonA)

		dec := json.NewDecoder(strings.NewReader(keyA))
		dec.UseNumber()
		var back []any
		require.NoError(t, dec.Decode(&back))
		require.Len(t, back, n)
		for i := range values {
			require.True(t, sameValue(values[i], back[i]), "field %d: %#v became %#v in %s", i, values[i], back[i], keyA)
		}
	})
}

// Model values: nil, bool, string, int64, uint64, float64 (finite), []any,
// map[string]any.
func genValue(depth int) *rapid.Generator[any] {
	scalars := []*rapid.Generator[any]{
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Int64(), func(v int64) any { return v }),
		rapid.Map(rapid.Uint64Min(math.MaxInt64), func(v uint64) any { return v }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.Int64Range(-1000, 1000), func(v int64) any { return float64(v) / 8 }),
	}
	if depth == 0 {
		return rapid.OneOf(scalars...)
	}
	return rapid.OneOf(append(scalars,
		rapid.Map(rapid.SliceOfN(rapid.Deferred(func() *rapid.Generator[any] { return genValue(depth - 1) }), 0, 3),
			func(v []any) any { return v }),
		rapid.Map(rapid.MapOfN(rapid.String(), rapid.Deferred(func() *rapid.Generator[any] { return genValue(depth - 1) }), 0, 3),
			func(v map[string]any) any { return v }),
	)...)
}

func spellPayload(t *rapid.T, fields []string, values []any) string {
	var b strings.Builder
	b.WriteString("{")
	order := rapid.Permutation(slices.Collect(func(yield func(int) bool) {
		for i := range fields {
			if !yield(i) {
				return
			}
		}
	})).Draw(t, "order")
	b.WriteString(`"noise":[1,"x",{"f0":2}],`)
	for k, i := range order {
		if k > 0 {
			b.WriteString(",")
		}
		name, nested := fields[i], false
		if after, ok := strings.CutPrefix(name, "nested."); ok {
			name, nested = after, true
			b.WriteString(`"nested": {"other":true, `)
		}
		spellString(t, &b, name)
		space(t, &b)
		b.WriteString(":")
		space(t, &b)
		spellValue(t, &b, values[i])
		if nested {
			b.WriteString("}")
		}
	}
	b.WriteString("}")
	return b.String()
}

func space(t *rapid.T, b *strings.Builder) {
	b.WriteString(rapid.SampledFrom([]string{"", " ", "\n\t", "\r\n  "}).Draw(t, "space"))
}

func spellValue(t *rapid.T, b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		spellString(t, b, v)
	case int64:
		spellInteger(t, b, strconv.FormatInt(v, 10))
	case uint64:
		spellInteger(t, b, strconv.FormatUint(v, 10))
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e21 {
			spellInteger(t, b, new(big.Float).SetFloat64(v).Text('f', 0))
			return
		}
		format := rapid.SampledFrom([]byte{'g', 'e', 'E'}).Draw(t, "float format")
		b.WriteString(strconv.FormatFloat(v, format, -1, 64))
	case []any:
		b.WriteString("[")
		for i, x := range v {
			if i > 0 {
				b.WriteString(",")
			}
			space(t, b)
			spellValue(t, b, x)
		}
		b.WriteString("]")
	case map[string]any:
		b.WriteString("{")
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		names = rapid.Permutation(names).Draw(t, "member order")
		for i, name := range names {
			if i > 0 {
				b.WriteString(",")
			}
			spellString(t, b, name)
			b.WriteString(":")
			spellValue(t, b, v[name])
		}
		b.WriteString("}")
	default:
		panic(fmt.Sprintf("model type %T", v))
	}
}

// spellInteger writes the integer with decimal text digits in one of the
// spellings JSON allows for it.
func spellInteger(t *rapid.T, b *strings.Builder, digits string) {
	neg := strings.HasPrefix(digits, "-")
	mag := strings.TrimPrefix(digits, "-")
	if neg {
		b.WriteString("-")
	}
	switch rapid.IntRange(0, 3).Draw(t, "integer spelling") {
	case 0:
		b.WriteString(mag)
	case 1:
		b.WriteString(mag + ".000")
	case 2:
		if mag == "0" {
			b.WriteString("0e-2")
			return
		}
		b.WriteString(mag + "00e-2")
	case 3:
		if mag == "0" {
			b.WriteString("0E+7")
			return
		}
		fmt.Fprintf(b, "0.%se%d", mag, len(mag))
	}
}

func spellString(t *rapid.T, b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		escape := r == '"' || r == '\\' || r < 0x20 || rapid.IntRange(0, 3).Draw(t, "escape") == 0
		if !escape {
			b.WriteRune(r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			fmt.Fprintf(b, `\u%04x\u%04X`, r1, r2)
		} else {
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}

func encodePayload(t *rapid.T, fields []string, values []any) []byte {
	top := map[string]any{"noise": []any{1, "x"}}
	for i, f := range fields {
		v := cborValue(t, values[i])
		if after, ok := strings.CutPrefix(f, "nested."); ok {
			top["nested"] = map[string]any{after: v, "other": true}
		} else {
			top[f] = v
		}
	}
	b, err := cbor.Marshal(top)
	require.NoError(t, err)
	return b
}

// cborValue picks one of the CBOR encodings of v.
func cborValue(t *rapid.T, v any) any {
	switch v := v.(type) {
	case int64:
		if math.Abs(float64(v)) < 1<<53 && rapid.Bool().Draw(t, "int as float") {
			return float64(v)
		}
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 && rapid.Bool().Draw(t, "float as int") {
			return int64(v)
		}
		if float64(float32(v)) == v && rapid.Bool().Draw(t, "float32") {
			return float32(v)
		}
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = cborValue(t, v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = cborValue(t, x)
		}
		return out
	}
	return v
}

// sameValue compares a model value with the value decoded from a key.
func sameValue(model, back any) bool {
	switch m := model.(type) {
	case int64, uint64, float64:
		n, ok := back.(json.Number)
		if !ok {
			return false
		}
		got, ok := new(big.Rat).SetString(string(n))
		if !ok {
			return false
		}
		var want *big.Rat
		switch m := m.(type) {
		case int64:
			want = new(big.Rat).SetInt64(m)
		case uint64:
			want = new(big.Rat).SetInt(new(big.Int).SetUint64(m))
		case float64:
			if m != math.Trunc(m) || math.Abs(m) >= 1e21 {
				f, err := strconv.ParseFloat(string(n), 64)
				return err == nil && f == m
			}
			want = new(big.Rat).SetFloat64(m)
		}
		return got.Cmp(want) == 0
	case []any:
		b, ok := back.([]any)
		if !ok || len(b) != len(m) {
			return false
		}
		for i := range m {
			if !sameValue(m[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := back.(map[string]any)
		if !ok || len(b) != len(m) {
			return false
		}
		for k := range m {
			if !sameValue(m[k], b[k]) {
				return false
			}
		}
		return true
	}
	return model == back
}

// The key of a CBOR payload that holds the same values as a JSON one is the
// same bytes.
func ExampleExtract() {
	jsonKey, _ := Extract([]byte(`{"order_id":"o-17","customer":{"id":3.0}}`), []string{"order_id", "customer.id"})
	cborPayload, _ := cbor.Marshal(map[string]any{"order_id": "o-17", "customer": map[string]any{"id": 3}})
	cborKey, _ := Extract(cborPayload, []string{"order_id", "customer.id"})
	_, err := Extract([]byte(`{"id":1}`), []string{"order_id"})
	fmt.Println(jsonKey)
	fmt.Println(cborKey)
	fmt.Println(err)
	// Output:
	// ["o-17",3]
	// ["o-17",3]
	// payload lacks group_by field "order_id"
}

func ExampleExtractor_Key() {
	e, err := NewExtractor([]string{"region"})
	if err != nil {
		panic(err)
	}
	for _, p := range []string{`{"region":"eu","n":1}`, `{"n":2,"region":"e\u0075"}`} {
		key, _ := e.Key([]byte(p))
		fmt.Println(key)
	}
	// Output:
	// ["eu"]
	// ["eu"]
}

// payload100 is a typical 100-byte message.
var payload100 = []byte(`{"order_id":"o-1234567","customer":{"id":987654,"region":"eu-west"},"amount":129.95,"items":[1,2,3]}`)

func BenchmarkKeyJSON(b *testing.B) {
	e, err := NewExtractor([]string{"order_id"})
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload100)))
	for b.Loop() {
		if _, err := e.Key(payload100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyJSONNested2(b *testing.B) {
	e, err := NewExtractor([]string{"customer.region", "amount"})
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload100)))
	for b.Loop() {
		if _, err := e.Key(payload100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractJSON(b *testing.B) {
	fields := []string{"order_id"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Extract(payload100, fields); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyCBOR(b *testing.B) {
	payload, err := cborOf(payload100)
	require.NoError(b, err)
	e, err := NewExtractor([]string{"order_id"})
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := e.Key(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecoderTokenWalk is the baseline the scanner replaces: an
// encoding/json token walk that stops at the field.
func BenchmarkDecoderTokenWalk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(payload100))
		dec.UseNumber()
		if _, err := dec.Token(); err != nil {
			b.Fatal(err)
		}
		for dec.More() {
			name, _ := dec.Token()
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				b.Fatal(err)
			}
			if name == "order_id" {
				_ = string(raw)
				break
			}
		}
	}
}
