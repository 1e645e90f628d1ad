package watch

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when the test calls Advance, so a
// test decides exactly when a debounce interval has passed, whatever the
// speed of the machine.
type fakeClock struct {
	tb     testing.TB
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock(tb testing.TB) *fakeClock {
	return &fakeClock{tb: tb, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer() timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Unbuffered: Advance returns only once the watcher goroutine has taken
	// the tick, and that goroutine handles the tick before it serves
	// anything else, so whatever the test does next sees its effect.
	t := &fakeTimer{c: c, ch: make(chan time.Time)}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock by d and delivers the tick of every timer that is
// then due, waiting for the watcher to take each. A timer reset to a
// non-positive duration is due at the next Advance, even Advance(0).
func (c *fakeClock) Advance(d time.Duration) {
	c.tb.Helper()
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var due []*fakeTimer
	for _, t := range c.timers {
		if t.active && !t.when.After(now) {
			t.active = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		select {
		case t.ch <- now:
		case <-time.After(10 * time.Second):
			c.tb.Fatal("the watcher did not take the timer tick within 10s")
		}
	}
}

type fakeTimer struct {
	c      *fakeClock
	ch     chan time.Time
	when   time.Time
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.when = t.c.now.Add(d)
	t.active = true
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.active = false
}
