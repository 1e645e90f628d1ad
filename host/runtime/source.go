package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// Source produces the records of one source stream; see package connect
// for the file, HTTP and generator sources.
type Source = connect.Source

// sourceStream is the in-memory source queue of one source stream: records
// are appended per partition as the connector accepts them (WriteTimestamp
// taken there) and read in partition priority, earliest WriteTimestamp
// first.
type sourceStream struct {
	rt     *Runtime
	spec   *spec.Source
	stream *stream
	conn   Source

	mu        sync.Mutex
	cond      *sync.Cond
	parts     []sourcePartition
	queued    int64 // bytes appended and not yet read
	capBytes  int64
	pm        *ordering.PartitionMerge
	eventWM   *ordering.SourceWatermark
	systemWM  *ordering.SourceSystemWatermark
	ingestEnd bool // the connector returned
	endOfData bool // it returned because its data ended, not on interrupt
	// bias is the stream's running EventTimestamp - AlignmentTimestamp
	// over the records queued here (the source's output buffer); gateIdx
	// is the stream's place in the runtime's sourceGate, and gateBias
	// whether the gate orders it by stabilized time (false when every
	// reader merges on raw alignment).
	bias     ordering.Bias
	gateIdx  int
	gateBias bool
}

type sourcePartition struct {
	queue  []*ordering.Message
	head   int
	clock  ordering.SourceClock
	offset uint64
}

// DefaultSourceQueueBytes bounds what a source may accept ahead of its
// readers; past it the connector blocks (the HTTP source then holds its
// answer until there is room).
const DefaultSourceQueueBytes = 64 << 20

func (r *Runtime) newSourceStream(ss *spec.Source, s *stream) (*sourceStream, error) {
	conn, ok := r.opts.sources[ss.Name]
	if !ok {
		var err error
		if conn, err = r.openSource(ss); err != nil {
			return nil, err
		}
	}
	now := r.opts.now()
	cfg := ordering.WatermarkConfig{
		OutOfOrdernessBound: ss.Watermark.OutOfOrdernessBound,
		IdleDuration:        ss.Watermark.IdlePartitions.Duration,
		IdleMaxRatio:        ss.Watermark.IdlePartitions.MaxRatio,
	}
	ewm, err := ordering.NewSourceWatermark(ss.Partitions, cfg, now)
	if err != nil {
		return nil, fmt.Errorf("source %q: watermark: %w", ss.Name, err)
	}
	src := &sourceStream{
		rt:       r,
		spec:     ss,
		stream:   s,
		conn:     conn,
		parts:    make([]sourcePartition, ss.Partitions),
		capBytes: r.opts.sourceCap,
		pm:       ordering.NewPartitionMerge(ss.Partitions),
		eventWM:  ewm,
		systemWM: ordering.NewSourceSystemWatermark(ss.Partitions),
	}
	src.cond = sync.NewCond(&src.mu)
	return src, nil
}

func (src *sourceStream) wake() {
	src.mu.Lock()
	src.cond.Broadcast()
	src.mu.Unlock()
}

// ingest runs the connector until its data ends or ctx (the user's) is
// cancelled. work is cancelled only on a fatal error.
func (src *sourceStream) ingest(ctx, work context.Context) error {
	r := src.rt
	counter := r.metrics.sourceRecords.WithLabelValues(src.spec.Name, src.stream.name)
	err := src.conn.Run(ctx, func(rec connect.Record) error {
		if rec.Partition < 0 || rec.Partition >= len(src.parts) {
			return fmt.Errorf("source %q: record %s: partition %d out of range [0,%d)", src.spec.Name, rec.Origin, rec.Partition, len(src.parts))
		}
		src.mu.Lock()
		defer src.mu.Unlock()
		for src.queued >= src.capBytes && work.Err() == nil {
			src.cond.Wait()
		}
		if work.Err() != nil {
			return work.Err()
		}
		now := r.opts.now()
		write := now
		if rec.HasWrite {
			write = rec.Write
		}
		event := write
		if rec.HasEvent {
			event = rec.Event
		}
		p := &src.parts[rec.Partition]
		m := &ordering.Message{
			ID:      ordering.SourceID(src.stream.name, int32(rec.Partition), p.offset),
			Stream:  src.stream.name,
			Time:    p.clock.SourceRecord(event, write),
			Payload: rec.Payload,
		}
		p.offset++
		if p.head == len(p.queue) {
			src.pm.Set(rec.Partition, m.Time.Write)
		}
		p.queue = append(p.queue, m)
		src.queued += m.Size()
		src.bias.Add(m.Time)
		src.eventWM.Appended(rec.Partition, event, now)
		src.systemWM.Appended(rec.Partition, m.Time.System)
		counter.Inc()
		src.cond.Broadcast()
		return nil
	})
	src.mu.Lock()
	src.ingestEnd = true
	src.endOfData = err == nil
	src.cond.Broadcast()
	src.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return nil // interrupted: what was accepted is still read
	}
	if err != nil {
		return fmt.Errorf("source %q: %w", src.spec.Name, err)
	}
	return nil
}

// read hands the queued records downstream in partition priority and
// publishes the stream's watermarks after each record has been delivered,
// so a watermark never passes a record that is not yet in a buffer.
func (src *sourceStream) read(work context.Context) error {
	r := src.rt
	for {
		src.mu.Lock()
		var part int
		var ok bool
		for {
			part, ok = src.pm.Next()
			if ok || src.ingestEnd || work.Err() != nil {
				break
			}
			r.gate.empty(src.gateIdx)
			src.cond.Wait()
		}
		if work.Err() != nil {
			src.mu.Unlock()
			return work.Err()
		}
		if !ok { // ingest ended and everything was read
			end := src.endOfData
			src.mu.Unlock()
			r.gate.end(src.gateIdx)
			src.stream.finish(end)
			return nil
		}
		p := &src.parts[part]
		m := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head == len(p.queue) {
			p.queue, p.head = p.queue[:0], 0
			src.pm.Clear(part)
		} else {
			src.pm.Set(part, p.queue[p.head].Time.Write)
		}
		src.queued -= m.Size()
		prio := m.Time.Alignment
		if src.gateBias {
			prio = src.bias.Stabilized(prio)
		}
		src.bias.Remove(m.Time)
		src.cond.Broadcast()
		src.mu.Unlock()

		if err := r.gate.pass(work, src.gateIdx, prio); err != nil {
			return err
		}

		if err := r.route(work, ordering.Sender{Computation: src.stream.name, Partition: part}, m); err != nil {
			return err
		}

		src.mu.Lock()
		now := r.opts.now()
		src.eventWM.Read(part, m.Time.Event, now)
		src.systemWM.Read(part, m.Time.System)
		ev := src.eventWM.Watermark(now)
		sys := src.systemWM.Watermark()
		src.mu.Unlock()
		src.stream.raise(ev, sys)
		src.stream.mEventWM.Set(nsToSeconds(ev))
		src.stream.mSystemWM.Set(nsToSeconds(sys))
	}
}
