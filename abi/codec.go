package abi

import (
	"bytes"
	"math"
	"reflect"
	"strconv"

	"github.com/fxamacker/cbor/v2"
)

// Encoding is RFC 8949 Core Deterministic Encoding (section 4.2.1): shortest
// heads, definite lengths, map keys sorted by their encoded bytes. It is the
// current standard's canonical form, so an SDK in any language can produce
// byte-identical envelopes with an off-the-shelf canonical CBOR encoder and
// be checked against the golden vectors. For the envelope's keys (text
// shorter than 24 bytes) that order is shortest key first, then bytewise,
// which is also the CTAP2 order, so either kind of canonical encoder
// matches. Core Deterministic additionally fixes the encoding of floats
// (shortest exact width), which only Init parameters carry. Nil slices and
// maps encode as empty ones rather than null because null is never valid
// in an envelope.
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

// decMode decodes an envelope that check has accepted. Its options repeat
// the checker's rules so that decoding stays strict even if the two ever
// disagree; the checker runs first only to name the field at fault.
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

// ResponseLimits bounds what a guest's response may contain. The checker
// enforces them while it walks the response, before anything is decoded,
// so an oversize response costs no allocation. A zero field takes its
// value from DefaultResponseLimits.
type ResponseLimits struct {
	// MaxBytes bounds the encoded response.
	MaxBytes int
	// MaxEmits bounds the number of emits over all keys.
	MaxEmits int
	// MaxTimers bounds timers_set plus timers_cancel entries over all keys.
	MaxTimers int
	// MaxStateBytes bounds one key's new state.
	MaxStateBytes int
}

// DefaultResponseLimits returns the limits a zero ResponseLimits field
// means: 64 MiB of response, 1,048,576 emits, 65,536 timers set or
// cancelled, 16 MiB of state per key.
func DefaultResponseLimits() ResponseLimits {
	return ResponseLimits{
		MaxBytes:      64 << 20,
		MaxEmits:      1 << 20,
		MaxTimers:     1 << 16,
		MaxStateBytes: 16 << 20,
	}
}

func (l ResponseLimits) withDefaults() ResponseLimits {
	d := DefaultResponseLimits()
	if l.MaxBytes > 0 {
		d.MaxBytes = l.MaxBytes
	}
	if l.MaxEmits > 0 {
		d.MaxEmits = l.MaxEmits
	}
	if l.MaxTimers > 0 {
		d.MaxTimers = l.MaxTimers
	}
	if l.MaxStateBytes > 0 {
		d.MaxStateBytes = l.MaxStateBytes
	}
	return d
}

// EncodeRequest returns the canonical encoding of req.
func EncodeRequest(req *Request) ([]byte, error) { return marshal(req) }

// EncodeRequestTo appends the canonical encoding of req to buf. Reusing buf
// across batches keeps encoding free of allocations once buf has grown.
func EncodeRequestTo(buf *bytes.Buffer, req *Request) error { return encMode.MarshalToBuffer(req, buf) }

// EncodeResponse returns the canonical encoding of resp.
func EncodeResponse(resp *Response) ([]byte, error) { return marshal(resp) }

// EncodeResponseTo appends the canonical encoding of resp to buf.
func EncodeResponseTo(buf *bytes.Buffer, resp *Response) error {
	return encMode.MarshalToBuffer(resp, buf)
}

// EncodeInit returns the canonical encoding of in. It fails with an *Error
// naming the parameter when a parameter value has no envelope form (for
// example a map with non-text keys), so a bad pipeline spec is reported
// by the host rather than by the guest.
func EncodeInit(in *Init) ([]byte, error) {
	b, err := marshal(in)
	if err != nil {
		return nil, err
	}
	if cerr := check(b, initSchema, ResponseLimits{}); cerr != nil {
		return nil, cerr
	}
	return b, nil
}

// EncodeInitResult returns the canonical encoding of r.
func EncodeInitResult(r *InitResult) ([]byte, error) { return marshal(r) }

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encMode.MarshalToBuffer(v, &buf); err != nil {
		return nil, &Error{Msg: "encoding: " + err.Error()}
	}
	return buf.Bytes(), nil
}

// DecodeRequest strictly decodes a request: see DecodeResponse for what
// strict means. It checks form, not meaning; Request.Validate checks
// meaning.
func DecodeRequest(b []byte) (*Request, error) {
	var req Request
	if err := decode(b, requestSchema, ResponseLimits{}, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// DecodeResponse strictly decodes a guest's response within limits. It
// rejects, with an *Error naming the field path: an unknown field, a
// missing required field, a value of the wrong type (null included), a
// duplicate map key, an integer out of its field's range, invalid UTF-8,
// tags, indefinite lengths, nesting deeper than the schema, trailing
// bytes, and anything beyond limits. It checks form, not meaning;
// ValidateResponse checks meaning. The result shares no memory with b, so
// b may be a view of the guest's memory that the next call overwrites.
func DecodeResponse(b []byte, limits ResponseLimits) (*Response, error) {
	limits = limits.withDefaults()
	if len(b) > limits.MaxBytes {
		return nil, &Error{Msg: "response of " + strconv.Itoa(len(b)) + " bytes exceeds the limit of " + strconv.Itoa(limits.MaxBytes)}
	}
	var resp Response
	if err := decode(b, responseSchema, limits, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DecodeInit strictly decodes an init envelope.
func DecodeInit(b []byte) (*Init, error) {
	var in Init
	if err := decode(b, initSchema, ResponseLimits{}, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// DecodeInitResult strictly decodes a guest's init result.
func DecodeInitResult(b []byte) (*InitResult, error) {
	var r InitResult
	if err := decode(b, initResultSchema, ResponseLimits{}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func decode(b []byte, n *schemaNode, limits ResponseLimits, v any) error {
	if err := check(b, n, limits); err != nil {
		return err
	}
	if err := decMode.Unmarshal(b, v); err != nil {
		// The checker accepted what the library refused: report the
		// library's reason rather than lose it.
		return &Error{Msg: "decoding: " + err.Error()}
	}
	return nil
}

// laxDecMode reads single fields out of envelopes the strict decoders
// refuse, ignoring everything else.
var laxDecMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{MaxNestedLevels: 2 * maxNesting}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// PeekVersion reads the abi field of an envelope that may not decode as
// this version's Request or Init, so that a guest can answer a newer
// envelope with StatusUnsupportedVersion rather than StatusBadRequest.
// ok is false when b is not a map with an unsigned abi field.
func PeekVersion(b []byte) (version uint64, ok bool) {
	var v struct {
		ABI *uint64 `cbor:"abi"`
	}
	if laxDecMode.Unmarshal(b, &v) != nil || v.ABI == nil {
		return 0, false
	}
	return *v.ABI, true
}
