package keys

import (
	"encoding/base64"
	"unicode/utf8"
)

// OfBytes returns the key text of an opaque byte key, such as a Kafka
// record's key, in the canonical form of package keys: a one-element key
// array, as one group_by field gives. Bytes that are valid UTF-8 are that
// string: ["o-17"], the key a group_by field holding "o-17" gives too.
// Other bytes are the object {"base64":"..."} of their standard, padded
// base64, which no UTF-8 key gives, so that distinct byte strings never
// share a key. Nil (no key at all) gives "", the unkeyed; an empty,
// non-nil key gives [""].
func OfBytes(b []byte) string {
	if b == nil {
		return ""
	}
	var buf [keyBuffer]byte
	key := append(buf[:0], '[')
	if utf8.Valid(b) {
		key = appendCanonicalString(key, string(b))
	} else {
		key = append(key, `{"base64":"`...)
		key = base64.StdEncoding.AppendEncode(key, b)
		key = append(key, `"}`...)
	}
	return string(append(key, ']'))
}
