package keys

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// cborDecoding reads payloads as strictly as the JSON side: no repeated map
// keys, text that is valid UTF-8, and the same nesting limit as JSON.
var cborDecoding = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:  maxDepth,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
		IndefLength:      cbor.IndefLengthAllowed,
		UTF8:             cbor.UTF8RejectInvalid,
		DefaultMapType:   reflect.TypeOf(map[string]any(nil)),
		IntDec:           cbor.IntDecConvertNone,
		BigIntDec:        cbor.BigIntDecodePointer,
	}.DecMode()
	if err != nil {
		panic(err) // the options above are constant
	}
	return dm
}()

func (e *Extractor) appendCBORKey(key, payload []byte) ([]byte, error) {
	values := make([]cbor.RawMessage, len(e.fields))
	kinds := make([]byte, e.nodes)
	if err := e.cborWalk(e.root, payload, values, kinds); err != nil {
		return key, err
	}
	key = append(key, '[')
	for f, raw := range values {
		if raw == nil {
			return key, e.missing(f, kinds)
		}
		if f > 0 {
			key = append(key, ',')
		}
		var v any
		if err := cborDecoding.Unmarshal(raw, &v); err != nil {
			return key, fmt.Errorf("%w: group_by field %q: %v", ErrPayload, e.fields[f], err)
		}
		var err error
		if key, err = appendCanonicalValue(key, v); err != nil {
			return key, fmt.Errorf("%w: group_by field %q: %v", ErrPayload, e.fields[f], err)
		}
	}
	return append(key, ']'), nil
}

// cborWalk decodes the map in data one level deep and descends into the
// members that lead to group_by fields.
func (e *Extractor) cborWalk(n *node, data []byte, values []cbor.RawMessage, kinds []byte) error {
	var m map[string]cbor.RawMessage
	if err := cborDecoding.Unmarshal(data, &m); err != nil {
		what := "payload"
		if n != e.root {
			what = fmt.Sprintf("field %q", n.path)
		}
		return fmt.Errorf("%w: %s is not a well-formed CBOR map with text keys: %v", ErrPayload, what, err)
	}
	for _, c := range n.children {
		raw, ok := m[c.name]
		if !ok {
			continue
		}
		kinds[c.id] = cborKind(raw)
		if c.field >= 0 {
			values[c.field] = raw
		}
		if len(c.children) > 0 && kinds[c.id] == kindObject {
			if err := e.cborWalk(c, raw, values, kinds); err != nil {
				return err
			}
		}
	}
	return nil
}

func cborKind(raw []byte) byte {
	switch raw[0] >> 5 {
	case 0, 1:
		return kindNumber
	case 3:
		return kindString
	case 4:
		return kindArray
	case cborMap:
		return kindObject
	case 7:
		switch raw[0] {
		case 0xf4, 0xf5:
			return kindBool
		case 0xf6, 0xf7:
			return kindNull
		case 0xf9, 0xfa, 0xfb:
			return kindNumber
		}
	}
	return kindOther
}

// appendCanonicalValue appends the canonical text of a value decoded from
// CBOR; it agrees with appendCanonicalJSON on every value both can hold.
func appendCanonicalValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendCanonicalString(dst, v), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case *big.Int:
		return appendCanonicalBigInt(dst, v)
	case big.Int:
		return appendCanonicalBigInt(dst, &v)
	case float64:
		return appendCanonicalFloat(dst, v)
	case float32:
		return appendCanonicalFloat(dst, float64(v))
	case []any:
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendCanonicalValue(dst, x); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.SortFunc(names, strings.Compare)
		dst = append(dst, '{')
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonicalString(dst, name)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonicalValue(dst, v[name]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []byte:
		return nil, fmt.Errorf("a CBOR byte string has no JSON equivalent")
	case cbor.Tag, cbor.RawTag:
		return nil, fmt.Errorf("CBOR tags other than bignums are not supported")
	}
	return nil, fmt.Errorf("CBOR value of Go type %T has no JSON equivalent", v)
}
