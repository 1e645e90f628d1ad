package ordering

import (
	"cmp"
	"fmt"
	"slices"
)

// BatchLimits bound one batch of a computation partition: Flow's
// max_rows_per_batch, max_bytes_per_batch and batch_duration. A zero field
// takes its value from [DefaultBatchLimits].
type BatchLimits struct {
	// MaxRows is the most messages a batch holds.
	MaxRows int
	// MaxBytes is the most bytes ([Message.Size]) a batch holds, unless a
	// single message is larger: it then forms a batch alone.
	MaxBytes int64
	// MaxAge is how long, in nanoseconds, the first message of a batch
	// waits for the batch to fill before the batch is due anyway.
	MaxAge int64
}

// DefaultBatchLimits are Flow's defaults: 1000 rows, 10 MiB, 1 s. Copy it;
// do not modify it.
var DefaultBatchLimits = BatchLimits{MaxRows: 1000, MaxBytes: 10 << 20, MaxAge: 1_000_000_000}

// withDefaults fills zero fields from DefaultBatchLimits and rejects
// negative ones.
func (l BatchLimits) withDefaults() (BatchLimits, error) {
	switch {
	case l.MaxRows < 0:
		return l, fmt.Errorf("batch limits: max_rows %d is negative", l.MaxRows)
	case l.MaxBytes < 0:
		return l, fmt.Errorf("batch limits: max_bytes %d is negative", l.MaxBytes)
	case l.MaxAge < 0:
		return l, fmt.Errorf("batch limits: max_age %dns is negative", l.MaxAge)
	}
	l.MaxRows = cmp.Or(l.MaxRows, DefaultBatchLimits.MaxRows)
	l.MaxBytes = cmp.Or(l.MaxBytes, DefaultBatchLimits.MaxBytes)
	l.MaxAge = cmp.Or(l.MaxAge, DefaultBatchLimits.MaxAge)
	return l, nil
}

// Batch is what one call of a computation partition processes: its messages
// and due timers grouped per key.
type Batch struct {
	// Keys holds one entry per key. First come the keys that have
	// messages, in the order of their first message; then the keys that
	// only have due timers, in (earliest Trigger, Key) order. Flow leaves
	// the order across keys unspecified; flowhost fixes one so that a
	// replay repeats it.
	Keys []KeyBatch
}

// KeyBatch is the share of one key in a [Batch]: its due timers, which are
// processed first, then its messages.
type KeyBatch struct {
	// Key is the canonical key text.
	Key string
	// Timers are the key's due timers in (Trigger, ID) order.
	Timers []Timer
	// Messages are the key's messages in the order they were added (the
	// merge order).
	Messages []*Message
}

// Rows returns the number of messages in b.
func (b Batch) Rows() int {
	n := 0
	for i := range b.Keys {
		n += len(b.Keys[i].Messages)
	}
	return n
}

// Batcher collects one computation partition's input, in merge order, into
// batches within [BatchLimits].
//
// The runtime Adds each message the [Merge] pops; when Add reports the
// batch full, or Ready reports it due, it Cuts. Cut takes the longest run of
// the oldest messages that fits the limits (at least one message), so a
// message that would overflow a batch waits for the next one: batches never
// exceed MaxRows, and exceed MaxBytes only when one message alone does.
//
// Cut groups per key (Flow processes an epoch's input per key, due timers
// first) without reordering the messages of a key, so the merge order of
// each key, and with it the derived-message guarantee, survives batching.
//
// The Batcher reuses its memory: the Batch returned by Cut, and the slices
// in it, are valid until the next Cut. In steady state Add and Cut allocate
// nothing. A Batcher is not safe for concurrent use.
type Batcher struct {
	limits BatchLimits
	// pending are the messages not yet cut, oldest first, and added the
	// times they were added.
	pending []*Message
	added   []int64
	bytes   int64

	// Reused by Cut.
	index  map[string]int
	groups []batchGroup
	last   int   // the group group() returned last, to skip the map for runs of one key
	slot   []int // group of each message being cut
	timers []Timer
	tslot  []int // group of each timer being cut
	msgs   []*Message
	keys   []KeyBatch
}

type batchGroup struct {
	key            string
	nMsgs, nTimers int
	// offsets into the flat message and timer arrays, then fill cursors.
	msgAt, timerAt int
}

// NewBatcher returns an empty Batcher; zero fields of limits take their
// [DefaultBatchLimits] value and negative ones are an error.
func NewBatcher(limits BatchLimits) (*Batcher, error) {
	l, err := limits.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Batcher{limits: l, index: make(map[string]int)}, nil
}

// Limits returns the limits in force, defaults filled in.
func (b *Batcher) Limits() BatchLimits { return b.limits }

// Add appends m, which arrived at now (nanoseconds), and reports whether
// the pending messages fill a batch: MaxRows messages, or at least MaxBytes
// bytes. A message must not be modified until it has been cut.
func (b *Batcher) Add(m *Message, now int64) (full bool) {
	b.pending = append(b.pending, m)
	b.added = append(b.added, now)
	b.bytes += m.Size()
	return b.full()
}

func (b *Batcher) full() bool {
	return len(b.pending) >= b.limits.MaxRows || b.bytes >= b.limits.MaxBytes
}

