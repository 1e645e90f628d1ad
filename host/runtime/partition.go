package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/keys"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// computation is a pipeline computation: its partitions and what they share.
type computation struct {
	rt      *Runtime
	spec    *spec.Computation
	kind    abi.Kind
	version atomic.Pointer[version] // what partitions instantiate; Reload replaces it
	keyer   *keys.Extractor         // nil for the unkeyed
	inputs  []*stream
	outputs []*stream
	parts   []*partition
	tenant  *spec.Tenant // nil: the operator's
	group   *group       // its share of the workers
	// quarantined mirrors the partitions' quarantines for Status.
	quarantined quarantines
	done        atomic.Int32 // partitions finished
	idleMu      sync.Mutex   // one publishIdle at a time
	// Metric series, resolved once: per input and output stream name.
	mIn, mOut              map[string]prometheus.Counter
	mBatchRows, mBatchTime prometheus.Observer
}

func newComputation(r *Runtime, cs *spec.Computation, f compute.Factory) (*computation, error) {
	c := &computation{rt: r, spec: cs, kind: abi.Kind(cs.Kind), tenant: r.pipe.Tenant(cs.Tenant)}
	if t := c.tenant; t != nil {
		c.group = r.sched.group(t.Name, t.Weight, t.Quotas.ConcurrentInstances, t.Quotas.CPULimit, r.metrics)
	} else {
		c.group = r.sched.group(operatorGroup, 1, 0, 0, r.metrics)
	}
	c.version.Store(&version{factory: f})
	if len(cs.GroupBy) > 0 {
		k, err := keys.NewExtractor(cs.GroupBy)
		if err != nil {
			return nil, fmt.Errorf("computation %q: group_by: %w", cs.Name, err)
		}
		c.keyer = k
	}
	for i := 0; i < cs.Partitions; i++ {
		d := store.Dest{Name: cs.Name, Partition: i}
		c.parts = append(c.parts, &partition{comp: c, index: i, dest: d, destKey: d.String()})
	}
	m := r.metrics
	c.mIn, c.mOut = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, s := range cs.InputStreams {
		c.mIn[s] = m.messagesIn.WithLabelValues(cs.Name, s)
	}
	for _, s := range cs.OutputStreams {
		c.mOut[s] = m.messagesOut.WithLabelValues(cs.Name, s)
	}
	m.quarantined.WithLabelValues(cs.Name).Set(0) // the series exists from the start
	c.mBatchRows = m.batchRows.WithLabelValues(cs.Name)
	c.mBatchTime = m.batchSeconds.WithLabelValues(cs.Name)
	return c, nil
}

// start creates every partition's instance, state and buffers.
func (c *computation) start(ctx context.Context) error {
	for _, p := range c.parts {
		if err := p.start(ctx); err != nil {
			return fmt.Errorf("computation %q partition %d: %w", c.spec.Name, p.index, err)
		}
	}
	return nil
}

func (c *computation) close(ctx context.Context) {
	for _, p := range c.parts {
		if p.proc != nil {
			_ = p.proc.Close(ctx)
			p.proc = nil
		}
	}
}

func (c *computation) wakeAll() {
	for _, p := range c.parts {
		p.wake()
	}
}

func (c *computation) wakeIdle() {
	for _, p := range c.parts {
		p.wakeIfIdle()
	}
}

// key computes a message's key at this computation: from its group_by
// fields of the payload (ABI.md: receivers compute their own key). A
// computation without group_by takes the key the message carries (one a
// guest set on its output), or none.
func (c *computation) key(m *ordering.Message, in *keys.Interner) (string, error) {
	if c.keyer == nil {
		return m.Key, nil
	}
	return c.keyer.KeyIn(m.Payload, in)
}

// partitionFinished publishes the end of a partition; the last one to
// finish ends the computation's output streams.
func (c *computation) partitionFinished(endOfData bool) {
	if int(c.done.Add(1)) == len(c.parts) {
		for _, s := range c.outputs {
			s.finish(endOfData)
		}
	}
}

