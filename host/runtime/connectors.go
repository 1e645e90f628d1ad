package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
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
	causes deadLetterCauses
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

// reject writes one record node refused (a computation, or a source whose
// connector could not read it) to the pipeline's dead-letter sink.
func (d *deadLetters) reject(node, stage, origin string, err error, record []byte) error {
	d.count(node, stage, err)
	d.rt.log.Warn("record sent to the dead-letter sink", "stage", stage, "origin", origin, "err", err)
	if werr := d.dl.Reject(connect.Rejection{Origin: origin, Stage: stage, Err: err, Record: record}); werr != nil {
		return fmt.Errorf("dead-letter sink failed (the run stops rather than lose records): %w", werr)
	}
	return nil
}

// count records one dead letter of node, whichever route it takes (the
// dead-letter sink or a dead_letter.stream): the one place that counts
// them, for flowhost_dead_letters_total and the run's Summary.
func (d *deadLetters) count(node, stage string, err error) {
	d.rt.metrics.deadLetters.WithLabelValues(stage, node).Inc()
	d.causes.add(node, stage, err)
}

// connectReject adapts the dead letter for the bad input of source's
// connector.
func (d *deadLetters) connectReject(source string) func(connect.Rejection) error {
	return func(rj connect.Rejection) error {
		return d.reject(source, rj.Stage, rj.Origin, rj.Err, rj.Record)
	}
}

func (d *deadLetters) close() error { return d.closer() }

// deadLetterKey sends every input of a key (messages and fired timers) to
// the computation's dead-letter route with err, as part of epoch ep.
func (p *partition) deadLetterKey(ctx context.Context, ep *epoch, kb *ordering.KeyBatch, stage string, err error) error {
	c := p.comp
	var derr error
	for _, t := range kb.Timers {
		origin := fmt.Sprintf("%s timer %s key %s trigger %d", c.spec.Name, t.ID, kb.Key, t.Trigger)
		tt := ordering.Timestamps{Event: t.Event, System: t.Trigger, Alignment: t.Trigger}
		if ep.ds, derr = c.deadLetter(ctx, p.snd, ep.ds, stage, origin, err, t.Payload, t.ID, tt); derr != nil {
			return derr
		}
	}
	for _, m := range kb.Messages {
		origin := fmt.Sprintf("%s <- %s %s", c.spec.Name, m.Stream, m.ID)
		if ep.ds, derr = c.deadLetter(ctx, p.snd, ep.ds, stage, origin, err, m.Payload, m.ID, m.Time); derr != nil {
			return derr
		}
	}
	return nil
}

// deadLetter refuses one input of this computation. Without a
// dead_letter.stream in the spec it goes to the pipeline's dead-letter
// sink at once; with one, it becomes a message on that stream (the
// rejection as a JSON object, the refused input as its parent), planned
// into ds from snd like any output, so a pipeline can route, count or
// repair its own rejects. Its id derives from the refused input's, so a
// replayed rejection has the same id.
func (c *computation) deadLetter(ctx context.Context, snd *sender, ds []delivery, stage, origin string, err error, record []byte, parent ordering.MessageID, parentTime ordering.Timestamps) ([]delivery, error) {
	r := c.rt
	if c.spec.DeadLetter == nil {
		return ds, r.dead.reject(c.spec.Name, stage, origin, err, record)
	}
	r.dead.count(c.spec.Name, stage, err)
	var buf bytes.Buffer
	if werr := connect.NewDeadLetter(&buf).Reject(connect.Rejection{Origin: origin, Stage: stage, Err: err, Record: record}); werr != nil {
		return ds, werr
	}
	stream := c.spec.DeadLetter.Stream
	m := &ordering.Message{
		ID:      parent.Derive(stream, 0),
		Stream:  stream,
		Time:    ordering.TransformOutput(r.opts.now(), []ordering.Timestamps{parentTime}, 0, false),
		Parents: []ordering.MessageID{parent},
		Payload: bytes.TrimSuffix(buf.Bytes(), []byte("\n")),
	}
	return r.plan(ctx, snd, m, ds)
}

func (r *Runtime) stdout() io.Writer {
	if r.opts.stdout != nil {
		return r.opts.stdout
	}
	return os.Stdout
}

