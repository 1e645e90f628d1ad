package runtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// An exactly-once Kafka sink commits each batch in three steps (see the
// package doc of connect for why the Kafka transaction is the commit
// point): the store records the batch as pending, one Kafka transaction
// writes it and the marker, and the store dequeues it. A run that
// starts on a store with a pending batch asks Kafka which side of the
// transaction the last run stopped on.

// KafkaSinkStep names a point of an exactly-once Kafka sink's commit, where
// tests stop it as a crash would.
type KafkaSinkStep string

// The points of a Kafka sink's commit.
const (
	// KafkaStepPending: the store recorded the batch as pending; nothing
	// is in Kafka yet.
	KafkaStepPending KafkaSinkStep = "pending"
	// KafkaStepBeforeEnd: the batch and the marker are in the open
	// transaction, which has not been committed.
	KafkaStepBeforeEnd KafkaSinkStep = "before_end"
	// KafkaStepAfterEnd: the transaction committed; the store has not
	// dequeued the batch yet.
	KafkaStepAfterEnd KafkaSinkStep = "after_end"
)

func (s *sinkRunner) fault(step KafkaSinkStep) error {
	if f := s.rt.kafkaFault; f != nil {
		return f(s.name, step)
	}
	return nil
}

// kafkaSinkMetrics returns the Kafka sinks' series, registering them with
// the first Kafka sink (sinks are opened one after the other).
func (r *Runtime) kafkaSinkMetrics() (*connect.KafkaSinkMetrics, error) {
	if r.kafkaSinks == nil {
		m, err := connect.NewKafkaSinkMetrics(r.opts.registry)
		if err != nil {
			return nil, err
		}
		r.kafkaSinks = m
	}
	return r.kafkaSinks, nil
}

// openKafka builds a kafka sink: exactly once when its delivery says so
// (by default when the run has a store), at least once otherwise.
func (s *sinkRunner) openKafka(ss *spec.Sink) error {
	r := s.rt
	path := fmt.Sprintf("sinks[%d].kafka", specIndex(r.pipe.Sinks, func(s *spec.Sink) string { return s.Name }, ss.Name))
	k := ss.Kafka
	conn, err := r.kafkaConnection(path, k.Connection())
	if err != nil {
		return err
	}
	durable := r.storage.Durable()
	if k.Delivery == spec.DeliveryExactlyOnce && !durable {
		return r.pipe.ErrorAt(path+".delivery", "sink %q: exactly_once needs a data directory, where the sink records the batch it is committing; run without --in-memory, or set delivery: at_least_once", ss.Name)
	}
	metrics, err := r.kafkaSinkMetrics()
	if err != nil {
		return err
	}
	cfg := connect.KafkaSinkConfig{
		Conn: conn, Topic: k.Topic, KeyFields: k.KeyFields, PayloadOnly: ss.Format == spec.FormatPayload,
		Name: ss.Name, Metrics: metrics, Logger: r.log, BrokerHook: r.metrics.kafka.BrokerHook("sink "+ss.Name, r.log),
	}
	eos := k.ExactlyOnce(durable)
	if eos {
		cfg.TransactionalID = k.TransactionalIDOf(r.pipe.Name, ss.Name)
		cfg.MarkerGroup = k.MarkerGroupOf(r.pipe.Name, ss.Name)
		cfg.BeforeEnd = func() error { return s.fault(KafkaStepBeforeEnd) }
	}
	ks, err := connect.NewKafkaSink(cfg)
	if err != nil {
		return err
	}
	s.sink = ks
	if eos {
		s.kafka = ks
	} else if s.pos.Pending != nil {
		// An exactly-once run left a batch pending; at least once writes
		// the whole queue anyway, so the batch is just no longer pending.
		r.log.Warn("kafka sink: the data directory has an exactly-once batch pending, and the sink is now at least once: its records are written again, possibly twice",
			"sink", ss.Name, "batch", s.pos.Pending.N)
		s.pos.Pending = nil
	}
	r.log.Info("kafka sink", "sink", ss.Name, "topic", k.Topic, "exactly_once", eos,
		"transactional_id", cfg.TransactionalID, "marker_group", cfg.MarkerGroup)
	return nil
}

