package flowhost

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// WindowSpec says which event-time windows a record belongs to. Build one
// with Tumbling, Hopping or Session; sdk/WINDOWS.md describes the design
// shared by every SDK.
type WindowSpec struct {
	kind    windowKind
	size    int64 // tumbling, hopping
	advance int64 // hopping
	gap     int64 // session
}

type windowKind uint8

const (
	tumbling windowKind = iota + 1
	hopping
	session
)

// Tumbling returns windows [n*size, (n+1)*size) of event time: each record
// belongs to exactly one. It panics when size is not positive.
func Tumbling(size time.Duration) WindowSpec {
	if size <= 0 {
		panic("flowhost: Tumbling window size must be positive")
	}
	return WindowSpec{kind: tumbling, size: int64(size)}
}

// Hopping returns windows of length size starting every advance
// ([n*advance, n*advance+size)): a record belongs to every window that
// contains its event time. It panics unless 0 < advance <= size.
func Hopping(size, advance time.Duration) WindowSpec {
	if advance <= 0 || size < advance {
		panic("flowhost: Hopping windows need 0 < advance <= size")
	}
	return WindowSpec{kind: hopping, size: int64(size), advance: int64(advance)}
}

// Session returns session windows: records of one key whose event times
// are less than gap apart are in one window [first, last+gap). It panics
// when gap is not positive.
func Session(gap time.Duration) WindowSpec {
	if gap <= 0 {
		panic("flowhost: Session gap must be positive")
	}
	return WindowSpec{kind: session, gap: int64(gap)}
}

// Window is one window of one key: [Start, End) in event time.
type Window struct {
	Key        string
	Start, End int64
}

// Aggregator folds a window's records into an accumulator of bytes, which
// the SDK keeps in the key's host-owned state between batches.
type Aggregator struct {
	// Init returns the accumulator of an empty window; nil means empty.
	Init func() []byte
	// Add returns acc with m folded in. It may modify and return acc.
	Add func(acc []byte, m Message) []byte
	// Merge combines the accumulators of two session windows, a starting
	// earlier than b. Required for Session windows.
	Merge func(a, b []byte) []byte
	// Result returns the payload emitted for a closed window; nil means
	// the accumulator itself.
	Result func(w Window, acc []byte) []byte
}

// WindowOption adjusts NewWindows.
type WindowOption func(*Windows)

// WithAllowedLateness keeps each window open until the watermark passes
// its end plus d, instead of its end.
func WithAllowedLateness(d time.Duration) WindowOption {
	return func(w *Windows) { w.lateness = int64(d) }
}

// Windows aggregates a transform's messages per (key, window) and emits
// each window's result when the watermark passes its end plus the allowed
// lateness. It owns the key's state and timers: a computation that uses
// Windows keeps nothing else in them.
//
// A result is emitted on the output stream with EventTimestamp End-1 and
// the firing timer as its only parent (the window's records were inputs of
// earlier calls, which the ABI cannot name). A record whose every window
// has already fired for its key is late: it goes, unchanged, to the late
// stream, with itself as parent. The rule depends only on the key's fired
// timers, which the host places at fixed positions among the messages, so
// the results do not depend on batch limits (sdk/WINDOWS.md).
type Windows struct {
	spec     WindowSpec
	agg      Aggregator
	output   string
	late     string
	lateness int64
	// setHere are the triggers set during the current Process call. Such
	// a timer is never cancelled in the same call: the host re-cuts a
	// batch only for the timers its response sets, so cancelling one that
	// would have fired before a later message of the batch would make the
	// result depend on where the batch was cut.
	setHere []int64
}

// NewWindows returns windows of spec aggregated by agg, whose results go
// to output and whose late records go to late. It panics when agg has no
// Add, a Session spec has no Merge, or a stream name is empty: a late
// record always has somewhere to go.
func NewWindows(spec WindowSpec, agg Aggregator, output, late string, opts ...WindowOption) *Windows {
	switch {
	case spec.kind == 0:
		panic("flowhost: NewWindows needs a WindowSpec from Tumbling, Hopping or Session")
	case agg.Add == nil:
		panic("flowhost: NewWindows needs Aggregator.Add")
	case spec.kind == session && agg.Merge == nil:
		panic("flowhost: Session windows need Aggregator.Merge")
	case output == "" || late == "":
		panic("flowhost: NewWindows needs an output stream and a late stream")
	}
	w := &Windows{spec: spec, agg: agg, output: output, late: late}
	for _, o := range opts {
		o(w)
	}
	if w.lateness < 0 {
		panic("flowhost: allowed lateness must not be negative")
	}
	return w
}

