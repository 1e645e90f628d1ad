package runtime

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// operatorGroup is the scheduling group of computations without a tenant.
const operatorGroup = "operator"

// scheduler shares the workers (WithWorkers slots: at most that many
// partitions call a guest, apply and commit at once) between tenants by
// weighted fair share. Each tenant is a group with a weight; what a group
// is charged is the time its partitions hold a slot, divided by its
// weight (its virtual time). When a slot frees, the waiting group with
// the least virtual time gets it, FIFO within the group. So under
// contention each group gets slot time in proportion to its weight, a
// group whose batches run long (a tenant hogging CPU) waits longer for
// each slot instead of starving the others, and a group alone gets every
// slot. A group that was idle starts from the least virtual time of the
// groups then active, so idling banks no credit. A group may also be
// capped to a number of slots at once (quotas.concurrent_instances).
//
// Slot time is wall time while holding a slot, which is CPU time as long
// as there are no more slots than cores (the default): a slot holder
// computes, and the wait for a slow disk at commit is charged to the
// group that committed.
type scheduler struct {
	mu     sync.Mutex
	free   int
	groups map[string]*group
	// wake runs the dispatcher again when a slot it held for a group
	// about to ask again has waited long enough, or a group waiting for
	// CPU credit has some again.
	wake *time.Timer
	now  func() time.Time
}

// group is one tenant's share of the workers.
type group struct {
	name    string
	weight  float64
	limit   int // slots at once; 0: no cap
	running int
	vtime   float64 // slot seconds used / weight
	queue   []*slotWaiter
	// cpuLimit caps the group's slot time per second of wall time (in
	// cores, quotas.cpu_limit; 0: no cap), with a bucket of credit in
	// slot seconds refilled at that rate and holding one cpuPeriod's
	// worth.
	// A group out of credit waits, even with slots free: the cap is
	// what keeps a tenant whose guests burn CPU from slowing the others
	// on a machine with few cores, which sharing the slots alone cannot.
	cpuLimit   float64
	credit     float64
	refilledAt time.Time
	// releasedAt is when the group last gave a slot back with none left:
	// a group that gave one back a moment ago is about to ask again (its
	// partition is cutting its next batch), not idle.
	releasedAt time.Time
	// Metric series.
	mUsed, mWaited prometheus.Counter
	mRunning       prometheus.Gauge
}

type slotWaiter struct {
	ready   chan struct{}
	granted bool
}

func newScheduler(slots int) *scheduler {
	s := &scheduler{free: slots, groups: map[string]*group{}, now: time.Now}
	s.wake = time.AfterFunc(time.Hour, func() {
		s.mu.Lock()
		s.dispatch()
		s.mu.Unlock()
	})
	s.wake.Stop()
	return s
}

// group returns the group named name, creating it with weight, limit and
// cpuLimit on first use.
func (s *scheduler) group(name string, weight, limit int, cpuLimit float64, m *metrics) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.groups[name]; ok {
		return g
	}
	g := &group{name: name, weight: float64(max(weight, 1)), limit: limit, cpuLimit: cpuLimit, refilledAt: s.now()}
	g.credit = g.creditCap()
	if m != nil {
		g.mUsed = m.tenantSlotSeconds.WithLabelValues(name)
		g.mWaited = m.tenantWaitSeconds.WithLabelValues(name)
		g.mRunning = m.tenantRunning.WithLabelValues(name)
	}
	s.groups[name] = g
	return g
}

