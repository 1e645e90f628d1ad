package runtime

import "github.com/flowhost/flowhost/ordering"

// slab hands out zeroed values of T from chunks of slabChunk, one heap
// allocation per chunk instead of one per value: the per-message
// allocations of the data path (a source record, a reader's keyed copy, a
// derived message) are its largest cost after the payload itself.
//
// A chunk stays in memory while any of its values is referenced. So each
// slab serves one queue, whose values are released in about the order they
// were handed out (one source partition's records, one sender's copies for
// one destination, one partition's outputs): at most the chunk being
// drained is partly dead, and what the buffers hold costs at most one chunk
// more per queue. A slab is not safe for concurrent use; its owner's
// goroutine (or lock) guards it.
type slab[T any] struct{ free []T }

// slabChunk is small enough that a partly released chunk costs little
// (a chunk of messages is about 10 KB) and large enough to make the
// allocation per value negligible.
const slabChunk = 64

func (s *slab[T]) next() *T {
	if len(s.free) == 0 {
		s.free = make([]T, slabChunk)
	}
	v := &s.free[0]
	s.free = s.free[1:]
	return v
}

// derivedMessage is a derived message with room for one parent's id, the
// common case, so that its Parents need no allocation of their own.
type derivedMessage struct {
	m      ordering.Message
	parent [1]ordering.MessageID
}

// fifo is a queue of pointers that drops its read prefix as it goes, so
// that a queue its writer never lets empty (a connector ahead of the
// reader) holds only what is in it, not every value it ever held.
type fifo[T any] struct {
	q    []*T
	head int
}

func (f *fifo[T]) push(v *T) { f.q = append(f.q, v) }

func (f *fifo[T]) len() int { return len(f.q) - f.head }

// peek returns the first value; the queue must not be empty.
func (f *fifo[T]) peek() *T { return f.q[f.head] }

// pop removes and returns the first value; the queue must not be empty.
func (f *fifo[T]) pop() *T {
	v := f.q[f.head]
	f.q[f.head] = nil
	f.head++
	switch {
	case f.head == len(f.q):
		f.q, f.head = f.q[:0], 0
	case f.head >= 64 && f.head >= len(f.q)/2:
		// Amortised O(1): the values moved are at most the ones popped.
		k := copy(f.q, f.q[f.head:])
		clear(f.q[k:])
		f.q, f.head = f.q[:k], 0
	}
	return v
}
