package ordering

// This file holds the binary min-heap under StreamBuffer, Merge and
// PartitionMerge. It is written here rather than taken from container/heap
// because container/heap reaches Less, Swap, Push and Pop through an
// interface: every comparison is an indirect call that cannot be inlined and
// every Push/Pop boxes the element into an `any`. At the ten million
// messages a second a merge must sustain, that dispatch costs more than the
// ordering work itself. Here the key every user orders by is a plain struct
// compared inline; only a StreamBuffer's rare equal-alignment ties go
// through a function value. Items are moved into a hole instead of swapped,
// and the backing slice is reused, so a heap in steady state allocates
// nothing.

// heapKey is the inline part of a heap item's order: primary, then
// secondary, then slot, all ascending.
type heapKey struct {
	primary   int64
	secondary uint64
	// slot is the last tie-break and, in an indexed heap, the item's
	// identity: pos[slot] tracks where the item sits.
	slot int32
}

// heapItem is a key with the value it orders.
type heapItem[V any] struct {
	// val comes first: a trailing zero-size field (V = struct{}) would be
	// padded, making every item 32 bytes instead of 24.
	val V
	key heapKey
}

// binHeap is a binary min-heap of items by key. The zero value is an empty
// heap with no tie-break and no index.
type binHeap[V any] struct {
	items []heapItem[V]
	// tie orders the values of items whose keys are equal; nil means keys
	// are unique (or equal keys may come out in any order).
	tie func(a, b V) bool
	// pos, when non-nil, maps a slot to the index of the item holding it,
	// or -1 when no item does: it lets an indexed heap re-key or remove an
	// item by identity in O(log n). Slots must then be unique and
	// 0 <= slot < len(pos).
	pos []int32
}

// newIndexedHeap returns a heap whose items are identified by slots
// 0..slots-1, each present at most once.
func newIndexedHeap[V any](slots int) binHeap[V] {
	pos := make([]int32, slots)
	for i := range pos {
		pos[i] = -1
	}
	return binHeap[V]{items: make([]heapItem[V], 0, slots), pos: pos}
}

func (h *binHeap[V]) len() int { return len(h.items) }

// less orders items by key, then by tie.
func (h *binHeap[V]) less(a, b *heapItem[V]) bool {
	return a.key.primary < b.key.primary || a.key.primary == b.key.primary && h.lessAfterPrimary(*a, *b)
}

// lessAfterPrimary is less for items of equal primary key. The sift loops
// test the primary key themselves and call this only on equality: less
// does not fit Go's inlining budget, and the call per comparison showed in
// profiles. It takes its items by value so that the item being sifted
// never has its address taken and can stay in registers.
func (h *binHeap[V]) lessAfterPrimary(a, b heapItem[V]) bool {
	if a.key.secondary != b.key.secondary {
		return a.key.secondary < b.key.secondary
	}
	if a.key.slot != b.key.slot {
		return a.key.slot < b.key.slot
	}
	return h.tie != nil && h.tie(a.val, b.val)
}

// push adds it.
func (h *binHeap[V]) push(it heapItem[V]) {
	var zero heapItem[V]
	h.items = append(h.items, zero)
	h.up(len(h.items)-1, it)
}

// top returns the least item; the heap must not be empty.
func (h *binHeap[V]) top() *heapItem[V] { return &h.items[0] }

// pop removes and returns the least item; the heap must not be empty.
func (h *binHeap[V]) pop() heapItem[V] {
	it := h.items[0]
	h.removeAt(0)
	return it
}

// removeAt removes the item at index i.
func (h *binHeap[V]) removeAt(i int) {
	if h.pos != nil {
		h.pos[h.items[i].key.slot] = -1
	}
	n := len(h.items) - 1
	last := h.items[n]
	// Clear the vacated cell so the heap does not keep a popped value (a
	// *Message, say) reachable.
	var zero heapItem[V]
	h.items[n] = zero
	h.items = h.items[:n]
	if i == n {
		return
	}
	if i > 0 && h.less(&last, &h.items[(i-1)/2]) {
		h.up(i, last)
		return
	}
	h.refill(i, last)
}

// fix puts it, the new content of index i, where it belongs.
func (h *binHeap[V]) fix(i int, it heapItem[V]) {
	if i > 0 && h.less(&it, &h.items[(i-1)/2]) {
		h.up(i, it)
		return
	}
	h.down(i, it)
}

// up moves the hole at i towards the root until it fits, then stores it.
func (h *binHeap[V]) up(i int, it heapItem[V]) {
	items, pos := h.items, h.pos
	for i > 0 {
		parent := (i - 1) / 2
		p := &items[parent]
		// !less(it, p), with the primary key compared inline.
		if it.key.primary > p.key.primary || it.key.primary == p.key.primary && !h.lessAfterPrimary(it, *p) {
			break
		}
		items[i] = *p
		if pos != nil {
			pos[p.key.slot] = int32(i)
		}
		i = parent
	}
	items[i] = it
	if pos != nil {
		pos[it.key.slot] = int32(i)
	}
}

