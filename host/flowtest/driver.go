package flowtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/keys"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// Record is one record pushed into a source: what a source connector
// hands the host.
type Record struct {
	// Event is the event time, int64 nanoseconds since the Unix epoch.
	Event int64
	// Write is the WriteTimestamp; 0 takes Event, so that a test is the
	// same on every run (the host raises a write time that steps back in
	// a partition to the partition's last one, as it does for any source).
	Write int64
	// Key is the record's key text (see package keys); "" for none. A
	// computation with group_by keys the record by its payload instead.
	Key string
	// Payload is the record's bytes, usually JSON.
	Payload []byte
}

// Timer is a pending timer of a computation.
type Timer = ordering.Timer

// Option configures a [Driver].
type Option func(*driverOptions)

type driverOptions struct {
	factories  map[string]compute.Factory
	pluginDirs []string
	cacheDir   string
	dir        string
	log        *slog.Logger
	clock      int64
	runtime    []runtime.Option
}

// WithComputation runs the computation name with f, a native Go
// computation (or any factory), instead of loading its plugin.
func WithComputation(name string, f compute.Factory) Option {
	return func(o *driverOptions) {
		if o.factories == nil {
			o.factories = map[string]compute.Factory{}
		}
		o.factories[name] = f
	}
}

// WithPlugins loads the computations not given with [WithComputation]
// from these plugin directories (or folders of them), as flowhost run
// does: checked and compiled WebAssembly.
func WithPlugins(dirs ...string) Option {
	return func(o *driverOptions) { o.pluginDirs = append(o.pluginDirs, dirs...) }
}

// WithCacheDir keeps compiled plugins in dir; without it every Driver
// compiles them again.
func WithCacheDir(dir string) Option { return func(o *driverOptions) { o.cacheDir = dir } }

// WithDataDir runs the driver on a pebble store in dir (which it does not
// remove), as flowhost run --data-dir does: the durable, exactly-once
// path, whose store flowhost inspect can then show. Without it the driver
// runs in memory, as flowhost run does without a data directory, on one
// runtime.NewMemoryStorage that every step resumes from and that is gone
// after [Driver.Close].
func WithDataDir(dir string) Option { return func(o *driverOptions) { o.dir = dir } }

// WithLogger receives the runtime's and guests' logs; by default they are
// discarded.
func WithLogger(l *slog.Logger) Option { return func(o *driverOptions) { o.log = l } }

// WithClock sets the driver's clock (int64 nanoseconds since the Unix
// epoch) at the start; the default is 2026-01-01T00:00:00Z. The clock
// moves only with [Driver.AdvanceClock].
func WithClock(now int64) Option { return func(o *driverOptions) { o.clock = now } }

// WithRuntimeOptions passes options on to runtime.New after the driver's
// own (a trace writer, say).
func WithRuntimeOptions(opts ...runtime.Option) Option {
	return func(o *driverOptions) { o.runtime = append(o.runtime, opts...) }
}

// ErrFinished is returned by a Driver that was asked for more after
// [Driver.Finish].
var ErrFinished = errors.New("flowtest: the driver's inputs have finished")

// Driver runs a pipeline's computations on records a test pushes, with the
// real runtime (package host/runtime) on a storage of its own (in memory,
// or a pebble store with [WithDataDir]), step by step.
// Each step ([Driver.Settle], [Driver.AdvanceWatermark], [Driver.Finish])
// runs the runtime on what was pushed since the last step until all of
// it, and everything derived from it, has been delivered, then stops the
// run; the next step resumes from the storage as a restarted flowhost run
// does. Between steps nothing runs, so what a test reads (outputs, state,
// pending timers) is the committed result of the steps so far.
//
// A Driver is not safe for concurrent use.
type Driver struct {
	pipe      *spec.Pipeline
	factories map[string]compute.Factory
	closeFn   func()
	storage   runtime.Storage
	st        *store.Store // the pebble store under storage, with WithDataDir
	opts      driverOptions
	clock     atomic.Int64
	capture   *capture
	pending   map[string][]connect.Record // by source name
	parts     map[string]*connect.Partitioner
	dead      []string
	finished  bool
}

