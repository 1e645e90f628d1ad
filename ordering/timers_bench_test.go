package ordering

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// The benchmarks hold the stores at wmBenchPending entries: the scale the
// brief names for one computation partition's pending timers.
const (
	wmBenchPending = 250_000
	wmBenchKeys    = 50_000
	wmBenchBase    = int64(1_700_000_000) * int64(time.Second)
	wmBenchSpan    = int64(time.Hour) // triggers spread over an hour ahead
	wmBenchChunk   = 1024             // ops between untimed refills
)

// wmBench holds the pre-built inputs so that the timed loops allocate
// nothing of their own.
type wmBench struct {
	rng  *rand.Rand
	keys []string
	ids  []MessageID
	seq  int
}

func wmNewBench() *wmBench {
	w := &wmBench{rng: rand.New(rand.NewPCG(1, 2))}
	for i := range wmBenchKeys {
		w.keys = append(w.keys, "user-"+strconv.Itoa(i))
	}
	for i := range 4096 {
		w.ids = append(w.ids, TransformID("sessions", 3, uint64(i)))
	}
	return w
}

// timer returns a fresh timer at a random key with a trigger in
// [from, from+wmBenchSpan).
func (w *wmBench) timer(from int64) Timer {
	w.seq++
	return Timer{
		Key:     w.keys[w.rng.IntN(len(w.keys))],
		Trigger: from + w.rng.Int64N(wmBenchSpan),
		Event:   from,
		ID:      w.ids[w.seq%len(w.ids)],
	}
}

// store returns a store holding wmBenchPending timers.
func (w *wmBench) store() *TimerStore {
	s := NewTimerStore()
	for s.Len() < wmBenchPending {
		s.Set(w.timer(wmBenchBase))
	}
	return s
}

func BenchmarkTimerStore(b *testing.B) {
	b.Run("Set", func(b *testing.B) {
		w := wmNewBench()
		s := w.store()
		batch := make([]Timer, 0, wmBenchChunk)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t := w.timer(wmBenchBase)
			if s.Set(t) {
				batch = append(batch, t)
			}
			if len(batch) == wmBenchChunk {
				b.StopTimer() // back to wmBenchPending
				for _, t := range batch {
					s.Cancel(t.Key, t.Trigger)
				}
				batch = batch[:0]
				b.StartTimer()
			}
		}
	})
	b.Run("SetDuplicate", func(b *testing.B) {
		w := wmNewBench()
		s := w.store()
		pending := make([]Timer, 0, s.Len())
		for t := range s.All() {
			t.Event++ // loses to the pending timer: dedup keeps it
			pending = append(pending, t)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s.Set(pending[i%len(pending)])
		}
	})
	b.Run("Cancel", func(b *testing.B) {
		w := wmNewBench()
		s := w.store()
		victims := make([]Timer, 0, wmBenchChunk)
		refill := func() {
			victims = victims[:0]
			for len(victims) < wmBenchChunk {
				if t := w.timer(wmBenchBase); s.Set(t) {
					victims = append(victims, t)
				}
			}
		}
		refill()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t := victims[i%wmBenchChunk]
			s.Cancel(t.Key, t.Trigger)
			if i%wmBenchChunk == wmBenchChunk-1 {
				b.StopTimer()
				refill()
				b.StartTimer()
			}
		}
	})
	// Steady state: the watermark reaches the earliest timer, it fires,
	// and the computation sets a new one up to an hour ahead.
	b.Run("FireOneSetOne/TakeDue", func(b *testing.B) {
		w := wmNewBench()
		s := w.store()
		accept := func(Timer) bool { return true }
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			wm, _ := s.MinTrigger()
			s.TakeDue(wm, accept)
			for !s.Set(w.timer(wm + 1)) {
			}
		}
	})
	b.Run("FireOneSetOne/PopDue", func(b *testing.B) {
		w := wmNewBench()
		s := w.store()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			wm, _ := s.MinTrigger()
			s.PopDue(wm)
			for !s.Set(w.timer(wm + 1)) {
			}
		}
	})
	b.Run("FireOneSetOne/PopDueForKey", func(b *testing.B) {
		w := wmNewBench()
		s := w.store()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			wm, _ := s.MinTrigger()
			first := s.slots[s.all.items[0].ref].t.Key
			s.PopDueForKey(first, wm)
			for !s.Set(w.timer(wm + 1)) {
			}
		}
	})
}

func BenchmarkInFlight(b *testing.B) {
	// Random: values leave in an order unrelated to their size, the worst
	// case for the stale entries.
	b.Run("AddRemove/random", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(3, 4))
		var f InFlight
		ring := make([]int64, wmBenchPending)
		for i := range ring {
			ring[i] = wmBenchBase + rng.Int64N(wmBenchSpan)
			f.Add(ring[i])
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := i % len(ring)
			f.Remove(ring[j])
			ring[j] = wmBenchBase + rng.Int64N(wmBenchSpan)
			f.Add(ring[j])
		}
	})
	// Buffer-like: timestamps rise with jitter and leave oldest first; the
	// minimum is read after every change, as the runtime does.
	b.Run("AddRemoveMin/fifo", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(5, 6))
		var f InFlight
		ring := make([]int64, wmBenchPending)
		next := wmBenchBase
		stamp := func() int64 {
			next += int64(time.Millisecond)
			return next + rng.Int64N(int64(time.Second))
		}
		for i := range ring {
			ring[i] = stamp()
			f.Add(ring[i])
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := i % len(ring)
			f.Remove(ring[j])
			ring[j] = stamp()
			f.Add(ring[j])
			f.Min()
		}
	})
}

// BenchmarkSourceWatermark computes a 64-partition source's watermark
// after every record. Half the partitions are idle, more than max_ratio
// lets go, so the idle rule sorts on every call: the slow path.
func BenchmarkSourceWatermark(b *testing.B) {
	const parts = 64
	w, err := NewSourceWatermark(parts, DefaultWatermarkConfig(), 0)
	if err != nil {
		b.Fatal(err)
	}
	now := int64(10 * time.Minute)
	for p := range parts {
		seen := now
		if p%2 == 0 {
			seen = int64(p) // idle since the start, each a little longer
		}
		w.Read(p, wmBenchBase, seen)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := 1 + 2*(i%(parts/2)) // the busy, odd partitions
		now++
		w.Appended(p, wmBenchBase+now, now)
		w.Read(p, wmBenchBase+now, now)
		w.Watermark(now)
	}
}

func BenchmarkStreamWatermark(b *testing.B) {
	w := NewStreamWatermark(4)
	var f InFlight
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts := int64(i)
		w.SetInput(i%4, ts)
		f.Add(ts)
		w.Advance(f.Min())
		f.Remove(ts)
	}
}
