package runtime

// The failure policy (spec.OnFailure, host/spec/README.md#on_failure).
//
// A batch fails when the call fails (a trap, a deadline, a bad status or
// an undecodable response: causeCall), when the response breaks the ABI's
// rules (causeValidate) or when the guest reports the batch failed
// (causeBatch). All three are found by partition.call before anything of
// the partition changes: the timers, id counters, clock and map counts
// are only touched by apply, on the response of the attempt that
// succeeded. So a failed attempt leaves no trace, and a retry is the same
// batch again: the same inputs, state, due timers and epoch, on a fresh
// instance (the failed one is closed before the wait, the new one is made
// after it). The epoch commits once.
//
// The wait between attempts doubles from on_failure.backoff up to
// max_backoff. It is a timer (interrupted when the run stops on a fatal
// error), and the partition gives its worker token back while it waits,
// so that the other partitions run meanwhile; it holds no lock.
//
// When every attempt failed, then: stop fails the run before anything of
// the batch commits, and then: dead_letter narrows the batch down
// (isolate.go): bisected on fresh instances until only the inputs that
// fail on their own go to the dead-letter route, each with the error of
// the call that held it alone, while the rest is applied in order, in
// the batch's one epoch. A key the guest reports failed is narrowed the
// same way, without a retry. Retries are for a failure of the whole batch
// that passes (a transient trap, a deadline on a loaded machine); a
// failure that survived them is taken as caused by an input, so the
// narrowing's calls are single attempts.
//
// Quarantine is for a computation that keeps failing, not for one bad
// record: after quarantine_after batches in a row of one partition in
// which inputs failed and none succeeded (countFailures), the partition
// is quarantined: it closes its instance and dead-letters every further
// batch without calling the guest, until the run restarts or a reload
// (the record of it is kept in memory only). A batch with one bad input
// among good ones resets the count.

