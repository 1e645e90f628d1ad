package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/flowhost/flowhost/ordering"
)

// The per-message values (source records and queued messages) use a
// compact, append-style binary codec rather than CBOR: they are written
// once per message on the exactly-once path, where reflection-based CBOR
// cost more CPU than the rest of the commit. Each value starts with a
// version byte naming its layout, so that a later layout can be read next
// to this one. Integers are varints (signed ones zig-zag), strings and
// byte strings a uvarint length and their bytes.
const (
	// codecRecordV1: event, system, write, alignment, key, payload.
	codecRecordV1 byte = 0x01
	// codecMessageV1: id, stream, key, event, system, write, alignment,
	// parent count, parents, payload.
	codecMessageV1 byte = 0x02
	// codecSourceRefV1: a queued source record by reference: stream,
	// partition, offset, key, event, system, write, alignment. Its
	// payload is the source record's, read back from the source log.
	codecSourceRefV1 byte = 0x03

	// The V2 layouts are the V1 layouts with the timestamps written as
	// the write timestamp, then event, system and alignment as their
	// differences from it (wrapping, so every value round-trips). The
	// write, system and alignment timestamps are all host clock readings
	// close to each other, and so is a live event timestamp: a
	// difference takes 1-4 bytes where a timestamp takes 9. What is
	// written is V2; V1 values, in data directories written before, are
	// read as they are.
	codecRecordV2  byte = 0x04
	codecMessageV2 byte = 0x05
	// codecSourceRefV2: stream, partition, offset, key. A routed record
	// has the timestamps the source log holds for it, so they are read
	// from there with its payload.
	codecSourceRefV2 byte = 0x06

	// codecRunV1: the messages one sender queued for a sink in one batch,
	// with consecutive TaskIds ending at the task of the value's key:
	// message count, then each message as a byte string holding its
	// queued-message value.
	codecRunV1 byte = 0x07
)

// errCodec is wrapped by every decoding error of a compact value; callers
// add the store key it was read under.
var errCodec = errors.New("malformed value")

func appendBytes(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendTimes appends t in the V2 layout.
func appendTimes(b []byte, t ordering.Timestamps) []byte {
	b = binary.AppendVarint(b, t.Write)
	b = binary.AppendVarint(b, t.Event-t.Write)
	b = binary.AppendVarint(b, t.System-t.Write)
	return binary.AppendVarint(b, t.Alignment-t.Write)
}

// appendRecord appends the compact encoding of source record m (its id and
// stream follow from its key).
func appendRecord(b []byte, m *ordering.Message) []byte {
	b = append(b, codecRecordV2)
	b = appendTimes(b, m.Time)
	b = appendString(b, m.Key)
	return appendBytes(b, m.Payload)
}

// appendMessage appends the compact encoding of queued message m; its id
// and parents are kept as their canonical text, parsed only at recovery.
func appendMessage(b []byte, m *ordering.Message) []byte {
	b = append(b, codecMessageV2)
	b = appendString(b, m.ID.String())
	b = appendString(b, m.Stream)
	b = appendString(b, m.Key)
	b = appendTimes(b, m.Time)
	b = binary.AppendUvarint(b, uint64(len(m.Parents)))
	for _, p := range m.Parents {
		b = appendString(b, p.String())
	}
	return appendBytes(b, m.Payload)
}

// AppendMessage appends the compact encoding of m that a queue keeps and
// a cluster's stream topics carry: id, stream, key, the four timestamps,
// parents and payload (not its TaskId, which the queue's key or the
// record's header holds).
func AppendMessage(b []byte, m *ordering.Message) []byte { return appendMessage(b, m) }

// DecodeMessage reads what [AppendMessage] wrote, copying the payload; a
// malformed value is refused naming the field and its byte.
func DecodeMessage(b []byte) (*ordering.Message, error) { return decodeMessage(b) }

// valueReader takes a compact value apart; the first malformed field sets
// err (naming the field and its byte offset) and later reads return zero
// values.
type valueReader struct {
	b   []byte
	off int
	err error
	v2  bool // the value has a V2 layout (times as differences)
}

func (r *valueReader) fail(field, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: field %s at byte %d: %s", errCodec, field, r.off, why)
	}
}

