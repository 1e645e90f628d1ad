package flowhost_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/keys"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

func TestParseKey(t *testing.T) {
	e, err := keys.NewExtractor([]string{"customer.id", "region", "n", "vip"})
	require.NoError(t, err)
	key, err := e.Key([]byte(`{"customer":{"id":"c-\"7\""},"region":"é","n":3.0,"vip":true}`))
	require.NoError(t, err)
	kf, err := flowhost.ParseKey(key, "customer.id", "region", "n", "vip")
	require.NoError(t, err)
	s, err := kf.String("customer.id")
	require.NoError(t, err)
	require.Equal(t, `c-"7"`, s)
	r, err := kf.String("region")
	require.NoError(t, err)
	require.Equal(t, "é", r)
	n, err := kf.Int("n")
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	v, err := kf.Bool("vip")
	require.NoError(t, err)
	require.True(t, v)

	for _, tc := range []struct {
		key   string
		names []string
		get   func(flowhost.KeyFields) error
		want  string
	}{
		{`["a"]`, []string{"a", "b"}, nil, `key ["a"]: has 1 values, expected 2 (group_by ["a" "b"])`},
		{`{"a":1}`, []string{"a"}, nil, `key {"a":1}: not a JSON array of group_by values`},
		{``, []string{"a"}, nil, `key "": the key is empty (an unkeyed computation), expected 1 group_by fields`},
		{`["x"]`, []string{"id"}, func(kf flowhost.KeyFields) error { _, err := kf.Int("id"); return err }, `key ["x"]: field "id": expected an integer, got "x"`},
		{`[1.5]`, []string{"id"}, func(kf flowhost.KeyFields) error { _, err := kf.Int("id"); return err }, `key [1.5]: field "id": expected an int64 integer, got 1.5`},
		{`[null]`, []string{"id"}, func(kf flowhost.KeyFields) error { _, err := kf.String("id"); return err }, `key [null]: field "id": expected a string, got null`},
		{`["x"]`, []string{"id"}, func(kf flowhost.KeyFields) error { _, err := kf.String("other"); return err }, `key ["x"]: field "other": not a group_by field (fields: ["id"])`},
	} {
		kf, err := flowhost.ParseKey(tc.key, tc.names...)
		if tc.get != nil {
			require.NoError(t, err)
			err = tc.get(kf)
		}
		var ke *flowhost.KeyError
		require.True(t, errors.As(err, &ke), "key %s: %v", tc.key, err)
		require.EqualError(t, err, tc.want)
	}
}

// FuzzParseKey: any text is refused with a *KeyError or decoded, never a
// panic; a key the host builds from a string field gives that string back.
func FuzzParseKey(f *testing.F) {
	f.Add(`["o-17",3]`, "o-17")
	f.Add(`[{"base64":"/w=="}]`, "a\"b\\c\n\x01")
	f.Fuzz(func(t *testing.T, key, s string) {
		if kf, err := flowhost.ParseKey(key, "a", "b"); err == nil {
			_, _ = kf.String("a")
			_, _ = kf.Int("b")
		} else {
			var ke *flowhost.KeyError
			require.True(t, errors.As(err, &ke))
		}
		if !utf8.ValidString(s) {
			return // the host refuses a key that is not UTF-8
		}
		e, err := keys.NewExtractor([]string{"a"})
		require.NoError(t, err)
		k, err := e.Key(append(append([]byte(`{"a":`), mustJSON(s)...), '}'))
		require.NoError(t, err)
		kf, err := flowhost.ParseKey(k, "a")
		require.NoError(t, err)
		got, err := kf.String("a")
		require.NoError(t, err)
		require.Equal(t, s, got)
	})
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// TestParseKeyFailedFieldsAnswerWithAnError reads the fields ParseKey
// returned with its error: each accessor says the key did not parse,
// rather than indexing values that are not there.
func TestParseKeyFailedFieldsAnswerWithAnError(t *testing.T) {
	for _, key := range []string{`[1,2]`, `x`, ``} {
		kf, err := flowhost.ParseKey(key, "a")
		require.Error(t, err, key)
		_, err = kf.Int("a")
		var ke *flowhost.KeyError
		require.ErrorAs(t, err, &ke, key)
		require.Contains(t, err.Error(), "did not parse", key)
	}
}