// openWindow is one window still waiting for its timer.
type openWindow struct {
	start, end int64
	acc        []byte
}

// windowState is what Windows keeps in a key's state.
type windowState struct {
	firedThrough int64 // largest trigger fired for the key; MinInt64: none
	open         []openWindow
}

// stateVersion is the first byte of the encoding (sdk/WINDOWS.md).
const stateVersion = 1

// ErrWindowState is wrapped by the error a key fails with when its state
// is not the encoding Windows writes.
var ErrWindowState = errors.New("flowhost: the key's state is not a window state")

func decodeWindowState(b []byte) (windowState, error) {
	s := windowState{firedThrough: math.MinInt64}
	if b == nil {
		return s, nil
	}
	bad := func(what string) (windowState, error) {
		return windowState{}, fmt.Errorf("%w: %s", ErrWindowState, what)
	}
	if len(b) == 0 || b[0] != stateVersion {
		return bad("missing or unknown version byte")
	}
	b = b[1:]
	varint := func(what string) (int64, error) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, fmt.Errorf("%w: bad %s", ErrWindowState, what)
		}
		b = b[n:]
		return v, nil
	}
	var err error
	if s.firedThrough, err = varint("fired-through"); err != nil {
		return windowState{}, err
	}
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return bad("bad window count")
	}
	b = b[n:]
	for range count {
		var w openWindow
		if w.start, err = varint("window start"); err != nil {
			return windowState{}, err
		}
		if w.end, err = varint("window end"); err != nil {
			return windowState{}, err
		}
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return bad("bad accumulator length")
		}
		w.acc = slices.Clone(b[n : n+int(size)])
		b = b[n+int(size):]
		// encode writes the windows sorted and distinct; two windows with
		// the same bounds would be found by lookup in an order no sort
		// defines, and so could differ between SDKs.
		if last := len(s.open) - 1; last >= 0 && !windowBefore(s.open[last], w) {
			return bad(windowOrder)
		}
		s.open = append(s.open, w)
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return s, nil
}

func (s *windowState) encode() []byte {
	out := []byte{stateVersion}
	out = binary.AppendVarint(out, s.firedThrough)
	out = binary.AppendUvarint(out, uint64(len(s.open)))
	for _, w := range s.open {
		out = binary.AppendVarint(out, w.start)
		out = binary.AppendVarint(out, w.end)
		out = binary.AppendUvarint(out, uint64(len(w.acc)))
		out = append(out, w.acc...)
	}
	return out
}

// floorDiv is t/d rounded towards minus infinity, for windows before 1970.
func floorDiv(t, d int64) int64 {
	q := t / d
	if t%d != 0 && (t < 0) != (d < 0) {
		q--
	}
	return q
}

// Process handles one key of a batch: it fires the windows whose timers
// are due, adds the key's messages to their windows (or sends them to the
// late stream) and saves the key's state and timers. On a state it cannot
// decode it fails the key (its inputs go to dead letters) and returns the
// error. It is not safe for concurrent use (a guest runs one call at a
// time).
func (w *Windows) Process(k *Key) error {
	s, err := decodeWindowState(k.stateOrNil())
	if err != nil {
		k.Fail(err)
		return err
	}
	w.setHere = w.setHere[:0]
	for t := range k.Timers() {
		kept := s.open[:0]
		for _, o := range s.open {
			if o.end+w.lateness <= t.TriggerTimestamp {
				// Only a timer that closes a window counts: a session's
				// stale timer closes nothing.
				s.firedThrough = max(s.firedThrough, t.TriggerTimestamp)
				w.emit(k, o)
			} else {
				kept = append(kept, o)
			}
		}
		s.open = kept
	}
	for m := range k.Messages() {
		if !w.add(k, &s, m) {
			k.Emit(w.late, m.Payload)
		}
	}
	if len(s.open) == 0 && s.firedThrough == math.MinInt64 {
		k.DeleteState()
	} else {
		k.SetState(s.encode())
	}
	return nil
}

