package abi

import (
	"bytes"
	"math"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// The reference codec: the envelope codec as it was before it was
// specialised, fxamacker/cbor driven by reflection over the envelope types'
// cbor tags. The specialised codec must encode, decode, accept and refuse
// exactly as this one does; the golden vector tests and the fuzz targets
// hold it to that.

// encMode is Core Deterministic Encoding with nil containers as empty ones
// and tags forbidden: the options the host encoded with.
var encMode = func() cbor.UserBufferEncMode {
	opts := cbor.CoreDetEncOptions()
	opts.NilContainers = cbor.NilContainerAsEmpty
	opts.TagsMd = cbor.TagsForbidden
	em, err := opts.UserBufferEncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

// decMode repeats the checker's rules, so that the reference decodes
// strictly on its own.
var decMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   2 * maxNesting,
		MaxArrayElements:  math.MaxInt32,
		MaxMapPairs:       math.MaxInt32,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		IntDec:            cbor.IntDecConvertSignedOrFail,
		DefaultMapType:    reflect.TypeFor[map[string]any](),
		UTF8:              cbor.UTF8RejectInvalid,
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// refEncode is the reference encoder of every envelope type.
func refEncode(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encMode.MarshalToBuffer(v, &buf); err != nil {
		return nil, &Error{Msg: "encoding: " + err.Error()}
	}
	return buf.Bytes(), nil
}

// refDecode is the reference decoder: the same checker in front of
// fxamacker/cbor.
func refDecode(b []byte, n *schemaNode, limits ResponseLimits, v any) error {
	if err := check(b, n, limits); err != nil {
		return err
	}
	if err := decMode.Unmarshal(b, v); err != nil {
		return &Error{Msg: "decoding: " + err.Error()}
	}
	return nil
}

// laxDecMode is the reference of PeekVersion.
var laxDecMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{MaxNestedLevels: 2 * maxNesting}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

func refPeekVersion(b []byte) (uint64, bool) {
	var v struct {
		ABI *uint64 `cbor:"abi"`
	}
	if laxDecMode.Unmarshal(b, &v) != nil || v.ABI == nil {
		return 0, false
	}
	return *v.ABI, true
}