// writeKafka commits one batch of an exactly-once Kafka sink.
func (s *sinkRunner) writeKafka(ctx context.Context, batch []sinkItem, recs []connect.SinkRecord) error {
	s.pos.Pending = pendingOf(s.pos.Batch+1, batch)
	b := s.rt.storage.NewBatch()
	b.SetSink(s.name, s.pos)
	if err := s.rt.metrics.commit("sink", b); err != nil {
		return err
	}
	if err := s.fault(KafkaStepPending); err != nil {
		return err
	}
	if err := s.kafka.Transact(ctx, s.pos.Pending.N, recs); err != nil {
		return err
	}
	if err := s.fault(KafkaStepAfterEnd); err != nil {
		return err
	}
	return s.finishKafka(batch)
}

// finishKafka dequeues the pending batch, which is in Kafka, and records
// it committed.
func (s *sinkRunner) finishKafka(batch []sinkItem) error {
	b := s.rt.storage.NewBatch()
	s.take(b, batch)
	s.pos.Batch = s.pos.Pending.N
	s.pos.Pending = nil
	s.pos.Records += uint64(len(batch))
	b.SetSink(s.name, s.pos)
	return s.rt.metrics.commit("sink", b)
}

// pendingOf names batch n: the last task of each sender in it.
func pendingOf(n uint64, batch []sinkItem) *store.SinkBatch {
	last := map[ordering.Sender]ordering.TaskID{}
	for i := range batch {
		last[batch[i].from] = max(last[batch[i].from], batch[i].task)
	}
	p := &store.SinkBatch{N: n}
	for from, task := range last {
		p.Last = append(p.Last, store.SinkBatchSender{Computation: from.Computation, Partition: from.Partition, Task: uint64(task)})
	}
	slices.SortFunc(p.Last, func(a, b store.SinkBatchSender) int {
		return cmp.Or(cmp.Compare(a.Computation, b.Computation), cmp.Compare(a.Partition, b.Partition))
	})
	return p
}

// recoverKafka fences the sink's earlier producer and settles what the
// last run left: a pending batch that reached Kafka is dequeued (it
// returns how many records that was), one that did not is written again
// with the next batch.
func (s *sinkRunner) recoverKafka(ctx context.Context) (int, error) {
	marker, err := s.kafka.Recover(ctx)
	if err != nil {
		return 0, err
	}
	log := s.rt.log.With("sink", s.name, "marker", marker)
	p := s.pos.Pending
	switch {
	case p == nil && marker == s.pos.Batch:
		return 0, nil
	case p == nil && s.pos.Batch == 0:
		// This store never committed a transaction of this sink: an
		// earlier run on another data directory did.
		log.Warn("kafka sink: the marker group holds the batches of an earlier run on another data directory; continuing after them (what this run writes again is written again)")
		s.pos.Batch = marker
		return 0, nil
	case p == nil:
		return 0, s.kafka.Conflict(s.pos.Batch, false, marker)
	case marker == p.N-1:
		log.Info("kafka sink: the batch pending at the last stop did not reach Kafka (its transaction was aborted); it is written again", "batch", p.N)
		s.pos.Pending = nil
		return 0, nil
	case marker != p.N:
		return 0, s.kafka.Conflict(p.N, true, marker)
	}
	batch, err := s.takePending(p)
	if err != nil {
		return 0, err
	}
	log.Info("kafka sink: the batch pending at the last stop had reached Kafka; it is dequeued without being written again", "batch", p.N, "records", len(batch))
	return len(batch), s.finishKafka(batch)
}

// takePending removes the pending batch p from the queue the store gave
// back: every sender's tasks up to its last one in p.
func (s *sinkRunner) takePending(p *store.SinkBatch) ([]sinkItem, error) {
	last := make(map[ordering.Sender]ordering.TaskID, len(p.Last))
	for _, l := range p.Last {
		last[ordering.Sender{Computation: l.Computation, Partition: l.Partition}] = ordering.TaskID(l.Task)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch, rest []sinkItem
	found := map[ordering.Sender]bool{}
	for _, it := range s.queue {
		if t, ok := last[it.from]; ok && it.task <= t {
			batch = append(batch, it)
			found[it.from] = found[it.from] || it.task == t
		} else {
			rest = append(rest, it)
		}
	}
	for from, t := range last {
		if !found[from] {
			return nil, fmt.Errorf("the store's pending batch %d ends with task %d of %s/p%d, which is not in the sink's queue: the data directory is damaged", p.N, t, from.Computation, from.Partition)
		}
	}
	s.queue = rest
	s.cond.Broadcast()
	return batch, nil
}
