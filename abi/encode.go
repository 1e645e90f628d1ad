package abi

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strconv"
)

// The envelope encoder below is specialised to the envelope types, without
// reflection for their fixed parts: each append function writes one type's
// fields in Core Deterministic order (shorter key first, then bytewise),
// with the presence rules of the types' cbor tags (envelope.go). It writes
// byte for byte what fxamacker/cbor writes with the reference options
// (reference_test.go; the golden vectors and the fuzz targets compare the
// two). Only Init parameters are free-form; appendAny encodes them.

// Map keys with their heads, in the order each type writes them.
var (
	keyABI           = textKey("abi")
	keyKeys          = textKey("keys")
	keyKind          = textKey("kind")
	keyEpoch         = textKey("epoch")
	keyPartition     = textKey("partition")
	keyWatermarks    = textKey("watermarks")
	keyComputation   = textKey("computation")
	keyEvent         = textKey("event")
	keySystem        = textKey("system")
	keyKey           = textKey("key")
	keyState         = textKey("state")
	keyTimers        = textKey("timers")
	keyMessages      = textKey("messages")
	keyID            = textKey("id")
	keyPayload       = textKey("payload")
	keyEventTS       = textKey("event_ts")
	keyTriggerTS     = textKey("trigger_ts")
	keyStream        = textKey("stream")
	keySystemTS      = textKey("system_ts")
	keyAlignmentTS   = textKey("alignment_ts")
	keyError         = textKey("error")
	keyEmits         = textKey("emits")
	keyStateOp       = textKey("state_op")
	keyTimersSet     = textKey("timers_set")
	keyTimersCancel  = textKey("timers_cancel")
	keyParents       = textKey("parents")
	keyParameters    = textKey("parameters")
	keyOutputStreams = textKey("output_streams")
)

func textKey(s string) []byte { return appendText(nil, s) }

// appendHead writes the shortest head of major type major with argument v.
func appendHead(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v <= math.MaxUint8:
		return append(b, m|24, byte(v))
	case v <= math.MaxUint16:
		return append(b, m|25, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, m|26, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(b, m|27, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendHead(b, 1, uint64(^v))
	}
	return appendHead(b, 0, uint64(v))
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, 3, uint64(len(s))), s...)
}

func appendBytes(b []byte, p []byte) []byte {
	return append(appendHead(b, 2, uint64(len(p))), p...)
}

// count returns the number of true flags: a map's number of present fields.
func count(present ...bool) uint64 {
	n := uint64(0)
	for _, p := range present {
		if p {
			n++
		}
	}
	return n
}

func appendRequest(b []byte, r *Request) []byte {
	b = append(b, 0xa7)
	b = appendHead(append(b, keyABI...), 0, r.ABI)
	b = appendHead(append(b, keyKeys...), 4, uint64(len(r.Keys)))
	for i := range r.Keys {
		b = appendRequestKey(b, &r.Keys[i])
	}
	b = appendText(append(b, keyKind...), string(r.Kind))
	b = appendHead(append(b, keyEpoch...), 0, r.Epoch)
	b = appendHead(append(b, keyPartition...), 0, r.Partition)
	b = append(b, keyWatermarks...)
	b = append(b, 0xa2)
	b = appendInt(append(b, keyEvent...), r.Watermarks.Event)
	b = appendInt(append(b, keySystem...), r.Watermarks.System)
	return appendText(append(b, keyComputation...), r.Computation)
}

func appendRequestKey(b []byte, k *RequestKey) []byte {
	b = appendHead(b, 5, 1+count(k.State != nil, len(k.Timers) > 0, len(k.Messages) > 0))
	b = appendText(append(b, keyKey...), k.Key)
	if k.State != nil {
		b = appendBytes(append(b, keyState...), k.State)
	}
	if len(k.Timers) > 0 {
		b = appendHead(append(b, keyTimers...), 4, uint64(len(k.Timers)))
		for i := range k.Timers {
			t := &k.Timers[i]
			b = appendHead(b, 5, 3+count(len(t.Payload) > 0))
			b = appendText(append(b, keyID...), t.ID)
			if len(t.Payload) > 0 {
				b = appendBytes(append(b, keyPayload...), t.Payload)
			}
			b = appendInt(append(b, keyEventTS...), t.EventTimestamp)
			b = appendInt(append(b, keyTriggerTS...), t.TriggerTimestamp)
		}
	}
	if len(k.Messages) > 0 {
		b = appendHead(append(b, keyMessages...), 4, uint64(len(k.Messages)))
		for i := range k.Messages {
			m := &k.Messages[i]
			b = append(b, 0xa6)
			b = appendText(append(b, keyID...), m.ID)
			b = appendText(append(b, keyStream...), m.Stream)
			b = appendBytes(append(b, keyPayload...), m.Payload)
			b = appendInt(append(b, keyEventTS...), m.EventTimestamp)
			b = appendInt(append(b, keySystemTS...), m.SystemTimestamp)
			b = appendInt(append(b, keyAlignmentTS...), m.AlignmentTimestamp)
		}
	}
	return b
}

