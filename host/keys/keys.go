// Package keys computes the key of a message: the canonical text of the
// values of a computation's group_by fields, read from a payload that is a
// JSON object or a CBOR map.
//
// # Key text
//
// The key is a compact JSON array of the field values in group_by order,
// e.g. ["o-17",3]; no fields give the empty key "". Values are written in
// one canonical form, so that equal values give equal keys whatever their
// spelling or encoding (JSON or CBOR):
//
//   - strings: UTF-8, with '"', '\' and control characters below U+0020
//     escaped (\b \f \n \r \t, others as \u00XX in lower case) and
//     everything else written as itself; "\u0041" and "A" give the same key.
//     Invalid UTF-8 and lone surrogates are errors, never replaced, so that
//     distinct byte strings cannot silently share a key.
//   - numbers: a number whose value is an integer of magnitude below 10^21
//     is written as that exact integer, however long (3, 3.0, 30e-1, -0 and
//     CBOR 3 or 3.0 give 3; -0 gives 0). Any other number is rounded to the
//     nearest float64; if that is an integer below 10^21 it is written as
//     that exact integer, otherwise the way ECMAScript and encoding/json
//     write floats: shortest round-trip digits, plain notation from 1e-6,
//     exponent notation below it and from 1e21 (1e+21, 1.5e-7). Two
//     non-integers that round to the same float64 therefore share a key.
//     NaN, infinities and numbers beyond the float64 range are errors.
//   - true, false and null as such (null is a value, not a missing field).
//   - arrays element by element; objects and maps with their keys sorted by
//     their UTF-8 bytes. A repeated key inside a key value is an error.
//
// CBOR byte strings, tags other than bignums (2, 3), and maps with keys that
// are not text strings have no JSON equivalent and are errors.
//
// # Fields
//
// A field name is a dot-separated path into nested objects: "customer.id"
// reads {"customer":{"id":...}}. A name that itself contains a dot cannot be
// addressed. A payload that repeats the name of a field on the path of a
// group_by field in the same object is rejected rather than resolved by
// guessing; in CBOR every map on such a path must be free of repeated keys.
package keys

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// ErrPayload is wrapped by every error about a payload (as opposed to a bad
// group_by list), so that callers can tell a bad message from a bad spec.
var ErrPayload = errors.New("payload")

// Extractor computes keys for one group_by list. It is immutable and safe
// for concurrent use; build it once per computation with [NewExtractor].
type Extractor struct {
	fields []string
	root   *node
	nodes  int
}

// node is one step of the field-path trie. A node may be both a field (its
// value is part of the key) and the parent of deeper fields.
type node struct {
	id       int    // index for per-extraction bookkeeping
	name     string // path segment
	path     string // dotted path from the root, for errors
	field    int    // index in the group_by list, or -1
	children []*node
}

func (n *node) child(name []byte) *node {
	for _, c := range n.children {
		if string(name) == c.name {
			return c
		}
	}
	return nil
}

// NewExtractor checks a group_by list and prepares it. Each field must be a
// non-empty dot-separated path without empty segments, listed once.
func NewExtractor(fields []string) (*Extractor, error) {
	e := &Extractor{fields: append([]string(nil), fields...), root: &node{field: -1}}
	e.nodes = 1
	for i, f := range fields {
		if f == "" {
			return nil, fmt.Errorf("group_by field %d is empty", i)
		}
		n := e.root
		for seg := range strings.SplitSeq(f, ".") {
			if seg == "" {
				return nil, fmt.Errorf("group_by field %q has an empty path segment", f)
			}
			c := n.childString(seg)
			if c == nil {
				path := seg
				if n != e.root {
					path = n.path + "." + seg
				}
				c = &node{id: e.nodes, name: seg, path: path, field: -1}
				e.nodes++
				n.children = append(n.children, c)
			}
			n = c
		}
		if n.field >= 0 {
			return nil, fmt.Errorf("group_by lists field %q twice", f)
		}
		n.field = i
	}
	return e, nil
}