// Ready reports whether a batch is due at now: full, or holding a message
// added at least MaxAge ago.
func (b *Batcher) Ready(now int64) bool {
	if len(b.pending) == 0 {
		return false
	}
	return b.full() || now-b.added[0] >= b.limits.MaxAge
}

// Len returns the number of messages not yet cut.
func (b *Batcher) Len() int { return len(b.pending) }

// Bytes returns the bytes of the messages not yet cut.
func (b *Batcher) Bytes() int64 { return b.bytes }

// Oldest returns when the oldest pending message was added; ok is false
// when none is pending. A runtime sleeps until Oldest + MaxAge.
func (b *Batcher) Oldest() (added int64, ok bool) {
	if len(b.pending) == 0 {
		return 0, false
	}
	return b.added[0], true
}

// Cut removes the next batch from the pending messages and returns it with
// the due timers grouped in. due are the timers that fire now (Trigger <=
// the timer stream's watermark, for instance [TimerStore.PopDue]); all of
// them go into this batch, whether or not their keys have messages in it,
// and they do not count towards the limits. Cut does not keep or modify
// due. With nothing pending and no timers it returns an empty Batch.
func (b *Batcher) Cut(due []Timer) Batch {
	n := b.cutLen()
	// Drop the previous batch's references, so that a large batch does
	// not keep messages and payloads alive behind a smaller one.
	clear(b.msgs)
	clear(b.timers)
	clear(b.keys)
	clear(b.index)
	b.groups = b.groups[:0]
	b.slot = b.slot[:0]
	for _, m := range b.pending[:n] {
		b.slot = append(b.slot, b.group(m.Key))
		b.groups[b.slot[len(b.slot)-1]].nMsgs++
	}

	// Timers sorted by (Trigger, Key, ID) meet the keys that only have
	// timers in (earliest Trigger, Key) order, and leave each key's timers
	// in (Trigger, ID) order.
	b.timers = append(b.timers[:0], due...)
	slices.SortFunc(b.timers, func(x, y Timer) int {
		if c := cmp.Compare(x.Trigger, y.Trigger); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return x.ID.Compare(y.ID)
	})
	b.tslot = b.tslot[:0]
	for i := range b.timers {
		g := b.group(b.timers[i].Key)
		b.tslot = append(b.tslot, g)
		b.groups[g].nTimers++
	}

	msgAt, timerAt := 0, 0
	for i := range b.groups {
		g := &b.groups[i]
		g.msgAt, g.timerAt = msgAt, timerAt
		msgAt += g.nMsgs
		timerAt += g.nTimers
	}
	b.msgs = slices.Grow(b.msgs[:0], n)[:n]
	for i, m := range b.pending[:n] {
		g := &b.groups[b.slot[i]]
		b.msgs[g.msgAt] = m
		g.msgAt++
	}
	b.placeTimers()

	b.keys = b.keys[:0]
	msgAt, timerAt = 0, 0
	for i := range b.groups {
		g := &b.groups[i]
		b.keys = append(b.keys, KeyBatch{
			Key:      g.key,
			Timers:   b.timers[timerAt : timerAt+g.nTimers : timerAt+g.nTimers],
			Messages: b.msgs[msgAt : msgAt+g.nMsgs : msgAt+g.nMsgs],
		})
		msgAt += g.nMsgs
		timerAt += g.nTimers
	}

	k := copy(b.pending, b.pending[n:])
	clear(b.pending[k:])
	b.pending = b.pending[:k]
	b.added = b.added[:copy(b.added, b.added[n:])]
	for _, m := range b.msgs {
		b.bytes -= m.Size()
	}
	return Batch{Keys: b.keys}
}

// cutLen returns how many of the oldest pending messages the next batch
// takes.
func (b *Batcher) cutLen() int {
	n := min(len(b.pending), b.limits.MaxRows)
	var bytes int64
	for i, m := range b.pending[:n] {
		bytes += m.Size()
		if i > 0 && bytes > b.limits.MaxBytes {
			return i
		}
	}
	return n
}

// group returns the index of key's group, adding one if key is new.
func (b *Batcher) group(key string) int {
	if b.last < len(b.groups) && b.groups[b.last].key == key {
		return b.last
	}
	g, ok := b.index[key]
	if !ok {
		g = len(b.groups)
		b.index[key] = g
		b.groups = append(b.groups, batchGroup{key: key})
	}
	b.last = g
	return g
}

// placeTimers moves b.timers, sorted by (Trigger, Key, ID), into group
// order, keeping the sorted order inside each group: a counting sort by
// group done in place (each timer's destination computed from the group
// offsets, then cycles of swaps), so no second array is needed.
func (b *Batcher) placeTimers() {
	if len(b.timers) < 2 {
		return
	}
	// tslot[i] becomes the destination of timer i; a cycle walk then
	// moves every timer once.
	for i, g := range b.tslot {
		b.tslot[i] = b.groups[g].timerAt
		b.groups[g].timerAt++
	}
	for i := range b.timers {
		for b.tslot[i] != i {
			j := b.tslot[i]
			b.timers[i], b.timers[j] = b.timers[j], b.timers[i]
			b.tslot[i], b.tslot[j] = b.tslot[j], b.tslot[i]
		}
	}
}