// openSource builds the connector a spec source names, continuing after
// resume (a position a record carried; nil: from the start).
func (r *Runtime) openSource(ss *spec.Source, resume []byte) (Source, error) {
	reject := r.dead.connectReject(ss.Name)
	switch ss.Type {
	case spec.SourceFile:
		return connect.NewFileSource(connect.FileSourceConfig{
			Path: ss.File.Path, Stream: ss.Stream, Partitions: ss.Partitions, PartitionBy: ss.PartitionBy,
			Format: connect.SourceFormat(ss.Format), EventTime: eventTimeSource(ss.EventTime),
			Reject: reject, Progress: r.fileProgress(ss), Resume: resume,
		})
	case spec.SourceHTTP:
		return r.openHTTPSource(ss)
	case spec.SourceGenerator:
		return connect.NewGenerator(generatorConfig(ss, resume))
	case spec.SourceKafka:
		return r.openKafkaSource(ss, resume, reject)
	}
	return nil, fmt.Errorf("source %q: unknown type %q", ss.Name, ss.Type)
}

// eventTimeSource is the connector's form of a source's event_time block.
func eventTimeSource(e *spec.EventTime) connect.EventTimeSource {
	if e == nil {
		return connect.EventTimeSource{}
	}
	return connect.EventTimeSource{Field: e.Field, Header: e.Header, Format: string(e.Format)}
}

// generatorConfig is the connector configuration of a generator source.
func generatorConfig(ss *spec.Source, resume []byte) connect.GeneratorConfig {
	g := ss.Generator
	return connect.GeneratorConfig{
		Stream: ss.Stream, Partitions: ss.Partitions, PartitionBy: ss.PartitionBy,
		Seed: uint64(g.Seed), Count: g.Count, Keys: int(g.Keys), PayloadBytes: int(g.PayloadBytes),
		Rate: g.Rate, EventLag: g.EventLag, Resume: resume,
	}
}

// openHTTPSource binds the endpoint of an HTTP source. Its errors name the
// source and the place in the spec, a busy port included.
func (r *Runtime) openHTTPSource(ss *spec.Source) (Source, error) {
	path := fmt.Sprintf("sources[%d].http", specIndex(r.pipe.Sources, func(s *spec.Source) string { return s.Name }, ss.Name))
	what := fmt.Sprintf("source %q", ss.Name)
	sec, err := r.endpointSecurity(path, what, ss.HTTP)
	if err != nil {
		return nil, err
	}
	src, err := connect.NewHTTPSource(connect.HTTPSourceConfig{
		Addr: ss.HTTP.Listen, Path: ss.HTTP.Path, Stream: ss.Stream, Partitions: ss.Partitions,
		PartitionBy: ss.PartitionBy, TLS: sec.tls, BearerToken: sec.token, Logger: r.log.With("source", ss.Name),
		Format: connect.SourceFormat(ss.Format), EventTime: eventTimeSource(ss.EventTime),
	})
	if err != nil {
		return nil, r.pipe.ErrorAt(path+".listen", "%s: %v", what, err)
	}
	r.log.Info("http source listening", "source", ss.Name, "url", endpointURL(sec, src.Addr().String(), ss.HTTP.Path),
		"bearer_token", sec.token != "")
	return src, nil
}

// sinkRunner feeds one sink from a bounded queue, in batches, so that a
// slow sink slows its writers down instead of growing memory. Each batch
// commits: the records leave the sink's queue in the same storage batch
// that records the sink's new position (a file sink's length, an HTTP
// sink's log), which on a durable storage makes sinks exactly-once.
type sinkRunner struct {
	rt      *Runtime
	name    string
	sink    Sink
	inputs  []*stream
	dest    store.Dest
	destKey string
	// On a durable storage exactly one of these is set: the file sink
	// that commits its length, or the HTTP sink served from the storage's
	// log; neither for stdout and embedded sinks, which are at-least-once
	// on a crash.
	file *connect.CommittedFileSink
	http *connect.HTTPSink
	// kafka is an exactly-once Kafka sink (kafka_sink.go), on a durable
	// storage.
	kafka *connect.KafkaSink
	pos   store.SinkPosition

	mu    sync.Mutex
	cond  *sync.Cond
	queue []sinkItem
}

// sinkItem is one message for a sink and its place in the sink's queue;
// the sink's goroutine makes its record, off its sender's path.
type sinkItem struct {
	m    *ordering.Message
	from ordering.Sender
	task ordering.TaskID
}

