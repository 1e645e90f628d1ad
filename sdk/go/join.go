package flowhost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// JoinRecord is one side of a join: a message as delivered, or as kept in
// the key's state from an earlier call.
type JoinRecord struct {
	// ID is the message's message_id, kept so that a payload can name a
	// side that is no longer an input (sdk/JOINS.md, "Parents").
	ID string
	// Stream is the stream the record was read from (for a record from
	// state, the join's stream of its side).
	Stream string
	// EventTimestamp is the message's event time.
	EventTimestamp int64
	// Payload is the message body; it must not be modified.
	Payload []byte
	// Input is the record's index among the key's inputs when it is an
	// input of this call, -1 when it came from state.
	Input int
}

// JoinPair is a match of an interval join.
type JoinPair struct {
	Key         string
	Left, Right JoinRecord
}

// ErrJoinState is wrapped by the error a key fails with when its state is
// not the encoding the join helpers write (sdk/JOINS.md).
var ErrJoinState = errors.New("flowhost: the key's state is not a join state")

const (
	joinStateVersion = 1
	kindInterval     = 'I'
	kindEnrich       = 'E'
)

// stateReader reads the join state encodings, naming the field and its byte
// offset on failure.
type stateReader struct {
	b   []byte
	off int
	err error
}

func (r *stateReader) fail(field string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", ErrJoinState, field, r.off)
	}
}

func (r *stateReader) byte(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("missing " + field)
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *stateReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad " + field)
		return 0
	}
	r.off += n
	return v
}

func (r *stateReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad " + field)
		return 0
	}
	r.off += n
	return v
}

func (r *stateReader) bytes(field string) []byte {
	start := r.off
	size := r.uvarint(field + " length")
	if r.err != nil {
		return nil
	}
	if size > uint64(len(r.b)-r.off) {
		r.off = start // name the length, not what follows it
		r.fail(field + " length past the end")
		return nil
	}
	v := slices.Clone(r.b[r.off : r.off+int(size)])
	r.off += int(size)
	return v
}

func (r *stateReader) header(kind byte) {
	if v := r.byte("version"); r.err == nil && v != joinStateVersion {
		r.off--
		r.fail(fmt.Sprintf("unknown version %d", v))
	}
	if k := r.byte("kind"); r.err == nil && k != kind {
		r.off--
		r.fail(fmt.Sprintf("kind %q, want %q", k, kind))
	}
}

func (r *stateReader) end() {
	if r.err == nil && r.off != len(r.b) {
		r.fail("trailing bytes")
	}
}

