package abi

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
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
//
// The codec is specialised to the envelope types (encode.go, decode.go):
// no reflection on the fixed parts, no dependency on a CBOR library, so a
// Go guest that imports this package stays small and fast. It is held to
// fxamacker/cbor with the options in reference_test.go, byte for byte and
// value for value, by the golden vector tests and the fuzz targets.

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

// EncodeRequest returns the canonical encoding of req. The error is
// always nil; it stays for callers written against encoders that can fail.
func EncodeRequest(req *Request) ([]byte, error) { return appendRequest(nil, req), nil }

// EncodeRequestTo appends the canonical encoding of req to buf. Reusing buf
// across batches keeps encoding free of allocations once buf has grown.
// The error is always nil.
func EncodeRequestTo(buf *bytes.Buffer, req *Request) error {
	buf.Write(appendRequest(buf.AvailableBuffer(), req))
	return nil
}

// AppendRequest appends the canonical encoding of req to b and returns the
// extended slice, as EncodeRequestTo does without a buffer's final copy.
func AppendRequest(b []byte, req *Request) []byte { return appendRequest(b, req) }

// AppendResponse appends the canonical encoding of resp to b and returns
// the extended slice: a guest that keeps its output slice across calls
// encodes without allocating or copying once the slice has grown.
func AppendResponse(b []byte, resp *Response) []byte { return appendResponse(b, resp) }

// EncodeResponse returns the canonical encoding of resp. The error is
// always nil.
func EncodeResponse(resp *Response) ([]byte, error) { return appendResponse(nil, resp), nil }

// EncodeResponseTo appends the canonical encoding of resp to buf. The
// error is always nil.
func EncodeResponseTo(buf *bytes.Buffer, resp *Response) error {
	buf.Write(appendResponse(buf.AvailableBuffer(), resp))
	return nil
}

// EncodeInit returns the canonical encoding of in. It fails with an *Error
// naming the parameter when a parameter value has no envelope form (for
// example a map with non-text keys, or a struct), so a bad pipeline spec
// is reported by the host rather than by the guest.
func EncodeInit(in *Init) ([]byte, error) {
	b, err := appendInit(nil, in)
	if err != nil {
		return nil, err
	}
	if cerr := check(b, initSchema, ResponseLimits{}); cerr != nil {
		return nil, cerr
	}
	return b, nil
}

// EncodeInitResult returns the canonical encoding of r. The error is
// always nil.
func EncodeInitResult(r *InitResult) ([]byte, error) { return appendInitResult(nil, r), nil }

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

// decode decodes b into v, one of the envelope types, by schema n. On the
// first violation the decoder gives up and the checker, walking b again,
// words the error with its field path.
func decode(b []byte, n *schemaNode, limits ResponseLimits, v any) (err error) {
	if len(b) == 0 {
		return &Error{Msg: "empty envelope"}
	}
	d := newDecoder(b, limits)
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(badEnvelope); !ok {
				panic(r)
			}
			if cerr := check(b, n, limits); cerr != nil {
				err = cerr
				return
			}
			// Only a bug makes the two disagree; the fuzz targets look for one.
			err = &Error{Msg: "decoding: the specialised decoder refused an envelope the checker accepts"}
		}
	}()
	switch v := v.(type) {
	case *Request:
		d.request(v)
	case *Response:
		d.response(v)
	case *Init:
		d.init(v)
	case *InitResult:
		d.initResult(v)
	}
	if d.off != len(d.data) {
		d.fail()
	}
	return nil
}

// PeekVersion reads the abi field of an envelope that may not decode as
// this version's Request or Init, so that a guest can answer a newer
// envelope with StatusUnsupportedVersion rather than StatusBadRequest.
// It is lax where the decoders are strict, the way fxamacker/cbor's
// default decoding into a struct is (the fuzz target holds it to that):
// any well-formed CBOR map will do (indefinite lengths, tags, unknown and
// integer keys; UTF-8 is checked in keys only), and the field name matches
// without regard to case. ok is false
// when b is not exactly one well-formed map with an unsigned abi field.
func PeekVersion(b []byte) (version uint64, ok bool) {
	p := peeker{data: b}
	major, info, arg, _, good := p.item()
	if !good || major != 5 {
		return 0, false
	}
	found := false
	for i := uint64(0); info == 31 || i < arg; i++ {
		if info == 31 && p.off < len(b) && b[p.off] == 0xff {
			p.off++
			break
		}
		kmajor, kinfo, karg, good := p.head()
		if !good {
			return 0, false
		}
		isABI := false
		switch {
		case kmajor == 3:
			key, good := p.text(kinfo, karg)
			if !good || !utf8.ValidString(key) {
				return 0, false
			}
			// The first abi key counts; the library skips the others.
			isABI = !found && strings.EqualFold(key, "abi")
			found = found || isABI
		case (kmajor == 0 || kmajor == 1) && karg <= math.MaxInt64:
			// An integer key names no field and is skipped.
		default:
			return 0, false
		}
		var vmajor, vinfo byte
		var varg, tag uint64
		if isABI {
			vmajor, vinfo, varg, tag, good = p.item()
		} else { // skipped, tags unchecked
			vmajor, vinfo, varg, good = p.head()
		}
		start := p.off
		if !good || !p.rest(vmajor, vinfo, varg, 1) {
			return 0, false
		}
		if isABI {
			switch {
			case tag == 2: // a bignum reads as its value when it fits
				if vinfo == 31 {
					return 0, false
				}
				digits := bytes.TrimLeft(b[start:p.off], "\x00")
				if len(digits) > 8 {
					return 0, false
				}
				version, ok = 0, true
				for _, c := range digits {
					version = version<<8 | uint64(c)
				}
			case tag == 3:
				return 0, false
			case vmajor == 0:
				version, ok = varg, true
			case vmajor == 7 && (vinfo == 22 || vinfo == 23): // null, undefined
				version, ok = 0, false
			case vmajor == 7 && (vinfo < 20 || vinfo == 24): // a simple value reads as its number
				version, ok = varg, true
			default:
				return 0, false
			}
		}
	}
	if p.off != len(b) {
		return 0, false
	}
	return version, ok
}

