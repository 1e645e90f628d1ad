package keys

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestOfBytes(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{nil, ""},
		{[]byte{}, `[""]`},
		{[]byte("o-17"), `["o-17"]`},
		{[]byte("a\"b\\c\n\x01"), `["a\"b\\c\n\u0001"]`},
		{[]byte("é"), `["é"]`},
		{[]byte{0xff}, `[{"base64":"/w=="}]`},
		{[]byte{0xed, 0xa0, 0x80}, `[{"base64":"7aCA"}]`}, // a lone surrogate is not UTF-8
	} {
		if got := OfBytes(tc.in); got != tc.want {
			t.Errorf("OfBytes(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// A UTF-8 key is the key a group_by field with that string gives.
	e, err := NewExtractor([]string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.Key([]byte(`{"id":"o-17"}`))
	if err != nil || k != OfBytes([]byte("o-17")) {
		t.Fatalf("group_by key %s (%v), byte key %s", k, err, OfBytes([]byte("o-17")))
	}
}

// FuzzOfBytes: every key is valid JSON (nil aside), and distinct byte
// strings never share a key.
func FuzzOfBytes(f *testing.F) {
	f.Add([]byte("o-17"), []byte{0xff})
	f.Add([]byte(`{"base64":"/w=="}`), []byte{0xff})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ka, kb := OfBytes(a), OfBytes(b)
		if a != nil && !json.Valid([]byte(ka)) {
			t.Fatalf("OfBytes(%q) = %q is not JSON", a, ka)
		}
		// nil (no key) and empty are different keys.
		if (ka == kb) != (bytes.Equal(a, b) && (a == nil) == (b == nil)) {
			t.Fatalf("OfBytes(%q) = %q, OfBytes(%q) = %q", a, ka, b, kb)
		}
	})
}
