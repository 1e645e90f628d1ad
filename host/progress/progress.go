// Package progress reports the progress of long-running work (replaying a
// file, generating records) to a person: on a terminal as live bars drawn by
// github.com/vbauerster/mpb/v8, elsewhere (logs, CI) as one slog info line
// per counter every interval, with the count, the total, the rate and,
// when the total is known, the ETA at the average rate so far.
//
// Counting is one atomic add, so hot paths may call [Counter.Add] per
// record; the display reads the counts on its own schedule.
package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// DefaultInterval is how often the log mode writes a line.
const DefaultInterval = 10 * time.Second

// barRefresh is how often the terminal mode copies counts into its bars.
const barRefresh = 150 * time.Millisecond

// Option changes how a [Reporter] works.
type Option func(*options)

type options struct {
	interval time.Duration
	ticks    <-chan time.Time
	now      func() time.Time
}

// WithInterval sets how often the log mode reports (default
// [DefaultInterval]). It has no effect on a terminal.
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithTicks makes the log mode report when ticks delivers a time, and stamp
// the report with that time, instead of using a ticker. With [WithClock] it
// makes the output deterministic, for tests.
func WithTicks(ticks <-chan time.Time) Option { return func(o *options) { o.ticks = ticks } }

// WithClock sets the clock that dates counter starts and the final report
// (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Reporter displays a set of counters until it is closed. Its methods are
// safe for concurrent use.
type Reporter struct {
	opts   options
	tty    bool
	logger *slog.Logger // log mode
	bars   *mpb.Progress

	mu       sync.Mutex
	counters []*Counter
	closed   bool
	// logMu serialises log lines and the counters' log-mode fields
	// between the reporting goroutine and Counter.Done.
	logMu sync.Mutex

	stop    chan struct{}
	stopped chan struct{}
	// reported is called after each periodic report; tests use it to
	// sequence counts and reports without sleeping.
	reported func()
}

// Counter counts the progress of one piece of work.
type Counter struct {
	r     *Reporter // nil for a counter that is not displayed
	name  string
	count atomic.Int64
	total atomic.Int64
	// base is the count the counter started at (work done before, such
	// as what an earlier run read of a file): shown, but not in the rates.
	base int64
	done atomic.Bool
	bar  *mpb.Bar // terminal mode

	// Log mode, guarded by Reporter.logMu.
	start     time.Time
	lastTime  time.Time
	lastCount int64
}

// IsTerminal reports whether f is a character device such as a terminal,
// which is what decides between bars and log lines for stderr.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// New starts a Reporter writing to w: live bars if isTTY, otherwise slog
// text lines. Close it to stop the display and write the final counts.
func New(w io.Writer, isTTY bool, opts ...Option) *Reporter {
	o := options{interval: DefaultInterval, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	r := &Reporter{opts: o, tty: isTTY, stop: make(chan struct{}), stopped: make(chan struct{})}
	if isTTY {
		// The caller decided that w is a terminal; don't let mpb second-guess
		// it for writers that are not *os.File.
		r.bars = mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithAutoRefresh(), mpb.WithRefreshRate(barRefresh))
		go r.syncBars()
		return r
	}
	r.logger = slog.New(slog.NewTextHandler(w, nil))
	ticks := o.ticks
	var ticker *time.Ticker
	if ticks == nil {
		ticker = time.NewTicker(o.interval)
		ticks = ticker.C
	}
	go func() {
		defer close(r.stopped)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case now := <-ticks:
				r.logAll(now, "progress")
				if r.reported != nil {
					r.reported()
				}
			case <-r.stop:
				return
			}
		}
	}()
	return r
}

// Counter adds a counter named name. total is the expected final count, or
// zero or less when unknown (then no percentage is shown). After Close it
// returns a counter that counts but is not displayed.
func (r *Reporter) Counter(name string, total int64) *Counter {
	return r.ResumedCounter(name, 0, total)
}

// ResumedCounter is Counter for work of which done units were done before
// it started, such as a file an earlier run read partly: the count starts
// at done and the rates count only what comes after it, so that resuming
// at the end of a file shows no work rather than all of it in no time.
func (r *Reporter) ResumedCounter(name string, done, total int64) *Counter {
	c := &Counter{name: name, start: r.opts.now(), base: done, lastCount: done}
	c.count.Store(done)
	c.total.Store(max(total, 0))
	c.lastTime = c.start
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return c
	}
	c.r = r
	if r.tty {
		c.bar = r.newBar(c, total)
		c.bar.SetCurrent(done)
	}
	r.counters = append(r.counters, c)
	return c
}

func (r *Reporter) newBar(c *Counter, total int64) *mpb.Bar {
	start := time.Now()
	speed := decor.Any(func(s decor.Statistics) string {
		secs := time.Since(start).Seconds()
		if secs <= 0 {
			return ""
		}
		return fmt.Sprintf(" %.0f/s", float64(s.Current-c.base)/secs)
	}, decor.WCSyncSpace)
	eta := decor.Any(func(s decor.Statistics) string {
		secs := time.Since(start).Seconds()
		if secs <= 0 || s.Completed {
			return ""
		}
		if e := ETA(s.Current, s.Total, float64(s.Current-c.base)/secs); e != nil {
			return " eta " + time.Duration(*e).Round(time.Second).String()
		}
		return ""
	}, decor.WCSyncSpace)
	if total > 0 {
		return r.bars.AddBar(total,
			mpb.PrependDecorators(decor.Name(c.name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d / %d", decor.WCSyncWidth)),
			mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), speed, eta),
		)
	}
	return r.bars.AddSpinner(0,
		mpb.PrependDecorators(decor.Name(c.name, decor.WCSyncSpaceR), decor.CurrentNoUnit("%d", decor.WCSyncWidth)),
		mpb.AppendDecorators(speed),
	)
}

