package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
)

func TestKeyJSON(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		fields  []string
		want    string
	}{
		{"no fields", `not even JSON`, nil, ""},
		{"one string", `{"order_id":"o-17","n":3}`, []string{"order_id"}, `["o-17"]`},
		{"field order", `{"a":1,"b":"x"}`, []string{"b", "a"}, `["x",1]`},
		{"leading space", " \t\r\n{\"a\":1}", []string{"a"}, `[1]`},
		{"nested", `{"customer":{"id":42,"name":"Ann"},"id":1}`, []string{"customer.id"}, `[42]`},
		{"nested and parent", `{"c":{"id":42}}`, []string{"c", "c.id"}, `[{"id":42},42]`},
		{"escaped name matches", `{"\u0061":1}`, []string{"a"}, `[1]`},
		{"escapes normalised", `{"a":"\u0041\/\t\u00e9\ud83d\ude00"}`, []string{"a"}, "[\"A/\\té\U0001F600\"]"},
		{"control escape", `{"a":"\u0001\u001f\b"}`, []string{"a"}, `["\u0001\u001f\b"]`},
		{"raw utf8 kept", `{"a":"é"}`, []string{"a"}, `["é"]`},
		{"int spellings", `{"a":3.0,"b":30e-1,"c":0.3E+1,"d":3}`, []string{"a", "b", "c", "d"}, `[3,3,3,3]`},
		{"negative zero", `{"a":-0,"b":-0.0e5}`, []string{"a", "b"}, `[0,0]`},
		{"big exact int", `{"a":123456789012345678901}`, []string{"a"}, `[123456789012345678901]`},
		{"beyond exact range", `{"a":1234567890123456789012}`, []string{"a"}, `[1.2345678901234568e+21]`},
		{"1e21", `{"a":1e21,"b":1e20}`, []string{"a", "b"}, `[1e+21,100000000000000000000]`},
		{"fractions", `{"a":0.1,"b":-2.50,"c":1e-7,"d":0.000001}`, []string{"a", "b", "c", "d"}, `[0.1,-2.5,1e-7,0.000001]`},
		{"beyond 2^53 exact", `{"a":9007199254740993}`, []string{"a"}, `[9007199254740993]`},
		{"tiny is zero", `{"a":1e-400}`, []string{"a"}, `[0]`},
		{"literals", `{"a":true,"b":false,"c":null}`, []string{"a", "b", "c"}, `[true,false,null]`},
		{"object sorted", `{"a":{ "z" : 1 , "b":[ 2.0 , "x" ] ,"\u00e9":{}}}`, []string{"a"}, `[{"b":[2,"x"],"z":1,"é":{}}]`},
		{"array", `{"a":[ ]}`, []string{"a"}, `[[]]`},
		{"other fields may repeat", `{"x":1,"x":2,"a":3}`, []string{"a"}, `[3]`},
		{"other strings need not be UTF-8", "{\"x\":\"\xff\",\"a\":3}", []string{"a"}, `[3]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Extract([]byte(tt.payload), tt.fields)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			if len(tt.fields) == 0 {
				return
			}
			require.True(t, json.Valid([]byte(got)), "key %s is not JSON", got)
			// The same value as CBOR gives the same key.
			c, err := cborOf([]byte(tt.payload))
			require.NoError(t, err)
			got, err = Extract(c, tt.fields)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestKeyErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		fields  []string
		want    string
	}{
		{"missing", `{"id":1}`, []string{"order_id"}, `payload lacks group_by field "order_id"`},
		{"missing nested", `{"customer":{}}`, []string{"customer.id"}, `payload lacks group_by field "customer.id"`},
		{"not an object", `{"customer":"ann"}`, []string{"customer.id"}, `group_by field "customer.id": "customer" is a string, not an object`},
		{"repeated field", `{"id":1,"id":2}`, []string{"id"}, `payload repeats field "id" (byte 8)`},
		{"repeated escaped", `{"id":1,"i\u0064":2}`, []string{"id"}, `payload repeats field "id"`},
		{"repeated parent", `{"c":{"id":1},"c":{"id":2}}`, []string{"c.id"}, `payload repeats field "c"`},
		{"array payload", `[1,2]`, []string{"a"}, `neither a JSON object nor a CBOR map: byte 0 is 0x5b, which starts a JSON array`},
		{"string after space", ` "x"`, []string{"a"}, `byte 1 is 0x22, which starts a JSON string`},
		{"cbor array", "\x82\x01\x02", []string{"a"}, `byte 0 is 0x82, which starts a CBOR array`},
		{"empty", "  ", []string{"a"}, `payload is empty`},
		{"truncated", `{"a":1`, []string{"a"}, `not valid JSON: byte 6: unexpected end, want ',' or '}' in an object`},
		{"trailing data", `{"a":1} x`, []string{"a"}, `byte 8: unexpected 'x', want end of payload`},
		{"bad number", `{"a":01}`, []string{"a"}, `byte 6: unexpected '1'`},
		{"bad escape", `{"a":"\x"}`, []string{"a"}, `byte 7: unexpected 'x', want an escape`},
		{"control char", "{\"a\":\"\n\"}", []string{"a"}, `control character 0x0a`},
		{"bad literal", `{"a":tru}`, []string{"a"}, `invalid literal, want true`},
		{"invalid utf8 key", "{\"a\":\"\xff\"}", []string{"a"}, `group_by field "a": string is not valid UTF-8`},
		{"lone surrogate", `{"a":"\ud800x"}`, []string{"a"}, `lone surrogate`},
		{"reversed surrogates", `{"a":"\udc00\ud800"}`, []string{"a"}, `lone surrogate`},
		{"huge number", `{"a":1e400}`, []string{"a"}, `number 1e400 is beyond the float64 range`},
		{"repeated key in value", `{"a":{"x":1,"x":2}}`, []string{"a"}, `object repeats key "x"`},
		{"deep", `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, []string{"a"}, `nested deeper than 10000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Extract([]byte(tt.payload), tt.fields)
			require.ErrorContains(t, err, tt.want)
			require.ErrorIs(t, err, ErrPayload)
		})
	}
}

func TestKeyCBORErrors(t *testing.T) {
	enc := func(v any) []byte {
		b, err := cbor.Marshal(v)
		require.NoError(t, err)
		return b
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"byte string", enc(map[string]any{"a": []byte{1}}), `group_by field "a": a CBOR byte string has no JSON equivalent`},
		{"NaN", enc(map[string]any{"a": math.NaN()}), `has no JSON equivalent`},
		{"infinity", enc(map[string]any{"a": math.Inf(1)}), `number +Inf has no JSON equivalent`},
		{"missing", enc(map[string]any{"b": 1}), `payload lacks group_by field "a"`},
		{"int map keys", enc(map[int]any{1: 1}), `payload is not a well-formed CBOR map with text keys`},
		{"repeated key", []byte("\xa2\x61a\x01\x61a\x02"), `duplicate map key`},
		{"trailing bytes", append(enc(map[string]any{"a": 1}), 0), `extraneous data`},
		{"other tag", enc(map[string]any{"a": cbor.Tag{Number: 99, Content: 1}}), `CBOR tags other than bignums are not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Extract(tt.payload, []string{"a"})
			require.ErrorContains(t, err, tt.want)
			require.ErrorIs(t, err, ErrPayload)
		})
	}
}