func (k *Key) stateOrNil() []byte {
	b, ok := k.State()
	if !ok {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}

func (w *Windows) emit(k *Key, o openWindow) {
	payload := o.acc
	if w.agg.Result != nil {
		payload = w.agg.Result(Window{Key: k.Key(), Start: o.start, End: o.end}, o.acc)
	}
	k.Emit(w.output, payload, WithEventTimestamp(o.end-1))
}

func (w *Windows) init() []byte {
	if w.agg.Init == nil {
		return nil
	}
	return w.agg.Init()
}

// closed reports whether a window ending at end has fired for the key.
func (w *Windows) closed(s *windowState, end int64) bool {
	return s.firedThrough != math.MinInt64 && end+w.lateness <= s.firedThrough
}

// add puts m into its windows; false means every one has fired: m is late.
func (w *Windows) add(k *Key, s *windowState, m Message) bool {
	t := m.EventTimestamp
	if w.spec.kind == session {
		return w.addSession(k, s, m)
	}
	size, advance := w.spec.size, w.spec.advance
	if w.spec.kind == tumbling {
		advance = size
	}
	added := false
	for start := floorDiv(t, advance) * advance; start > t-size; start -= advance {
		end := start + size
		if w.closed(s, end) {
			break // earlier windows end earlier: closed too
		}
		i := slices.IndexFunc(s.open, func(o openWindow) bool { return o.start == start })
		if i < 0 {
			s.open = append(s.open, openWindow{start: start, end: end, acc: w.init()})
			i = len(s.open) - 1
			w.setTimer(k, end+w.lateness)
		}
		s.open[i].acc = w.agg.Add(s.open[i].acc, m)
		added = true
	}
	sortOpen(s.open)
	return added
}

func (w *Windows) addSession(k *Key, s *windowState, m Message) bool {
	t := m.EventTimestamp
	n := openWindow{start: t, end: t + w.spec.gap}
	if w.closed(s, n.end) {
		return false
	}
	n.acc = w.agg.Add(w.init(), m)
	kept := s.open[:0]
	var merged []openWindow
	for _, o := range s.open {
		if o.start < n.end && n.start < o.end {
			merged = append(merged, o)
		} else {
			kept = append(kept, o)
		}
	}
	old := slices.Clone(merged) // the sort below must not reorder the windows whose timers are cancelled
	merged = append(merged, n)
	slices.SortFunc(merged, func(a, b openWindow) int { return cmp.Compare(a.start, b.start)*2 + cmp.Compare(a.end, b.end) })
	acc := merged[0].acc
	start, end := merged[0].start, merged[0].end
	for _, o := range merged[1:] {
		acc = w.agg.Merge(acc, o.acc)
		start, end = min(start, o.start), max(end, o.end)
	}
	for _, o := range old {
		if o.end != end && !slices.Contains(w.setHere, o.end+w.lateness) {
			k.CancelTimer(o.end + w.lateness)
		}
	}
	w.setTimer(k, end+w.lateness)
	s.open = append(kept, openWindow{start: start, end: end, acc: acc})
	sortOpen(s.open)
	return true
}

func (w *Windows) setTimer(k *Key, trigger int64) {
	k.SetTimer(trigger)
	w.setHere = append(w.setHere, trigger)
}

// windowOrder is the error text of a state whose windows are not strictly
// increasing in (end, start), the order sortOpen keeps.
const windowOrder = "windows out of (end, start) order or repeated"

func sortOpen(ws []openWindow) {
	slices.SortFunc(ws, compareWindows)
}

func compareWindows(a, b openWindow) int {
	if a.end != b.end {
		return cmp.Compare(a.end, b.end)
	}
	return cmp.Compare(a.start, b.start)
}

// windowBefore reports whether a sorts strictly before b.
func windowBefore(a, b openWindow) bool { return compareWindows(a, b) < 0 }