// peeker walks any well-formed CBOR for PeekVersion.
type peeker struct {
	data []byte
	off  int
}

func (p *peeker) head() (major, info byte, arg uint64, ok bool) {
	if p.off >= len(p.data) {
		return 0, 0, 0, false
	}
	b := p.data[p.off]
	p.off++
	major, info = b>>5, b&0x1f
	switch {
	case info < 24:
		return major, info, uint64(info), true
	case info <= 27:
		n := 1 << (info - 24)
		if len(p.data)-p.off < n {
			return 0, 0, 0, false
		}
		for _, c := range p.data[p.off : p.off+n] {
			arg = arg<<8 | uint64(c)
		}
		p.off += n
		if major == 7 && info == 24 && arg < 32 {
			return 0, 0, 0, false // a simple value with a needless extra byte
		}
		return major, info, arg, true
	case info == 31 && major >= 2 && major <= 5:
		return major, info, 0, true
	}
	return 0, 0, 0, false
}

// text reads the content of a text string whose head has been read.
func (p *peeker) text(info byte, n uint64) (string, bool) {
	if info == 31 {
		var s []byte
		for {
			if p.off >= len(p.data) {
				return "", false
			}
			if p.data[p.off] == 0xff {
				p.off++
				return string(s), true
			}
			major, cinfo, arg, ok := p.head()
			if !ok || major != 3 || cinfo == 31 || uint64(len(p.data)-p.off) < arg {
				return "", false
			}
			s = append(s, p.data[p.off:p.off+int(arg)]...)
			p.off += int(arg)
		}
	}
	if uint64(len(p.data)-p.off) < n {
		return "", false
	}
	s := p.data[p.off : p.off+int(n)]
	p.off += int(n)
	return string(s), true
}

// rest steps over the content of an item whose head has been read.
func (p *peeker) rest(major, info byte, arg uint64, depth int) bool {
	if depth > 2*maxNesting {
		return false
	}
	switch major {
	case 2:
		if info == 31 {
			for {
				if p.off >= len(p.data) {
					return false
				}
				if p.data[p.off] == 0xff {
					p.off++
					return true
				}
				cmajor, cinfo, n, ok := p.head()
				if !ok || cmajor != 2 || cinfo == 31 || uint64(len(p.data)-p.off) < n {
					return false
				}
				p.off += int(n)
			}
		}
		if uint64(len(p.data)-p.off) < arg {
			return false
		}
		p.off += int(arg)
	case 3:
		_, ok := p.text(info, arg)
		return ok
	case 4, 5:
		items := arg
		if major == 5 {
			items *= 2
			if arg > math.MaxUint64/2 {
				return false
			}
		}
		for i := uint64(0); info == 31 || i < items; i++ {
			if info == 31 && p.off < len(p.data) && p.data[p.off] == 0xff {
				p.off++
				return major == 4 || i%2 == 0
			}
			m, in, a, ok := p.head()
			if !ok || !p.rest(m, in, a, depth+1) {
				return false
			}
		}
	case 6:
		m, in, a, ok := p.head()
		return ok && p.rest(m, in, a, depth+1) // skipped content is not checked against its tag
	}
	return true
}

// item reads the head of the next item, stepping over its tags; tag is the
// innermost tag's number, or math.MaxUint64 when there is none.
func (p *peeker) item() (major, info byte, arg, tag uint64, ok bool) {
	tag = math.MaxUint64
	major, info, arg, ok = p.head()
	for ok && major == 6 {
		tag = arg
		major, info, arg, ok = p.head()
		ok = ok && tagFits(tag, major, info)
	}
	return major, info, arg, tag, ok
}

// tagFits reports whether an item of this major type may be the content of
// the tag: the library checks the content of the tags it knows (RFC 8949
// section 3.4: date/time text, epoch time numbers, bignum byte strings).
func tagFits(tag uint64, major, info byte) bool {
	switch tag {
	case 0:
		return major == 3
	case 1:
		return major == 0 || major == 1 || (major == 7 && info >= 25 && info <= 27)
	case 2, 3:
		return major == 2
	}
	return true
}