// New builds a driver for pipe. Every source of pipe is replaced by the
// records pushed with [Driver.Push]; every sink by a capture that
// [Driver.Outputs] reads, and every stream a computation writes can be
// read there, whether or not a sink reads it.
func New(ctx context.Context, pipe *spec.Pipeline, opts ...Option) (*Driver, error) {
	o := driverOptions{clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{pipe: pipe, opts: o, capture: newCapture(), pending: map[string][]connect.Record{}, parts: map[string]*connect.Partitioner{}}
	d.clock.Store(o.clock)
	for _, s := range pipe.Sources {
		p, err := connect.NewPartitioner(s.Partitions, s.PartitionBy)
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", s.Name, err)
		}
		d.parts[s.Name] = p
	}
	if _, err := captureAll(pipe, d.capture); err != nil {
		return nil, err
	}
	f, closeFn, err := loadFactories(ctx, pipe, o.factories, o.pluginDirs, o.cacheDir, o.log)
	if err != nil {
		return nil, err
	}
	d.factories, d.closeFn = f, closeFn
	if o.dir == "" {
		d.storage = runtime.NewMemoryStorage()
		return d, nil
	}
	if d.st, err = store.Open(o.dir, store.Options{}); err != nil {
		d.Close()
		return nil, err
	}
	d.storage = runtime.NewPebbleStorage(d.st)
	return d, nil
}

// NewFromYAML parses spec (a pipeline in the YAML of host/spec/README.md)
// and builds a driver for it; see [New].
func NewFromYAML(ctx context.Context, specYAML string, opts ...Option) (*Driver, error) {
	p, err := spec.Parse("pipeline.yaml", []byte(specYAML))
	if err != nil {
		return nil, err
	}
	return New(ctx, p, opts...)
}

// Close releases the storage (an in-memory one is gone after it, a store
// in [WithDataDir] stays) and the compiled plugins.
func (d *Driver) Close() error {
	var err error
	if d.st != nil {
		err = d.st.Close()
		d.st = nil
	}
	d.storage = nil
	if d.closeFn != nil {
		d.closeFn()
		d.closeFn = nil
	}
	return err
}

// Push queues records for the named source; the next step delivers them.
// The partition is the one the source's partition_by gives (round robin
// without it), as for any source; a payload whose partition_by fields are
// missing is refused with the error.
func (d *Driver) Push(source string, recs ...Record) error {
	if d.finished {
		return ErrFinished
	}
	part, ok := d.parts[source]
	if !ok {
		return fmt.Errorf("no source %q in pipeline %q; its sources are %s", source, d.pipe.Name, strings.Join(slices.Sorted(maps.Keys(d.parts)), ", "))
	}
	stream := d.pipe.Source(source).Stream
	for i, r := range recs {
		p, err := part.Partition(r.Payload)
		if err != nil {
			return fmt.Errorf("source %q, record %d of this push: %w", source, i+1, err)
		}
		write := r.Write
		if write == 0 {
			write = r.Event
		}
		d.pending[source] = append(d.pending[source], connect.Record{Stream: stream, Partition: p, RoundRobin: part.RoundRobin(),
			Event: r.Event, HasEvent: true, Write: write, HasWrite: true, Payload: bytes.Clone(r.Payload), Key: r.Key,
			Origin: fmt.Sprintf("flowtest push to %s #%d", source, len(d.pending[source])+1)})
	}
	return nil
}

// Settle runs the runtime until everything pushed since the last step,
// and everything derived from it, has been delivered, and the timers the
// records' watermark makes due have fired. A source's watermark is its
// newest event time (the minimum over its partitions) less its
// watermark.out_of_orderness_bound, as in any run; timers beyond it stay
// pending.
func (d *Driver) Settle(ctx context.Context) error { return d.step(ctx, false) }

// AdvanceWatermark raises the event watermark of the source's stream to
// event (never lowers it) and settles: the timers it makes due fire, in
// every computation downstream.
func (d *Driver) AdvanceWatermark(ctx context.Context, source string, event int64) error {
	if d.finished {
		return ErrFinished
	}
	s := d.pipe.Source(source)
	if s == nil {
		return fmt.Errorf("no source %q in pipeline %q", source, d.pipe.Name)
	}
	w, ok, err := d.storage.SourceWatermarks(s.Stream)
	if err != nil {
		return err
	}
	if !ok {
		w = store.Watermarks{Event: ordering.NoWatermark, System: ordering.NoWatermark}
	}
	if event > w.Event {
		// Only the event watermark: the system watermark stays the
		// records' and the clock's.
		w.Event = event
		b := d.storage.NewBatch()
		b.SetSourceWatermarks(s.Stream, w)
		if err := b.Commit(); err != nil {
			return err
		}
	}
	return d.step(ctx, false)
}

// AdvanceClock moves the driver's clock (the wall clock the runtime
// stamps ingest and system times with) on by by; the next step sees it.
func (d *Driver) AdvanceClock(by time.Duration) { d.clock.Add(int64(by)) }

// Finish ends every source, as the end of a file does: what was pushed is
// delivered, the watermarks reach the end of time and every pending timer
// fires. The driver takes no more records after it.
func (d *Driver) Finish(ctx context.Context) error {
	if d.finished {
		return ErrFinished
	}
	err := d.step(ctx, true)
	d.finished = true
	return err
}