func appendResponse(b []byte, r *Response) []byte {
	b = appendHead(b, 5, 1+count(r.Error != ""))
	b = appendHead(append(b, keyKeys...), 4, uint64(len(r.Keys)))
	for i := range r.Keys {
		b = appendResponseKey(b, &r.Keys[i])
	}
	if r.Error != "" {
		b = appendText(append(b, keyError...), r.Error)
	}
	return b
}

func appendResponseKey(b []byte, k *ResponseKey) []byte {
	b = appendHead(b, 5, 1+count(len(k.Emits) > 0, k.Error != "", k.State != nil, k.StateOp != 0, len(k.TimersSet) > 0, len(k.TimersCancel) > 0))
	b = appendText(append(b, keyKey...), k.Key)
	if len(k.Emits) > 0 {
		b = appendHead(append(b, keyEmits...), 4, uint64(len(k.Emits)))
		for i := range k.Emits {
			b = appendEmit(b, &k.Emits[i])
		}
	}
	if k.Error != "" {
		b = appendText(append(b, keyError...), k.Error)
	}
	if k.State != nil {
		b = appendBytes(append(b, keyState...), k.State)
	}
	if k.StateOp != 0 {
		b = appendHead(append(b, keyStateOp...), 0, uint64(k.StateOp))
	}
	if len(k.TimersSet) > 0 {
		b = appendHead(append(b, keyTimersSet...), 4, uint64(len(k.TimersSet)))
		for i := range k.TimersSet {
			t := &k.TimersSet[i]
			b = appendHead(b, 5, 1+count(len(t.Payload) > 0, t.EventTimestamp != nil))
			if len(t.Payload) > 0 {
				b = appendBytes(append(b, keyPayload...), t.Payload)
			}
			if t.EventTimestamp != nil {
				b = appendInt(append(b, keyEventTS...), *t.EventTimestamp)
			}
			b = appendInt(append(b, keyTriggerTS...), t.TriggerTimestamp)
		}
	}
	if len(k.TimersCancel) > 0 {
		b = appendHead(append(b, keyTimersCancel...), 4, uint64(len(k.TimersCancel)))
		for _, v := range k.TimersCancel {
			b = appendInt(b, v)
		}
	}
	return b
}

func appendEmit(b []byte, e *Emit) []byte {
	b = appendHead(b, 5, 2+count(e.Key != "", len(e.Parents) > 0, e.EventTimestamp != nil))
	if e.Key != "" {
		b = appendText(append(b, keyKey...), e.Key)
	}
	b = appendText(append(b, keyStream...), e.Stream)
	if len(e.Parents) > 0 {
		b = appendHead(append(b, keyParents...), 4, uint64(len(e.Parents)))
		for _, p := range e.Parents {
			b = appendHead(b, 0, uint64(p))
		}
	}
	b = appendBytes(append(b, keyPayload...), e.Payload)
	if e.EventTimestamp != nil {
		b = appendInt(append(b, keyEventTS...), *e.EventTimestamp)
	}
	return b
}

// appendInit fails with an *Error naming the parameter whose value has no
// envelope form.
func appendInit(b []byte, in *Init) ([]byte, error) {
	b = appendHead(b, 5, 5+count(len(in.Parameters) > 0))
	b = appendHead(append(b, keyABI...), 0, in.ABI)
	b = appendText(append(b, keyKind...), string(in.Kind))
	b = appendHead(append(b, keyPartition...), 0, in.Partition)
	if len(in.Parameters) > 0 {
		var err *checkError
		if b, err = appendAny(append(b, keyParameters...), reflect.ValueOf(in.Parameters), 0); err != nil {
			return nil, err.in("parameters").toError()
		}
	}
	b = appendText(append(b, keyComputation...), in.Computation)
	b = appendHead(append(b, keyOutputStreams...), 4, uint64(len(in.OutputStreams)))
	for _, s := range in.OutputStreams {
		b = appendText(b, s)
	}
	return b, nil
}

func appendInitResult(b []byte, r *InitResult) []byte {
	if r.Error == "" {
		return append(b, 0xa0)
	}
	return appendText(append(append(b, 0xa1), keyError...), r.Error)
}