func (n *node) childString(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Fields returns a copy of the group_by list.
func (e *Extractor) Fields() []string { return append([]string(nil), e.fields...) }

// Extract returns the key of payload for fields. It is [NewExtractor]
// followed by [Extractor.Key]; code that extracts many keys for the same
// fields should keep an Extractor.
func Extract(payload []byte, fields []string) (string, error) {
	if len(fields) == 0 {
		return "", nil
	}
	e, err := NewExtractor(fields)
	if err != nil {
		return "", err
	}
	return e.Key(payload)
}

// Key returns the canonical key of payload (see the package documentation).
// With no fields it returns "" without reading the payload. Otherwise the
// payload must be a JSON object (after optional JSON white space) or a CBOR
// map, and the whole payload must be well-formed: errors wrap [ErrPayload]
// and say which field or byte is at fault, e.g.
// `payload lacks group_by field "order_id"`.
func (e *Extractor) Key(payload []byte) (string, error) {
	return e.KeyIn(payload, nil)
}

// KeyIn is [Extractor.Key] with the key's text taken from in when in
// already holds it, so that a key seen before costs no allocation. A nil
// in allocates every key, as Key does. The key and the errors are Key's.
func (e *Extractor) KeyIn(payload []byte, in *Interner) (string, error) {
	if len(e.fields) == 0 {
		return "", nil
	}
	var buf [keyBuffer]byte
	key, err := e.AppendKey(buf[:0], payload)
	if err != nil {
		return "", err
	}
	return in.String(key), nil
}

// AppendKey appends the canonical key of payload to dst, as [Extractor.Key]
// computes it, and returns the extended buffer; on an error dst's contents
// are unspecified. With no fields it appends nothing.
func (e *Extractor) AppendKey(dst, payload []byte) ([]byte, error) {
	if len(e.fields) == 0 {
		return dst, nil
	}
	if len(payload) > 0 && payload[0]>>5 == cborMap {
		return e.appendCBORKey(dst, payload)
	}
	i := 0
	for i < len(payload) && isSpace(payload[i]) {
		i++
	}
	if i < len(payload) && payload[i] == '{' {
		return e.appendJSONKey(dst, payload)
	}
	return dst, describeBadStart(payload, i)
}

// keyBuffer is big enough for most keys, so that building one costs a
// single allocation (the final string), or none with an [Interner].
const keyBuffer = 128

func (e *Extractor) missing(f int, kinds []byte) error {
	// Report the deepest existing prefix that is not an object, if any: that
	// is what the user needs to fix.
	n := e.root
	for seg := range strings.SplitSeq(e.fields[f], ".") {
		n = n.childString(seg)
		if n.field == f {
			break
		}
		if k := kinds[n.id]; k != 0 && k != kindObject {
			return fmt.Errorf("%w: group_by field %q: %q is %s, not an object", ErrPayload, e.fields[f], n.path, kindName(k))
		}
	}
	return fmt.Errorf("%w lacks group_by field %q", ErrPayload, e.fields[f])
}

// Value kinds as recorded while walking a payload; 0 means not seen.
const (
	kindObject byte = iota + 1
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
	kindOther
)

func kindName(k byte) string {
	switch k {
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindBool:
		return "a boolean"
	case kindNull:
		return "null"
	}
	return "a value of another type"
}

const cborMap = 5

func describeBadStart(payload []byte, i int) error {
	if len(bytes.TrimLeft(payload, " \t\r\n")) == 0 {
		return fmt.Errorf("%w is empty: need a JSON object or a CBOR map", ErrPayload)
	}
	b := payload[i]
	var what string
	switch {
	case i > 0 || b == '[' || b == '"' || b == '-' || b >= '0' && b <= '9' || b == 't' || b == 'f' || b == 'n':
		what = jsonStartName(b)
	default:
		what = cborMajorNames[b>>5]
	}
	return fmt.Errorf("%w is neither a JSON object nor a CBOR map: byte %d is 0x%02x, which starts %s", ErrPayload, i, b, what)
}

func jsonStartName(b byte) string {
	switch {
	case b == '[':
		return "a JSON array"
	case b == '"':
		return "a JSON string"
	case b == '-' || b >= '0' && b <= '9':
		return "a JSON number"
	case b == 't' || b == 'f':
		return "a JSON boolean"
	case b == 'n':
		return "JSON null"
	}
	return "no JSON value"
}

var cborMajorNames = [8]string{
	"a CBOR unsigned integer", "a CBOR negative integer", "a CBOR byte string", "a CBOR text string",
	"a CBOR array", "a CBOR map", "a CBOR tag", "a CBOR simple value or float",
}