// step runs the runtime once on the pending records; end ends the
// sources' data, otherwise the run is stopped once every source has
// handed over its records, and drains what they accepted.
func (d *Driver) step(ctx context.Context, end bool) error {
	if d.finished {
		return ErrFinished
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// Stopping once every source has handed its records over drains them
	// (and what they derive) but leaves the watermarks where the records
	// put them, as a stopped flowhost run does.
	var waiting atomic.Int64
	waiting.Store(int64(len(d.pipe.Sources)))
	emitted := func() {
		if waiting.Add(-1) == 0 && !end {
			stop()
		}
	}
	var opts []runtime.Option
	for _, s := range d.pipe.Sources {
		opts = append(opts, runtime.WithSource(s.Name, &pushSource{recs: d.pending[s.Name], end: end, emitted: emitted}))
	}
	for _, sk := range d.pipe.Sinks {
		opts = append(opts, runtime.WithSink(sk.Name, captureSink{d.capture}))
	}
	var dead bytes.Buffer
	opts = append(opts, runtime.WithStorage(d.storage), runtime.WithLogger(d.opts.log), runtime.WithDeadLetter(&dead),
		runtime.WithClock(d.clock.Load), runtime.WithStopGrace(-1))
	opts = append(opts, d.opts.runtime...)
	rt, err := runtime.New(d.pipe, d.factories, opts...)
	if err != nil {
		return err
	}
	err = rt.Run(runCtx)
	for l := range strings.Lines(dead.String()) {
		d.dead = append(d.dead, strings.TrimRight(l, "\n"))
	}
	// What the run accepted is in the store, whether or not it failed:
	// pushing the records again would duplicate it.
	clear(d.pending)
	if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() == nil) {
		return fmt.Errorf("flowtest: the step failed (what it accepted is committed; close the driver): %w", err)
	}
	return nil
}

// pushSource hands a step's records to the runtime.
type pushSource struct {
	recs    []connect.Record
	end     bool
	emitted func()
}

func (s *pushSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	defer func() {
		if s.emitted != nil {
			s.emitted()
		}
	}()
	for _, r := range s.recs {
		if err := emit(r); err != nil {
			return err
		}
	}
	if s.end {
		return nil
	}
	s.emitted()
	s.emitted = nil
	<-ctx.Done()
	return ctx.Err()
}

// Outputs returns what the steps so far delivered to stream, in delivery
// order, as a sink's json lines hold it.
func (d *Driver) Outputs(stream string) []connect.SinkRecord { return d.capture.get(stream) }

// Payloads returns the payloads of [Driver.Outputs] as text.
func (d *Driver) Payloads(stream string) []string {
	recs := d.Outputs(stream)
	out := make([]string, len(recs))
	for i, r := range recs {
		p, err := r.PayloadBytes()
		if err != nil {
			p = r.Payload
		}
		out[i] = string(p)
	}
	return out
}

// DeadLetters returns the dead-letter records of the steps so far, one
// JSON line each.
func (d *Driver) DeadLetters() []string { return slices.Clone(d.dead) }

// KeyOf returns the key text computation gives a record with payload (its
// group_by fields), as [Driver.State] and [Driver.Timers] name keys.
func (d *Driver) KeyOf(computation string, payload []byte) (string, error) {
	c := d.pipe.Computation(computation)
	if c == nil {
		return "", fmt.Errorf("no computation %q in pipeline %q", computation, d.pipe.Name)
	}
	if len(c.GroupBy) == 0 {
		return "", fmt.Errorf("computation %q has no group_by: its keys are its inputs' message keys", computation)
	}
	e, err := keys.NewExtractor(c.GroupBy)
	if err != nil {
		return "", err
	}
	return e.Key(payload)
}

// State returns the committed state of key in computation, and whether
// it has any.
func (d *Driver) State(computation, key string) ([]byte, bool, error) {
	c := d.pipe.Computation(computation)
	if c == nil {
		return nil, false, fmt.Errorf("no computation %q in pipeline %q", computation, d.pipe.Name)
	}
	return d.storage.State(computation, ordering.PartitionOf(key, max(1, c.Partitions)), key)
}

// Timers returns the pending timers of computation, over its partitions,
// by trigger time, then key.
func (d *Driver) Timers(computation string) ([]Timer, error) {
	c := d.pipe.Computation(computation)
	if c == nil {
		return nil, fmt.Errorf("no computation %q in pipeline %q", computation, d.pipe.Name)
	}
	var all []Timer
	for p := range max(1, c.Partitions) {
		ts, err := d.storage.Timers(computation, p)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
	}
	slices.SortStableFunc(all, func(a, b Timer) int {
		if a.Trigger != b.Trigger {
			return cmpInt(a.Trigger, b.Trigger)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return all, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
