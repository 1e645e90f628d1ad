package abi

import (
	"math"
	"unsafe"
)

// The envelope decoder below is specialised to the envelope types: it reads
// exactly the schema of schema.go and nothing else, without reflection. It
// runs only on data that check has accepted, so it trusts the structure
// (every head is well formed, every key is a field of its map, every length
// is backed by the data) and has no error path: the checker is the single
// place that decides what is accepted and names the field at fault.
//
// It produces exactly the values fxamacker/cbor produces with the reference
// options (reference_test.go holds them; the fuzz targets compare the two):
// an absent field is its zero value, a present array or byte string is
// non-nil even when empty, parameter values are int64, float64, string,
// []byte, bool, nil, []any and map[string]any.
//
// Sharing: the decoder copies the data once and every string and byte
// slice of the result is a view of that copy, so the result shares no
// memory with the caller's data while costing one allocation for all of its
// strings and bytes. Byte slices are capped at their own length, so that
// appending to one reallocates instead of overwriting its neighbour; the
// strings are never written through (no byte slice overlaps a string).
type decoder struct {
	data []byte
	off  int
	// Small values that the result points at come from slabs, so that a
	// response of n emits does not cost n allocations for their parents.
	u32 []uint32
	i64 []int64
}

// slabSize is the number of elements a slab holds when it is refilled:
// large enough to amortise the allocation, small enough that a result
// with few of them keeps little dead memory alive.
const slabSize = 512

func newDecoder(b []byte) *decoder {
	own := make([]byte, len(b))
	copy(own, b)
	return &decoder{data: own}
}

// head reads one item head that the checker has validated and returns its
// major type and argument (value, length or count, simple value or raw
// float bits).
func (d *decoder) head() (major byte, arg uint64) {
	b := d.data[d.off]
	major, info := b>>5, b&0x1f
	d.off++
	switch {
	case info < 24:
		return major, uint64(info)
	case info == 24:
		arg = uint64(d.data[d.off])
		d.off++
	case info == 25:
		arg = uint64(d.data[d.off])<<8 | uint64(d.data[d.off+1])
		d.off += 2
	case info == 26:
		p := d.data[d.off : d.off+4]
		arg = uint64(p[0])<<24 | uint64(p[1])<<16 | uint64(p[2])<<8 | uint64(p[3])
		d.off += 4
	default: // 27: the checker lets nothing else through
		p := d.data[d.off : d.off+8]
		arg = uint64(p[0])<<56 | uint64(p[1])<<48 | uint64(p[2])<<40 | uint64(p[3])<<32 |
			uint64(p[4])<<24 | uint64(p[5])<<16 | uint64(p[6])<<8 | uint64(p[7])
		d.off += 8
	}
	return major, arg
}

