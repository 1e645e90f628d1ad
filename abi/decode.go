package abi

import (
	"math"
	"unicode/utf8"
	"unsafe"
)

// The envelope decoder below is specialised to the envelope types: it reads
// exactly the schema of schema.go and nothing else, without reflection, in
// one pass. It enforces every rule of the checker (check, schema.go) but
// names no field: at the first violation it gives up (errBadEnvelope), and
// decode runs the checker over the data for the precise error with its
// field path. The checker thus stays the single place that words errors,
// and a valid envelope pays for one walk, not two. The fuzz targets hold
// the decoder to the checker in front of fxamacker/cbor: same decision,
// same error, same value.
//
// It produces exactly the values fxamacker/cbor produces with the reference
// options (reference_test.go): an absent field is its zero value, a present
// array or byte string is non-nil even when empty, parameter values are
// int64, float64, string, []byte, bool, nil, []any and map[string]any.
//
// Sharing: every string and byte slice of the result is copied into chunks
// of the decoder's arena, so the result shares no memory with the caller's
// data while costing one allocation per 16 KiB of its strings and bytes.
// Byte slices are capped at their own length, so that appending to one
// reallocates instead of overwriting its neighbour; the strings are never
// written through (no byte slice overlaps a string).
type decoder struct {
	data   []byte // the caller's: nothing of the result points into it
	arena  []byte // where the result's strings and bytes are copied
	off    int
	limits ResponseLimits
	emits  int
	timers int
	// Small values that the result points at come from slabs, so that a
	// response of n emits does not cost n allocations for their parents.
	u32      []uint32
	i64      []int64
	emitSlab []Emit
}

// badEnvelope is what the decoder panics with at a violation; decode
// recovers it and asks the checker why.
type badEnvelope struct{}

var errBadEnvelope = badEnvelope{}

// slabSize is the number of elements a slab holds when it is refilled:
// large enough to amortise the allocation, small enough that a result
// with few of them keeps little dead memory alive.
const slabSize = 512

func newDecoder(b []byte, limits ResponseLimits) *decoder {
	return &decoder{data: b, limits: limits}
}

// noBytes is every empty byte string of a result; its capacity of 0 makes
// an append to it allocate.
var noBytes = []byte{}

// arenaChunk is the size of the chunks the kept bytes are copied into:
// below the runtime's large-object size, so that a chunk comes from the
// allocator's per-thread cache rather than from the heap under its lock.
const arenaChunk = 16 << 10

// keep returns a copy of s from the decoder's arena, capped at its length.
func (d *decoder) keep(s []byte) []byte {
	if len(s) == 0 {
		return noBytes // present and empty: non-nil, as the reference decodes it
	}
	if cap(d.arena)-len(d.arena) < len(s) {
		d.arena = make([]byte, 0, max(len(s), arenaChunk))
	}
	start := len(d.arena)
	d.arena = append(d.arena, s...)
	return d.arena[start:len(d.arena):len(d.arena)]
}

func (d *decoder) fail() { panic(errBadEnvelope) }

// head reads one item head and returns its major type, additional
// information and argument (value, length or count, simple value or raw
// float bits). It refuses what the checker's head refuses: truncation,
// reserved additional information, indefinite lengths and breaks, and
// two-byte simple values below 32.
func (d *decoder) head() (major, info byte, arg uint64) {
	if d.off >= len(d.data) {
		d.fail()
	}
	b := d.data[d.off]
	major, info = b>>5, b&0x1f
	d.off++
	if info < 24 {
		return major, info, uint64(info)
	}
	if info > 27 {
		d.fail()
	}
	n := 1 << (info - 24)
	if len(d.data)-d.off < n {
		d.fail()
	}
	p := d.data[d.off : d.off+n]
	switch n {
	case 1:
		arg = uint64(p[0])
		if major == 7 && arg < 32 {
			d.fail()
		}
	case 2:
		arg = uint64(p[0])<<8 | uint64(p[1])
	case 4:
		arg = uint64(p[0])<<24 | uint64(p[1])<<16 | uint64(p[2])<<8 | uint64(p[3])
	default:
		arg = uint64(p[0])<<56 | uint64(p[1])<<48 | uint64(p[2])<<40 | uint64(p[3])<<32 |
			uint64(p[4])<<24 | uint64(p[5])<<16 | uint64(p[6])<<8 | uint64(p[7])
	}
	d.off += n
	return major, info, arg
}

