package runtime

// Isolating the inputs that fail on their own (host/spec/README.md#on_failure).
//
// A batch that failed every attempt, or a key the guest reported failed,
// is not dead-lettered whole: it is narrowed down by bisection, on fresh
// instances, until only the inputs that fail alone remain. A failed part
// is split in two halves in the order the guest sees the batch (keys in
// the batch's order, per key its due timers, then its messages in merge
// order), and each half is called, left first (the second without a
// call when the first succeeded, see narrow). A half that succeeds is
// applied; a half that fails is split again; a single input that fails,
// called alone, is dead-lettered with the error of that call. A key that
// fails in a response that otherwise succeeded is narrowed the same way,
// at its place in the response, so that everything is applied in the
// order of the batch: a later part reads the keyed state the earlier
// parts left (stateOf), timers an earlier part set or cancelled are seen
// by the later ones, and the host's id counter and clock advance in that
// order: ids depend only on the batch and the guest's answers (the same
// as a run in which the bad inputs were left out), and timestamps are
// assigned in the batch's order. Every input of the batch is applied or dead-lettered
// exactly once, each due timer among them.
//
// All the parts of a batch commit as ONE epoch, the batch's. A batch is
// the unit of the commit and of replay: its inputs leave their queue, its
// due timers are deleted and its outputs are published in one
// transaction. Committing each part as an epoch of its own would leave,
// after a crash in the middle of a narrowing, a part of the batch
// committed and the rest back in the queue, where it would be cut into
// other batches with other inputs: what ran before a crash would no longer
// be what runs after it. With one epoch a crash loses the whole narrowing
// and the restart redoes it from the same inputs and state, to the same
// result for a deterministic guest; and nothing of a batch reaches
// downstream before it is known what of it succeeded.
//
// Retries (on_failure.retries, backoff) are for transient failures of
// the whole batch and come first; a failure that survived them is taken
// as deterministic, so each call of the narrowing is one attempt, without
// backoff. A failed call's instance is replaced before the next call.
// Between its calls the partition gives its worker token back and takes
// one again, so that the scheduler charges and paces a narrowing like as
// many batches: a guest that fails its inputs on a deadline costs the
// other tenants no more than its cpu_limit.
// With then: stop a batch that failed every attempt is not narrowed:
// the run stops, as before; a failed key still is narrowed.
//
// The cost: isolating k failing inputs in a batch of n takes at most
// 2·k·⌈log₂ n⌉ calls. A narrowing spends at most isolationCalls(n) calls
// (enough for isolateAtLeast failing inputs wherever they are), and it
// stops early when more than isolateAtLeast inputs failed and none
// succeeded: a guest that fails everything, which quarantine is for,
// costs about log₂ n + 2·isolateAtLeast calls per batch. Past either
// limit, every part still unresolved is dead-lettered whole with an error
// saying which limit and what the failure was, and counts in
// flowhost_isolation_unresolved_total.

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/ordering"
)

// isolateAtLeast is how many failing inputs a narrowing can always
// isolate, wherever they are in the batch, before its calls run out.
const isolateAtLeast = 8

// isolationCalls is the most calls narrowing a batch of n inputs may
// spend: 2·isolateAtLeast·⌈log₂ n⌉, at least 2·isolateAtLeast.
func isolationCalls(n int) int {
	depth := bits.Len(uint(max(n-1, 1)))
	return 2 * isolateAtLeast * depth
}

// isolation is the narrowing of one batch's failures: what it has spent
// and found. A batch that fails nothing uses it only to count what
// succeeded.
type isolation struct {
	p  *partition
	ep *epoch
	wm abi.Watermarks
	// batchInputs is the size of the whole batch; callsLeft what remains
	// of isolationCalls(batchInputs).
	batchInputs, callsLeft int
	// cause labels the metrics of the calls spent: the cause of the
	// failure that started the narrowing.
	cause string
	// succeeded counts the batch's inputs applied, failed those
	// dead-lettered by the failure policy (isolated or unresolved).
	succeeded, failed int
	// lastErr is the last failure found, for the quarantine's error.
	lastErr error
}

func (p *partition) newIsolation(ep *epoch, b *ordering.Batch, wm abi.Watermarks) *isolation {
	n := batchInputs(b)
	return &isolation{p: p, ep: ep, wm: wm, batchInputs: n, callsLeft: isolationCalls(n)}
}

