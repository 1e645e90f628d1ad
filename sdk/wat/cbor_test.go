package wat_test

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// A tiny CBOR writer for envelopes the host's encoder would never produce:
// fields in any order, missing, repeated, or of the wrong type.

// item is one encoded CBOR item.
type item = []byte

// pair is one map entry, its key already encoded.
type pair struct{ k, v item }

func p(key string, v item) pair { return pair{text(key), v} }

// head encodes a major type and argument in the shortest form.
func head(major byte, n uint64) []byte {
	top := major << 5
	switch {
	case n < 24:
		return []byte{top | byte(n)}
	case n <= 0xff:
		return []byte{top | 24, byte(n)}
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16([]byte{top | 25}, uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32([]byte{top | 26}, uint32(n))
	}
	return binary.BigEndian.AppendUint64([]byte{top | 27}, n)
}

func uint_(n uint64) item { return head(0, n) }

// neg encodes the integer -1-n.
func neg(n uint64) item      { return head(1, n) }
func bstr(b []byte) item     { return append(head(2, uint64(len(b))), b...) }
func text(s string) item     { return rawText([]byte(s)) }
func rawText(b []byte) item  { return append(head(3, uint64(len(b))), b...) }
func arr(items ...item) item { return append(head(4, uint64(len(items))), bytes.Join(items, nil)...) }
func mapOf(pairs ...pair) item {
	b := head(5, uint64(len(pairs)))
	for _, kv := range pairs {
		b = append(append(b, kv.k...), kv.v...)
	}
	return b
}

// fieldList is a map's entries in the order they are written.
type fieldList []pair

// with returns a copy with the field appended, even if it is already there.
func (f fieldList) with(key string, v item) fieldList {
	return append(slices.Clone(f), p(key, v))
}

// without returns a copy without the field.
func (f fieldList) without(key string) fieldList {
	return slices.DeleteFunc(slices.Clone(f), func(kv pair) bool { return bytes.Equal(kv.k, text(key)) })
}

// set returns a copy with the field's value replaced.
func (f fieldList) set(key string, v item) fieldList {
	out := slices.Clone(f)
	for i := range out {
		if bytes.Equal(out[i].k, text(key)) {
			out[i].v = v
		}
	}
	return out
}

// The fields of a valid request with one key and one message, in
// canonical order.
var (
	messageFields = fieldList{p("id", text("m")), p("stream", text("in")), p("payload", bstr([]byte("x"))),
		p("event_ts", uint_(1)), p("system_ts", uint_(2)), p("alignment_ts", uint_(3))}
	keyFields = fieldList{p("key", text("k")), p("messages", arr(mapOf(messageFields...)))}
	fields    = fieldList{p("abi", uint_(1)), p("keys", arr(mapOf(keyFields...))), p("kind", text("transform")),
		p("epoch", uint_(1)), p("partition", uint_(0)), p("watermarks", mapOf(p("event", uint_(0)), p("system", uint_(0)))),
		p("computation", text("c"))}
)

// top encodes a request with the given top-level fields.
func top(f fieldList) item { return mapOf(f...) }

// key encodes a valid request whose one key has the given fields.
func key(kf fieldList) item { return top(fields.set("keys", arr(mapOf(kf...)))) }

// message encodes a valid request whose one message has the given fields.
func message(mf fieldList) item { return key(keyFields.set("messages", arr(mapOf(mf...)))) }

func validRequest() item { return top(fields) }
