package ordering

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// NoPartition marks a [Segment] that names no partition: the segments that a
// map appends to its parent's id.
const NoPartition int32 = -1

// Segment is one step of a [MessageID]: a name (a stream, or a computation for
// transform outputs), an optional partition and a sequence number.
type Segment struct {
	// Name is a stream or computation name: non-empty, made of letters,
	// digits, '_', '-' and '.'.
	Name string
	// Partition is the partition of a root segment, or NoPartition.
	Partition int32
	// Seq is the offset in a source partition, the output counter of a
	// transform partition, or the index among a parent's derived messages.
	Seq uint64
}

// MessageID identifies a message for deduplication and as the tie-break of
// the in-stream order. It is a root segment followed by one segment per
// derivation step:
//
//   - a source record: stream/pPARTITION:OFFSET, e.g. "orders/p3:42";
//   - a transform output: a fresh root computation/pPARTITION:SEQ, where SEQ
//     grows with every output of that computation partition, so ids follow
//     production order;
//   - a map output: its parent's id, '>', then stream:INDEX, e.g.
//     "orders/p3:42>enriched:0".
//
// IDs compare segment by segment (name as text, partition and sequence as
// numbers), and a prefix sorts before its extensions. So "p10" sorts after
// "p9", ":10" after ":9", and a derived id sorts right after its parent and
// before its parent's next sibling: the order of a depth-first walk of the
// derivation tree. The zero MessageID is empty and sorts first.
//
// A MessageID is immutable; its methods never modify the receiver.
type MessageID struct {
	// The root segment is held inline, so that a source or transform id
	// (a root alone) costs no allocation of its own; more are the
	// segments a map appended.
	root Segment
	more []Segment
	set  bool // false: the empty id
}

// idFrom returns the id of segments segs, which it keeps.
func idFrom(segs []Segment) MessageID {
	if len(segs) == 0 {
		return MessageID{}
	}
	id := MessageID{root: segs[0], set: true}
	if len(segs) > 1 {
		id.more = segs[1:]
	}
	return id
}

// depth returns the number of segments.
func (id *MessageID) depth() int {
	if !id.set {
		return 0
	}
	return 1 + len(id.more)
}

// seg returns segment i < depth().
func (id *MessageID) seg(i int) *Segment {
	if i == 0 {
		return &id.root
	}
	return &id.more[i-1]
}

// SourceID returns the id of the record at offset in a source stream's
// partition. stream must pass [CheckName] and partition be >= 0 (or
// NoPartition); the constructors do not check, because their arguments come
// from a validated pipeline and they sit on the per-message path. An id
// built from other values does not survive the text form.
func SourceID(stream string, partition int32, offset uint64) MessageID {
	return MessageID{root: Segment{Name: stream, Partition: partition, Seq: offset}, set: true}
}

// TransformID returns the id of the seq-th output of a transform
// computation's partition.
func TransformID(computation string, partition int32, seq uint64) MessageID {
	return SourceID(computation, partition, seq)
}

// Derive returns the id of the index-th message that a map derives from id
// into stream.
func (id MessageID) Derive(stream string, index uint64) MessageID {
	seg := Segment{Name: stream, Partition: NoPartition, Seq: index}
	if !id.set {
		return MessageID{root: seg, set: true}
	}
	more := make([]Segment, len(id.more)+1)
	copy(more, id.more)
	more[len(id.more)] = seg
	return MessageID{root: id.root, more: more, set: true}
}

// IsZero reports whether id is the empty id.
func (id MessageID) IsZero() bool { return !id.set }

// Segments returns a copy of id's segments, root first.
func (id MessageID) Segments() []Segment {
	if !id.set {
		return nil
	}
	return append([]Segment{id.root}, id.more...)
}

// Root returns id's first segment; the zero Segment for the empty id.
func (id MessageID) Root() Segment {
	return id.root // the zero Segment when !id.set
}

// Compare returns -1, 0 or +1 as id sorts before, equal to or after other.
// It allocates nothing.
func (id MessageID) Compare(other MessageID) int {
	n := min(id.depth(), other.depth())
	for i := 0; i < n; i++ {
		a, b := id.seg(i), other.seg(i)
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
			return c
		}
	}
	return cmp.Compare(id.depth(), other.depth())
}