// raw returns the next n content bytes, capped at their length.
func (d *decoder) raw(n uint64) []byte {
	s := d.data[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return s
}

// key returns the next map key's bytes; a switch on string(key) compares
// without allocating.
func (d *decoder) key() []byte {
	_, n := d.head()
	return d.raw(n)
}

func (d *decoder) text() string {
	_, n := d.head()
	if n == 0 {
		return ""
	}
	s := d.raw(n)
	return unsafe.String(&s[0], len(s))
}

func (d *decoder) bytes() []byte {
	_, n := d.head()
	return d.raw(n)
}

func (d *decoder) uint() uint64 {
	_, v := d.head()
	return v
}

func (d *decoder) int() int64 {
	major, v := d.head()
	if major == 1 {
		return -1 - int64(v)
	}
	return int64(v)
}

func (d *decoder) count() int {
	_, n := d.head()
	return int(n)
}

func (d *decoder) int64Ptr() *int64 {
	if len(d.i64) == cap(d.i64) {
		d.i64 = make([]int64, 0, slabSize)
	}
	d.i64 = append(d.i64, d.int())
	return &d.i64[len(d.i64)-1]
}

func (d *decoder) uint32s() []uint32 {
	n := d.count()
	if cap(d.u32)-len(d.u32) < n {
		d.u32 = make([]uint32, 0, max(n, slabSize))
	}
	start := len(d.u32)
	for range n {
		d.u32 = append(d.u32, uint32(d.uint()))
	}
	return d.u32[start:len(d.u32):len(d.u32)]
}

func (d *decoder) int64s() []int64 {
	s := make([]int64, d.count())
	for i := range s {
		s[i] = d.int()
	}
	return s
}

func (d *decoder) texts() []string {
	s := make([]string, d.count())
	for i := range s {
		s[i] = d.text()
	}
	return s
}

func (d *decoder) request(r *Request) {
	for range d.count() {
		switch string(d.key()) {
		case "abi":
			r.ABI = d.uint()
		case "computation":
			r.Computation = d.text()
		case "kind":
			r.Kind = Kind(d.text())
		case "partition":
			r.Partition = d.uint()
		case "epoch":
			r.Epoch = d.uint()
		case "watermarks":
			for range d.count() {
				switch string(d.key()) {
				case "event":
					r.Watermarks.Event = d.int()
				case "system":
					r.Watermarks.System = d.int()
				}
			}
		case "keys":
			r.Keys = make([]RequestKey, d.count())
			for i := range r.Keys {
				d.requestKey(&r.Keys[i])
			}
		}
	}
}

func (d *decoder) requestKey(k *RequestKey) {
	for range d.count() {
		switch string(d.key()) {
		case "key":
			k.Key = d.text()
		case "state":
			k.State = d.bytes()
		case "timers":
			k.Timers = make([]DueTimer, d.count())
			for i := range k.Timers {
				t := &k.Timers[i]
				for range d.count() {
					switch string(d.key()) {
					case "id":
						t.ID = d.text()
					case "trigger_ts":
						t.TriggerTimestamp = d.int()
					case "event_ts":
						t.EventTimestamp = d.int()
					case "payload":
						t.Payload = d.bytes()
					}
				}
			}
		case "messages":
			k.Messages = make([]Message, d.count())
			for i := range k.Messages {
				m := &k.Messages[i]
				for range d.count() {
					switch string(d.key()) {
					case "id":
						m.ID = d.text()
					case "stream":
						m.Stream = d.text()
					case "event_ts":
						m.EventTimestamp = d.int()
					case "system_ts":
						m.SystemTimestamp = d.int()
					case "alignment_ts":
						m.AlignmentTimestamp = d.int()
					case "payload":
						m.Payload = d.bytes()
					}
				}
			}
		}
	}
}

func (d *decoder) response(r *Response) {
	for range d.count() {
		switch string(d.key()) {
		case "keys":
			r.Keys = make([]ResponseKey, d.count())
			for i := range r.Keys {
				d.responseKey(&r.Keys[i])
			}
		case "error":
			r.Error = d.text()
		}
	}
}

func (d *decoder) responseKey(k *ResponseKey) {
	for range d.count() {
		switch string(d.key()) {
		case "key":
			k.Key = d.text()
		case "emits":
			k.Emits = make([]Emit, d.count())
			for i := range k.Emits {
				d.emit(&k.Emits[i])
			}
		case "timers_set":
			k.TimersSet = make([]Timer, d.count())
			for i := range k.TimersSet {
				t := &k.TimersSet[i]
				for range d.count() {
					switch string(d.key()) {
					case "trigger_ts":
						t.TriggerTimestamp = d.int()
					case "event_ts":
						t.EventTimestamp = d.int64Ptr()
					case "payload":
						t.Payload = d.bytes()
					}
				}
			}
		case "timers_cancel":
			k.TimersCancel = d.int64s()
		case "state_op":
			k.StateOp = StateOp(d.uint())
		case "state":
			k.State = d.bytes()
		case "error":
			k.Error = d.text()
		}
	}
}

func (d *decoder) emit(e *Emit) {
	for range d.count() {
		switch string(d.key()) {
		case "stream":
			e.Stream = d.text()
		case "payload":
			e.Payload = d.bytes()
		case "key":
			e.Key = d.text()
		case "event_ts":
			e.EventTimestamp = d.int64Ptr()
		case "parents":
			e.Parents = d.uint32s()
		}
	}
}

func (d *decoder) init(in *Init) {
	for range d.count() {
		switch string(d.key()) {
		case "abi":
			in.ABI = d.uint()
		case "computation":
			in.Computation = d.text()
		case "kind":
			in.Kind = Kind(d.text())
		case "partition":
			in.Partition = d.uint()
		case "parameters":
			in.Parameters = d.mapAny()
		case "output_streams":
			in.OutputStreams = d.texts()
		}
	}
}

func (d *decoder) initResult(r *InitResult) {
	for range d.count() {
		switch string(d.key()) {
		case "error":
			r.Error = d.text()
		}
	}
}

func (d *decoder) mapAny() map[string]any { return d.mapAnyOf(d.count()) }

func (d *decoder) mapAnyOf(n int) map[string]any {
	m := make(map[string]any, n)
	for range n {
		k := d.text()
		m[k] = d.anyValue()
	}
	return m
}

// anyValue decodes a parameter value the way fxamacker/cbor decodes into
// an empty interface with the reference options.
func (d *decoder) anyValue() any {
	info := d.data[d.off] & 0x1f
	major, arg := d.head()
	switch major {
	case 0:
		return int64(arg)
	case 1:
		return -1 - int64(arg)
	case 2:
		return d.raw(arg)
	case 3:
		if arg == 0 {
			return ""
		}
		s := d.raw(arg)
		return unsafe.String(&s[0], len(s))
	case 4:
		s := make([]any, arg)
		for i := range s {
			s[i] = d.anyValue()
		}
		return s
	case 5:
		return d.mapAnyOf(int(arg))
	}
	// major 7: the checker lets through only false, true, null and floats.
	switch info {
	case 20:
		return false
	case 21:
		return true
	case 22:
		return nil
	case 25:
		return float64(float16ToFloat32(uint16(arg)))
	case 26:
		return float64(math.Float32frombits(uint32(arg)))
	}
	return math.Float64frombits(arg)
}

// float16ToFloat32 widens an IEEE 754 half-precision value exactly (NaN
// payloads included), as x448/float16 does for fxamacker/cbor.
func float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0: // zero
		return math.Float32frombits(sign)
	}
	// Subnormal: normalise the mantissa.
	e := uint32(127 - 15 + 1)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}