// appendAny encodes a parameter value as fxamacker/cbor does with the
// reference options: nil pointers, interfaces, slices and maps as null, [],
// {} (nil containers are empty ones), floats in the shortest width that
// keeps their value, map entries sorted by their encoded keys. Values of
// kinds without an envelope form (structs, channels, functions, complex
// numbers) are refused; a pipeline spec's parameters never hold them. A
// map key that is not text is encoded nonetheless: EncodeInit's check then
// refuses it with the same message as a guest's bad key.
func appendAny(b []byte, v reflect.Value, depth int) ([]byte, *checkError) {
	// The checker refuses nesting beyond maxNesting with the value's path;
	// this bound only stops a map that contains itself.
	if depth > 4*maxNesting {
		return nil, failure("nesting exceeds " + strconv.Itoa(maxNesting) + " levels")
	}
	switch v.Kind() {
	case reflect.Invalid:
		return append(b, 0xf6), nil
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return append(b, 0xf6), nil
		}
		return appendAny(b, v.Elem(), depth)
	case reflect.Bool:
		if v.Bool() {
			return append(b, 0xf5), nil
		}
		return append(b, 0xf4), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return appendInt(b, v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return appendHead(b, 0, v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return appendFloat(b, v.Float(), v.Kind() == reflect.Float32), nil
	case reflect.String:
		return appendText(b, v.String()), nil
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Kind() == reflect.Slice {
				return appendBytes(b, v.Bytes()), nil
			}
			b = appendHead(b, 2, uint64(v.Len()))
			for i := range v.Len() {
				b = append(b, byte(v.Index(i).Uint()))
			}
			return b, nil
		}
		b = appendHead(b, 4, uint64(v.Len()))
		for i := range v.Len() {
			var err *checkError
			if b, err = appendAny(b, v.Index(i), depth+1); err != nil {
				return nil, err.at(i)
			}
		}
		return b, nil
	case reflect.Map:
		return appendMap(b, v, depth)
	}
	return nil, failure("a value of type " + v.Type().String() + " has no envelope form")
}

// appendMap writes a map with its entries sorted by their encoded keys
// (Core Deterministic Encoding), which for text keys is shorter first,
// then bytewise.
func appendMap(b []byte, v reflect.Value, depth int) ([]byte, *checkError) {
	type entry struct {
		key  []byte
		name string
		val  reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		k, err := appendAny(nil, it.Key(), depth+1)
		if err != nil {
			return nil, err
		}
		name := ""
		if it.Key().Kind() == reflect.String {
			name = it.Key().String()
		}
		entries = append(entries, entry{key: k, name: name, val: it.Value()})
	}
	slices.SortFunc(entries, func(x, y entry) int { return bytes.Compare(x.key, y.key) })
	b = appendHead(b, 5, uint64(len(entries)))
	for _, e := range entries {
		b = append(b, e.key...)
		var err *checkError
		if b, err = appendAny(b, e.val, depth+1); err != nil {
			return nil, err.in(e.name)
		}
	}
	return b, nil
}

// appendFloat writes f in the shortest of half, single and double
// precision that holds it exactly, NaN as half-precision 0x7e00 and the
// infinities in half precision (RFC 8949 section 4.2.1 and 4.2.2).
func appendFloat(b []byte, f float64, single bool) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, 0xf9, 0x7e, 0x00)
	case math.IsInf(f, 1):
		return append(b, 0xf9, 0x7c, 0x00)
	case math.IsInf(f, -1):
		return append(b, 0xf9, 0xfc, 0x00)
	}
	f32 := float32(f)
	if !single && float64(f32) != f {
		bits := math.Float64bits(f)
		return append(b, 0xfb, byte(bits>>56), byte(bits>>48), byte(bits>>40), byte(bits>>32), byte(bits>>24), byte(bits>>16), byte(bits>>8), byte(bits))
	}
	if h, ok := float32ToFloat16(f32); ok {
		return append(b, 0xf9, byte(h>>8), byte(h))
	}
	bits := math.Float32bits(f32)
	return append(b, 0xfa, byte(bits>>24), byte(bits>>16), byte(bits>>8), byte(bits))
}

// float32ToFloat16 returns the half-precision form of f when it holds f
// exactly (subnormals included).
func float32ToFloat16(f float32) (uint16, bool) {
	bits := math.Float32bits(f)
	sign := uint16(bits>>31) << 15
	exp := int(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0 {
		return sign, mant == 0 // a float32 subnormal is below half precision
	}
	e := exp - 127
	switch {
	case e >= -14 && e <= 15:
		if mant&0x1fff != 0 {
			return 0, false
		}
		return sign | uint16(e+15)<<10 | uint16(mant>>13), true
	case e >= -24 && e < -14:
		full := mant | 1<<23
		shift := uint(-1 - e)
		if full&(1<<shift-1) != 0 {
			return 0, false
		}
		return sign | uint16(full>>shift), true
	}
	return 0, false
}