// expect reads a head of the given major type and returns its argument.
// Its fast path, a head without following bytes, is small enough to be
// inlined: most heads of an envelope are of that kind.
func (d *decoder) expect(major byte) uint64 {
	if d.off < len(d.data) {
		if v := d.data[d.off] ^ major<<5; v < 24 {
			d.off++
			return uint64(v)
		}
	}
	return d.expectSlow(major)
}

func (d *decoder) expectSlow(major byte) uint64 {
	m, _, arg := d.head()
	if m != major {
		d.fail()
	}
	return arg
}

// raw returns the next n content bytes, capped at their length.
func (d *decoder) raw(n uint64) []byte {
	if n > uint64(len(d.data)-d.off) {
		d.fail()
	}
	s := d.data[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return s
}

// key returns the next map key's bytes, which must be a text string; a
// switch on string(key) compares without allocating. A key that is a
// field name is valid UTF-8; any other key fails the map.
func (d *decoder) key() []byte { return d.raw(d.expect(3)) }

func (d *decoder) textOf(n uint64) string {
	s := d.raw(n)
	if !utf8.Valid(s) {
		d.fail()
	}
	if n == 0 {
		return ""
	}
	s = d.keep(s)
	return unsafe.String(&s[0], len(s))
}

func (d *decoder) text() string { return d.textOf(d.expect(3)) }

func (d *decoder) bytes() []byte { return d.keep(d.raw(d.expect(2))) }

func (d *decoder) uint(max uint64) uint64 {
	v := d.expect(0)
	if v > max {
		d.fail()
	}
	return v
}

func (d *decoder) int() int64 {
	major, _, v := d.head()
	if v > math.MaxInt64 {
		d.fail()
	}
	switch major {
	case 0:
		return int64(v)
	case 1:
		return -1 - int64(v)
	}
	d.fail()
	return 0
}

// enter is the checker's guard on a container of count items of itemsPer
// data items each at nesting depth.
func (d *decoder) enter(count, itemsPer uint64, depth int) int {
	if depth >= maxNesting || count > uint64(len(d.data)-d.off)/itemsPer {
		d.fail()
	}
	return int(count)
}

func (d *decoder) array(depth int) int { return d.enter(d.expect(4), 1, depth) }

func (d *decoder) mapOf(depth int) int { return d.enter(d.expect(5), 2, depth) }

// seen records field i of a map and refuses it the second time.
func (d *decoder) seen(mask *uint64, i uint) {
	if *mask&(1<<i) != 0 {
		d.fail()
	}
	*mask |= 1 << i
}

func (d *decoder) require(mask, required uint64) {
	if mask&required != required {
		d.fail()
	}
}

func (d *decoder) int64Ptr() *int64 {
	if len(d.i64) == cap(d.i64) {
		d.i64 = make([]int64, 0, slabSize)
	}
	d.i64 = append(d.i64, d.int())
	return &d.i64[len(d.i64)-1]
}

// slabOf returns n zero values from *slab, capped at n, starting a new
// slab of about arenaChunk bytes when it has no room: a response's keys
// share a few allocations instead of making one each.
func slabOf[T any](slab *[]T, n int) []T {
	if n == 0 {
		return make([]T, 0) // present and empty: non-nil, as the reference decodes it
	}
	if cap(*slab)-len(*slab) < n {
		var zero T
		*slab = make([]T, 0, max(n, arenaChunk/int(unsafe.Sizeof(zero))))
	}
	start := len(*slab)
	*slab = (*slab)[:start+n]
	return (*slab)[start : start+n : start+n]
}

// parents decodes Emit.Parents: a non-empty array of uint32.
func (d *decoder) parents(depth int) []uint32 {
	n := d.array(depth)
	if n == 0 {
		d.fail()
	}
	if cap(d.u32)-len(d.u32) < n {
		d.u32 = make([]uint32, 0, max(n, slabSize))
	}
	start := len(d.u32)
	for range n {
		d.u32 = append(d.u32, uint32(d.uint(math.MaxUint32)))
	}
	return d.u32[start:len(d.u32):len(d.u32)]
}

func (d *decoder) int64s(depth int) []int64 {
	s := make([]int64, d.array(depth))
	for i := range s {
		s[i] = d.int()
	}
	return s
}

func (d *decoder) texts(depth int) []string {
	s := make([]string, d.array(depth))
	for i := range s {
		s[i] = d.text()
	}
	return s
}

// The functions below decode one envelope type each. The bit of a field in
// a seen mask is its index in the type's declaration, as in the schema.

func (d *decoder) request(r *Request) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "abi":
			d.seen(&seen, 0)
			r.ABI = d.uint(math.MaxUint64)
		case "computation":
			d.seen(&seen, 1)
			r.Computation = d.text()
		case "kind":
			d.seen(&seen, 2)
			r.Kind = Kind(d.text())
		case "partition":
			d.seen(&seen, 3)
			r.Partition = d.uint(math.MaxUint64)
		case "epoch":
			d.seen(&seen, 4)
			r.Epoch = d.uint(math.MaxUint64)
		case "watermarks":
			d.seen(&seen, 5)
			var wm uint64
			for range d.mapOf(0) {
				switch string(d.key()) {
				case "event":
					d.seen(&wm, 0)
					r.Watermarks.Event = d.int()
				case "system":
					d.seen(&wm, 1)
					r.Watermarks.System = d.int()
				default:
					d.fail()
				}
			}
			d.require(wm, 0b11)
		case "keys":
			d.seen(&seen, 6)
			r.Keys = make([]RequestKey, d.array(0))
			for i := range r.Keys {
				d.requestKey(&r.Keys[i])
			}
		default:
			d.fail()
		}
	}
	d.require(seen, 0b111_1111)
}

