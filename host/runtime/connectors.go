package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// Sink receives output records; see package connect for the file, stdout
// and HTTP sinks.
type Sink = connect.Sink

// Dead-letter stages the runtime reports.
const (
	stageKey   = connect.StageKey
	stageGuest = connect.StageGuest
)

// deadLetters is the pipeline's dead-letter sink: every record the
// pipeline refuses is written there with its reason, never dropped.
type deadLetters struct {
	dl     *connect.DeadLetter
	closer func() error
	rt     *Runtime
}

func (r *Runtime) openDeadLetters() (*deadLetters, error) {
	d := &deadLetters{rt: r, closer: func() error { return nil }}
	if r.opts.deadLetter != nil {
		d.dl = connect.NewDeadLetter(r.opts.deadLetter)
		return d, nil
	}
	dl := r.pipe.DeadLetter
	switch dl.Type {
	case spec.DeadLetterFile:
		f, err := connect.OpenDeadLetter(dl.File.Path)
		if err != nil {
			return nil, fmt.Errorf("dead_letter: %w", err)
		}
		d.dl, d.closer = f, f.Close
	case spec.DeadLetterStdout:
		d.dl = connect.NewDeadLetter(r.stdout())
	default:
		return nil, fmt.Errorf("dead_letter: unknown type %q", dl.Type)
	}
	return d, nil
}

func (d *deadLetters) reject(stage, origin string, err error, record []byte) error {
	d.rt.metrics.deadLetters.WithLabelValues(stage).Inc()
	d.rt.log.Warn("record sent to the dead-letter sink", "stage", stage, "origin", origin, "err", err)
	if werr := d.dl.Reject(connect.Rejection{Origin: origin, Stage: stage, Err: err, Record: record}); werr != nil {
		return fmt.Errorf("dead-letter sink failed (the run stops rather than lose records): %w", werr)
	}
	return nil
}

// connectReject adapts the dead letter for connectors' bad input.
func (d *deadLetters) connectReject(rj connect.Rejection) error {
	return d.reject(rj.Stage, rj.Origin, rj.Err, rj.Record)
}

func (d *deadLetters) close() error { return d.closer() }

// deadLetterKey sends every input of a key (messages and fired timers) to
// the computation's dead-letter route with err.
func (p *partition) deadLetterKey(ctx context.Context, kb *ordering.KeyBatch, stage string, err error) error {
	c := p.comp
	for _, t := range kb.Timers {
		origin := fmt.Sprintf("%s timer %s key %s trigger %d", c.spec.Name, t.ID, kb.Key, t.Trigger)
		tt := ordering.Timestamps{Event: t.Event, System: t.Trigger, Alignment: t.Trigger}
		if derr := c.deadLetter(ctx, stage, origin, err, t.Payload, t.ID, tt); derr != nil {
			return derr
		}
	}
	for _, m := range kb.Messages {
		origin := fmt.Sprintf("%s <- %s %s", c.spec.Name, m.Stream, m.ID)
		if derr := c.deadLetter(ctx, stage, origin, err, m.Payload, m.ID, m.Time); derr != nil {
			return derr
		}
	}
	return nil
}

// deadLetter refuses one input of this computation. Without a
// dead_letter.stream in the spec it goes to the pipeline's dead-letter
// sink; with one, it becomes a message on that stream (the rejection as
// a JSON object, the refused input as its parent), so a pipeline can
// route, count or repair its own rejects.
func (c *computation) deadLetter(ctx context.Context, stage, origin string, err error, record []byte, parent ordering.MessageID, parentTime ordering.Timestamps) error {
	r := c.rt
	if c.spec.DeadLetter == nil {
		return r.dead.reject(stage, origin, err, record)
	}
	r.metrics.deadLetters.WithLabelValues(stage).Inc()
	var buf bytes.Buffer
	if werr := connect.NewDeadLetter(&buf).Reject(connect.Rejection{Origin: origin, Stage: stage, Err: err, Record: record}); werr != nil {
		return werr
	}
	m := &ordering.Message{
		ID:      ordering.TransformID(c.spec.Name+".dead-letter", 0, c.deadSeq.Add(1)-1),
		Stream:  c.spec.DeadLetter.Stream,
		Time:    ordering.TransformOutput(r.opts.now(), []ordering.Timestamps{parentTime}, 0, false),
		Parents: []ordering.MessageID{parent},
		Payload: bytes.TrimSuffix(buf.Bytes(), []byte("\n")),
	}
	return r.route(ctx, ordering.Sender{Computation: c.spec.Name + ".dead-letter"}, m)
}

func (r *Runtime) stdout() io.Writer {
	if r.opts.stdout != nil {
		return r.opts.stdout
	}
	return os.Stdout
}

