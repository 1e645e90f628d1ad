// Package runtime runs a pipeline in one process: it reads sources by
// partition priority, routes every message FIFO per (sending partition,
// destination computation, destination key), buffers it in the destination
// partition's cross-stream merge, cuts batches, calls the computation once
// per batch, stamps what it derives, and hands the results to downstream
// computations and sinks. Watermarks flow along the same graph and fire
// timers. All ordering decisions come from package ordering; this package
// adds goroutines, locks, backpressure and I/O.
//
// # Storage and exactly-once
//
// Streams, queues, keyed state, timers, partition metadata and commits
// live behind one boundary, [Storage] (storage.go), with one code path for
// every implementation. Every step that hands data on commits first, in
// one [StorageBatch], and hands on only what committed; with [WithStore]
// (the pebble store) those commits are durable transactions:
//
//   - ingest: accepted source records, with their offsets, WriteTimestamps
//     and the connector's resume position, in groups (an HTTP request is
//     acknowledged only after its group committed);
//   - routing: a source reader's group of records, copied into the queues
//     of the computation partitions and sinks that read them, with the
//     partitions' read positions and the TaskIds given;
//   - an epoch: one batch of a computation partition. It commits the keyed
//     state changes, the timers set, cancelled and fired, the inputs taken
//     off the partition's queue, the derived messages put on their
//     destinations' queues, and the partition's epoch, id counters, clock,
//     output watermarks, stream biases and TaskIds. Epochs are bounded by
//     the computation's batch limits (rows, bytes, time);
//   - a sink batch: taken off the sink's queue together with the sink's
//     new position (see the sinks' guarantees in host/spec/README.md).
//
// A message is in exactly one queue at a time, and leaves it in the same
// transaction that commits what was derived from it. So a restart, after
// any crash, resumes every partition from its last commit: the queues hand
// back what was committed and not consumed, in the order it was queued,
// and nothing is processed twice. A redelivered input is impossible by
// construction rather than filtered: an input's only copy is deleted by
// the epoch that consumed it.
//
// On [NewMemoryStorage], the default, keyed state and timers are kept in
// memory and everything else lives only in the runtime's buffers: it is
// lost when the process ends.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/time/rate"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// endOfStream is the watermark of a stream whose writer has finished with
// all its input: nothing more will ever come, so every timer fires.
const endOfStream int64 = math.MaxInt64

// Runtime runs one pipeline. Create it with [New], start it with
// [Runtime.Run].
type Runtime struct {
	pipe    *spec.Pipeline
	opts    options
	log     *slog.Logger
	metrics *metrics
	trace   *traceWriter
	// storage is where streams, queues, state, timers and commits live.
	storage Storage

	streams map[string]*stream
	comps   []*computation
	sources []*sourceStream
	sinks   []*sinkRunner
	dead    *deadLetters

	gates []*sourceGate // keep the source streams in step, per part of the graph
	sched *scheduler    // shares the workers between tenants
	// ingest paces each tenant's sources to its quotas.ingest_rate.
	ingest map[string]*rate.Limiter
	failed chan error // first fatal error stops the run
	// interrupted is set when a stop's grace period ran out (Run).
	interrupted atomic.Bool
	failMu      sync.Mutex
	failErr     error
	// retryWait waits between the attempts of a failed batch (waitRetry;
	// tests replace it).
	retryWait func(ctx context.Context, d time.Duration) error
	// kafkaSinks are the Kafka sinks' series, made with the first one
	// (kafka_sink.go); kafkaFault stops an exactly-once Kafka sink at a
	// step of its commit, as a crash would (tests set it).
	kafkaSinks *connect.KafkaSinkMetrics
	kafkaFault func(sink string, step KafkaSinkStep) error
}

// stream is a pipeline stream: one writer, any number of reading
// computations and sinks, and the watermarks its writer publishes.
type stream struct {
	name string
	// Metric series of the stream, resolved once.
	mBuffered, mBufferedBytes, mBias, mEventWM, mSystemWM prometheus.Gauge
	readers                                               []*computation
	sinks                                                 []*sinkRunner
	eventWM                                               atomic.Int64
	systemWM                                              atomic.Int64
	finished                                              atomic.Bool
	// idle is set while the stream's writer is idle (see setIdle): its
	// readers leave it out of their event watermark.
	idle  atomic.Bool
	mIdle prometheus.Gauge
}