func (d *decoder) requestKey(k *RequestKey) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "key":
			d.seen(&seen, 0)
			k.Key = d.text()
		case "state":
			d.seen(&seen, 1)
			k.State = d.bytes()
		case "timers":
			d.seen(&seen, 2)
			k.Timers = make([]DueTimer, d.array(0))
			for i := range k.Timers {
				d.dueTimer(&k.Timers[i])
			}
		case "messages":
			d.seen(&seen, 3)
			k.Messages = make([]Message, d.array(0))
			for i := range k.Messages {
				if !d.fastMessage(&k.Messages[i]) {
					d.message(&k.Messages[i])
				}
			}
		default:
			d.fail()
		}
	}
	d.require(seen, 0b1)
}

func (d *decoder) dueTimer(t *DueTimer) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "id":
			d.seen(&seen, 0)
			t.ID = d.text()
		case "trigger_ts":
			d.seen(&seen, 1)
			t.TriggerTimestamp = d.int()
		case "event_ts":
			d.seen(&seen, 2)
			t.EventTimestamp = d.int()
		case "payload":
			d.seen(&seen, 3)
			t.Payload = d.bytes()
		default:
			d.fail()
		}
	}
	d.require(seen, 0b111)
}

// fastMessage decodes a message in the form the encoder writes (canonical
// key order, text and byte strings shorter than 64 KiB, ASCII text) in one
// function, without the calls of the general path: most of a request is
// messages, and in WebAssembly a call costs more than the work of a field.
// On anything else it returns false with nothing consumed, and message
// decodes the message by the general path, which decides and refuses.
func (d *decoder) fastMessage(m *Message) bool {
	data, off := d.data, d.off
	if len(data)-off < 1+3 || data[off] != 0xa6 {
		return false
	}
	off++
	var id, stream, payload []byte
	var ts [3]int64
	for field := range 6 {
		key := messageKeys[field]
		if len(data)-off < len(key) || string(data[off:off+len(key)]) != key {
			return false
		}
		off += len(key)
		if off >= len(data) {
			return false
		}
		b := data[off]
		if field >= 3 { // the timestamps: an int of any width
			major, info := b>>5, b&0x1f
			off++
			var v uint64
			switch {
			case info < 24:
				v = uint64(info)
			case info == 27 && len(data)-off >= 8:
				p := data[off : off+8]
				v = uint64(p[0])<<56 | uint64(p[1])<<48 | uint64(p[2])<<40 | uint64(p[3])<<32 |
					uint64(p[4])<<24 | uint64(p[5])<<16 | uint64(p[6])<<8 | uint64(p[7])
				off += 8
			default:
				return false
			}
			if v > math.MaxInt64 || major > 1 {
				return false
			}
			ts[field-3] = int64(v) ^ -int64(major) // -1-v for a negative int
			continue
		}
		want := byte(0x60) // id and stream: text
		if field == 2 {
			want = 0x40 // payload: bytes
		}
		var n int
		switch {
		case b-want < 24:
			n, off = int(b-want), off+1
		case b == want|24 && len(data)-off >= 2:
			n, off = int(data[off+1]), off+2
		case b == want|25 && len(data)-off >= 3:
			n, off = int(data[off+1])<<8|int(data[off+2]), off+3
		default:
			return false
		}
		if len(data)-off < n {
			return false
		}
		v := data[off : off+n]
		off += n
		switch field {
		case 0, 1:
			for _, c := range v {
				if c >= utf8.RuneSelf {
					return false
				}
			}
			if field == 0 {
				id = v
			} else {
				stream = v
			}
		case 2:
			payload = v
		}
	}
	d.off = off
	m.ID, m.Stream, m.Payload = d.keepText(id), d.keepText(stream), d.keep(payload)
	m.EventTimestamp, m.SystemTimestamp, m.AlignmentTimestamp = ts[0], ts[1], ts[2]
	return true
}