func TestKeyCBORNumbers(t *testing.T) {
	big2 := func(s string) *big.Int {
		v, ok := new(big.Int).SetString(s, 10)
		require.True(t, ok)
		return v
	}
	tests := []struct {
		value any
		want  string
	}{
		{uint64(math.MaxUint64), "18446744073709551615"},
		{int64(math.MinInt64), "-9223372036854775808"},
		{big2("-18446744073709551616"), "-18446744073709551616"}, // CBOR's smallest integer
		{big2("123456789012345678901"), "123456789012345678901"},
		{big2("1000000000000000000000"), "1e+21"},
		{float32(0.5), "0.5"},
		{float64(3), "3"},
		{math.Copysign(0, -1), "0"},
		{1e20, "100000000000000000000"},
	}
	for _, tt := range tests {
		payload, err := cbor.Marshal(map[string]any{"a": tt.value})
		require.NoError(t, err)
		got, err := Extract(payload, []string{"a"})
		require.NoError(t, err)
		require.Equal(t, "["+tt.want+"]", got, "%T %v", tt.value, tt.value)
	}
}

func TestNewExtractorErrors(t *testing.T) {
	for _, tt := range []struct {
		fields []string
		want   string
	}{
		{[]string{""}, "group_by field 0 is empty"},
		{[]string{"a..b"}, `group_by field "a..b" has an empty path segment`},
		{[]string{".a"}, `group_by field ".a" has an empty path segment`},
		{[]string{"a", "b", "a"}, `group_by lists field "a" twice`},
	} {
		_, err := NewExtractor(tt.fields)
		require.EqualError(t, err, tt.want)
		require.False(t, errors.Is(err, ErrPayload))
	}
}

