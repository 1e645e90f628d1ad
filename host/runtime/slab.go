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