// Done marks the counter's work finished, so that a finished piece of work
// beside others still running stops being reported: in log mode its
// "progress done" line (as Close writes it) is written at once and no
// other follows; on a terminal its bar completes at its count. Done is idempotent, and
// does nothing after Close (which wrote the final counts).
func (c *Counter) Done() {
	r := c.r
	if r == nil || c.done.Swap(true) {
		return
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return
	}
	if r.tty {
		c.finishBar()
		return
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.logCounter(c, r.opts.now(), "progress done")
}

// Add counts n more units of work.
func (c *Counter) Add(n int64) { c.count.Add(n) }

// Set sets the count, for work that reports how far it has got rather than
// how much it did since the last call.
func (c *Counter) Set(n int64) { c.count.Store(n) }

// SetTotal changes the expected final count (zero or less: unknown), for
// work whose size is learnt late. On a terminal a bar keeps the kind it was
// created with.
func (c *Counter) SetTotal(total int64) {
	c.total.Store(max(total, 0))
	if c.bar != nil && total > 0 {
		c.bar.SetTotal(total, false)
	}
}

// Count returns the units counted so far.
func (c *Counter) Count() int64 { return c.count.Load() }

// Name returns the counter's name.
func (c *Counter) Name() string { return c.name }

func (r *Reporter) snapshot() []*Counter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Counter(nil), r.counters...)
}

func (r *Reporter) syncBars() {
	defer close(r.stopped)
	ticker := time.NewTicker(barRefresh)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			for _, c := range r.snapshot() {
				if !c.done.Load() {
					c.bar.SetCurrent(c.count.Load())
				}
			}
		case <-r.stop:
			return
		}
	}
}

// logAll writes one line per counter not yet done, dated now; the rate is
// over the time since the previous line.
func (r *Reporter) logAll(now time.Time, msg string) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	for _, c := range r.snapshot() {
		if !c.done.Load() {
			r.logCounter(c, now, msg)
		}
	}
}

// logCounter writes c's line; r.logMu is held.
func (r *Reporter) logCounter(c *Counter, now time.Time, msg string) {
	count := c.count.Load()
	attrs := []slog.Attr{slog.String("name", c.name), slog.Int64("count", count)}
	if total := c.total.Load(); total > 0 {
		attrs = append(attrs, slog.Int64("total", total), slog.Float64("percent", roundTo(100*float64(count)/float64(total), 1)))
	}
	if secs := now.Sub(c.lastTime).Seconds(); secs > 0 {
		attrs = append(attrs, slog.Float64("rate_per_s", roundTo(float64(count-c.lastCount)/secs, 1)))
	}
	if msg != "progress" {
		if secs := now.Sub(c.start).Seconds(); secs > 0 {
			attrs = append(attrs, slog.Float64("average_per_s", roundTo(float64(count-c.base)/secs, 1)))
		}
	} else if total := c.total.Load(); total > 0 {
		// At the average rate of this run: steadier than the last
		// interval's, and the display's only rate that has seen the
		// whole of the work so far.
		var avg float64
		if secs := now.Sub(c.start).Seconds(); secs > 0 {
			avg = float64(count-c.base) / secs
		}
		if eta := ETA(count, total, avg); eta != nil {
			attrs = append(attrs, slog.Duration("eta", time.Duration(*eta).Round(time.Second)))
		}
	}
	c.lastTime, c.lastCount = now, count
	rec := slog.NewRecord(now, slog.LevelInfo, msg, 0)
	rec.AddAttrs(attrs...)
	_ = r.logger.Handler().Handle(context.Background(), rec)
}

// ETA is how long total-done more units take at rate units per second,
// in nanoseconds: 0 when the work is finished (done reached total, which
// work of total 0 has at once; a done past the total counts as finished),
// nil when it cannot be told (a rate of zero or less, or one so low that
// the wait overflows int64).
func ETA(done, total int64, rate float64) *int64 {
	if done >= total {
		zero := int64(0)
		return &zero
	}
	if !(rate > 0) {
		return nil
	}
	ns := float64(total-done) / rate * float64(time.Second)
	if ns >= math.MaxInt64 {
		return nil
	}
	eta := int64(math.Ceil(ns))
	return &eta
}

func roundTo(v float64, decimals int) float64 {
	scale := math.Pow10(decimals)
	return math.Round(v*scale) / scale
}

// Close stops the display and shows the final counts: a last bar state on
// a terminal (bars of unknown total are marked complete, bars short of
// their total stay as they are), or a "progress done" line per counter with
// the average rate. Close is idempotent; counters keep counting after it.
func (r *Reporter) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.stopped
	counters := r.snapshot()
	if !r.tty {
		r.logAll(r.opts.now(), "progress done")
		return
	}
	for _, c := range counters {
		if c.done.Load() {
			continue // its bar completed
		}
		count := c.count.Load()
		if total := c.total.Load(); total > 0 && count < total {
			c.bar.SetCurrent(count)
			c.bar.Abort(false)
			continue
		}
		c.bar.SetCurrent(count)
		c.bar.SetTotal(-1, true)
	}
	r.bars.Wait()
}

// finishBar completes c's bar at its count.
func (c *Counter) finishBar() {
	c.bar.SetCurrent(c.count.Load())
	c.bar.SetTotal(-1, true)
}