// partition is one computation partition: a single-threaded worker with its
// inbox (a Router carrying FIFO lanes from every sender), its cross-stream
// Merge, its Batcher, its timers and its instance.
type partition struct {
	comp  *computation
	index int
	// dest names the partition's queue in the store, destKey the same as
	// senders count TaskIds for it.
	dest    store.Dest
	destKey string

	mu      sync.Mutex
	cond    *sync.Cond // signalled on input, watermark moves and space freed
	inbox   *ordering.Router
	merge   *ordering.Merge
	mergeAt int64 // bytes the merge may hold before the inbox keeps the rest
	events  ordering.InFlight
	systems ordering.InFlight
	// held are the EventTimestamps of the messages not yet cut into a
	// batch (inbox, merge and requeued): Q of ordering.StepBefore.
	held ordering.InFlight
	// requeued are messages a timer cut gave back (process.go), in merge
	// order: they come before anything the merge holds.
	requeued []*ordering.Message
	blocked  int // senders waiting for room in the inbox
	// awaitSince is when the partition began to wait for its input
	// watermark before the next message (0: it does not wait).
	awaitSince int64
	woken      bool
	idle       bool // the worker waits with no input pending, or for the watermark

	// Owned by the worker goroutine.
	batcher   *ordering.Batcher
	rebatcher *ordering.Batcher // rebuilds a batch a timer cut shortened
	// The batch being processed, in merge order, with Q at each message
	// (ordering.TimerCut) and the due timers it fires first.
	cutMsgs   []*ordering.Message
	cutBounds []int64
	cutDue    []ordering.Timer
	// strategy is the watermark_strategy estimate (nil: none), an extra
	// input of evWM.
	strategy  *ordering.OutputWatermark
	timers    *ordering.TimerStore
	timerEvts ordering.InFlight
	snd       *sender
	derived   slab[derivedMessage] // its outputs with one parent
	released  []inputRelease       // per input stream, for release
	metaBias  map[string]int64     // commitEpoch's, reused: SetPartition encodes it at once
	proc      compute.Computation
	version   *version // the one proc is an instance of
	clock     *ordering.SystemClock
	outSeq    uint64
	epoch     uint64
	prio      map[*ordering.Message]ordering.Priority
	self      ordering.Sender
	evWM      *ordering.StreamWatermark
	sysWM     *ordering.StreamWatermark
	inEvWM    *ordering.StreamWatermark // the inputs' alone, without what is in flight here
	outIdle   atomic.Bool               // every input idle and nothing queued (publishIdle)
	outWM     atomic.Int64
	outSysWM  atomic.Int64
	finished  bool
	// waitingSince is when the oldest message not yet cut arrived (0:
	// none); lingerTimer wakes the worker when it has waited lingerNanos.
	waitingSince int64
	lingerNanos  int64
	lingerTimer  *time.Timer
	tracebuf     []TraceRecord
	// idText and idEnds are the buffers request formats message ids in.
	idText    []byte
	idEnds    []int
	mapCounts map[mapSlot]uint64
	failures  partitionFailures
	hasToken  bool      // holds a worker slot (process)
	tokenAt   time.Time // since when
	view      partitionView
	recent    recentDeliveries
}

type mapSlot struct {
	parent *ordering.Message
	stream string
}