func newStream(name string, m *metrics) *stream {
	s := &stream{
		name:           name,
		mBuffered:      m.bufferedMsgs.WithLabelValues(name),
		mBufferedBytes: m.bufferedBytes.WithLabelValues(name),
		mBias:          m.bias.WithLabelValues(name),
		mEventWM:       m.eventWM.WithLabelValues(name),
		mSystemWM:      m.systemWM.WithLabelValues(name),
		mIdle:          m.streamIdle.WithLabelValues(name),
	}
	s.eventWM.Store(ordering.NoWatermark)
	s.systemWM.Store(ordering.NoWatermark)
	return s
}

// finish marks the stream complete. At the natural end of the data its
// watermarks jump to the end of time so every pending timer downstream
// fires; on an interrupted run they stay where they are.
func (s *stream) finish(endOfData bool) {
	if endOfData {
		s.eventWM.Store(endOfStream)
		s.systemWM.Store(endOfStream)
	}
	// A finished stream is never idle: it counts with its last
	// watermark, the end of time at the natural end of its data.
	s.setIdle(false)
	s.finished.Store(true)
	for _, c := range s.readers {
		c.wakeAll()
	}
	for _, sk := range s.sinks {
		sk.wake()
	}
}

// raise moves the stream's watermarks up (never down) and wakes its readers
// if either moved.
func (s *stream) raise(event, system int64) {
	moved := raiseTo(&s.eventWM, event)
	moved = raiseTo(&s.systemWM, system) || moved
	if moved {
		for _, c := range s.readers {
			c.wakeIdle()
		}
	}
}

func raiseTo(a *atomic.Int64, v int64) bool {
	for {
		old := a.Load()
		if v <= old {
			return false
		}
		if a.CompareAndSwap(old, v) {
			return true
		}
	}
}

// New checks that every computation of p has a factory and builds the
// runtime. Nothing runs until [Runtime.Run].
func New(p *spec.Pipeline, factories map[string]compute.Factory, opts ...Option) (*Runtime, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	r := &Runtime{
		pipe:    p,
		opts:    o,
		log:     o.logger,
		metrics: newMetrics(o.registry),
		streams: map[string]*stream{},
		sched:   newScheduler(o.workers),
		failed:  make(chan error, 1),

		retryWait: waitRetry,
	}
	if o.trace != nil {
		r.trace = newTraceWriter(o.trace)
	}
	if o.storage == nil {
		o.storage = NewMemoryStorage()
	}
	r.opts.storage, r.storage = o.storage, o.storage
	if err := r.storage.Bind(Fingerprint(p)); err != nil {
		return nil, err
	}
	if r.storage.Durable() {
		r.metrics.storageDurable.Set(1)
	}
	if len(o.replay) > 0 && !r.storage.Durable() {
		return nil, errors.New("replaying a source needs a store: its records are kept there")
	}
	for name := range o.replay {
		if !slices.ContainsFunc(p.Sources, func(s spec.Source) bool { return s.Name == name }) {
			return nil, fmt.Errorf("replay: the pipeline has no source %q", name)
		}
	}
	if o.resetState {
		if len(o.replay) == 0 {
			return nil, errors.New("--reset-state resets the computations a replay reprocesses: give the sources to replay with --from")
		}
		if err := r.resetForReplay(); err != nil {
			return nil, err
		}
	}
	dl, err := r.openDeadLetters()
	if err != nil {
		return nil, err
	}
	r.dead = dl
	streamOf := func(name string) *stream {
		s, ok := r.streams[name]
		if !ok {
			s = newStream(name, r.metrics)
			r.streams[name] = s
		}
		return s
	}
	order := p.TopologicalOrder()
	byName := map[string]*computation{}
	for _, cs := range order {
		f, ok := factories[cs.Name]
		if !ok {
			return nil, fmt.Errorf("computation %q: no implementation for plugin %q", cs.Name, cs.Plugin)
		}
		c, err := newComputation(r, cs, f)
		if err != nil {
			return nil, err
		}
		for _, out := range cs.OutputStreams {
			c.outputs = append(c.outputs, streamOf(out))
		}
		if cs.DeadLetter != nil {
			c.outputs = append(c.outputs, streamOf(cs.DeadLetter.Stream))
		}
		byName[cs.Name] = c
		r.comps = append(r.comps, c)
	}
	for _, c := range r.comps {
		for _, in := range c.spec.InputStreams {
			s := streamOf(in)
			s.readers = append(s.readers, c)
			c.inputs = append(c.inputs, s)
		}
	}
	for i := range p.Sources {
		src, err := r.newSourceStream(&p.Sources[i], streamOf(p.Sources[i].Stream))
		if err != nil {
			return nil, err
		}
		r.sources = append(r.sources, src)
	}
	r.gates = r.newSourceGates()
	for _, src := range r.sources {
		for _, c := range src.stream.readers {
			src.gateBias = src.gateBias || c.spec.InputOrdering.TimeType != spec.TimeAlignment
		}
	}
	for i := range p.Sinks {
		sk, err := r.newSinkRunner(&p.Sinks[i])
		if err != nil {
			return nil, err
		}
		for _, name := range p.Sinks[i].Streams {
			s := streamOf(name)
			s.sinks = append(s.sinks, sk)
			sk.inputs = append(sk.inputs, s)
		}
		r.sinks = append(r.sinks, sk)
	}
	return r, nil
}