// down moves the hole at i towards the leaves until it fits, then stores
// it; it must not sort before i's parent.
//
// This loop compares primary keys only and hands over to downTies at the
// first equality it meets. Keeping every call out of the loop lets the
// compiler hold its state in registers, and the merge's sift is the
// hottest loop of the package.
func (h *binHeap[V]) down(i int, it heapItem[V]) {
	items, pos := h.items, h.pos
	n := len(items)
	for {
		child := 2*i + 1
		if child >= n || child < 0 {
			break
		}
		if r := child + 1; r < n {
			lp, rp := items[child].key.primary, items[r].key.primary
			if lp == rp {
				h.downTies(i, it)
				return
			}
			// child = the lesser sibling. Which one that is is a coin toss
			// on real data, so a branch on it would mispredict half the
			// time; this compiles to a flag move instead.
			step := 0
			if rp < lp {
				step = 1
			}
			child += step
		}
		c := &items[child]
		if c.key.primary >= it.key.primary {
			if c.key.primary == it.key.primary {
				h.downTies(i, it)
				return
			}
			break
		}
		items[i] = *c
		if pos != nil {
			pos[c.key.slot] = int32(i)
		}
		i = child
	}
	items[i] = it
	if pos != nil {
		pos[it.key.slot] = int32(i)
	}
}

// downTies is down for any keys, equal primaries included.
func (h *binHeap[V]) downTies(i int, it heapItem[V]) {
	items, pos := h.items, h.pos
	n := len(items)
	for {
		child := 2*i + 1
		if child >= n || child < 0 {
			break
		}
		if r := child + 1; r < n {
			// child = the lesser sibling, without a branch when the
			// primary keys differ (see down).
			lp, rp := items[child].key.primary, items[r].key.primary
			if lp != rp {
				step := 0
				if rp < lp {
					step = 1
				}
				child += step
			} else if h.lessAfterPrimary(items[r], items[child]) {
				child = r
			}
		}
		c := &items[child]
		// !less(c, it), with the primary key compared inline.
		if c.key.primary > it.key.primary || c.key.primary == it.key.primary && !h.lessAfterPrimary(*c, it) {
			break
		}
		items[i] = *c
		if pos != nil {
			pos[c.key.slot] = int32(i)
		}
		i = child
	}
	items[i] = it
	if pos != nil {
		pos[it.key.slot] = int32(i)
	}
}

// refill fills the hole at i, left by a removed item, with it, the heap's
// former last leaf, which must not sort before i's parent. It is Floyd's
// variant of sifting down: the hole first goes all the way to a leaf,
// always taking the lesser child (one comparison per level, not two), then
// it climbs back up, never above i. A former leaf belongs near the bottom,
// where most of a heap's nodes are, so the climb is short.
func (h *binHeap[V]) refill(i int, it heapItem[V]) {
	items, pos := h.items, h.pos
	n := len(items)
	start := i
	for {
		child := 2*i + 1
		if child >= n || child < 0 {
			break
		}
		if r := child + 1; r < n {
			// child = the lesser sibling, without a branch when the
			// primary keys differ (see down).
			lp, rp := items[child].key.primary, items[r].key.primary
			if lp != rp {
				step := 0
				if rp < lp {
					step = 1
				}
				child += step
			} else if h.lessAfterPrimary(items[r], items[child]) {
				child = r
			}
		}
		c := &items[child]
		items[i] = *c
		if pos != nil {
			pos[c.key.slot] = int32(i)
		}
		i = child
	}
	for i > start {
		parent := (i - 1) / 2
		p := &items[parent]
		// !less(it, p), with the primary key compared inline.
		if it.key.primary > p.key.primary || it.key.primary == p.key.primary && !h.lessAfterPrimary(it, *p) {
			break
		}
		items[i] = *p
		if pos != nil {
			pos[p.key.slot] = int32(i)
		}
		i = parent
	}
	items[i] = it
	if pos != nil {
		pos[it.key.slot] = int32(i)
	}
}

// index returns where the item holding slot sits, or -1; indexed heaps only.
func (h *binHeap[V]) index(slot int) int { return int(h.pos[slot]) }

// set gives slot the key k (whose slot must be slot): it adds the item if
// absent and re-keys it if present; an unchanged key moves nothing.
// Indexed heaps only.
func (h *binHeap[V]) set(k heapKey, v V) {
	i := h.pos[k.slot]
	if i < 0 {
		h.push(heapItem[V]{key: k, val: v})
		return
	}
	it := heapItem[V]{key: k, val: v}
	switch {
	case h.items[i].key == k:
		h.items[i].val = v
	case i > 0 && h.less(&it, &h.items[(i-1)/2]):
		h.up(int(i), it)
	case 2*int(i)+1 >= len(h.items):
		// A leaf that need not rise stays: skip down's setup.
		h.items[i] = it
	default:
		h.down(int(i), it)
	}
}

// replaceTop gives the least item the key k, keeping its value: set for
// the item known to be at the top, without looking up its index.
func (h *binHeap[V]) replaceTop(k heapKey) {
	top := &h.items[0]
	if top.key == k {
		return
	}
	it := heapItem[V]{key: k, val: top.val}
	if len(h.items) == 1 {
		top.key = k
		return
	}
	h.down(0, it)
}

// clear removes the item holding slot, if any. Indexed heaps only.
func (h *binHeap[V]) clear(slot int) {
	if i := h.pos[slot]; i >= 0 {
		h.removeAt(int(i))
	}
}