// messageKeys are a Message's keys with their heads, in canonical order.
var messageKeys = [6]string{"\x62id", "\x66stream", "\x67payload", "\x68event_ts", "\x69system_ts", "\x6calignment_ts"}

// keepText returns a copy of s, valid UTF-8, as a string from the arena.
func (d *decoder) keepText(s []byte) string {
	if len(s) == 0 {
		return ""
	}
	s = d.keep(s)
	return unsafe.String(&s[0], len(s))
}

func (d *decoder) message(m *Message) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "id":
			d.seen(&seen, 0)
			m.ID = d.text()
		case "stream":
			d.seen(&seen, 1)
			m.Stream = d.text()
		case "event_ts":
			d.seen(&seen, 2)
			m.EventTimestamp = d.int()
		case "system_ts":
			d.seen(&seen, 3)
			m.SystemTimestamp = d.int()
		case "alignment_ts":
			d.seen(&seen, 4)
			m.AlignmentTimestamp = d.int()
		case "payload":
			d.seen(&seen, 5)
			m.Payload = d.bytes()
		default:
			d.fail()
		}
	}
	d.require(seen, 0b11_1111)
}

func (d *decoder) response(r *Response) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "keys":
			d.seen(&seen, 0)
			r.Keys = make([]ResponseKey, d.array(0))
			for i := range r.Keys {
				d.responseKey(&r.Keys[i])
			}
		case "error":
			d.seen(&seen, 1)
			r.Error = d.text()
		default:
			d.fail()
		}
	}
	d.require(seen, 0b1)
}

func (d *decoder) responseKey(k *ResponseKey) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "key":
			d.seen(&seen, 0)
			k.Key = d.text()
		case "emits":
			d.seen(&seen, 1)
			k.Emits = slabOf(&d.emitSlab, d.array(0))
			for i := range k.Emits {
				if d.emits++; d.emits > d.limits.MaxEmits {
					d.fail()
				}
				if !d.fastEmit(&k.Emits[i]) {
					d.emit(&k.Emits[i])
				}
			}
		case "timers_set":
			d.seen(&seen, 2)
			k.TimersSet = make([]Timer, d.array(0))
			for i := range k.TimersSet {
				d.countTimer()
				d.timer(&k.TimersSet[i])
			}
		case "timers_cancel":
			d.seen(&seen, 3)
			k.TimersCancel = make([]int64, d.array(0))
			for i := range k.TimersCancel {
				d.countTimer()
				k.TimersCancel[i] = d.int()
			}
		case "state_op":
			d.seen(&seen, 4)
			k.StateOp = StateOp(d.uint(math.MaxUint8))
		case "state":
			d.seen(&seen, 5)
			n := d.expect(2)
			if n > uint64(d.limits.MaxStateBytes) {
				d.fail()
			}
			k.State = d.keep(d.raw(n))
		case "error":
			d.seen(&seen, 6)
			k.Error = d.text()
		default:
			d.fail()
		}
	}
	d.require(seen, 0b1)
}