// sinkQueueRecords bounds the records waiting for one sink.
const sinkQueueRecords = 8192

func (r *Runtime) newSinkRunner(ss *spec.Sink) (*sinkRunner, error) {
	d := store.Dest{Sink: true, Name: ss.Name}
	s := &sinkRunner{rt: r, name: ss.Name, dest: d, destKey: d.String()}
	s.cond = sync.NewCond(&s.mu)
	if sk, ok := r.opts.sinks[ss.Name]; ok {
		s.sink = sk
	} else if err := s.open(ss); err != nil {
		var located *spec.Error // names the sink already, after its place
		if errors.As(err, &located) {
			return nil, err
		}
		return nil, fmt.Errorf("sink %q: %w", ss.Name, err)
	}
	return s, nil
}

// open builds the sink the spec names and resumes it from its committed
// position.
func (s *sinkRunner) open(ss *spec.Sink) error {
	r := s.rt
	st := r.storage
	var resumed bool
	var err error
	if s.pos, resumed, err = st.Sink(ss.Name); err != nil {
		return err
	}
	switch ss.Type {
	case spec.SinkFile:
		cfg := connect.FileSinkConfig{Path: ss.File.Path, Format: connect.Format(ss.Format)}
		if !st.Durable() { // nothing committed to go back to
			sk, err := connect.OpenFileSink(cfg)
			s.sink = sk
			return err
		}
		fs, discarded, err := connect.OpenCommittedFileSink(cfg, s.pos.Bytes, !resumed)
		if err != nil {
			return err
		}
		if discarded > 0 {
			r.log.Info("file sink: removed what was written after the last commit; it is written again",
				"sink", ss.Name, "path", ss.File.Path, "bytes", discarded)
		}
		if !resumed {
			// Record where this sink's records start, so that what a crash
			// leaves after it is removed even before the first commit.
			if s.pos.Bytes, err = fs.Commit(); err == nil {
				b := st.NewBatch()
				b.SetSink(ss.Name, s.pos)
				err = b.Commit()
			}
			if err != nil {
				_ = fs.Close()
				return err
			}
		}
		s.sink, s.file = fs, fs
		return nil
	case spec.SinkStdout:
		format := connect.Format(ss.Format)
		var err error
		if r.opts.stdout != nil {
			s.sink, err = connect.NewWriterSink(r.opts.stdout, format)
		} else {
			s.sink, err = connect.NewStdoutSink(format)
		}
		return err
	case spec.SinkHTTP:
		path := fmt.Sprintf("sinks[%d].http", specIndex(r.pipe.Sinks, func(s *spec.Sink) string { return s.Name }, ss.Name))
		what := fmt.Sprintf("sink %q", ss.Name)
		sec, err := r.endpointSecurity(path, what, ss.HTTP)
		if err != nil {
			return err
		}
		cfg := connect.HTTPSinkConfig{Addr: ss.HTTP.Listen, Path: ss.HTTP.Path, Logger: r.log, TLS: sec.tls, BearerToken: sec.token,
			Format: connect.Format(ss.Format)}
		// A durable storage keeps the sink's log, which then outlives the
		// process; otherwise the sink keeps it in memory.
		if st.Durable() {
			cfg.Next = int64(s.pos.Records)
			cfg.Log = storageSinkLog{st: st, sink: ss.Name}
		}
		hs, err := connect.NewHTTPSink(cfg)
		if err != nil {
			return r.pipe.ErrorAt(path+".listen", "%s: %v", what, err)
		}
		r.log.Info("http sink listening", "sink", ss.Name, "url", endpointURL(sec, hs.Addr().String(), ss.HTTP.Path),
			"bearer_token", sec.token != "")
		s.sink = hs
		if cfg.Log != nil {
			s.http = hs
		}
		return nil
	case spec.SinkKafka:
		return s.openKafka(ss)
	}
	return fmt.Errorf("unknown type %q", ss.Type)
}

// restoreQueue queues again what was committed for the sink and not yet
// written before a restart.
func (s *sinkRunner) restoreQueue() error {
	return s.rt.storage.Queue(s.dest, func(from ordering.Sender, m *ordering.Message) error {
		s.queue = append(s.queue, sinkItem{m: m, from: from, task: m.Task})
		return nil
	})
}