// Registry returns the Prometheus gatherer holding the runtime's metrics.
func (r *Runtime) Registry() prometheus.Gatherer { return r.opts.gatherer }

// ErrInterrupted is returned by [Runtime.Run] when the stop's grace
// period (see [WithStopGrace]) ran out before everything accepted was
// delivered.
var ErrInterrupted = errors.New("the stop's grace period ran out: running batches were interrupted and not committed (with a store, the next run on it processes what was accepted and not delivered)")

// Run runs the pipeline until every source has ended and everything derived
// from them has reached the sinks, or until ctx is cancelled. On
// cancellation the sources stop taking input, and everything they had
// accepted is still processed and delivered before Run returns; timers that
// are not yet due stay pending and are not fired. If that takes longer
// than the stop's grace period ([WithStopGrace]), the running guest calls
// are interrupted, nothing more is committed (an interrupted batch is
// simply not committed, and runs again in the next run on the store) and
// Run returns [ErrInterrupted]. Otherwise Run returns the first fatal
// error: a source, sink or computation that cannot continue.
func (r *Runtime) Run(ctx context.Context) error {
	// work outlives ctx: it is cancelled on a fatal error, or when the
	// stop's grace period has run out, so that an interrupt drains what
	// was accepted instead of dropping it.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	stopGrace := r.afterStopGrace(ctx, func() {
		r.interrupted.Store(true)
		r.log.Warn("stopping: the grace period ran out; interrupting the running batches, which are not committed and run again on the next start",
			"stop_grace", r.opts.stopGrace)
		stopWork()
		r.unblockAll()
	})
	defer stopGrace()

	for _, c := range r.comps {
		if err := c.start(work); err != nil {
			r.closeAll(work)
			return err
		}
	}
	for _, c := range r.comps {
		c.publishResumed()
	}
	for _, sk := range r.sinks {
		if err := sk.restoreQueue(); err != nil {
			r.closeAll(work)
			return fmt.Errorf("sink %q: resuming from the store: %w", sk.name, err)
		}
	}
	var wg sync.WaitGroup
	for _, sk := range r.sinks {
		wg.Go(func() { r.fail(sk.run(work)) })
	}
	for _, c := range r.comps {
		for _, p := range c.parts {
			wg.Go(func() { r.fail(p.run(work)) })
		}
	}
	for _, g := range r.gates {
		g.startGrace()
	}
	for _, src := range r.sources {
		wg.Go(func() { r.fail(src.ingest(ctx, work)) })
		wg.Go(func() { r.fail(src.read(work)) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	retainCtx, stopRetain := context.WithCancel(work)
	retained := make(chan struct{})
	go func() { defer close(retained); r.fail(r.retain(retainCtx)) }()
	defer func() { stopRetain(); <-retained }()
	var err error
	select {
	case <-done:
	case err = <-r.failed:
		stopWork()
		r.unblockAll()
		<-done
	}
	stopGrace()
	if r.interrupted.Load() {
		if err != nil && !errors.Is(err, context.Canceled) {
			r.log.Debug("after the stop's grace period ran out", "err", err)
		}
		err = ErrInterrupted
	}
	r.closeAll(work)
	if err == nil {
		// A last retention pass, so that a finished run leaves no more
		// behind than its policy allows.
		if rerr := r.retainOnce(r.pipe.Retention); rerr != nil {
			err = fmt.Errorf("retention: %w", rerr)
		}
	}
	if r.trace != nil {
		if ferr := r.trace.flush(); ferr != nil && err == nil {
			err = fmt.Errorf("trace: %w", ferr)
		}
	}
	if cerr := r.dead.close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// afterStopGrace calls interrupt once the stop's grace period has passed
// after ctx is done, unless the returned function was called first.
func (r *Runtime) afterStopGrace(ctx context.Context, interrupt func()) (stop func()) {
	if r.opts.stopGrace < 0 {
		return func() {}
	}
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(r.opts.stopGrace, interrupt)
		}
	})
	return func() {
		stopAfter()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
}

// fail records the first fatal error; later ones are logged.
func (r *Runtime) fail(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	r.failMu.Lock()
	defer r.failMu.Unlock()
	if r.failErr != nil {
		r.log.Error("after the first fatal error", "err", err)
		return
	}
	r.failErr = err
	r.failed <- err
}

// unblockAll wakes every goroutine waiting on a condition so that it sees
// the cancelled context.
func (r *Runtime) unblockAll() {
	for _, c := range r.comps {
		c.wakeAll()
	}
	for _, src := range r.sources {
		src.wake()
	}
	for _, g := range r.gates {
		g.wake()
	}
	for _, sk := range r.sinks {
		sk.wake()
	}
}

func (r *Runtime) closeAll(ctx context.Context) {
	for _, c := range r.comps {
		c.close(ctx)
	}
}

// Option configures a [Runtime].
type Option func(*options)

type options struct {
	liveTrace  int // deliveries kept per partition for RecentDeliveries (WithLiveTrace)
	logger     *slog.Logger
	registry   prometheus.Registerer
	gatherer   prometheus.Gatherer
	trace      io.Writer
	now        func() int64
	workers    int
	deadLetter io.Writer
	sinks      map[string]Sink
	sources    map[string]Source
	baseDir    string
	stdout     io.Writer
	progress   func(source string, p connect.FileProgress)
	// workProgress is told how replays and Kafka backlogs advance.
	workProgress func(WorkProgress)
	sourceCap    int64
	storage      Storage
	replay       map[string]Replay

	// insecureListen lets HTTP endpoints serve plain HTTP on addresses
	// that are not loopback (WithInsecureListen).
	insecureListen bool
	stopGrace      time.Duration
	resetState     bool
}

func defaultOptions() options {
	reg := prometheus.NewRegistry()
	return options{
		logger:    slog.Default(),
		registry:  reg,
		gatherer:  reg,
		now:       func() int64 { return time.Now().UnixNano() },
		workers:   defaultWorkers(),
		sourceCap: DefaultSourceQueueBytes,
		stopGrace: -1,
	}
}

// WithStopGrace sets how long [Runtime.Run], once its context is
// cancelled, goes on processing and delivering what the sources had
// accepted. When it runs out, the context of the running guest calls is
// cancelled (an interruptible WebAssembly guest stops at its next loop
// head or function entry, even in an infinite loop; a native Go
// computation when it honours its context or returns), nothing more
// commits, and Run returns ErrInterrupted. Without it, or with a negative
// d, Run waits as long as delivering takes.
func WithStopGrace(d time.Duration) Option { return func(o *options) { o.stopGrace = d } }

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegistry registers the runtime's metrics in reg instead of a private
// registry.
func WithRegistry(reg *prometheus.Registry) Option {
	return func(o *options) { o.registry, o.gatherer = reg, reg }
}

// WithTrace writes one JSON line per delivery to w (see [TraceRecord]).
func WithTrace(w io.Writer) Option { return func(o *options) { o.trace = w } }

// WithClock replaces the wall clock (Unix nanoseconds) used for ingest
// times, transform outputs and idleness; tests pass a scripted one.
func WithClock(now func() int64) Option { return func(o *options) { o.now = now } }

// WithWorkers bounds how many batches are called, applied and committed at
// once; the default is GOMAXPROCS. The workers are shared between the
// pipeline's tenants by weighted fair share, within each tenant's
// quotas.cpu_limit and quotas.concurrent_instances (see the spec's
// Tenant); the operator's computations count as one tenant of weight 1.
func WithWorkers(n int) Option { return func(o *options) { o.workers = max(1, n) } }

// WithDeadLetter writes dead-letter records to w instead of the file the
// spec names.
func WithDeadLetter(w io.Writer) Option { return func(o *options) { o.deadLetter = w } }

// WithSink replaces the sink the spec names name by s (for tests and
// embedding).
func WithSink(name string, s Sink) Option {
	return func(o *options) {
		if o.sinks == nil {
			o.sinks = map[string]Sink{}
		}
		o.sinks[name] = s
	}
}

// WithSource replaces the source the spec names name by s.
func WithSource(name string, s Source) Option {
	return func(o *options) {
		if o.sources == nil {
			o.sources = map[string]Source{}
		}
		o.sources[name] = s
	}
}

// WithProgress calls fn as file sources advance, for progress displays.
func WithProgress(fn func(source string, p connect.FileProgress)) Option {
	return func(o *options) { o.progress = fn }
}

// WithSourceQueueBytes bounds the memory a source may hold ahead of its
// readers (default DefaultSourceQueueBytes), counting each record's
// footprint (ordering.Message.Footprint); past it the connector blocks.
func WithSourceQueueBytes(n int64) Option { return func(o *options) { o.sourceCap = max(1, n) } }

// WithStore makes the run exactly-once on st: sources, queues between
// computations, state, timers, positions and watermarks are committed to
// it, and a run started on a store resumes from its last commits (see
// package store and the package documentation). Without it, or
// [WithStorage], the run is on a [NewMemoryStorage] of its own: everything
// is lost when the process ends.
func WithStore(st *store.Store) Option { return WithStorage(NewPebbleStorage(st)) }

// NewPebbleStorage returns st behind the [Storage] boundary: the durable
// storage of [WithStore], for a caller that reads or writes it between
// runs as well (host/flowtest's Driver). Every write to st must go through
// it while it is in use: it caches the keyed state its batches commit.
func NewPebbleStorage(st *store.Store) Storage { return newPebbleStorage(st) }

// WithStorage runs the pipeline on s (see [Storage]): for example a
// [NewMemoryStorage] shared by runtimes run one after another, which then
// find the keyed state and timers the last one committed.
func WithStorage(s Storage) Option { return func(o *options) { o.storage = s } }

// WithReplay reprocesses the named sources from the positions given (see
// [Replay]); it needs [WithStore], which holds the records.
func WithReplay(from map[string]Replay) Option { return func(o *options) { o.replay = from } }

// WithResetState makes a replay ([WithReplay]) start the computations it
// reprocesses from empty state and timers, as on a first run, instead of
// counting the replayed records a second time; see [ResetComputations]
// for which are reset.
func WithResetState() Option { return func(o *options) { o.resetState = true } }

// WithStdout sets where stdout sinks write; the default is os.Stdout.
func WithStdout(w io.Writer) Option { return func(o *options) { o.stdout = w } }

// ingestLimiter returns the limiter of tenant's ingest rate, shared by its
// sources (nil without a tenant or a rate). The bucket holds one second's
// worth of records, so a burst up to the rate passes at once.
func (r *Runtime) ingestLimiter(tenant string) *rate.Limiter {
	t := r.pipe.Tenant(tenant)
	if t == nil || t.Quotas.IngestRate <= 0 {
		return nil
	}
	if l, ok := r.ingest[tenant]; ok {
		return l
	}
	if r.ingest == nil {
		r.ingest = map[string]*rate.Limiter{}
	}
	l := rate.NewLimiter(rate.Limit(t.Quotas.IngestRate), max(1, int(t.Quotas.IngestRate)))
	r.ingest[tenant] = l
	return l
}

// newSourceGates gives each set of source streams that meet, directly or
// through other computations, at some computation a gate of its own and
// sets each source's gate and place in it. Sources that never meet (two
// tenants' pipelines, say) are not kept in step: ordering them against
// each other buys nothing, and one tenant's idle or slow source must not
// hold back another's.
func (r *Runtime) newSourceGates() []*sourceGate {
	parent := make([]int, len(r.sources))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	bySourceStream := map[string]int{}
	for i, src := range r.sources {
		bySourceStream[src.stream.name] = i
	}
	feeding := map[string][]int{} // computation -> the sources upstream of it
	for _, cs := range r.pipe.TopologicalOrder() {
		var srcs []int
		for _, in := range cs.InputStreams {
			if i, ok := bySourceStream[in]; ok {
				srcs = append(srcs, i)
			} else if w, ok := r.pipe.Writer(in); ok && w.Kind == spec.ComputationNode {
				srcs = append(srcs, feeding[w.Name]...)
			}
		}
		for _, i := range srcs[min(1, len(srcs)):] {
			parent[find(i)] = find(srcs[0])
		}
		feeding[cs.Name] = srcs
	}
	byRoot := map[int][]*sourceStream{}
	var roots []int
	for i, src := range r.sources {
		root := find(i)
		if _, ok := byRoot[root]; !ok {
			roots = append(roots, root)
		}
		byRoot[root] = append(byRoot[root], src)
	}
	gates := make([]*sourceGate, 0, len(roots))
	for _, root := range roots {
		g := newSourceGate(len(byRoot[root]))
		for j, src := range byRoot[root] {
			src.gate, src.gateIdx = g, j
		}
		gates = append(gates, g)
	}
	return gates
}