// applied applies the successful response resp to part, a piece of the
// batch, narrowing each key the guest reported failed, at its place. It
// tells whether the response failed no key.
func (iso *isolation) applied(ctx context.Context, part *ordering.Batch, resp *abi.Response) (clean bool, err error) {
	iso.succeeded += batchInputs(part)
	clean = true
	err = iso.p.apply(ctx, iso.ep, part, resp, func(kb *ordering.KeyBatch, kerr error, quota bool) error {
		iso.succeeded -= keyInputs(kb)
		if quota {
			// A quota is the host's limit on what a key keeps, not a
			// failure of the guest: the key fails whole, as it always did.
			return iso.p.deadLetterKey(ctx, iso.ep, kb, stageGuest, kerr)
		}
		clean = false
		iso.p.comp.rt.metrics.guestErrors.WithLabelValues(iso.p.comp.spec.Name, causeKey).Inc()
		return iso.narrow(ctx, &ordering.Batch{Keys: []ordering.KeyBatch{*kb}}, causeKey, kerr)
	})
	return clean, err
}

// narrow handles part, which failed with cause and err: a single input
// is dead-lettered, a larger part is split in two halves, called in
// order.
//
// When the first half succeeds cleanly, the failure is in the second:
// a failure that survived the retries is taken as caused by an input, so
// the second half is split at once, without a call of its own that would
// only fail (a call, and a fresh instance, saved at about every other
// level). A single input is always called alone before it is
// dead-lettered, so an input is never blamed for its neighbours; a guess
// that was wrong (a deadline that the whole part exceeded, but neither of
// its halves) costs only finer parts, which succeed.
func (iso *isolation) narrow(ctx context.Context, part *ordering.Batch, cause string, err error) error {
	if iso.cause == "" {
		iso.cause = cause
	}
	iso.lastErr = err
	if batchInputs(part) == 1 {
		return iso.isolated(ctx, part, cause, err)
	}
	left, right := splitBatch(part)
	clean, rerr := iso.run(ctx, &left, err)
	if rerr != nil {
		return rerr
	}
	if clean && batchInputs(&right) > 1 {
		return iso.narrow(ctx, &right, cause, err)
	}
	_, rerr = iso.run(ctx, &right, err)
	return rerr
}