func (d *decoder) countTimer() {
	if d.timers++; d.timers > d.limits.MaxTimers {
		d.fail()
	}
}

// emitKeys are an Emit's keys with their heads, in canonical order, and
// whether each is required.
var emitKeys = [5]struct {
	key      string
	required bool
}{{"\x63key", false}, {"\x66stream", true}, {"\x67parents", false}, {"\x67payload", true}, {"\x68event_ts", false}}

// fastEmit is fastMessage for an Emit: the form the encoders write (keys in
// canonical order, ASCII text, strings shorter than 64 KiB), in one
// function; on anything else it returns false with nothing consumed.
func (d *decoder) fastEmit(e *Emit) bool {
	data, off := d.data, d.off
	if off >= len(data) || data[off]>>5 != 5 || data[off]&0x1f > 5 {
		return false
	}
	left := int(data[off] & 0x1f)
	off++
	var key, stream, payload []byte
	var parents []uint32
	var eventTS *int64
	var seen [5]bool
	for field := 0; field < 5 && left > 0; field++ {
		k := emitKeys[field].key
		if len(data)-off < len(k) || string(data[off:off+len(k)]) != k {
			if emitKeys[field].required {
				return false
			}
			continue
		}
		off += len(k)
		left--
		seen[field] = true
		if off >= len(data) {
			return false
		}
		b := data[off]
		switch field {
		case 2: // parents: a non-empty array of uint32
			if b-0x81 >= 23 { // 1 to 23 elements
				return false
			}
			n := int(b - 0x80)
			off++
			start := len(d.u32)
			if cap(d.u32)-start < n {
				d.u32 = make([]uint32, 0, max(n, slabSize))
				start = 0
			}
			for range n {
				if off >= len(data) {
					d.u32 = d.u32[:start]
					return false
				}
				var v uint32
				switch c := data[off]; {
				case c < 24:
					v, off = uint32(c), off+1
				case c == 24 && len(data)-off >= 2:
					v, off = uint32(data[off+1]), off+2
				case c == 25 && len(data)-off >= 3:
					v, off = uint32(data[off+1])<<8|uint32(data[off+2]), off+3
				case c == 26 && len(data)-off >= 5:
					v = uint32(data[off+1])<<24 | uint32(data[off+2])<<16 | uint32(data[off+3])<<8 | uint32(data[off+4])
					off += 5
				default:
					d.u32 = d.u32[:start]
					return false
				}
				d.u32 = append(d.u32, v)
			}
			parents = d.u32[start:len(d.u32):len(d.u32)]
		case 4: // event_ts: an int of any width
			major, info := b>>5, b&0x1f
			off++
			var v uint64
			switch {
			case info < 24:
				v = uint64(info)
			case info == 27 && len(data)-off >= 8:
				p := data[off : off+8]
				v = uint64(p[0])<<56 | uint64(p[1])<<48 | uint64(p[2])<<40 | uint64(p[3])<<32 |
					uint64(p[4])<<24 | uint64(p[5])<<16 | uint64(p[6])<<8 | uint64(p[7])
				off += 8
			default:
				return false
			}
			if v > math.MaxInt64 || major > 1 {
				return false
			}
			if len(d.i64) == cap(d.i64) {
				d.i64 = make([]int64, 0, slabSize)
			}
			d.i64 = append(d.i64, int64(v)^-int64(major))
			eventTS = &d.i64[len(d.i64)-1]
		default: // key, stream: text; payload: bytes
			want := byte(0x60)
			if field == 3 {
				want = 0x40
			}
			var n int
			switch {
			case b-want < 24:
				n, off = int(b-want), off+1
			case b == want|24 && len(data)-off >= 2:
				n, off = int(data[off+1]), off+2
			case b == want|25 && len(data)-off >= 3:
				n, off = int(data[off+1])<<8|int(data[off+2]), off+3
			default:
				return false
			}
			if len(data)-off < n {
				return false
			}
			v := data[off : off+n]
			off += n
			if field != 3 {
				for _, c := range v {
					if c >= utf8.RuneSelf {
						return false
					}
				}
			}
			switch field {
			case 0:
				key = v
			case 1:
				stream = v
			case 3:
				payload = v
			}
		}
	}
	if left > 0 || !seen[1] || !seen[3] {
		return false
	}
	d.off = off
	e.Key, e.Stream, e.Payload = d.keepText(key), d.keepText(stream), d.keep(payload)
	e.Parents, e.EventTimestamp = parents, eventTS
	return true
}

