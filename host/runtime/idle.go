package runtime

import (
	"time"

	"github.com/flowhost/flowhost/ordering"
)

// Idle sources (watermark.idle_partitions in the spec).
//
// A source partition is idle when it has had no record appended or read
// for the source's idle timeout (processing time, from the runtime's
// clock) and has none waiting. Idle partitions are left out of the
// source's own event watermark up to idle_partitions.max_ratio
// (ordering.SourceWatermark). When every partition of a source is idle,
// the source is idle as a whole and its stream is marked idle: the
// computations reading it leave it out of the minimum of their input
// event watermarks (ordering.StreamWatermark), so a silent source no
// longer holds back the timers of what it feeds. A computation partition
// whose inputs are all idle, with nothing queued, is idle in turn, and
// when every partition of a computation is, its output streams are
// marked idle too, so idleness travels down the graph as far as it is
// true. The first record appended to an idle source makes its stream
// active again before a reader can see the record.

// setIdle marks the stream idle or active; readers that wait for input
// are woken when it turns idle, so that they take their watermarks again
// without it.
func (s *stream) setIdle(idle bool) {
	if s.idle.Swap(idle) == idle {
		return
	}
	if idle {
		s.mIdle.Set(1)
		for _, c := range s.readers {
			c.wakeIdle()
		}
		return
	}
	s.mIdle.Set(0)
}

// sourceWatermarks is what a source publishes after it read records or
// looked at its idleness.
type sourceWatermarks struct {
	event, system int64
	idleParts     int
}

// watermarksLocked computes the source's watermarks and idleness at now,
// marks the stream idle or active accordingly, and arms the idle check
// for the next time a partition may turn idle. Called with src.mu held.
func (src *sourceStream) watermarksLocked(now int64) sourceWatermarks {
	w := sourceWatermarks{
		event:     src.eventWM.Watermark(now),
		system:    src.systemWM.Watermark(),
		idleParts: src.eventWM.IdlePartitions(now),
	}
	whole := w.idleParts == len(src.parts)
	if whole != src.idle {
		src.idle = whole
		src.stream.setIdle(whole)
		if whole {
			src.rt.log.Info("source idle: left out of the event watermark of what it feeds until it has records again",
				"source", src.spec.Name, "idle_timeout", src.spec.Watermark.IdlePartitions.Duration)
		}
	}
	if next, ok := src.eventWM.NextIdle(now); ok && !src.idleArmed && !src.readEnd {
		src.idleArmed = true
		src.idleTimer.Reset(time.Duration(next - now))
	}
	return w
}

// publishWatermarks raises the stream to w and updates the source's
// gauges.
func (src *sourceStream) publishWatermarks(w sourceWatermarks) {
	src.stream.raise(w.event, w.system)
	if w.event != ordering.NoWatermark {
		src.stream.mEventWM.Set(nsToSeconds(w.event))
	}
	if w.system != ordering.NoWatermark {
		src.stream.mSystemWM.Set(nsToSeconds(w.system))
	}
	src.mIdleParts.Set(float64(w.idleParts))
}

// checkIdle is the idle timer's callback: with no record read meanwhile,
// nothing else would look at the source's idleness.
func (src *sourceStream) checkIdle() {
	src.mu.Lock()
	src.idleArmed = false
	if src.readEnd {
		src.mu.Unlock()
		return
	}
	w := src.watermarksLocked(src.rt.opts.now())
	src.mu.Unlock()
	src.publishWatermarks(w)
}

// activeLocked makes an idle source active again; publish calls it for
// every record appended, before the reader can see the record. Called with
// src.mu held.
func (src *sourceStream) activeLocked() {
	if src.idle {
		src.idle = false
		src.stream.setIdle(false)
		src.rt.log.Info("source active again: records it brings older than what it feeds has reached are late", "source", src.spec.Name)
	}
}

// stopIdle stops the idle checks once the reader has ended.
func (src *sourceStream) stopIdle() {
	src.mu.Lock()
	src.readEnd = true
	src.idleTimer.Stop()
	src.mu.Unlock()
}

// publishIdle records whether partition p is idle (every input idle and
// nothing queued) and marks the computation's output streams idle while
// every partition is. Called with p.mu held.
func (c *computation) publishIdle(p *partition, idle bool) {
	if p.outIdle.Load() == idle {
		return
	}
	c.idleMu.Lock()
	defer c.idleMu.Unlock()
	p.outIdle.Store(idle)
	all := idle
	for _, q := range c.parts {
		all = all && q.outIdle.Load()
	}
	for _, s := range c.outputs {
		// Readers' locks are taken while we hold ours: safe, because locks
		// are only ever taken downstream along the DAG.
		s.setIdle(all)
	}
}

// inputsIdle sets each input stream's idleness into w's inputs and
// reports whether every input is idle.
func inputsIdle(inputs []*stream, set func(i int, idle bool)) bool {
	all := true
	for i, s := range inputs {
		idle := s.idle.Load()
		set(i, idle)
		all = all && idle
	}
	return all
}