func (s *sinkRunner) wake() {
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *sinkRunner) send(ctx context.Context, it sinkItem) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) >= sinkQueueRecords && ctx.Err() == nil {
		s.cond.Wait()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.queue = append(s.queue, it)
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
	var batch []sinkItem
	var recs []connect.SinkRecord
	var msgs []*ordering.Message
	var format connect.SinkRecordFormatter
	if s.kafka != nil {
		n, err := s.recoverKafka(ctx)
		if err != nil {
			_ = s.sink.Close()
			return fmt.Errorf("sink %q: %w", s.name, err)
		}
		counter.Add(float64(n))
	}
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
		msgs = msgs[:0]
		for i := range batch {
			msgs = append(msgs, batch[i].m)
		}
		recs = format.Append(recs[:0], msgs...)
		if err := s.write(ctx, batch, recs); err != nil {
			if s.kafka != nil {
				_ = s.sink.Close() // a transaction left open stays open, as after a crash
			}
			return fmt.Errorf("sink %q: %w", s.name, err)
		}
		counter.Add(float64(len(batch)))
		clear(batch)
		clear(recs)
		clear(msgs)
	}
}

// take takes batch off the sink's queue in b: it is a prefix of each of
// its senders' queues, since the sink gets every sender's messages in
// TaskId order.
func (s *sinkRunner) take(b StorageBatch, batch []sinkItem) {
	last := map[ordering.Sender]ordering.TaskID{}
	for i := range batch {
		last[batch[i].from] = batch[i].task
	}
	for from, task := range last {
		b.TakeThrough(s.dest, from, task)
	}
}

// write writes one batch and commits it. An HTTP sink's records whose log
// is in the storage are committed to it first and then served; a
// committed file sink's are written, synced, and then committed with the
// file's new length.
func (s *sinkRunner) write(ctx context.Context, batch []sinkItem, recs []connect.SinkRecord) error {
	if s.kafka != nil {
		return s.writeKafka(ctx, batch, recs)
	}
	b := s.rt.storage.NewBatch()
	s.take(b, batch)
	if s.http != nil {
		for i := range recs {
			line, err := s.http.Line(&recs[i])
			if err != nil {
				b.Discard()
				return fmt.Errorf("record %s: %w", recs[i].MessageID, err)
			}
			b.AppendSinkLog(s.name, s.pos.Records+uint64(i), line)
		}
		s.pos.Records += uint64(len(recs))
		b.SetSink(s.name, s.pos)
		if err := s.rt.metrics.commit("sink", b); err != nil {
			return err
		}
		return s.sink.Write(ctx, recs)
	}
	if err := s.sink.Write(ctx, recs); err != nil {
		b.Discard()
		return err
	}
	if s.file != nil {
		n, err := s.file.Commit()
		if err != nil {
			b.Discard()
			return err
		}
		s.pos.Bytes = n
	}
	s.pos.Records += uint64(len(recs))
	b.SetSink(s.name, s.pos)
	return s.rt.metrics.commit("sink", b)
}

// storageSinkLog is an HTTP sink's log in a durable storage.
type storageSinkLog struct {
	st   Storage
	sink string
}

func (l storageSinkLog) Bounds() (oldest, end int64, err error) {
	first, endSeq, err := l.st.SinkLogRange(l.sink)
	return int64(first), int64(endSeq), err
}

func (l storageSinkLog) Read(from int64, fn func(n int64, line []byte) error) error {
	return l.st.SinkLog(l.sink, uint64(max(from, 0)), func(seq uint64, line []byte) error { return fn(int64(seq), line) })
}

// fileProgress reports a file source's progress through the runtime's
// progress hook, if any, and logs when a file source resumed at the end of
// its file: a finished pipeline run again reads nothing, which would
// otherwise look like a run that did nothing for no reason.
func (r *Runtime) fileProgress(ss *spec.Source) func(connect.FileProgress) {
	hook := r.opts.progress
	return func(fp connect.FileProgress) {
		if fp.Done && fp.StartBytes > 0 && fp.BytesRead == fp.StartBytes {
			r.log.Info("file source: nothing new to read: an earlier run on this data directory read the file to its end",
				"source", ss.Name, "path", ss.File.Path, "bytes", fp.BytesRead, "to_read_it_again", "--from "+ss.Name+"=0")
		}
		if hook != nil {
			hook(ss.Name, fp)
		}
	}
}