func (d *decoder) emit(e *Emit) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "stream":
			d.seen(&seen, 0)
			e.Stream = d.text()
		case "payload":
			d.seen(&seen, 1)
			e.Payload = d.bytes()
		case "key":
			d.seen(&seen, 2)
			e.Key = d.text()
		case "event_ts":
			d.seen(&seen, 3)
			e.EventTimestamp = d.int64Ptr()
		case "parents":
			d.seen(&seen, 4)
			e.Parents = d.parents(0)
		default:
			d.fail()
		}
	}
	d.require(seen, 0b11)
}

func (d *decoder) timer(t *Timer) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "trigger_ts":
			d.seen(&seen, 0)
			t.TriggerTimestamp = d.int()
		case "event_ts":
			d.seen(&seen, 1)
			t.EventTimestamp = d.int64Ptr()
		case "payload":
			d.seen(&seen, 2)
			t.Payload = d.bytes()
		default:
			d.fail()
		}
	}
	d.require(seen, 0b1)
}

func (d *decoder) init(in *Init) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "abi":
			d.seen(&seen, 0)
			in.ABI = d.uint(math.MaxUint64)
		case "computation":
			d.seen(&seen, 1)
			in.Computation = d.text()
		case "kind":
			d.seen(&seen, 2)
			in.Kind = Kind(d.text())
		case "partition":
			d.seen(&seen, 3)
			in.Partition = d.uint(math.MaxUint64)
		case "parameters":
			d.seen(&seen, 4)
			in.Parameters = d.mapAny(d.expect(5), 1)
		case "output_streams":
			d.seen(&seen, 5)
			in.OutputStreams = d.texts(0)
		default:
			d.fail()
		}
	}
	d.require(seen, 0b10_1111)
}

func (d *decoder) initResult(r *InitResult) {
	var seen uint64
	for range d.mapOf(0) {
		switch string(d.key()) {
		case "error":
			d.seen(&seen, 0)
			r.Error = d.text()
		default:
			d.fail()
		}
	}
}

// mapAny decodes a parameter map of count entries whose head has been read,
// at the checker's depth.
func (d *decoder) mapAny(count uint64, depth int) map[string]any {
	n := d.enter(count, 2, depth)
	m := make(map[string]any, n)
	for range n {
		k := d.textOf(d.expect(3))
		if _, dup := m[k]; dup {
			d.fail()
		}
		major, info, arg := d.head()
		m[k] = d.anyValue(major, info, arg, depth+1)
	}
	return m
}

// anyValue decodes a parameter value whose head has been read the way
// fxamacker/cbor decodes into an empty interface with the reference
// options, refusing what the checker's anyValue refuses.
func (d *decoder) anyValue(major, info byte, arg uint64, depth int) any {
	switch major {
	case 0:
		if arg > math.MaxInt64 {
			d.fail()
		}
		return int64(arg)
	case 1:
		if arg > math.MaxInt64 {
			d.fail()
		}
		return -1 - int64(arg)
	case 2:
		return d.keep(d.raw(arg))
	case 3:
		return d.textOf(arg)
	case 4:
		s := make([]any, d.enter(arg, 1, depth))
		for i := range s {
			major, info, arg := d.head()
			s[i] = d.anyValue(major, info, arg, depth+1)
		}
		return s
	case 5:
		return d.mapAny(arg, depth)
	case 6:
		d.fail()
	}
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
	case 27:
		return math.Float64frombits(arg)
	}
	d.fail() // undefined and simple values
	return nil
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
