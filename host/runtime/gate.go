package runtime

import (
	"context"
	"sync"
	"time"
)

// sourceGate keeps the source streams of a pipeline in step. Each source
// stream's reader offers the priority of the record it would send next,
// AlignmentTimestamp plus the stream's bias (its StabilizedEventTimestamp,
// the sending-side priority of Flow's first merge point), and may send it
// only when no other source stream has an earlier record waiting. Without
// the gate, a file replayed as fast as it can be read races ahead of the
// others and the cross-stream merge downstream can only order whatever
// happens to be buffered together; with it, sources are read in the same
// order they would have been read live.
//
// A stream with nothing waiting holds the others back for at most
// sourceGateGrace, so an idle live source (an HTTP endpoint nobody posts
// to) never stalls the pipeline.
type sourceGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	streams []gateState
	timer   *time.Timer
	now     func() time.Time // time.Now; a test's clock in tests
}

// sourceGateGrace is how long an empty source stream holds back the
// others: long enough for a replayed file's next records to be appended,
// short enough not to matter to a live pipeline.
const sourceGateGrace = 200 * time.Millisecond

type gateState struct {
	hasHead    bool
	prio       int64
	ended      bool
	emptySince time.Time
}

func newSourceGate(streams int) *sourceGate {
	g := &sourceGate{streams: make([]gateState, streams), now: time.Now}
	g.cond = sync.NewCond(&g.mu)
	g.startGrace()
	g.timer = time.AfterFunc(time.Hour, g.wake)
	g.timer.Stop()
	return g
}

// startGrace starts every stream's grace afresh, unless it has a record
// waiting or has ended. Run calls it just before the sources start
// reading: the grace is the time a source has to produce its first record
// once it runs, and counting it from runtime.New instead would spend it on
// starting the computations (instantiating a large module takes longer
// than the grace), so that the first source to read a record would pass
// alone and overtake the others' earlier records.
func (g *sourceGate) startGrace() {
	g.mu.Lock()
	now := g.now()
	for i := range g.streams {
		if st := &g.streams[i]; !st.hasHead && !st.ended {
			st.emptySince = now
		}
	}
	g.mu.Unlock()
}

func (g *sourceGate) wake() {
	g.mu.Lock()
	g.cond.Broadcast()
	g.mu.Unlock()
}

// empty records that stream i has nothing waiting.
func (g *sourceGate) empty(i int) {
	g.mu.Lock()
	if st := &g.streams[i]; st.hasHead {
		st.hasHead = false
		st.emptySince = g.now()
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// end records that stream i will send nothing more.
func (g *sourceGate) end(i int) {
	g.mu.Lock()
	g.streams[i].ended = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// pass offers stream i's next record at priority prio and returns when it
// may be sent (or ctx is done).
func (g *sourceGate) pass(ctx context.Context, i int, prio int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := &g.streams[i]
	st.hasHead, st.prio = true, prio
	g.cond.Broadcast()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wait, graceLeft := g.blocked(i, prio)
		if !wait {
			return nil
		}
		if graceLeft > 0 {
			g.timer.Reset(graceLeft)
		}
		g.cond.Wait()
	}
}

// open reports whether stream i's record at priority prio could be sent
// now, without waiting.
func (g *sourceGate) open(i int, prio int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	wait, _ := g.blocked(i, prio)
	return !wait
}

// blocked reports whether another stream has an earlier record waiting, or
// has been empty for less than the grace (graceLeft then says how long).
func (g *sourceGate) blocked(i int, prio int64) (wait bool, graceLeft time.Duration) {
	for j := range g.streams {
		o := &g.streams[j]
		switch {
		case j == i || o.ended:
		case o.hasHead:
			if o.prio < prio {
				return true, 0
			}
		default:
			if left := sourceGateGrace - g.now().Sub(o.emptySince); left > 0 {
				return true, left
			}
		}
	}
	return false, 0
}