// Equal reports whether id and other name the same message.
func (id MessageID) Equal(other MessageID) bool { return id.Compare(other) == 0 }

// String returns the canonical text form, which [ParseMessageID] reads back.
func (id MessageID) String() string {
	var buf [64]byte // most ids fit: one allocation, the string's own
	return string(id.appendText(buf[:0]))
}

// AppendText implements encoding.TextAppender.
func (id MessageID) AppendText(b []byte) ([]byte, error) { return id.appendText(b), nil }

func (id MessageID) appendText(b []byte) []byte {
	for i := range id.depth() {
		s := id.seg(i)
		if i > 0 {
			b = append(b, '>')
		}
		b = append(b, s.Name...)
		if s.Partition != NoPartition {
			b = append(b, "/p"...)
			b = strconv.AppendInt(b, int64(s.Partition), 10)
		}
		b = append(b, ':')
		b = strconv.AppendUint(b, s.Seq, 10)
	}
	return b
}

// MarshalText implements encoding.TextMarshaler with the canonical form.
func (id MessageID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [ParseMessageID].
func (id *MessageID) UnmarshalText(b []byte) error {
	parsed, err := ParseMessageID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ErrMessageID is wrapped by every error of [ParseMessageID].
var ErrMessageID = errors.New("invalid message_id")

// ParseMessageID reads the canonical text form written by
// [MessageID.String]. It accepts exactly that form: no leading zeros, no
// sign, no spaces. The empty string is the zero id. Errors give the byte
// offset, counted from the start of s, where the text goes wrong.
func ParseMessageID(s string) (MessageID, error) {
	if s == "" {
		return MessageID{}, nil
	}
	var segs []Segment
	pos := 0
	for part := range strings.SplitSeq(s, ">") {
		seg, at, err := parseSegment(part)
		if err != nil {
			return MessageID{}, fmt.Errorf("%w %q: segment %d, byte %d: %v", ErrMessageID, s, len(segs), pos+at, err)
		}
		segs = append(segs, seg)
		pos += len(part) + 1
	}
	return idFrom(segs), nil
}

// parseSegment reads one NAME[/pPART]:SEQ segment; on error it also
// returns the offset within s of the offending byte.
func parseSegment(s string) (Segment, int, error) {
	colon := strings.LastIndexByte(s, ':')
	if colon < 0 {
		return Segment{}, len(s), errors.New("missing ':SEQ'")
	}
	head, seqText := s[:colon], s[colon+1:]
	seq, at, err := parseCanonicalUint(seqText, 64)
	if err != nil {
		return Segment{}, colon + 1 + at, fmt.Errorf("sequence %q: %v", seqText, err)
	}
	seg := Segment{Name: head, Partition: NoPartition, Seq: seq}
	if slash := strings.LastIndex(head, "/p"); slash >= 0 {
		p, at, err := parseCanonicalUint(head[slash+2:], 31)
		if err != nil {
			return Segment{}, slash + 2 + at, fmt.Errorf("partition %q: %v", head[slash+2:], err)
		}
		seg.Name, seg.Partition = head[:slash], int32(p)
	}
	if at, err := checkName(seg.Name); err != nil {
		return Segment{}, at, err
	}
	return seg, 0, nil
}

// parseCanonicalUint reads a decimal without sign or leading zeros; on
// error it returns the offset of the offending byte.
func parseCanonicalUint(s string, bits int) (uint64, int, error) {
	if s == "" {
		return 0, 0, errors.New("empty number")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, 0, errors.New("leading zero")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, i, fmt.Errorf("%q is not a digit", s[i])
		}
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, 0, fmt.Errorf("out of range for %d bits", bits)
	}
	return v, 0, nil
}

// CheckName reports whether name can be a stream or computation name: one or
// more letters, digits, '_', '-' or '.'. Only such names keep the text form
// of a [MessageID] unambiguous.
func CheckName(name string) error {
	_, err := checkName(name)
	return err
}

func checkName(name string) (int, error) {
	if name == "" {
		return 0, errors.New("empty name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			what := fmt.Sprintf("%q", c)
			if c >= 0x80 {
				what = fmt.Sprintf("byte 0x%02x", c)
			}
			return i, fmt.Errorf("name %q: %s is not a letter, digit, '_', '-' or '.'", name, what)
		}
	}
	return 0, nil
}