func appendBytes(out, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// IntervalJoin joins two streams per key: a left record at ts_l and a
// right record at ts_r match when lower <= ts_r - ts_l <= upper. It owns
// the key's state and timers: a computation that uses it keeps nothing
// else in them.
//
// Every match is emitted on the output stream, EventTimestamp the later of
// the two; every record that never matched is emitted on the expired
// stream when its expiry timer fires, so nothing is dropped. Results
// depend only on the key's inputs in merge order, not on batch limits; the
// contract, state bytes included, is sdk/JOINS.md.
type IntervalJoin struct {
	left, right     string
	lower, upper    int64
	join            func(JoinPair) []byte
	output, expired string
	onExpired       func(JoinRecord) []byte
}

// JoinOption adjusts NewIntervalJoin.
type JoinOption func(*IntervalJoin)

// WithExpired makes f build the payload of an expired record instead of
// its own payload.
func WithExpired(f func(JoinRecord) []byte) JoinOption {
	return func(j *IntervalJoin) { j.onExpired = f }
}

// NewIntervalJoin returns a join of the streams left and right with
// lower <= ts_right - ts_left <= upper, whose matches join builds and
// emits on output and whose unmatched records go to expired. It panics
// when lower > upper, join is nil, a stream name is empty or left equals
// right.
func NewIntervalJoin(left, right string, lower, upper time.Duration, join func(JoinPair) []byte, output, expired string, opts ...JoinOption) *IntervalJoin {
	switch {
	case lower > upper:
		panic("flowhost: NewIntervalJoin needs lower <= upper")
	case join == nil:
		panic("flowhost: NewIntervalJoin needs a join function")
	case left == "" || right == "" || output == "" || expired == "":
		panic("flowhost: NewIntervalJoin needs left, right, output and expired streams")
	case left == right:
		panic("flowhost: NewIntervalJoin needs two different input streams")
	}
	j := &IntervalJoin{left: left, right: right, lower: int64(lower), upper: int64(upper), join: join, output: output, expired: expired}
	for _, o := range opts {
		o(j)
	}
	return j
}

// heldRecord is one record waiting in an interval join's state.
type heldRecord struct {
	right   bool
	matched bool
	rec     JoinRecord
}

func decodeIntervalState(b []byte) ([]heldRecord, error) {
	if b == nil {
		return nil, nil
	}
	r := &stateReader{b: b}
	r.header(kindInterval)
	n := r.uvarint("record count")
	if r.err == nil && n > uint64(len(b)) {
		r.fail("record count larger than the state")
	}
	var held []heldRecord
	for i := uint64(0); r.err == nil && i < n; i++ {
		var h heldRecord
		switch s := r.byte("side"); {
		case r.err != nil:
		case s > 1:
			r.off--
			r.fail(fmt.Sprintf("record %d: side %d, want 0 or 1", i, s))
		default:
			h.right = s == 1
		}
		switch m := r.byte("matched"); {
		case r.err != nil:
		case m > 1:
			r.off--
			r.fail(fmt.Sprintf("record %d: matched %d, want 0 or 1", i, m))
		default:
			h.matched = m == 1
		}
		h.rec.EventTimestamp = r.varint("ts")
		h.rec.ID = string(r.bytes("message_id"))
		h.rec.Payload = r.bytes("payload")
		h.rec.Input = -1
		held = append(held, h)
	}
	r.end()
	if r.err != nil {
		return nil, r.err
	}
	return held, nil
}

func encodeIntervalState(held []heldRecord) []byte {
	out := []byte{joinStateVersion, kindInterval}
	out = binary.AppendUvarint(out, uint64(len(held)))
	for _, h := range held {
		out = append(out, boolByte(h.right), boolByte(h.matched))
		out = binary.AppendVarint(out, h.rec.EventTimestamp)
		out = appendBytes(out, []byte(h.rec.ID))
		out = appendBytes(out, h.rec.Payload)
	}
	return out
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// expiry is the trigger after which no on-time record can match h.
func (j *IntervalJoin) expiry(h heldRecord) int64 {
	if h.right {
		return satAdd(h.rec.EventTimestamp, -j.lower)
	}
	return satAdd(h.rec.EventTimestamp, j.upper)
}

// satAdd is a+b+1 clamped to int64, so times near the ends of int64 do not
// wrap around into the past.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	if s == math.MaxInt64 {
		return s
	}
	return s + 1
}

// Process handles one key of a batch: it expires the held records whose
// timers fired, matches the key's messages and holds them, and saves the
// key's state and timers. On a bad state or a message of neither stream it
// fails the key (its inputs go to dead letters) and returns the error. It
// is not safe for concurrent use.
func (j *IntervalJoin) Process(k *Key) error {
	held, err := decodeIntervalState(k.stateOrNil())
	for i := range held {
		held[i].rec.Stream = j.left
		if held[i].right {
			held[i].rec.Stream = j.right
		}
	}
	if err == nil {
		err = j.process(k, held)
	}
	if err != nil {
		k.Fail(err)
	}
	return err
}

func (j *IntervalJoin) process(k *Key, held []heldRecord) error {
	changed := false
	for t := range k.Timers() {
		kept := held[:0]
		for _, h := range held {
			if j.expiry(h) > t.TriggerTimestamp {
				kept = append(kept, h)
				continue
			}
			changed = true
			if !h.matched {
				payload := h.rec.Payload
				if j.onExpired != nil {
					payload = j.onExpired(h.rec)
				}
				k.Emit(j.expired, payload, WithEventTimestamp(h.rec.EventTimestamp))
			}
		}
		held = kept
	}
	for m := range k.Messages() {
		var right bool
		switch m.Stream {
		case j.left:
		case j.right:
			right = true
		default:
			return fmt.Errorf("message %s: stream %q is neither the left stream %q nor the right stream %q of the join", m.ID, m.Stream, j.left, j.right)
		}
		n := heldRecord{right: right, rec: JoinRecord{ID: m.ID, Stream: m.Stream, EventTimestamp: m.EventTimestamp, Payload: m.Payload, Input: m.Input}}
		for i := range held {
			h := &held[i]
			if h.right == right {
				continue
			}
			l, r := h.rec, n.rec
			if !right {
				l, r = r, l
			}
			if !j.inRange(l.EventTimestamp, r.EventTimestamp) {
				continue
			}
			h.matched, n.matched = true, true
			parents := []int{m.Input}
			if h.rec.Input >= 0 {
				parents = append(parents, h.rec.Input)
				slices.Sort(parents)
			}
			k.Emit(j.output, j.join(JoinPair{Key: k.Key(), Left: l, Right: r}),
				WithParents(parents...), WithEventTimestamp(max(l.EventTimestamp, r.EventTimestamp)))
		}
		held = append(held, n)
		changed = true
		trigger := j.expiry(n)
		oldest := n.rec.EventTimestamp
		for _, h := range held {
			if j.expiry(h) == trigger {
				oldest = min(oldest, h.rec.EventTimestamp)
			}
		}
		k.SetTimer(trigger, WithTimerEventTimestamp(oldest))
	}
	switch {
	case !changed:
	case len(held) == 0:
		if _, had := k.State(); had {
			k.DeleteState()
		}
	default:
		k.SetState(encodeIntervalState(held))
	}
	return nil
}