func TestExtractorFieldsIsACopy(t *testing.T) {
	fields := []string{"a", "b.c"}
	e, err := NewExtractor(fields)
	require.NoError(t, err)
	fields[0] = "z"
	got := e.Fields()
	require.Equal(t, []string{"a", "b.c"}, got)
	got[1] = "y"
	require.Equal(t, []string{"a", "b.c"}, e.Fields())
}

// TestScannerAgreesWithEncodingJSON checks the hand-written scanner against
// encoding/json on tricky inputs (the fuzz target does it on random ones).
func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{}`, `{"a":[1,2,{"b":null}]}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`,
		`{"a":"\u12"}`, `{"a":"\uzzzz"}`, `{"a" 1}`, `{"a":1,}`, `{,}`, `{"a":[1,]}`, `{"a":nul}`,
		"{\"a\":\"\x7f\"}", `{"a":"\/"}`, `{"a":-0.0e-0}`, `{} {}`, `{`, `{"a":[}`, `{"a":]}`,
		`{"a":1}` + "\n",
	} {
		err := validateJSON([]byte(in))
		require.Equal(t, json.Valid([]byte(in)), err == nil, "%s: %v", in, err)
	}
}

func validateJSON(data []byte) error {
	s := jsonScanner{data: data}
	return s.document(nil)
}

// cborOf converts a JSON text to CBOR keeping numbers exact: integers
// (whatever their spelling) become CBOR integers or bignums, other numbers
// float64. It is independent of the code under test (math/big does the
// arithmetic).
func cborOf(jsonText []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(jsonText))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v, err := exactNumbers(v)
	if err != nil {
		return nil, err
	}
	return cbor.Marshal(v)
}

var errSkip = errors.New("number too large to convert exactly")

func exactNumbers(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
			if err != nil || exp > 1000 || exp < -1000 {
				return nil, errSkip
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, errors.New("bad number " + s)
		}
		if r.IsInt() {
			return new(big.Int).Set(r.Num()), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errSkip
		}
		return f, nil
	case []any:
		for i := range v {
			var err error
			if v[i], err = exactNumbers(v[i]); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range v {
			var err error
			if v[k], err = exactNumbers(v[k]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

func FuzzExtract(f *testing.F) {
	f.Add([]byte(`{"order_id":"o-17","n":3}`), "order_id")
	f.Add([]byte(`{"customer":{"id":42},"x":[1,2.5,"\u00e9"]}`), "customer.id,x")
	f.Add([]byte(`{"a":1e21,"b":-0.0,"c":{"z":1,"a":null}}`), "a,b,c")
	f.Add([]byte(`{"a":"\ud83d\ude00","b":9007199254740993}`), "b,a")
	f.Add([]byte("\xa1\x61a\x01"), "a")
	f.Add([]byte(`[1]`), "a")
	f.Fuzz(func(t *testing.T, payload []byte, fieldList string) {
		if ValidJSON(payload) != json.Valid(payload) {
			t.Fatalf("ValidJSON says %v, json.Valid says %v", ValidJSON(payload), json.Valid(payload))
		}
		if payload := bytes.TrimLeft(payload, " \t\r\n"); len(payload) > 0 && payload[0] == '{' {
			err := validateJSON(payload)
			if (err == nil) != json.Valid(payload) {
				t.Fatalf("scanner says %v, json.Valid says %v", err, json.Valid(payload))
			}
		}
		var fields []string
		if fieldList != "" {
			fields = strings.Split(fieldList, ",")
		}
		key, err := Extract(payload, fields)
		if e, eerr := NewExtractor(fields); eerr == nil {
			in := &Interner{}
			for range 2 { // a miss, then a hit
				interned, ierr := e.KeyIn(payload, in)
				if interned != key || (ierr == nil) != (err == nil) || (err != nil && ierr.Error() != err.Error()) {
					t.Fatalf("KeyIn gives %q, %v; Key gives %q, %v", interned, ierr, key, err)
				}
			}
		}
		if err != nil || len(fields) == 0 || payload[0]>>5 == cborMap {
			return
		}
		if !json.Valid([]byte(key)) {
			t.Fatalf("key %q is not JSON", key)
		}
		if !utf8Valid(fieldList) {
			return // encoding/json would replace the bytes that matched a field name
		}
		c, err := cborOf(payload)
		if errors.Is(err, errSkip) {
			return
		}
		if err != nil {
			t.Fatalf("payload accepted by Extract but not by encoding/json: %v", err)
		}
		cborKey, err := Extract(c, fields)
		if err != nil {
			t.Fatalf("JSON key %s, but CBOR of the same value fails: %v", key, err)
		}
		if cborKey != key {
			t.Fatalf("JSON key %s, CBOR key %s", key, cborKey)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
