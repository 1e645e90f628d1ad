package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// process runs one batch through the computation and commits it as one
// epoch: state and timer changes, the derived messages (stamped by the
// host), the consumed inputs and the partition's positions, all in one
// storage batch. Only then do the derived messages go downstream.
//
// A batch the guest fails is handled by the computation's failure policy
// (failure.go): retried on a fresh instance, and when every attempt
// failed, fatal to the run before anything of it commits (then: stop) or
// narrowed down until only the inputs that fail on their own go to the
// dead-letter route, the rest applied in order (then: dead_letter,
// isolate.go); a key the guest reports failed is narrowed the same way.
// A quarantined partition dead-letters its batches without calling the
// guest. Only the calls that succeeded change the partition (apply), and
// all of them belong to the batch's epoch, which commits once, whatever
// the attempts.
//
// The worker pool: at most WithWorkers partitions call, apply and commit
// at once (a quarantined partition, which calls nothing, takes no worker), so many partitions share the cores instead of oversubscribing
// them. A partition gives its token back while it waits to retry, and
// before it hands its outputs over: a partition blocked on a full
// downstream buffer must not hold a token, or the downstream partition
// could wait for one forever.
func (p *partition) process(ctx context.Context, b *ordering.Batch, wm abi.Watermarks) error {
	started := time.Now()
	p.adoptVersion(ctx)
	// A quarantined partition calls no guest: it dead-letters and commits
	// without a worker, so that its tenant's CPU quota, spent by the
	// failures that quarantined it, does not hold its dead letters back.
	if p.failures.quarantine == nil {
		if err := p.takeToken(ctx); err != nil {
			return err
		}
	}
	defer p.giveToken()
	p.epoch++
	fs := &p.failures
	if fs.quarantine != nil {
		ep := p.newEpoch(b)
		for i := range b.Keys {
			if err := p.deadLetterKey(ctx, ep, &b.Keys[i], stageGuest, fs.quarantine); err != nil {
				return err
			}
		}
		return p.finishEpoch(ctx, ep, b, started)
	}
	// The batch may come back shorter: a timer the guest set in it fell
	// before one of its messages (callUntilTimersFit).
	b, resp, failed, err := p.callUntilTimersFit(ctx, b, wm)
	if err != nil {
		return err
	}
	ep := p.newEpoch(b)
	// A batch that failed is narrowed down to the inputs that fail on
	// their own (isolate.go). Its parts' timers are not checked against
	// the batch's own messages as callUntilTimersFit checks a whole
	// response's: a timer a part sets fires from the next batch on.
	iso := p.newIsolation(ep, b, wm)
	if failed != nil {
		if err := p.exhausted(ctx, failed); err != nil {
			return err
		}
		err = iso.narrow(ctx, b, failed.cause, failed.deadLetterErr())
	} else {
		_, err = iso.applied(ctx, b, resp)
	}
	if err != nil {
		return err
	}
	iso.logDone()
	p.countFailures(ctx, iso)
	return p.finishEpoch(ctx, ep, b, started)
}

// newEpoch starts the epoch of batch b: its due timers are deleted, the
// map counters start again.
func (p *partition) newEpoch(b *ordering.Batch) *epoch {
	if p.comp.rt.trace != nil || p.comp.rt.opts.liveTrace > 0 {
		p.traceBatch(b)
	}
	ep := &epoch{commit: stateCommit{Epoch: p.epoch}}
	for i := range b.Keys {
		for _, t := range b.Keys[i].Timers {
			ep.commit.TimersDeleted = append(ep.commit.TimersDeleted, timerRef{t.Key, t.Trigger})
		}
	}
	clear(p.mapCounts)
	return ep
}