// inRange reports lower <= tr - tl <= upper; a difference that overflows
// int64 is outside any range.
func (j *IntervalJoin) inRange(tl, tr int64) bool {
	d := tr - tl
	if (tr >= tl) != (d >= 0) {
		return false // the difference overflows int64: out of any range
	}
	return j.lower <= d && d <= j.upper
}

// EnrichJoin enriches the events of one stream with the latest value of a
// table stream of the same key, in merge order. A table record with an
// empty payload is a tombstone that deletes the value. An event with no
// value goes unchanged to the unmatched stream: it is never dropped, and
// it does not wait for a value. The helper owns the key's state and sets
// no timers (sdk/JOINS.md).
type EnrichJoin struct {
	table, events     string
	enrich            func(event Message, value JoinRecord) []byte
	output, unmatched string
}

// NewEnrichJoin returns an enrichment of events by table, whose results
// enrich builds and emits on output and whose events without a value go to
// unmatched. It panics when enrich is nil, a stream name is empty or table
// equals events.
func NewEnrichJoin(table, events string, enrich func(event Message, value JoinRecord) []byte, output, unmatched string) *EnrichJoin {
	switch {
	case enrich == nil:
		panic("flowhost: NewEnrichJoin needs an enrich function")
	case table == "" || events == "" || output == "" || unmatched == "":
		panic("flowhost: NewEnrichJoin needs table, events, output and unmatched streams")
	case table == events:
		panic("flowhost: NewEnrichJoin needs two different input streams")
	}
	return &EnrichJoin{table: table, events: events, enrich: enrich, output: output, unmatched: unmatched}
}

func decodeEnrichState(b []byte) (*JoinRecord, error) {
	if b == nil {
		return nil, nil
	}
	r := &stateReader{b: b}
	r.header(kindEnrich)
	v := &JoinRecord{Input: -1}
	v.EventTimestamp = r.varint("ts")
	v.ID = string(r.bytes("message_id"))
	start := r.off
	v.Payload = r.bytes("payload")
	if r.err == nil && len(v.Payload) == 0 {
		r.off = start
		r.fail("empty payload (a tombstone is no state)")
	}
	r.end()
	if r.err != nil {
		return nil, r.err
	}
	return v, nil
}

func encodeEnrichState(v *JoinRecord) []byte {
	out := []byte{joinStateVersion, kindEnrich}
	out = binary.AppendVarint(out, v.EventTimestamp)
	out = appendBytes(out, []byte(v.ID))
	return appendBytes(out, v.Payload)
}

// Process handles one key of a batch in delivery order: table messages set
// or delete the value, events are enriched or sent to unmatched. On a bad
// state or a message of neither stream it fails the key and returns the
// error. It is not safe for concurrent use.
func (e *EnrichJoin) Process(k *Key) error {
	v, err := decodeEnrichState(k.stateOrNil())
	if err == nil {
		err = e.process(k, v)
	}
	if err != nil {
		k.Fail(err)
	}
	return err
}

func (e *EnrichJoin) process(k *Key, v *JoinRecord) error {
	if v != nil {
		v.Stream = e.table
	}
	changed := false
	for m := range k.Messages() {
		switch m.Stream {
		case e.table:
			changed = true
			if len(m.Payload) == 0 {
				v = nil
			} else {
				v = &JoinRecord{ID: m.ID, Stream: m.Stream, EventTimestamp: m.EventTimestamp, Payload: m.Payload, Input: m.Input}
			}
		case e.events:
			if v == nil {
				k.Emit(e.unmatched, m.Payload)
				continue
			}
			parents := []int{m.Input}
			if v.Input >= 0 {
				parents = []int{v.Input, m.Input}
			}
			k.Emit(e.output, e.enrich(m, *v), WithParents(parents...), WithEventTimestamp(m.EventTimestamp))
		default:
			return fmt.Errorf("message %s: stream %q is neither the table stream %q nor the events stream %q of the join", m.ID, m.Stream, e.table, e.events)
		}
	}
	switch {
	case !changed:
	case v == nil:
		if _, had := k.State(); had {
			k.DeleteState()
		}
	default:
		k.SetState(encodeEnrichState(v))
	}
	return nil
}
