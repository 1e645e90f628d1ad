package ordering

// InFlight is a multiset of timestamps still in flight on a stream: the
// EventTimestamp (or SystemTimestamp) of every buffered message and the
// TriggerTimestamp of every pending timer. Its minimum is what a
// [StreamWatermark] is lowered to.
//
// Add and Remove cost O(log d) where d is the number of distinct values
// held, and amortised O(1) for values added in nondecreasing order that
// leave oldest first (a buffer filled in time order); Min is amortised
// O(log d); Len is O(1). A value removed while a
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
	// run holds the values added in nondecreasing order, ascending and
	// distinct, with their live copies, from run[head] on: the common case
	// of a buffer filled in time order costs no hashing. run[head] is
	// live whenever head < len(run); runDead counts the entries after it
	// whose copies are all gone, dropped once they outnumber the live.
	run     []inFlightRun
	head    int
	runDead int
	// count holds, for every value with a heap entry, how many copies are
	// live; 0 marks a stale entry still in the heap. The heap holds the
	// values added below the run's last one.
	count map[int64]int
	heap  []int64 // min-heap of distinct values, live or stale
	stale int     // heap entries whose count is 0
	n     int     // live copies
}

type inFlightRun struct {
	v int64
	c int
}

// Add records one more copy of ts.
func (f *InFlight) Add(ts int64) {
	f.n++
	if last := len(f.run) - 1; last < f.head || ts >= f.run[last].v {
		if last >= f.head && f.run[last].v == ts {
			if f.run[last].c == 0 {
				f.runDead--
			}
			f.run[last].c++
			return
		}
		f.run = append(f.run, inFlightRun{v: ts, c: 1})
		return
	}
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
}

// Remove drops one copy of ts. It reports false, changing nothing, when no
// copy of ts is held.
func (f *InFlight) Remove(ts int64) bool {
	if i, ok := f.findRun(ts); ok {
		f.n--
		f.run[i].c--
		if i == f.head {
			f.advanceRun()
		} else if f.run[i].c == 0 {
			f.runDead++
			if f.runDead > 64 && f.runDead > (len(f.run)-f.head)/2 {
				f.compactRun()
			}
		}
		return true
	}
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

// findRun returns the index of a live run entry of value ts.
func (f *InFlight) findRun(ts int64) (int, bool) {
	r := f.run[f.head:]
	if len(r) == 0 || ts < r[0].v || ts > r[len(r)-1].v {
		return 0, false
	}
	i := f.head
	if r[0].v != ts { // leaving oldest first is the common case
		lo, hi := 0, len(r)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if r[m].v < ts {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo == len(r) || r[lo].v != ts {
			return 0, false
		}
		i += lo
	}
	return i, f.run[i].c > 0
}

// advanceRun moves the run's head past the entries with no live copy.
func (f *InFlight) advanceRun() {
	for f.head < len(f.run) && f.run[f.head].c == 0 {
		f.head++
		if f.head < len(f.run) && f.run[f.head].c == 0 {
			f.runDead--
		}
	}
	switch {
	case f.head == len(f.run):
		f.run, f.head, f.runDead = f.run[:0], 0, 0
	case f.head > 64 && f.head >= len(f.run)/2:
		n := copy(f.run, f.run[f.head:])
		f.run, f.head = f.run[:n], 0
	}
}

// compactRun drops the run's entries with no live copy.
func (f *InFlight) compactRun() {
	live := f.run[:0]
	for _, e := range f.run[f.head:] {
		if e.c > 0 {
			live = append(live, e)
		}
	}
	f.run, f.head, f.runDead = live, 0, 0
}

// Min returns the smallest value held; ok is false when none is.
func (f *InFlight) Min() (ts int64, ok bool) {
	f.popStale()
	hasRun := f.head < len(f.run)
	if len(f.heap) == 0 {
		if !hasRun {
			return 0, false
		}
		return f.run[f.head].v, true
	}
	if hasRun && f.run[f.head].v < f.heap[0] {
		return f.run[f.head].v, true
	}
	return f.heap[0], true
}

// Len returns the number of values held, copies included.
func (f *InFlight) Len() int { return f.n }

// Count returns how many copies of ts are held.
func (f *InFlight) Count(ts int64) int {
	n := f.count[ts]
	if i, ok := f.findRun(ts); ok {
		n += f.run[i].c
	}
	return n
}

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