func (p *partition) start(ctx context.Context) error {
	c := p.comp
	r := c.rt
	p.cond = sync.NewCond(&p.mu)
	p.self = ordering.Sender{Computation: c.spec.Name, Partition: p.index}
	p.outWM.Store(ordering.NoWatermark)
	p.outSysWM.Store(ordering.NoWatermark)
	if ws := c.spec.WatermarkStrategy; ws != nil && c.kind == abi.KindTransform {
		p.strategy = ordering.NewOutputWatermark(ws.OutOfOrdernessBound)
		p.evWM = ordering.NewStreamWatermark(len(c.inputs) + 1)
	} else {
		p.evWM = ordering.NewStreamWatermark(len(c.inputs))
	}
	p.sysWM = ordering.NewStreamWatermark(len(c.inputs))
	p.inEvWM = ordering.NewStreamWatermark(len(c.inputs))
	inboxCap := max(c.spec.BufferBytes/4, 1)
	p.mergeAt = max(c.spec.BufferBytes-inboxCap, 1)
	inbox, err := ordering.NewRouter(ordering.RouterConfig{
		Partitions: map[string]int{c.spec.Name: 1},
		Cap:        inboxCap,
	})
	if err != nil {
		return err
	}
	p.inbox = inbox
	var mopts []ordering.MergeOption
	if len(c.spec.InputOrdering.StreamDelays) > 0 {
		delays := map[string]int64{}
		for s, d := range c.spec.InputOrdering.StreamDelays {
			delays[s] = int64(d)
		}
		mopts = append(mopts, ordering.WithStreamDelays(delays))
	}
	if c.spec.InputOrdering.TimeType == spec.TimeAlignment {
		mopts = append(mopts, ordering.WithoutBias())
	}
	if p.merge, err = ordering.NewMerge(c.spec.InputStreams, mopts...); err != nil {
		return err
	}
	limits := ordering.BatchLimits{
		MaxRows:  c.spec.Batch.MaxRows,
		MaxBytes: c.spec.Batch.MaxBytes,
		MaxAge:   int64(c.spec.Batch.MaxDuration),
	}
	if p.batcher, err = ordering.NewBatcher(limits); err != nil {
		return err
	}
	if p.rebatcher, err = ordering.NewBatcher(limits); err != nil {
		return err
	}
	meta, resumed, err := r.storage.Partition(c.spec.Name, p.index)
	if err != nil {
		return err
	}
	pending, err := r.storage.Timers(c.spec.Name, p.index)
	if err != nil {
		return err
	}
	p.timers = ordering.NewTimerStore()
	p.timers.Restore(func(yield func(ordering.Timer) bool) {
		for _, t := range pending {
			if !yield(t) {
				return
			}
		}
	})
	for t := range p.timers.All() {
		p.timerEvts.Add(t.Event)
	}
	p.epoch, p.outSeq = meta.Epoch, meta.OutSeq
	p.clock = ordering.NewSystemClock(r.opts.now, meta.Clock)
	p.snd = newSender(p.self, meta.Tasks)
	if resumed {
		p.outWM.Store(meta.Out.Event)
		p.outSysWM.Store(meta.Out.System)
		p.evWM.Resume(meta.Out.Event)
		p.sysWM.Resume(meta.Out.System)
		for i, name := range c.spec.InputStreams {
			if b, ok := meta.Bias[name]; ok {
				p.merge.ResumeBias(i, b)
			}
		}
	}
	if err := p.restoreQueue(); err != nil {
		return err
	}
	p.publishView(0, time.Time{}, nil)
	if resumed {
		r.log.Info("computation partition resumed from its last commit", "computation", c.spec.Name, "partition", p.index,
			"epoch", p.epoch, "queued", p.inbox.Len(c.spec.Name, 0), "timers", p.timers.Len())
	}
	p.lingerNanos = int64(c.spec.Batch.MaxDuration)
	p.lingerTimer = time.AfterFunc(time.Hour, p.wake)
	p.lingerTimer.Stop()
	p.prio = map[*ordering.Message]ordering.Priority{}
	p.mapCounts = map[mapSlot]uint64{}
	if v := c.version.Load(); isRefused(v.factory) {
		p.use(ctx, v)
		p.setQuarantine(v.factory.(*compute.Refused).Err)
		return nil
	}
	return p.instantiate(ctx)
}

func isRefused(f compute.Factory) bool {
	_, ok := f.(*compute.Refused)
	return ok
}

// restoreQueue hands the partition back what was committed for it and not
// yet consumed before a restart, in the order each sender queued it.
func (p *partition) restoreQueue() error {
	name := p.comp.spec.Name
	return p.comp.rt.storage.Queue(p.dest, func(from ordering.Sender, m *ordering.Message) error {
		s := p.comp.rt.streams[m.Stream]
		if _, ok := p.merge.StreamIndex(m.Stream); !ok || s == nil {
			return fmt.Errorf("%w: the queue of %s holds message %s of stream %q, which %s does not read", store.ErrCorrupted, p.dest, m.ID, m.Stream, name)
		}
		if err := p.inbox.Restore(from, name, m); err != nil {
			return err
		}
		p.events.Add(m.Time.Event)
		p.systems.Add(m.Time.System)
		p.held.Add(m.Time.Event)
		s.mBuffered.Inc()
		s.mBufferedBytes.Add(float64(m.Footprint()))
		return nil
	})
}

// publishResumed raises the output streams to the watermarks the
// partitions committed before a restart.
func (c *computation) publishResumed() {
	ev, sys := endOfStream, endOfStream
	for _, q := range c.parts {
		ev = min(ev, q.outWM.Load())
		sys = min(sys, q.outSysWM.Load())
	}
	for _, s := range c.outputs {
		s.raise(ev, sys)
	}
}