import (
	"context"
	"fmt"
	"time"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// failurePolicy is a computation's spec.OnFailure, resolved.
type failurePolicy struct {
	retries         int
	backoff         time.Duration
	maxBackoff      time.Duration
	stop            bool
	quarantineAfter int
}

// policyOf resolves a spec's failure policy. The zero spec.OnFailure (a
// Computation not made by spec.Parse) retries nothing, dead-letters and
// never quarantines.
func policyOf(f spec.OnFailure) failurePolicy {
	return failurePolicy{
		retries:         max(f.Retries, 0),
		backoff:         max(f.Backoff, 0),
		maxBackoff:      max(f.MaxBackoff, 0),
		stop:            f.Then == spec.FailStop,
		quarantineAfter: max(f.QuarantineAfter, 0),
	}
}

// delay is the wait before the retry-th retry (1 is the first): backoff,
// doubled for each retry before it, at most maxBackoff.
func (f failurePolicy) delay(retry int) time.Duration {
	d := min(f.backoff, f.maxBackoff)
	for i := 1; i < retry && d > 0 && d < f.maxBackoff; i++ {
		if d > f.maxBackoff/2 {
			return f.maxBackoff
		}
		d *= 2
	}
	return d
}

// waitRetry waits d, or until ctx is done; it is the runtime's wait
// between the attempts of a batch.
func waitRetry(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// partitionFailures is one partition's record. Only the partition's
// worker goroutine reads or changes it.
type partitionFailures struct {
	// allFailed counts the batches in a row in which inputs failed (on
	// their own, or unresolved) and none succeeded.
	allFailed int
	// quarantine, once set, is why the partition no longer calls its
	// guest: every batch is dead-lettered with it.
	quarantine error
}

// batchFailure is a batch that failed every attempt.
type batchFailure struct {
	cause    string
	err      error // the last attempt's
	attempts int
}

// deadLetterErr is the error the batch's inputs are dead-lettered with:
// the last attempt's, with the count of attempts when there were several.
func (f *batchFailure) deadLetterErr() error {
	if f.attempts == 1 {
		return f.err
	}
	return fmt.Errorf("%w (failed %s)", f.err, attemptsText(f.attempts))
}

// attemptsText says how many attempts failed: "all 3 attempts" or "its
// only attempt".
func attemptsText(n int) string {
	if n == 1 {
		return "its only attempt"
	}
	return fmt.Sprintf("all %d attempts", n)
}

// callWithRetries calls the guest with batch b (request req, epoch
// p.epoch) until an attempt succeeds or the computation's failure policy
// has no retry left. It returns the response of the attempt that
// succeeded, or else the failure; an error is fatal to the run (the run
// stopping, an instance that cannot be replaced). It changes nothing of
// the partition but its instance.
func (p *partition) callWithRetries(ctx context.Context, b *ordering.Batch, wm abi.Watermarks, req *abi.Request) (*abi.Response, *batchFailure, error) {
	c := p.comp
	r := c.rt
	pol := policyOf(c.spec.OnFailure)
	for attempt := 1; ; attempt++ {
		if err := p.ensureInstance(ctx); err != nil {
			return nil, nil, err
		}
		resp, cause, gerr := p.call(ctx, req)
		if gerr == nil {
			if attempt > 1 {
				r.log.Info("computation succeeded on a retry", "computation", c.spec.Name, "partition", p.index,
					"epoch", p.epoch, "attempt", attempt)
			}
			return resp, nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err // the run is stopping: neither retry nor dead-letter
		}
		r.metrics.guestErrors.WithLabelValues(c.spec.Name, cause).Inc()
		if attempt > pol.retries {
			return nil, &batchFailure{cause: cause, err: gerr, attempts: attempt}, nil
		}
		wait := pol.delay(attempt)
		r.metrics.batchRetries.WithLabelValues(c.spec.Name, cause).Inc()
		r.log.Warn("computation failed a batch; retrying it on a fresh instance",
			"computation", c.spec.Name, "partition", p.index, "epoch", p.epoch, "cause", cause,
			"attempt", attempt+1, "attempts", pol.retries+1, "wait", wait, "err", gerr)
		p.closeInstance(ctx)
		if err := p.backoff(ctx, wait); err != nil {
			return nil, nil, err
		}
		// The same batch again, in a request of its own: a native guest
		// may have changed the one it was given.
		var err error
		if req, err = p.request(b, wm, nil); err != nil {
			return nil, nil, err
		}
	}
}

// backoff waits d before a retry without holding a worker token, so that
// other partitions run meanwhile, and takes one again before it returns.
func (p *partition) backoff(ctx context.Context, d time.Duration) error {
	p.giveToken()
	if err := p.comp.rt.retryWait(ctx, d); err != nil {
		return err
	}
	return p.takeToken(ctx)
}

// exhausted applies the failure policy to a batch that failed every
// attempt: with then: stop it returns the error that stops the run;
// otherwise it closes the instance that failed, so that the narrowing
// (isolate.go), and the batches after, run on a fresh one.
func (p *partition) exhausted(ctx context.Context, f *batchFailure) error {
	c := p.comp
	r := c.rt
	pol := policyOf(c.spec.OnFailure)
	if pol.stop {
		r.log.Error("computation failed a batch on every attempt; on_failure.then is stop, so the run stops",
			"computation", c.spec.Name, "partition", p.index, "epoch", p.epoch, "cause", f.cause, "attempts", f.attempts, "err", f.err)
		return fmt.Errorf("computation %q (plugin %q) partition %d: the batch of epoch %d failed %s (cause %s) and on_failure.then is stop: %w",
			c.spec.Name, c.spec.Plugin, p.index, p.epoch, attemptsText(f.attempts), f.cause, f.err)
	}
	r.log.Warn("computation failed a batch on every attempt; narrowing it down to the inputs that fail on their own",
		"computation", c.spec.Name, "partition", p.index, "epoch", p.epoch, "cause", f.cause, "attempts", f.attempts, "err", f.err)
	p.closeInstance(ctx)
	return nil
}

// countFailures counts a batch towards quarantine once its failures are
// isolated: a batch in which inputs failed and none succeeded adds one,
// a batch in which any input succeeded starts the count again. After
// quarantine_after batches in a row the partition is quarantined. One bad
// input among good ones therefore never counts.
func (p *partition) countFailures(ctx context.Context, iso *isolation) {
	c := p.comp
	r := c.rt
	fs := &p.failures
	pol := policyOf(c.spec.OnFailure)
	switch {
	case iso.succeeded > 0:
		fs.allFailed = 0
		return
	case iso.failed == 0:
		return
	}
	fs.allFailed++
	if pol.quarantineAfter == 0 || fs.allFailed < pol.quarantineAfter {
		return
	}
	p.setQuarantine(fmt.Errorf("computation %q (plugin %q) partition %d is quarantined: %d batches in a row failed on every input (on_failure.quarantine_after: %d), so its guest is no longer called until the run restarts; last error: %w",
		c.spec.Name, c.spec.Plugin, p.index, fs.allFailed, pol.quarantineAfter, iso.lastErr))
	r.log.Error("computation partition quarantined: its further batches go to the dead-letter route without calling the guest, until the run restarts",
		"computation", c.spec.Name, "partition", p.index, "epoch", p.epoch, "batches", fs.allFailed, "err", iso.lastErr)
	p.closeInstance(ctx)
}
