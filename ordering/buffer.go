package ordering

// StreamBuffer holds the queued messages of one stream and yields them in
// the seed's in-stream order: ascending (AlignmentTimestamp, MessageID),
// with MessageID compared as a structured value ([MessageID.Compare]).
//
// The order depends only on the messages, never on when they arrived: the
// same multiset pushed in any order pops in the same order. Two messages
// with equal AlignmentTimestamp and equal MessageID are the same message as
// far as ordering goes (deduplication is the caller's job); between such
// twins the order is unspecified.
//
// Messages mostly arrive in order already (a source partition's alignments
// never decrease, and a transform stamps its outputs with a clock that
// never goes back), so the buffer keeps two parts: a run, the messages
// that arrived in order, kept as a FIFO; and a heap for the rest. Push
// appends to the run when the message sorts at or after the run's last
// one, and Pop takes the lesser of the run's first and the heap's top. A
// stream that arrives in order therefore costs O(1) per message, and any
// other O(log n). Once the buffer has grown to its working size, neither
// allocates.
//
// A queued message must not be modified until it has been popped: its Time
// and ID are its place in the buffer. A StreamBuffer is not safe for
// concurrent use.
type StreamBuffer struct {
	stream string
	// run is a ring of in-order arrivals: run[(first+i)&(len(run)-1)] for
	// i < runLen, sorted ascending. len(run) is 0 or a power of two.
	run    []runEntry
	first  int
	runLen int
	// heap holds the messages that arrived out of order.
	heap binHeap[*Message]
	// head is the next message, nil when empty; headInRun says whether it
	// is the run's first or the heap's top. Keeping it makes Peek (which
	// Merge needs after every Push and Pop) a field read.
	head      *Message
	headInRun bool
	bytes     int64
}

// runEntry caches a run message's alignment, which most comparisons need
// alone, beside the message.
type runEntry struct {
	alignment int64
	m         *Message
}

// NewStreamBuffer returns an empty buffer for the stream named stream.
func NewStreamBuffer(stream string) *StreamBuffer {
	b := &StreamBuffer{}
	b.init(stream)
	return b
}

// init readies b in place, so that Merge can keep its buffers in one slice.
func (b *StreamBuffer) init(stream string) {
	b.stream = stream
	b.heap.tie = idLess
}

// idLess breaks ties of equal AlignmentTimestamp, which the heap key
// already compared.
func idLess(a, b *Message) bool { return a.ID.Compare(b.ID) < 0 }

// Stream returns the name of the buffer's stream.
func (b *StreamBuffer) Stream() string { return b.stream }

// Push queues m.
func (b *StreamBuffer) Push(m *Message) {
	b.bytes += m.Footprint()
	a := m.Time.Alignment
	if b.runLen > 0 {
		last := &b.run[(b.first+b.runLen-1)&(len(b.run)-1)]
		if a < last.alignment || a == last.alignment && m.ID.Compare(last.m.ID) < 0 {
			b.heap.push(heapItem[*Message]{key: heapKey{primary: a}, val: m})
			if b.heap.top().val == m && inStreamLess(m, b.head) {
				b.head, b.headInRun = m, false
			}
			return
		}
	}
	if b.runLen == len(b.run) {
		b.growRun()
	}
	b.run[(b.first+b.runLen)&(len(b.run)-1)] = runEntry{alignment: a, m: m}
	b.runLen++
	// m is the run's last; it is the head only if nothing else is queued
	// or it started the run while the heap held only later messages.
	if b.runLen == 1 && (b.head == nil || !inStreamLess(b.head, m)) {
		b.head, b.headInRun = m, true
	}
}

// growRun doubles the ring, unrolling it to start at index 0.
func (b *StreamBuffer) growRun() {
	grown := make([]runEntry, max(8, 2*len(b.run)))
	for i := range b.runLen {
		grown[i] = b.run[(b.first+i)&(len(b.run)-1)]
	}
	b.run, b.first = grown, 0
}

// findHead sets head to the lesser of the run's first and the heap's top.
func (b *StreamBuffer) findHead() {
	switch {
	case b.runLen == 0 && b.heap.len() == 0:
		b.head = nil
	case b.heap.len() == 0:
		b.head, b.headInRun = b.run[b.first].m, true
	case b.runLen == 0:
		b.head, b.headInRun = b.heap.top().val, false
	default:
		r, h := &b.run[b.first], b.heap.top()
		inRun := r.alignment < h.key.primary ||
			r.alignment == h.key.primary && r.m.ID.Compare(h.val.ID) <= 0
		if inRun {
			b.head, b.headInRun = r.m, true
		} else {
			b.head, b.headInRun = h.val, false
		}
	}
}

// Peek returns the next message in order without removing it, or nil if the
// buffer is empty.
func (b *StreamBuffer) Peek() *Message { return b.head }

// Pop removes and returns the next message in order, or nil if the buffer is
// empty.
func (b *StreamBuffer) Pop() *Message {
	m := b.head
	switch {
	case m == nil:
		return nil
	case b.headInRun:
		// Drop the reference so that a popped message is not kept alive.
		b.run[b.first].m = nil
		b.first = (b.first + 1) & (len(b.run) - 1)
		b.runLen--
	default:
		b.heap.pop()
	}
	b.bytes -= m.Footprint()
	b.findHead()
	return m
}

// Len returns the number of queued messages.
func (b *StreamBuffer) Len() int { return b.runLen + b.heap.len() }

// Bytes returns the sum of [Message.Size] over the queued messages.
func (b *StreamBuffer) Bytes() int64 { return b.bytes }