// run calls the guest with part, one piece of a failed part whose error
// was parentErr, and applies or narrows it by the outcome. It tells
// whether the call succeeded and failed no key.
func (iso *isolation) run(ctx context.Context, part *ordering.Batch, parentErr error) (clean bool, err error) {
	p := iso.p
	c := p.comp
	m := c.rt.metrics
	if reason := iso.unresolvable(); reason != "" {
		n := batchInputs(part)
		iso.failed += n
		m.isolationUnresolved.WithLabelValues(c.spec.Name).Add(float64(n))
		uerr := fmt.Errorf("not isolated: narrowing the failed batch of %d inputs %s, so this part of %d inputs is dead-lettered whole; the failure narrowed: %w",
			iso.batchInputs, reason, n, parentErr)
		for i := range part.Keys {
			if err := p.deadLetterKey(ctx, iso.ep, &part.Keys[i], stageGuest, uerr); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	iso.callsLeft--
	m.isolationCalls.WithLabelValues(c.spec.Name, iso.cause).Inc()
	// Each call goes through the scheduler like a batch of its own, so
	// that a narrowing, perhaps many deadlines long, stays within its
	// tenant's cpu_limit and fair share instead of holding a worker.
	p.giveToken()
	if err := p.takeToken(ctx); err != nil {
		return false, err
	}
	req, err := p.request(part, iso.wm, iso.ep)
	if err != nil {
		return false, err
	}
	if err := p.ensureInstance(ctx); err != nil {
		return false, err
	}
	resp, cause, gerr := p.call(ctx, req)
	if gerr == nil {
		return iso.applied(ctx, part, resp)
	}
	if err := ctx.Err(); err != nil {
		return false, err // the run is stopping
	}
	m.guestErrors.WithLabelValues(c.spec.Name, cause).Inc()
	p.closeInstance(ctx)
	return false, iso.narrow(ctx, part, cause, gerr)
}

// logDone logs what a narrowing found and spent, if the batch was
// narrowed.
func (iso *isolation) logDone() {
	if iso.cause == "" {
		return
	}
	p := iso.p
	p.comp.rt.log.Info("narrowed a failure down to the inputs that fail on their own",
		"computation", p.comp.spec.Name, "partition", p.index, "epoch", p.epoch, "cause", iso.cause,
		"inputs", iso.batchInputs, "succeeded", iso.succeeded, "dead_lettered", iso.failed,
		"calls", isolationCalls(iso.batchInputs)-iso.callsLeft)
}

// unresolvable says why the narrowing calls the guest no more, or "":
// its calls are spent, or more than isolateAtLeast inputs failed on
// their own and none succeeded, so that the guest looks as if it failed
// every input (a broken plugin, which quarantine is for) and each further
// call, perhaps a deadline, would only find one more.
func (iso *isolation) unresolvable() string {
	switch {
	case iso.callsLeft == 0:
		return fmt.Sprintf("reached its limit of %d calls", isolationCalls(iso.batchInputs))
	case iso.succeeded == 0 && iso.failed > isolateAtLeast:
		return fmt.Sprintf("found %d inputs that fail on their own and none that succeeds", iso.failed)
	}
	return ""
}

// isolated dead-letters part, a single input that failed on its own.
func (iso *isolation) isolated(ctx context.Context, part *ordering.Batch, cause string, err error) error {
	p := iso.p
	iso.failed++
	p.comp.rt.metrics.isolatedFailures.WithLabelValues(p.comp.spec.Name, cause).Inc()
	if iso.batchInputs > 1 {
		err = fmt.Errorf("%w (it fails on its own: isolated from a batch of %d inputs)", err, iso.batchInputs)
	}
	p.comp.rt.log.Warn("computation failed an input on its own; it goes to the dead-letter route",
		"computation", p.comp.spec.Name, "partition", p.index, "epoch", p.epoch, "cause", cause, "key", part.Keys[0].Key, "err", err)
	return p.deadLetterKey(ctx, iso.ep, &part.Keys[0], stageGuest, err)
}

// splitBatch splits b in two halves of its inputs in the order the guest
// sees them (keys in order, per key its timers, then its messages); a key
// may be cut in two, its earlier inputs in left. b has at least two
// inputs; left gets the smaller half.
func splitBatch(b *ordering.Batch) (left, right ordering.Batch) {
	half := batchInputs(b) / 2
	for _, kb := range b.Keys {
		n := keyInputs(&kb)
		switch {
		case half >= n:
			left.Keys = append(left.Keys, kb)
			half -= n
		case half == 0:
			right.Keys = append(right.Keys, kb)
		default:
			l, r := splitKey(kb, half)
			left.Keys = append(left.Keys, l)
			right.Keys = append(right.Keys, r)
			half = 0
		}
	}
	return left, right
}

// keyInputs counts kb's inputs: its due timers and its messages.
func keyInputs(kb *ordering.KeyBatch) int { return len(kb.Timers) + len(kb.Messages) }

// splitKey cuts kb after its first at inputs (0 < at < inputs).
func splitKey(kb ordering.KeyBatch, at int) (l, r ordering.KeyBatch) {
	l.Key, r.Key = kb.Key, kb.Key
	if nt := len(kb.Timers); at <= nt {
		l.Timers = kb.Timers[:at:at]
		r.Timers, r.Messages = kb.Timers[at:], kb.Messages
		return l, r
	}
	at -= len(kb.Timers)
	l.Timers, l.Messages = kb.Timers, kb.Messages[:at:at]
	r.Messages = kb.Messages[at:]
	return l, r
}

// stateOf is key's state as the batch's parts applied so far left it: the
// last change staged in ep, or else the committed state.
func (p *partition) stateOf(ep *epoch, key string) ([]byte, bool, error) {
	if ep != nil && len(ep.commit.State) > 0 {
		if ep.stateIndex == nil {
			ep.stateIndex = map[string]int{}
		}
		for ; ep.indexed < len(ep.commit.State); ep.indexed++ {
			ep.stateIndex[ep.commit.State[ep.indexed].Key] = ep.indexed
		}
		if i, ok := ep.stateIndex[key]; ok {
			ch := ep.commit.State[i]
			return ch.Value, !ch.Delete, nil
		}
	}
	return p.comp.rt.storage.State(p.comp.spec.Name, p.index, key)
}