// acquire waits for a slot for g.
func (s *scheduler) acquire(ctx context.Context, g *group) error {
	s.mu.Lock()
	s.wakeGroup(g)
	w := &slotWaiter{ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	s.dispatch()
	if w.granted { // at once: no wait to count
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	started := time.Now()
	select {
	case <-w.ready:
		if g.mWaited != nil {
			g.mWaited.Add(time.Since(started).Seconds())
		}
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted {
			s.releaseLocked(g, 0)
		} else {
			for i, q := range g.queue {
				if q == w {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
					break
				}
			}
		}
		return ctx.Err()
	}
}

// release gives back a slot g held for used.
func (s *scheduler) release(g *group, used time.Duration) {
	s.mu.Lock()
	s.releaseLocked(g, used)
	s.mu.Unlock()
	if g.mUsed != nil {
		g.mUsed.Add(used.Seconds())
	}
}

func (s *scheduler) releaseLocked(g *group, used time.Duration) {
	g.running--
	g.vtime += used.Seconds() / g.weight
	if g.running == 0 {
		g.releasedAt = s.now()
	}
	if g.cpuLimit > 0 {
		g.refillAt(s.now())
		g.credit -= used.Seconds()
	}
	s.free++
	if g.mRunning != nil {
		g.mRunning.Set(float64(g.running))
	}
	s.dispatch()
}

// dispatch hands free slots to the waiting groups with the least virtual
// time; a group out of CPU credit is passed over, and the wake timer is
// set for when the first such group has credit again.
//
// It anticipates: when a group that gave its last slot back less than
// anticipationWindow ago has less virtual time than every waiting group,
// the slot is held for it rather than handed to them. A partition gives
// its slot back after every batch and asks again a moment later, once it
// has cut the next one; without anticipation a tenant whose partitions
// are always busy would still lose every slot to whichever tenant
// happened to be queued in that moment, and shares would be by turns,
// not by weight: a tenant with long batches would get its turn as often
// as one with short batches, and most of the time.
func (s *scheduler) dispatch() {
	now := s.now()
	for s.free > 0 {
		var next *group
		for _, g := range s.groups {
			if len(g.queue) > 0 && g.canRun(now) && (next == nil || g.vtime < next.vtime || g.vtime == next.vtime && g.name < next.name) {
				next = g
			}
		}
		if next == nil {
			break
		}
		if left := s.anticipate(now, next); left > 0 {
			s.wake.Reset(left)
			return
		}
		w := next.queue[0]
		next.queue = next.queue[1:]
		s.grant(next)
		w.granted = true
		close(w.ready)
	}
	if s.free == 0 {
		return
	}
	var wait time.Duration
	for _, g := range s.groups {
		if len(g.queue) > 0 && g.cpuLimit > 0 && g.credit <= 0 && (g.limit == 0 || g.running < g.limit) {
			d := time.Duration((-g.credit/g.cpuLimit)*float64(time.Second)) + time.Millisecond
			if wait == 0 || d < wait {
				wait = d
			}
		}
	}
	if wait > 0 {
		s.wake.Reset(wait)
	}
}

func (s *scheduler) grant(g *group) {
	s.free--
	g.running++
	if g.mRunning != nil {
		g.mRunning.Set(float64(g.running))
	}
}

// anticipationWindow is how long a slot is held for a group that gave
// its last one back and is about to ask again: longer than a partition
// takes to hand over its outputs and cut its next batch, short enough
// that a group that does not come back costs little.
const anticipationWindow = 2 * time.Millisecond

// anticipate returns how long to hold a free slot for a group that gave
// its last one back a moment ago and has less virtual time than next, the
// best waiting group; 0: hand it to next.
func (s *scheduler) anticipate(now time.Time, next *group) time.Duration {
	var left time.Duration
	for _, g := range s.groups {
		if g == next || g.running > 0 || len(g.queue) > 0 || g.vtime >= next.vtime || !g.canRun(now) {
			continue
		}
		if d := anticipationWindow - now.Sub(g.releasedAt); d > left {
			left = d
		}
	}
	return left
}

// wakeGroup lets a group that was idle start from the least virtual time
// of the active groups: what it did not use while idle is not owed to it.
// A group that gave its last slot back within anticipationWindow was not
// idle: it was cutting its next batch.
func (s *scheduler) wakeGroup(g *group) {
	if g.running > 0 || len(g.queue) > 0 || s.now().Sub(g.releasedAt) < anticipationWindow {
		return
	}
	least := math.Inf(1)
	for _, o := range s.groups {
		if o != g && (o.running > 0 || len(o.queue) > 0) {
			least = min(least, o.vtime)
		}
	}
	if !math.IsInf(least, 1) {
		g.vtime = max(g.vtime, least)
	}
}

func (g *group) canRun(now time.Time) bool {
	if g.limit > 0 && g.running >= g.limit {
		return false
	}
	if g.cpuLimit > 0 {
		g.refillAt(now)
		return g.credit > 0
	}
	return true
}

// cpuPeriod is the window over which quotas.cpu_limit holds: a group may
// run ahead of its limit by at most one period's worth. It is the period
// of Linux's CPU bandwidth control (cfs_period_us), so a tenant's limit
// behaves like its container's would.
const cpuPeriod = 100 * time.Millisecond

func (g *group) creditCap() float64 { return g.cpuLimit * cpuPeriod.Seconds() }

// refillAt adds the CPU credit earned since the last refill, up to one
// period's worth.
func (g *group) refillAt(now time.Time) {
	if d := now.Sub(g.refilledAt); d > 0 {
		g.credit = min(g.creditCap(), g.credit+d.Seconds()*g.cpuLimit)
		g.refilledAt = now
	}
}