// finishEpoch commits epoch ep of batch b and hands its outputs
// downstream.
func (p *partition) finishEpoch(ctx context.Context, ep *epoch, b *ordering.Batch, started time.Time) error {
	c := p.comp
	r := c.rt
	if err := p.commitEpoch(ep, b); err != nil {
		return fmt.Errorf("computation %q partition %d: committing epoch %d: %w", c.spec.Name, p.index, p.epoch, err)
	}
	for _, m := range ep.outs {
		if ctr := c.mOut[m.Stream]; ctr != nil { // nil for the dead-letter stream
			ctr.Inc()
		}
	}
	p.giveToken()
	if err := r.deliver(ctx, p.self, ep.ds); err != nil {
		return err
	}
	if p.strategy != nil {
		p.mu.Lock()
		for _, m := range ep.outs {
			if c.mOut[m.Stream] != nil { // not a dead letter
				p.strategy.Emitted(m.Time.Event)
			}
		}
		p.mu.Unlock()
	}
	p.release(b)
	c.mBatchRows.Observe(float64(batchInputs(b)))
	c.mBatchTime.Observe(time.Since(started).Seconds())
	p.publishView(batchInputs(b), started, &ep.commit)
	return nil
}

// callUntilTimersFit calls the guest with b and, while a timer the guest
// set would fall inside b (ordering.TimerCut: before a message of b that
// comes after the first input of the key that set it), shortens b to end
// there and calls again: the messages cut off go back to the front of the
// merge order, and the timer, now pending, fires where the watermark
// passes it (next). A timer set by a key with due timers may fall before
// the batch's first message (timers set by fired timers fire at the same
// position), which leaves a batch of the due timers alone. A response is
// pure (state and timers live in the host), so only the last call counts;
// each shortening drops at least one message, so the loop ends. It
// returns the batch that was processed with its response, or the failure
// of its last call.
func (p *partition) callUntilTimersFit(ctx context.Context, b *ordering.Batch, wm abi.Watermarks) (*ordering.Batch, *abi.Response, *batchFailure, error) {
	for {
		req, err := p.request(b, wm, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		resp, failed, err := p.callWithRetries(ctx, b, wm, req)
		if err != nil || failed != nil {
			return b, nil, failed, err
		}
		cut, ok := p.timerCut(b, resp)
		if !ok {
			return b, resp, nil, nil
		}
		p.comp.rt.metrics.timerCuts.WithLabelValues(p.comp.spec.Name).Inc()
		b = p.shorten(cut)
	}
}

// timerCut returns where the first timer resp sets inside b would fall
// (an index into p.cutMsgs); ok is false when none does.
func (p *partition) timerCut(b *ordering.Batch, resp *abi.Response) (int, bool) {
	if len(p.cutMsgs) == 0 || !setsTimers(resp) {
		return 0, false
	}
	first := map[string]int{}
	for i := range b.Keys {
		if len(b.Keys[i].Timers) > 0 {
			// A timer its due timers set may be due before message 0
			// too: they fire there, and so does what they set.
			first[b.Keys[i].Key] = -1
		}
	}
	for i, m := range p.cutMsgs {
		if _, seen := first[m.Key]; !seen {
			first[m.Key] = i
		}
	}
	cut, found := len(p.cutMsgs), false
	for i := range resp.Keys {
		rk := &resp.Keys[i]
		if rk.Error != "" {
			continue // nothing of a failed key is applied
		}
		for _, ts := range rk.TimersSet {
			if at, ok := ordering.TimerCut(p.cutBounds[:cut], first[rk.Key], ts.TriggerTimestamp); ok {
				cut, found = at, true
			}
		}
	}
	return cut, found
}

// setsTimers reports whether any key the response applies sets a timer:
// only then can a batch need cutting.
func setsTimers(resp *abi.Response) bool {
	for i := range resp.Keys {
		if resp.Keys[i].Error == "" && len(resp.Keys[i].TimersSet) > 0 {
			return true
		}
	}
	return false
}

// shorten gives the messages of the current batch from index cut on back
// to the front of the merge order and returns the batch of those before,
// with the same due timers.
func (p *partition) shorten(cut int) *ordering.Batch {
	back := p.cutMsgs[cut:]
	p.mu.Lock()
	p.requeued = append(append(make([]*ordering.Message, 0, len(back)+len(p.requeued)), back...), p.requeued...)
	for _, m := range back {
		p.held.Add(m.Time.Event)
	}
	p.mu.Unlock()
	clear(p.cutMsgs[cut:])
	p.cutMsgs, p.cutBounds = p.cutMsgs[:cut], p.cutBounds[:cut]
	now := p.comp.rt.opts.now()
	for _, m := range p.cutMsgs {
		p.rebatcher.Add(m, now)
	}
	nb := p.rebatcher.Cut(p.cutDue)
	return &nb
}

// takeToken waits for a worker slot of the partition's tenant
// (scheduler.go).
func (p *partition) takeToken(ctx context.Context) error {
	if err := p.comp.rt.sched.acquire(ctx, p.comp.group); err != nil {
		return err
	}
	p.hasToken, p.tokenAt = true, time.Now()
	return nil
}

// giveToken gives the worker slot back if the partition holds it, charging
// its tenant for the time it held it.
func (p *partition) giveToken() {
	if p.hasToken {
		p.hasToken = false
		p.comp.rt.sched.release(p.comp.group, time.Since(p.tokenAt))
	}
}

// epoch is what one batch changes, gathered before it commits.
type epoch struct {
	commit stateCommit
	outs   []*ordering.Message // derived messages, before routing
	ds     []delivery          // where they (and dead letters) go
	// applied counts the responses applied: more than one when the batch
	// was narrowed (isolate.go), and then a later part may cancel a timer
	// an earlier one set.
	applied int
	// stateIndex maps a key to its last change in commit.State, for the
	// first indexed changes; built only when a part of a narrowed batch
	// reads state (stateOf).
	stateIndex map[string]int
	indexed    int
}

// commitEpoch commits an epoch in one batch of the storage: state, timers,
// the inputs taken off this partition's queue, the outputs put on their
// destinations' queues, and the partition's epoch, id counters, clock,
// watermarks, biases and TaskIds.
func (p *partition) commitEpoch(ep *epoch, b *ordering.Batch) error {
	c := p.comp
	sb := c.rt.storage.NewBatch()
	writeCommit(sb, c.spec.Name, p.index, &ep.commit)
	for i := range b.Keys {
		for _, m := range b.Keys[i].Messages {
			sb.Dequeue(p.dest, m.From, m.Task)
		}
	}
	persist(sb, p.self, ep.ds)
	meta := store.PartitionMeta{
		Epoch:  p.epoch,
		OutSeq: p.outSeq,
		Clock:  p.clock.Last(),
		Out:    store.Watermarks{Event: p.outWM.Load(), System: p.outSysWM.Load()},
		Tasks:  p.snd.storedTasks(),
	}
	if p.metaBias == nil {
		p.metaBias = make(map[string]int64, len(c.spec.InputStreams))
	}
	for i, name := range c.spec.InputStreams {
		p.metaBias[name] = p.merge.Bias(i)
	}
	meta.Bias = p.metaBias
	sb.SetPartition(c.spec.Name, p.index, meta)
	return c.rt.metrics.commit("epoch", sb)
}

// Causes of a failed batch, for metrics and logs.
const (
	causeCall     = "call"     // trap, deadline, bad status or undecodable response
	causeValidate = "validate" // a response that breaks the ABI's rules
	causeBatch    = "batch"    // the guest reported the batch failed
	causeKey      = "key"      // the guest reported one key failed
)

// call invokes the computation and checks its response against the
// request.
func (p *partition) call(ctx context.Context, req *abi.Request) (*abi.Response, string, error) {
	name := p.comp.spec.Name
	resp, err := p.proc.Process(ctx, req)
	if err != nil {
		return nil, causeCall, fmt.Errorf("computation %q (plugin %q): %w", name, p.comp.spec.Plugin, err)
	}
	if err := abi.ValidateResponse(resp, req, p.comp.spec.OutputStreams); err != nil {
		return nil, causeValidate, fmt.Errorf("computation %q (plugin %q): response: %w", name, p.comp.spec.Plugin, err)
	}
	if resp.Error != "" {
		return nil, causeBatch, fmt.Errorf("computation %q (plugin %q) failed the batch: %s", name, p.comp.spec.Plugin, resp.Error)
	}
	return resp, "", nil
}

// closeInstance closes an instance that failed a call (it may have
// trapped or been interrupted); the next call makes a fresh one
// (ensureInstance). State lives in the host, so nothing is lost.
func (p *partition) closeInstance(ctx context.Context) {
	if p.proc != nil {
		_ = p.proc.Close(ctx)
		p.proc = nil
	}
}

// ensureInstance makes the partition's instance if the last one was
// closed after a failure. It is an instance of the version the partition
// runs, not of a newer one a Reload brought meanwhile: a batch, retries
// and narrowing included, runs on one version, and the partition moves
// to the new one at its next epoch (adoptVersion). An error is fatal to
// the run.
func (p *partition) ensureInstance(ctx context.Context) error {
	if p.proc != nil {
		return nil
	}
	v := p.version
	if v == nil {
		v = p.comp.version.Load()
	}
	proc, err := v.factory.Instantiate(ctx, p.comp.init(p.index))
	if err != nil {
		return fmt.Errorf("computation %q partition %d: replacing a failed instance: %w", p.comp.spec.Name, p.index, err)
	}
	p.proc = proc
	p.use(ctx, v)
	return nil
}

// request builds the ABI request of a batch, or of a part of one: with
// ep, a key's state is what the parts of ep applied so far left.
func (p *partition) request(b *ordering.Batch, wm abi.Watermarks, ep *epoch) (*abi.Request, error) {
	c := p.comp
	req := &abi.Request{
		ABI:         abi.Version,
		Computation: c.spec.Name,
		Kind:        c.kind,
		Partition:   uint64(p.index),
		Epoch:       p.epoch,
		Watermarks:  wm,
		Keys:        make([]abi.RequestKey, len(b.Keys)),
	}
	// One array holds every key's messages: one allocation per request.
	n := 0
	for i := range b.Keys {
		n += len(b.Keys[i].Messages)
	}
	msgs := make([]abi.Message, n)
	for i := range b.Keys {
		kb := &b.Keys[i]
		rk := &req.Keys[i]
		rk.Key = kb.Key
		if c.kind == abi.KindTransform {
			st, ok, err := p.stateOf(ep, kb.Key)
			if err != nil {
				return nil, fmt.Errorf("computation %q partition %d: reading state of key %q: %w", c.spec.Name, p.index, kb.Key, err)
			}
			if ok {
				if st == nil {
					st = []byte{}
				}
				rk.State = st
			}
		}
		if len(kb.Timers) > 0 {
			rk.Timers = make([]abi.DueTimer, len(kb.Timers))
			for j, t := range kb.Timers {
				rk.Timers[j] = abi.DueTimer{ID: t.ID.String(), TriggerTimestamp: t.Trigger, EventTimestamp: t.Event, Payload: t.Payload}
			}
		}
		rk.Messages, msgs = msgs[:len(kb.Messages):len(kb.Messages)], msgs[len(kb.Messages):]
		for j, m := range kb.Messages {
			rk.Messages[j] = abi.Message{
				Stream:             m.Stream,
				EventTimestamp:     m.Time.Event,
				SystemTimestamp:    m.Time.System,
				AlignmentTimestamp: m.Time.Alignment,
				Payload:            m.Payload,
			}
		}
	}
	p.setMessageIDs(b, req)
	return req, nil
}

// setMessageIDs gives the request's messages their ids' text: formatted
// into one reused buffer and made one string per request, which the ids
// share, instead of one allocation per message.
func (p *partition) setMessageIDs(b *ordering.Batch, req *abi.Request) {
	text, ends := p.idText[:0], p.idEnds[:0]
	for i := range b.Keys {
		for _, m := range b.Keys[i].Messages {
			text, _ = m.ID.AppendText(text)
			ends = append(ends, len(text))
		}
	}
	all := string(text)
	p.idText, p.idEnds = text, ends
	at, k := 0, 0
	for i := range req.Keys {
		for j := range req.Keys[i].Messages {
			req.Keys[i].Messages[j].ID = all[at:ends[k]]
			at = ends[k]
			k++
		}
	}
}

// apply gathers the effects of a successful response to b (a batch or a
// part of one) into ep: state and timer changes, and the derived messages
// with their deliveries. A key the guest reports failed, or over a quota
// of its tenant, changes nothing: it goes to failedKey, with quota set
// for the latter.
func (p *partition) apply(ctx context.Context, ep *epoch, b *ordering.Batch, resp *abi.Response, failedKey func(kb *ordering.KeyBatch, err error, quota bool) error) error {
	c := p.comp
	r := c.rt
	inBatch := batchKeys{b: b}
	commit := &ep.commit
	earlier := ep.applied > 0
	// One clock reading stamps every output of the response: they were
	// created by one call.
	now := p.clock.Now()
	ep.applied++
	for i := range resp.Keys {
		rk := &resp.Keys[i]
		kb := inBatch.find(rk.Key)
		if rk.Error != "" {
			kerr := fmt.Errorf("computation %q (plugin %q) failed key %q: %s", c.spec.Name, c.spec.Plugin, rk.Key, rk.Error)
			if err := failedKey(kb, kerr, false); err != nil {
				return err
			}
			continue
		}
		if quota, qerr := p.overQuota(rk); qerr != nil {
			r.metrics.guestErrors.WithLabelValues(c.spec.Name, causeKey).Inc()
			r.metrics.quotaExceeded.WithLabelValues(c.tenant.Name, c.spec.Name, quota).Inc()
			kerr := fmt.Errorf("computation %q (plugin %q, tenant %q) failed key %q: %w", c.spec.Name, c.spec.Plugin, c.tenant.Name, rk.Key, qerr)
			if err := failedKey(kb, kerr, true); err != nil {
				return err
			}
			continue
		}
		switch rk.StateOp {
		case abi.StateReplace:
			commit.State = append(commit.State, stateChange{Key: rk.Key, Value: rk.State})
		case abi.StateDelete:
			commit.State = append(commit.State, stateChange{Key: rk.Key, Delete: true})
		}
		for _, trig := range rk.TimersCancel {
			if old, ok := p.timers.Get(rk.Key, trig); ok {
				p.timers.Cancel(rk.Key, trig)
				p.timerEvts.Remove(old.Event)
				commit.TimersDeleted = append(commit.TimersDeleted, timerRef{rk.Key, trig})
				if earlier {
					// A commit deletes timers before it sets them: a timer
					// an earlier part set must leave TimersSet.
					commit.TimersSet = slices.DeleteFunc(commit.TimersSet, func(t ordering.Timer) bool {
						return t.Key == rk.Key && t.Trigger == trig
					})
				}
			}
		}
		for _, ts := range rk.TimersSet {
			t := ordering.Timer{
				Key:     rk.Key,
				Trigger: ts.TriggerTimestamp,
				Event:   ts.TriggerTimestamp,
				ID:      ordering.TransformID(c.spec.Name+".timers", int32(p.index), p.outSeq),
				Payload: ts.Payload,
			}
			p.outSeq++
			if ts.EventTimestamp != nil {
				t.Event = *ts.EventTimestamp
			}
			old, had := p.timers.Get(rk.Key, t.Trigger)
			p.timers.Set(t)
			kept, _ := p.timers.Get(rk.Key, t.Trigger)
			if had {
				p.timerEvts.Remove(old.Event)
			}
			p.timerEvts.Add(kept.Event)
			commit.TimersSet = append(commit.TimersSet, kept)
		}
		for e := range rk.Emits {
			m := p.derive(kb, &rk.Emits[e], now)
			ep.outs = append(ep.outs, m)
			var err error
			if ep.ds, err = r.plan(ctx, p.snd, m, ep.ds); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchKeys finds a validated response's keys in its batch. A guest
// answers in the request's order as a rule, so the next key is tried
// first; the index is built only for a response out of that order.
type batchKeys struct {
	b      *ordering.Batch
	cursor int
	index  map[string]int
}

func (k *batchKeys) find(key string) *ordering.KeyBatch {
	if k.index == nil && k.cursor < len(k.b.Keys) && k.b.Keys[k.cursor].Key == key {
		k.cursor++
		return &k.b.Keys[k.cursor-1]
	}
	if k.index == nil {
		k.index = make(map[string]int, len(k.b.Keys))
		for i := range k.b.Keys {
			k.index[k.b.Keys[i].Key] = i
		}
	}
	return &k.b.Keys[k.index[key]]
}

// derive builds a derived message and stamps it: the guest chose stream,
// payload, key, parents and perhaps EventTimestamp; the host assigns the
// rest by the ordering rules.
func (p *partition) derive(kb *ordering.KeyBatch, e *abi.Emit, now int64) *ordering.Message {
	c := p.comp
	nt := len(kb.Timers)
	nParents := nt + len(kb.Messages)
	if e.Parents != nil {
		nParents = len(e.Parents)
	}
	// The common single parent costs one allocation: the message with its
	// parent's id; the parents' times stay on the stack.
	var timesBuf [4]ordering.Timestamps
	parentTimes := timesBuf[:0]
	var out *ordering.Message
	var parentIDs []ordering.MessageID
	if nParents == 1 {
		one := p.derived.next()
		out, parentIDs = &one.m, one.parent[:0]
	} else {
		out = &ordering.Message{}
		if nParents > 0 {
			parentIDs = make([]ordering.MessageID, 0, nParents)
		}
	}
	var firstMsg *ordering.Message
	addParent := func(idx int) {
		if idx < nt {
			t := kb.Timers[idx]
			parentTimes = append(parentTimes, ordering.Timestamps{Event: t.Event, System: t.Trigger, Alignment: t.Trigger})
			parentIDs = append(parentIDs, t.ID)
			return
		}
		m := kb.Messages[idx-nt]
		parentTimes = append(parentTimes, m.Time)
		parentIDs = append(parentIDs, m.ID)
		if firstMsg == nil || m.ID.Compare(firstMsg.ID) < 0 {
			firstMsg = m
		}
	}
	if e.Parents == nil {
		for i := 0; i < nt+len(kb.Messages); i++ {
			addParent(i)
		}
	} else {
		for _, idx := range e.Parents {
			addParent(int(idx))
		}
	}
	*out = ordering.Message{Stream: e.Stream, Key: e.Key, Parents: parentIDs, Payload: e.Payload}
	if c.kind == abi.KindMap && firstMsg != nil {
		out.Time = ordering.MultiParentOutput(parentTimes)
		if e.EventTimestamp != nil {
			out.Time.Event = *e.EventTimestamp
		}
		slot := mapSlot{parent: firstMsg, stream: e.Stream}
		out.ID = firstMsg.ID.Derive(e.Stream, p.mapCounts[slot])
		p.mapCounts[slot]++
		return out
	}
	var ev int64
	if e.EventTimestamp != nil {
		ev = *e.EventTimestamp
	}
	out.Time = ordering.TransformOutput(now, parentTimes, ev, e.EventTimestamp != nil)
	out.ID = ordering.TransformID(c.spec.Name, int32(p.index), p.outSeq)
	p.outSeq++
	return out
}

// release takes a processed batch's inputs out of flight and republishes
// the watermarks they held back.
func (p *partition) release(b *ordering.Batch) {
	c := p.comp
	p.mu.Lock()
	defer p.mu.Unlock()
	// The metrics move once per input stream and batch, not per message:
	// each move is an atomic operation on a shared gauge.
	if len(p.released) != len(c.inputs) {
		p.released = make([]inputRelease, len(c.inputs))
	}
	for i := range b.Keys {
		kb := &b.Keys[i]
		for _, t := range kb.Timers {
			p.timerEvts.Remove(t.Event)
		}
		for _, msg := range kb.Messages {
			p.events.Remove(msg.Time.Event)
			p.systems.Remove(msg.Time.System)
			pr := p.prio[msg]
			r := &p.released[pr.Stream]
			r.msgs++
			r.bytes += msg.Footprint()
			r.lastBias = pr.Bias
			delete(p.prio, msg)
		}
	}
	for i := range p.released {
		r := &p.released[i]
		if r.msgs == 0 {
			continue
		}
		s := c.inputs[i]
		c.mIn[s.name].Add(float64(r.msgs))
		s.mBuffered.Sub(float64(r.msgs))
		s.mBufferedBytes.Sub(float64(r.bytes))
		s.mBias.Set(nsToSeconds(r.lastBias))
		*r = inputRelease{}
	}
	p.publishWatermarks()
}

// traceBatch writes the batch's deliveries in the order the guest sees
// them: per key, due timers first, then messages.
func (p *partition) traceBatch(b *ordering.Batch) {
	c := p.comp
	recs := p.tracebuf[:0]
	for i := range b.Keys {
		kb := &b.Keys[i]
		for _, t := range kb.Timers {
			recs = append(recs, TraceRecord{
				Computation: c.spec.Name, Partition: p.index, Epoch: p.epoch, Key: kb.Key, Kind: TraceTimer,
				Stream: c.spec.Name + ".timers", MessageID: t.ID.String(), Parents: []string{},
				EventTS: t.Event, SystemTS: t.Trigger, AlignmentTS: t.Trigger, PriorityTS: t.Trigger, TriggerTS: t.Trigger,
			})
		}
		for _, m := range kb.Messages {
			pr := p.prio[m]
			recs = append(recs, TraceRecord{
				Computation: c.spec.Name, Partition: p.index, Epoch: p.epoch, Key: kb.Key, Kind: TraceMessage,
				Stream: m.Stream, MessageID: m.ID.String(), Parents: idStrings(m.Parents),
				EventTS: m.Time.Event, SystemTS: m.Time.System, AlignmentTS: m.Time.Alignment, WriteTS: m.Time.Write,
				Bias: pr.Bias, Delay: pr.Delay, PriorityTS: pr.Timestamp, TaskID: uint64(m.Task),
			})
		}
	}
	p.tracebuf = recs
	p.recent.add(recs, c.rt.opts.liveTrace)
	if c.rt.trace == nil {
		return
	}
	if err := c.rt.trace.write(recs); err != nil {
		c.rt.fail(fmt.Errorf("trace: %w", err))
	}
}

func idStrings(ids []ordering.MessageID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func batchInputs(b *ordering.Batch) int {
	n := 0
	for i := range b.Keys {
		n += len(b.Keys[i].Timers) + len(b.Keys[i].Messages)
	}
	return n
}

// overQuota checks what a response key would change against the tenant's
// per-key quotas; it names the quota exceeded. A key over a quota fails
// as a whole: nothing of it is applied, and its inputs are dead-lettered.
func (p *partition) overQuota(rk *abi.ResponseKey) (string, error) {
	t := p.comp.tenant
	if t == nil {
		return "", nil
	}
	q := &t.Quotas
	if rk.StateOp == abi.StateReplace && int64(len(rk.State)) > q.MaxStateBytesPerKey {
		return "max_state_bytes_per_key", fmt.Errorf("quota exceeded: its new state is %d bytes, more than tenant %q's quotas.max_state_bytes_per_key (%d bytes); its state stays as it was",
			len(rk.State), t.Name, q.MaxStateBytesPerKey)
	}
	if len(rk.TimersSet) == 0 {
		return "", nil
	}
	pending := p.timers.KeyLen(rk.Key)
	cancelled := map[int64]bool{}
	for _, trig := range rk.TimersCancel {
		if _, ok := p.timers.Get(rk.Key, trig); ok && !cancelled[trig] {
			cancelled[trig] = true
			pending--
		}
	}
	added := map[int64]bool{}
	for _, ts := range rk.TimersSet {
		trig := ts.TriggerTimestamp
		if _, ok := p.timers.Get(rk.Key, trig); ok && !cancelled[trig] || added[trig] {
			continue // replaces a pending timer
		}
		added[trig] = true
		if pending++; pending > q.MaxTimersPerKey {
			return "max_timers_per_key", fmt.Errorf("quota exceeded: it would have more than tenant %q's quotas.max_timers_per_key (%d) timers pending (%d pending, %d set in this batch); its timers stay as they were",
				t.Name, q.MaxTimersPerKey, p.timers.KeyLen(rk.Key), len(rk.TimersSet))
		}
	}
	return "", nil
}

// inputRelease is what one batch released of one input stream, for the
// stream's metrics: messages, their bytes and the last one's bias.
type inputRelease struct {
	msgs     int
	bytes    int64
	lastBias int64
}