// version reads the layout byte, v1 or v2, and sets r.v2 by it.
func (r *valueReader) version(v1, v2 byte, what string) {
	if len(r.b) == 0 {
		r.fail("version", "empty value")
		return
	}
	if r.b[0] != v1 && r.b[0] != v2 {
		r.fail("version", fmt.Sprintf("layout 0x%02x is not a %s (0x%02x or 0x%02x)", r.b[0], what, v1, v2))
		return
	}
	r.v2 = r.b[0] == v2
	r.b, r.off = r.b[1:], 1
}

func (r *valueReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(field, "truncated or overlong varint")
		return 0
	}
	r.b, r.off = r.b[n:], r.off+n
	return v
}

func (r *valueReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(field, "truncated or overlong varint")
		return 0
	}
	r.b, r.off = r.b[n:], r.off+n
	return v
}

// bytes returns the next byte string, aliasing the value.
func (r *valueReader) bytes(field string) []byte {
	n := r.uvarint(field + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(field, fmt.Sprintf("length %d is past the value's end (%d bytes left)", n, len(r.b)))
		return nil
	}
	v := r.b[:n:n]
	r.b, r.off = r.b[n:], r.off+int(n)
	return v
}

func (r *valueReader) str(field string) string { return string(r.bytes(field)) }

func (r *valueReader) times() ordering.Timestamps {
	if r.v2 {
		w := r.varint("write")
		return ordering.Timestamps{Write: w, Event: w + r.varint("event"), System: w + r.varint("system"), Alignment: w + r.varint("alignment")}
	}
	return ordering.Timestamps{Event: r.varint("event"), System: r.varint("system"), Write: r.varint("write"), Alignment: r.varint("alignment")}
}

// done returns the first error, or one for bytes left over.
func (r *valueReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes at byte %d", errCodec, len(r.b), r.off)
	}
	return r.err
}

// decodeRecord decodes a source record stored at offset of a source
// partition. The payload is copied: the caller's b is pebble's buffer.
func decodeRecord(stream string, partition int, offset uint64, b []byte) (*ordering.Message, error) {
	r := valueReader{b: b}
	r.version(codecRecordV1, codecRecordV2, "source record")
	t := r.times()
	key := r.str("key")
	payload := append([]byte{}, r.bytes("payload")...)
	if err := r.done(); err != nil {
		return nil, err
	}
	return &ordering.Message{
		ID: ordering.SourceID(stream, int32(partition), offset), Stream: stream, Key: key, Time: t, Payload: payload,
	}, nil
}

// decodeMessage decodes a queued message. The payload is copied.
func decodeMessage(b []byte) (*ordering.Message, error) {
	r := valueReader{b: b}
	r.version(codecMessageV1, codecMessageV2, "queued message")
	idText := r.str("id")
	stream := r.str("stream")
	key := r.str("key")
	t := r.times()
	nParents := r.uvarint("parent count")
	if r.err == nil && nParents > uint64(len(r.b)) { // each parent takes at least one byte
		r.fail("parent count", fmt.Sprintf("%d parents in %d bytes", nParents, len(r.b)))
	}
	var parentText []string
	if r.err == nil && nParents > 0 {
		parentText = make([]string, nParents)
		for i := range parentText {
			parentText[i] = r.str(fmt.Sprintf("parent %d", i))
		}
	}
	payload := append([]byte{}, r.bytes("payload")...)
	if err := r.done(); err != nil {
		return nil, err
	}
	id, err := ordering.ParseMessageID(idText)
	if err != nil {
		return nil, fmt.Errorf("message id: %w", err)
	}
	m := &ordering.Message{ID: id, Stream: stream, Key: key, Time: t, Payload: payload}
	if len(parentText) > 0 {
		m.Parents = make([]ordering.MessageID, len(parentText))
		for i, p := range parentText {
			if m.Parents[i], err = ordering.ParseMessageID(p); err != nil {
				return nil, fmt.Errorf("parent %d: %w", i, err)
			}
		}
	}
	return m, nil
}

// isRun reports whether queue value v is a run of messages.
func isRun(v []byte) bool { return len(v) > 0 && v[0] == codecRunV1 }