// openSource builds the connector a spec source names.
func (r *Runtime) openSource(ss *spec.Source) (Source, error) {
	reject := r.dead.connectReject
	switch ss.Type {
	case spec.SourceFile:
		return connect.NewFileSource(connect.FileSourceConfig{
			Path: ss.File.Path, Stream: ss.Stream, Partitions: ss.Partitions, PartitionBy: ss.PartitionBy,
			Reject: reject, Progress: r.opts.fileProgress(ss.Name),
		})
	case spec.SourceHTTP:
		return connect.NewHTTPSource(connect.HTTPSourceConfig{
			Addr: ss.HTTP.Listen, Path: ss.HTTP.Path, Stream: ss.Stream, Partitions: ss.Partitions,
			PartitionBy: ss.PartitionBy, Reject: reject,
		})
	case spec.SourceGenerator:
		g := ss.Generator
		return connect.NewGenerator(connect.GeneratorConfig{
			Stream: ss.Stream, Partitions: ss.Partitions, PartitionBy: ss.PartitionBy,
			Seed: uint64(g.Seed), Count: g.Count, Keys: int(g.Keys), PayloadBytes: int(g.PayloadBytes),
			Rate: g.Rate, EventLag: g.EventLag,
		})
	}
	return nil, fmt.Errorf("source %q: unknown type %q", ss.Name, ss.Type)
}

// sinkRunner feeds one sink from a bounded queue, in batches, so that a
// slow sink slows its writers down instead of growing memory.
type sinkRunner struct {
	rt     *Runtime
	name   string
	sink   Sink
	inputs []*stream

	mu    sync.Mutex
	cond  *sync.Cond
	queue []connect.SinkRecord
}

// sinkQueueRecords bounds the records waiting for one sink.
const sinkQueueRecords = 8192

func (r *Runtime) newSinkRunner(ss *spec.Sink) (*sinkRunner, error) {
	sk, ok := r.opts.sinks[ss.Name]
	if !ok {
		var err error
		if sk, err = r.openSink(ss); err != nil {
			return nil, fmt.Errorf("sink %q: %w", ss.Name, err)
		}
	}
	s := &sinkRunner{rt: r, name: ss.Name, sink: sk}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

func (r *Runtime) openSink(ss *spec.Sink) (Sink, error) {
	switch ss.Type {
	case spec.SinkFile:
		return connect.OpenFileSink(connect.FileSinkConfig{Path: ss.File.Path, Format: connect.Format(ss.Format)})
	case spec.SinkStdout:
		format := connect.Format(ss.Format)
		if r.opts.stdout != nil {
			return connect.NewWriterSink(r.opts.stdout, format)
		}
		return connect.NewStdoutSink(format)
	case spec.SinkHTTP:
		return connect.NewHTTPSink(connect.HTTPSinkConfig{Addr: ss.HTTP.Listen, Path: ss.HTTP.Path})
	}
	return nil, fmt.Errorf("unknown type %q", ss.Type)
}

func (s *sinkRunner) wake() {
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *sinkRunner) send(ctx context.Context, rec connect.SinkRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) >= sinkQueueRecords && ctx.Err() == nil {
		s.cond.Wait()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.queue = append(s.queue, rec)
	s.cond.Broadcast()
	return nil
}

func (s *sinkRunner) inputsFinished() bool {
	for _, in := range s.inputs {
		if !in.finished.Load() {
			return false
		}
	}
	return true
}

// run writes batches until every input stream has finished and the queue
// is empty, then closes the sink.
func (s *sinkRunner) run(ctx context.Context) error {
	counter := s.rt.metrics.sinkRecords.WithLabelValues(s.name)
	var batch []connect.SinkRecord
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.inputsFinished() && ctx.Err() == nil {
			s.cond.Wait()
		}
		if ctx.Err() != nil {
			s.mu.Unlock()
			_ = s.sink.Close()
			return ctx.Err()
		}
		batch, s.queue = s.queue, batch[:0]
		s.cond.Broadcast()
		s.mu.Unlock()
		if len(batch) == 0 {
			if err := s.sink.Close(); err != nil {
				return fmt.Errorf("sink %q: %w", s.name, err)
			}
			return nil
		}
		if err := s.sink.Write(ctx, batch); err != nil {
			return fmt.Errorf("sink %q: %w", s.name, err)
		}
		counter.Add(float64(len(batch)))
		clear(batch)
	}
}

// fileProgress reports a file source's progress through the runtime's
// progress hook, if any.
func (o *options) fileProgress(source string) func(connect.FileProgress) {
	if o.progress == nil {
		return nil
	}
	return func(fp connect.FileProgress) { o.progress(source, fp) }
}