func (p *partition) instantiate(ctx context.Context) error {
	v := p.comp.version.Load()
	proc, err := v.factory.Instantiate(ctx, p.comp.init(p.index))
	if err != nil {
		return err
	}
	p.proc = proc
	p.use(ctx, v)
	return nil
}

func (p *partition) wake() {
	p.mu.Lock()
	p.woken = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// sendAll queues, in order, the messages of ds (deliveries to this
// partition) under one hold of the partition's lock, waiting while the
// inbox is full: the backpressure that slows a sender down to the pace of
// its slowest reader.
func (p *partition) sendAll(ctx context.Context, from ordering.Sender, ds []delivery) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range ds {
		if err := p.sendLocked(ctx, from, ds[i].m); err != nil {
			return err
		}
	}
	return nil
}

// sendLocked queues one message, waiting for room; called with p.mu held.
func (p *partition) sendLocked(ctx context.Context, from ordering.Sender, m *ordering.Message) error {
	var blockedSince time.Time
	for {
		err := p.inbox.SendAssigned(from, p.comp.spec.Name, m)
		if err == nil {
			break
		}
		if !errors.Is(err, ordering.ErrFull) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if blockedSince.IsZero() {
			blockedSince = time.Now()
		}
		p.woken = true // the worker must drain the inbox to make room
		p.cond.Broadcast()
		p.blocked++
		p.cond.Wait()
		p.blocked--
	}
	if !blockedSince.IsZero() {
		p.comp.rt.metrics.backpressureNs.WithLabelValues(p.comp.spec.Name).Add(time.Since(blockedSince).Seconds())
	}
	p.events.Add(m.Time.Event)
	p.systems.Add(m.Time.System)
	if m.Time.Event < p.inEvWM.Value() {
		p.comp.rt.metrics.lateMessages.WithLabelValues(p.comp.spec.Name, m.Stream).Inc()
	}
	p.held.Add(m.Time.Event)
	// Wake the worker only when it waits for input or a batch is full:
	// while it lingers, its timer wakes it, and waking it for every
	// message would cost a context switch per message.
	if p.idle || p.inbox.Len(p.comp.spec.Name, 0)+p.merge.Len() >= p.batcher.Limits().MaxRows {
		p.woken = true
		p.cond.Broadcast()
	}
	return nil
}

