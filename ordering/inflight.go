package ordering

// InFlight is a multiset of timestamps still in flight on a stream: the
// EventTimestamp (or SystemTimestamp) of every buffered message and the
// TriggerTimestamp of every pending timer. Its minimum is what a
// [StreamWatermark] is lowered to.
//
// Add and Remove cost O(log d) where d is the number of distinct values
// held; Min is amortised O(log d); Len is O(1). A value removed while a
// smaller one is held leaves a stale heap entry behind, dropped when it
// reaches the top or when stale entries outnumber live ones (a rebuild in
// O(d)), so memory stays within twice the live distinct values.
//
// At 250,000 values (BenchmarkInFlight, same machine and caveats as
// [TimerStore]) a Remove plus an Add takes 660-680 ns when values leave in
// random order and 585-620 ns, Min included, when they leave oldest first
// as from a buffer; neither allocates per operation.
//
// The zero InFlight is empty and ready to use. It is not safe for
// concurrent use.
type InFlight struct {
	// count holds, for every value with a heap entry, how many copies are
	// live; 0 marks a stale entry still in the heap.
	count map[int64]int
	heap  []int64 // min-heap of distinct values, live or stale
	stale int     // heap entries whose count is 0
	n     int     // live copies
}

// Add records one more copy of ts.
func (f *InFlight) Add(ts int64) {
	if f.count == nil {
		f.count = make(map[int64]int)
	}
	c, inHeap := f.count[ts]
	switch {
	case !inHeap:
		f.push(ts)
	case c == 0:
		f.stale--
	}
	f.count[ts] = c + 1
	f.n++
}

// Remove drops one copy of ts. It reports false, changing nothing, when no
// copy of ts is held.
func (f *InFlight) Remove(ts int64) bool {
	c := f.count[ts]
	if c == 0 {
		return false
	}
	f.count[ts] = c - 1
	f.n--
	if c == 1 {
		f.stale++
		if len(f.heap) > 0 && f.heap[0] == ts {
			f.popStale()
		} else if f.stale > 64 && f.stale > len(f.heap)/2 {
			f.compact()
		}
	}
	return true
}

// Min returns the smallest value held; ok is false when none is.
func (f *InFlight) Min() (ts int64, ok bool) {
	f.popStale()
	if len(f.heap) == 0 {
		return 0, false
	}
	return f.heap[0], true
}

// Len returns the number of values held, copies included.
func (f *InFlight) Len() int { return f.n }

// Count returns how many copies of ts are held.
func (f *InFlight) Count(ts int64) int { return f.count[ts] }

// popStale removes stale entries from the top of the heap.
func (f *InFlight) popStale() {
	for len(f.heap) > 0 && f.count[f.heap[0]] == 0 {
		top := f.heap[0]
		last := len(f.heap) - 1
		f.heap[0] = f.heap[last]
		f.heap = f.heap[:last]
		if last > 0 {
			f.down(0)
		}
		delete(f.count, top)
		f.stale--
	}
}

// compact drops every stale entry and re-heapifies in O(d).
func (f *InFlight) compact() {
	live := f.heap[:0]
	for _, v := range f.heap {
		if f.count[v] > 0 {
			live = append(live, v)
		} else {
			delete(f.count, v)
		}
	}
	clear(f.heap[len(live):])
	f.heap, f.stale = live, 0
	for i := len(f.heap)/2 - 1; i >= 0; i-- {
		f.down(i)
	}
}

func (f *InFlight) push(v int64) {
	f.heap = append(f.heap, v)
	i := len(f.heap) - 1
	for i > 0 {
		p := (i - 1) / 2
		if f.heap[p] <= v {
			break
		}
		f.heap[i] = f.heap[p]
		i = p
	}
	f.heap[i] = v
}

func (f *InFlight) down(i int) {
	h := f.heap
	v := h[i]
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r] < h[c] {
			c = r
		}
		if v <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = v
}