// isSourceRef reports whether queue value v is a source reference.
func isSourceRef(v []byte) bool {
	return len(v) > 0 && (v[0] == codecSourceRefV1 || v[0] == codecSourceRefV2)
}

// sourceRef is the position of the source record a queued message is.
type sourceRef struct {
	stream    string
	partition int32
	offset    uint64
}

// asSourceRef reports whether queued message m, sent by from, is a source
// record as the source log holds it (a source reader's message with a
// source id in its own stream and no parents): then the queue stores its
// position and key, not a second copy of its payload and timestamps.
func asSourceRef(from ordering.Sender, m *ordering.Message) (sourceRef, bool) {
	if len(m.Parents) > 0 || !strings.HasPrefix(from.Computation, "source:") {
		return sourceRef{}, false
	}
	root := m.ID.Root()
	if root.Name != m.Stream || root.Partition < 0 || !m.ID.Equal(ordering.SourceID(root.Name, root.Partition, root.Seq)) {
		return sourceRef{}, false
	}
	return sourceRef{stream: root.Name, partition: root.Partition, offset: root.Seq}, true
}

func appendSourceRef(b []byte, ref sourceRef, m *ordering.Message) []byte {
	b = append(b, codecSourceRefV2)
	b = appendString(b, ref.stream)
	b = binary.AppendUvarint(b, uint64(ref.partition))
	b = binary.AppendUvarint(b, ref.offset)
	return appendString(b, m.Key)
}

// decodeSourceRef decodes a queued source reference: the message without
// its payload, and where the payload is. timed reports whether the
// reference holds the message's timestamps (V1); a V2 reference's are the
// source record's.
func decodeSourceRef(b []byte) (ref sourceRef, m *ordering.Message, timed bool, err error) {
	r := valueReader{b: b}
	r.version(codecSourceRefV1, codecSourceRefV2, "queued source reference")
	ref = sourceRef{stream: r.str("stream")}
	part := r.uvarint("partition")
	if r.err == nil && part > math.MaxInt32 {
		r.fail("partition", fmt.Sprintf("%d is out of range", part))
	}
	ref.partition = int32(part)
	ref.offset = r.uvarint("offset")
	key := r.str("key")
	var t ordering.Timestamps
	if timed = !r.v2; timed {
		t = r.times()
	}
	if err := r.done(); err != nil {
		return sourceRef{}, nil, false, err
	}
	if err := ordering.CheckName(ref.stream); err != nil {
		return sourceRef{}, nil, false, fmt.Errorf("%w: field stream: %v", errCodec, err)
	}
	return ref, &ordering.Message{
		ID: ordering.SourceID(ref.stream, ref.partition, ref.offset), Stream: ref.stream, Key: key, Time: t,
	}, timed, nil
}

// appendRun appends the run value of n messages, msgs being their
// queued-message values, each as a byte string.
func appendRun(b []byte, n int, msgs []byte) []byte {
	return append(binary.AppendUvarint(append(b, codecRunV1), uint64(n)), msgs...)
}

// decodeRun decodes a run of queued messages whose last TaskId is last,
// each with its TaskId, in order. The payloads are copied.
func decodeRun(b []byte, last ordering.TaskID) ([]*ordering.Message, error) {
	r := valueReader{b: b}
	switch {
	case len(b) == 0:
		r.fail("version", "empty value")
	case b[0] != codecRunV1:
		r.fail("version", fmt.Sprintf("layout 0x%02x is not a run of queued messages (0x%02x)", b[0], codecRunV1))
	default:
		r.b, r.off = b[1:], 1
	}
	n := r.uvarint("message count")
	if r.err == nil && (n == 0 || n > uint64(len(r.b)) || n > uint64(last)) {
		r.fail("message count", fmt.Sprintf("%d messages in %d bytes ending at task %d", n, len(r.b), last))
	}
	if r.err != nil {
		return nil, r.err
	}
	first := last - ordering.TaskID(n) + 1
	ms := make([]*ordering.Message, n)
	for i := range ms {
		v := r.bytes(fmt.Sprintf("message %d", i))
		if r.err != nil {
			return nil, r.err
		}
		m, err := decodeMessage(v)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		m.Task = first + ordering.TaskID(i)
		ms[i] = m
	}
	return ms, r.done()
}