// wakeIfIdle wakes the worker if it waits for input, so that it sees a
// watermark move; a lingering worker sees it when its linger ends.
func (p *partition) wakeIfIdle() {
	p.mu.Lock()
	if p.idle {
		p.woken = true
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

// inputWatermarks are the minimum event and system watermarks over the
// partition's input streams; a finished input without end-of-data holds
// its last value. The event watermark leaves idle inputs out, and holds
// while every input is idle (ordering.StreamWatermark). Called with p.mu
// held.
func (p *partition) inputWatermarks() (event, system int64, allFinished bool) {
	system, allFinished = endOfStream, true
	inputsIdle(p.comp.inputs, p.inEvWM.SetInputIdle)
	for i, s := range p.comp.inputs {
		p.inEvWM.SetInput(i, s.eventWM.Load())
		system = min(system, s.systemWM.Load())
		allFinished = allFinished && s.finished.Load()
	}
	return p.inEvWM.Advance(0, false), system, allFinished
}

// timerWatermark is the watermark timers fire against at the next
// position of the merge order (ordering/timerplace.go): the input
// watermark lowered to the earliest EventTimestamp still held here, so a
// timer never overtakes a message already waiting in this partition's
// buffers. Called with p.mu held, between batches.
func (p *partition) timerWatermark(inputEvent int64) int64 {
	if m, ok := p.held.Min(); ok {
		return min(inputEvent, m)
	}
	return inputEvent
}

// run is the partition's worker loop.
func (p *partition) run(ctx context.Context) error {
	for {
		batch, wm, err := p.next(ctx)
		if err != nil || batch == nil {
			return err
		}
		if err := p.process(ctx, batch, wm); err != nil {
			return err
		}
	}
}

// peekInput returns the next message of the merge order: a requeued one
// first. Called with p.mu held.
func (p *partition) peekInput() *ordering.Message {
	if len(p.requeued) > 0 {
		return p.requeued[0]
	}
	if p.merge.Len() == 0 {
		return nil
	}
	m, _ := p.merge.Peek()
	return m
}

// takeInput consumes the message peekInput returned. Called with p.mu
// held.
func (p *partition) takeInput() *ordering.Message {
	if len(p.requeued) > 0 {
		m := p.requeued[0]
		p.requeued[0] = nil
		p.requeued = p.requeued[1:]
		return m // its priority is still in p.prio
	}
	m, prio := p.merge.Pop()
	p.prio[m] = prio
	return m
}

// timerAwaitLimit bounds, in processing time, how long a partition waits
// for its input watermark before a message that a pending timer may
// precede (host/spec/README.md, "When a timer fires"): a watermark stuck
// that long (a silent input) must not stall the partition's input.
const timerAwaitLimit = time.Minute

// nextStep is what the earliest pending timer means for the next message
// of the merge order (ordering.StepBefore). Waiting for the watermark is
// off when it could not end: the inputs have finished, or a sender waits
// for room that only consuming makes; and once it has lasted
// timerAwaitLimit. Called with p.mu held.
func (p *partition) nextStep(inEvent int64, inputsDone bool, now int64) ordering.TimerStep {
	q, ok := p.held.Min()
	if !ok {
		return ordering.TakeMessage
	}
	trig, has := p.timers.MinTrigger()
	settle := !inputsDone && p.blocked == 0 && (p.awaitSince == 0 || now-p.awaitSince < int64(timerAwaitLimit))
	return ordering.StepBefore(trig, has, inEvent, q, settle)
}

// next waits for work and cuts the next batch. It returns nil when the
// partition is finished.
//
// A batch starts at a position of the merge order: the timers due there
// (Trigger <= the timer watermark) fire first, then messages follow in
// merge order until a limit is reached or a pending timer could fall
// before the next message (ordering.StepBefore). So timers fire where the
// watermark passes them, whatever the batch limits; process.go shortens a
// batch in which a timer the guest set would have fallen.
func (p *partition) next(ctx context.Context) (*ordering.Batch, abi.Watermarks, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if ctx.Err() != nil {
			return nil, abi.Watermarks{}, ctx.Err()
		}
		// Move what the inbox holds into the merge, as far as the merge's
		// share of the buffer allows.
		p.inbox.Drain(p.comp.spec.Name, 0, func(m *ordering.Message) bool {
			if p.merge.Len() > 0 && p.merge.Bytes()+m.Footprint() > p.mergeAt {
				return false
			}
			idx, _ := p.merge.StreamIndex(m.Stream)
			p.merge.Push(idx, m)
			return true
		})
		p.cond.Broadcast() // room in the inbox for blocked senders
		now := p.comp.rt.opts.now()
		pending := len(p.requeued) + p.merge.Len()
		if pending == 0 {
			p.waitingSince = 0
		} else if p.waitingSince == 0 {
			p.waitingSince = now
		}
		inEvent, inSystem, inputsDone := p.inputWatermarks()
		twm := p.timerWatermark(inEvent)
		minTrigger, hasTimers := p.timers.MinTrigger()
		timersDue := hasTimers && minTrigger <= twm
		p.publishWatermarks()
		step := ordering.TakeMessage
		if pending > 0 && !timersDue {
			step = p.nextStep(inEvent, inputsDone, now)
		}
		if timersDue || (pending > 0 && step == ordering.TakeMessage && (inputsDone || p.batchDue(now))) {
			p.cutDue = append(p.cutDue[:0], p.timers.PopDue(twm)...)
			p.cutMsgs, p.cutBounds = p.cutMsgs[:0], p.cutBounds[:0]
			lim := p.batcher.Limits()
			// Messages stay in the merge until the cut, so that the
			// cross-stream order covers everything that arrived meanwhile.
			for p.batcher.Len() < lim.MaxRows {
				m := p.peekInput()
				if m == nil || p.batcher.Len() > 0 && p.batcher.Bytes()+m.Size() > lim.MaxBytes {
					break
				}
				if p.nextStep(inEvent, inputsDone, now) != ordering.TakeMessage {
					break // a timer falls here: it fires at the next batch's start
				}
				q, _ := p.held.Min()
				p.takeInput()
				p.held.Remove(m.Time.Event)
				p.batcher.Add(m, now)
				p.cutMsgs = append(p.cutMsgs, m)
				p.cutBounds = append(p.cutBounds, q)
				p.awaitSince = 0
			}
			p.waitingSince = 0
			if len(p.requeued)+p.merge.Len() > 0 {
				p.waitingSince = now
			}
			b := p.batcher.Cut(p.cutDue)
			// The guest sees the input watermarks, not the timer watermark
			// (lowered to what is queued here): a message older than
			// the event watermark is late, and the guest can tell.
			return &b, abi.Watermarks{Event: inEvent, System: inSystem}, nil
		}
		if inputsDone && pending == 0 && p.inbox.Len(p.comp.spec.Name, 0) == 0 {
			if !p.finished {
				p.finished = true
				p.outWM.Store(max(p.outWM.Load(), p.finalEventWatermark(inEvent)))
				end := inEvent == endOfStream
				if !end {
					if n := p.timers.Len(); n > 0 {
						p.comp.rt.log.Warn("pending timers not fired: the run was interrupted before their watermark",
							"computation", p.comp.spec.Name, "partition", p.index, "timers", n)
					}
				}
				p.comp.partitionFinished(end)
			}
			return nil, abi.Watermarks{}, nil
		}
		awaiting := step == ordering.AwaitWatermark
		if awaiting {
			if p.awaitSince == 0 {
				p.awaitSince = now
			}
			// Wake when the wait has lasted its limit.
			p.lingerTimer.Reset(time.Duration(p.awaitSince + int64(timerAwaitLimit) - now))
		} else if pending > 0 {
			// Wake when the oldest waiting message has waited long enough.
			p.lingerTimer.Reset(time.Duration(p.waitingSince + p.lingerNanos - now))
		}
		p.woken = false
		// Waiting for the watermark, the worker wants every watermark
		// move, as when it waits for input.
		p.idle = pending == 0 || awaiting
		for !p.woken && ctx.Err() == nil {
			p.cond.Wait()
		}
		p.idle = false
	}
}

// finalEventWatermark is the event watermark a finishing partition
// publishes: its inputs', held back by the watermark_strategy if any.
func (p *partition) finalEventWatermark(inEvent int64) int64 {
	if p.strategy != nil && inEvent != endOfStream {
		return min(inEvent, p.strategy.Value())
	}
	return inEvent
}

// batchDue reports whether the waiting input fills a batch or has waited
// its linger (batch.max_duration); messages a timer cut gave back have
// waited already. Called with p.mu held.
func (p *partition) batchDue(now int64) bool {
	lim := p.batcher.Limits()
	return p.merge.Len()+len(p.requeued) >= lim.MaxRows ||
		p.merge.Bytes() >= lim.MaxBytes ||
		len(p.requeued) > 0 ||
		now-p.waitingSince >= p.lingerNanos
}

// publishWatermarks computes the partition's output watermarks, the input
// watermarks lowered to what is still in flight here (queued messages and
// pending timers) and never moving back (ordering.StreamWatermark), the
// event one also held back by the watermark_strategy if any, and
// raises the output streams' watermarks to the minimum over the
// computation's partitions. Called with p.mu held.
func (p *partition) publishWatermarks() {
	allIdle := inputsIdle(p.comp.inputs, p.evWM.SetInputIdle)
	for i, s := range p.comp.inputs {
		p.evWM.SetInput(i, s.eventWM.Load())
		p.sysWM.SetInput(i, s.systemWM.Load())
	}
	if p.strategy != nil {
		p.evWM.SetInput(len(p.comp.inputs), p.strategy.Value())
	}
	evMin, evOK := p.events.Min()
	p.comp.publishIdle(p, allIdle && !evOK)
	if t, ok := p.timerEvts.Min(); ok && (!evOK || t < evMin) {
		evMin, evOK = t, true
	}
	sysMin, sysOK := p.systems.Min()
	changed := raiseTo(&p.outWM, p.evWM.Advance(evMin, evOK))
	changed = raiseTo(&p.outSysWM, p.sysWM.Advance(sysMin, sysOK)) || changed
	if !changed {
		return
	}
	c := p.comp
	allEv, allSys := endOfStream, endOfStream
	for _, q := range c.parts {
		allEv = min(allEv, q.outWM.Load())
		allSys = min(allSys, q.outSysWM.Load())
	}
	for _, s := range c.outputs {
		// Waking readers takes their locks while we hold ours: safe,
		// because locks are only ever taken downstream along the DAG.
		s.raise(allEv, allSys)
		s.mEventWM.Set(nsToSeconds(allEv))
		s.mSystemWM.Set(nsToSeconds(allSys))
	}
}
