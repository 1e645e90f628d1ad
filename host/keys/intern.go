package keys

// Interner hands out one string per distinct key text, so that a key seen
// again costs a map lookup instead of an allocation, and the copies of a
// key held by a partition's state and queues share one backing array. It
// holds at most maxInterned texts of at most maxInternedLen bytes: when it
// is full it starts afresh, so it never grows past that, and longer texts
// are never kept. Keys that rarely repeat (an order id) would pay a map
// insert per key for nothing, more than doubling a key's cost: so when a
// filling brought fewer hits than misses, the Interner steps aside for
// the next skipAfterMisses keys (one allocation each, as without it) and
// then tries again. An Interner is not safe for concurrent
// use: each goroutine that computes keys keeps its own. A nil *Interner is
// valid and interns nothing.
type Interner struct {
	texts        map[string]string
	hits, misses int
	skip         int
}

const (
	maxInterned     = 1 << 14
	maxInternedLen  = 256
	skipAfterMisses = 4 * maxInterned
)

// String returns b as a string: the one the Interner holds for that text
// when there is one, a new one otherwise (kept for next time).
func (in *Interner) String(b []byte) string {
	if in == nil || len(b) > maxInternedLen {
		return string(b)
	}
	if in.skip > 0 {
		in.skip--
		return string(b)
	}
	if s, ok := in.texts[string(b)]; ok {
		in.hits++
		return s
	}
	in.misses++
	if in.texts == nil {
		in.texts = make(map[string]string)
	} else if len(in.texts) >= maxInterned {
		if in.hits < in.misses {
			in.skip = skipAfterMisses
		}
		clear(in.texts)
		in.hits, in.misses = 0, 0
	}
	s := string(b)
	in.texts[s] = s
	return s
}
