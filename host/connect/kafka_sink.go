package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flowhost/flowhost/host/keys"
)

// KafkaSinkConfig configures a [KafkaSink].
type KafkaSinkConfig struct {
	Conn  KafkaConnection
	Topic string
	// KeyFields, when set, make the Kafka key from the payload's fields;
	// otherwise it is the message key.
	KeyFields []string
	// PayloadOnly writes the payload as the value; otherwise the value is
	// the record as a file sink writes it (JSON with every timestamp and id).
	PayloadOnly bool
	// TransactionalID, when set, makes the sink transactional (see
	// [KafkaSink.Transact]); MarkerGroup is then required.
	TransactionalID string
	// MarkerGroup is the consumer group whose offset on partition 0 of
	// Topic is the number of the last committed batch.
	MarkerGroup string
	// Name labels the sink's metrics and logs.
	Name string
	// Metrics, when set, receives the sink's Prometheus series.
	Metrics *KafkaSinkMetrics
	// Logger logs retried failures; default slog.Default().
	Logger *slog.Logger
	// BeforeEnd, when set, is called inside every transaction once the
	// batch and the marker are in it, before it is committed. An error
	// stops Transact there and leaves the transaction open, as a crash
	// would (tests use it to crash at that step).
	BeforeEnd func() error

	// clientOpts are more kgo options (tests).
	clientOpts []kgo.Opt
}

// KafkaSink produces records to a topic. Each record carries the headers
// flowhost-message-id, flowhost-event-ts, flowhost-alignment-ts (decimal
// nanoseconds) and flowhost-parents (comma-separated message ids).
//
// Without a transactional id it is at least once: with the idempotent
// producer and acks from every in-sync replica (kgo's defaults), Write
// returns only when the brokers acknowledged every record, so the host's
// sink position never passes an unacknowledged one; a crash between the
// acknowledgement and the host's commit writes those records again.
//
// With one, every Write is one Kafka transaction that also moves the
// marker (see [KafkaSink.Transact]); a read_committed consumer sees each
// batch whole or not at all, and with the host's store (package runtime)
// every record exactly once.
type KafkaSink struct {
	cfg     KafkaSinkConfig
	cl      *kgo.Client
	adm     *kadm.Client
	keys    *keys.Extractor
	log     *slog.Logger
	topicID kadm.TopicID
	// marker is the last batch number known committed in Kafka, once
	// Recover or Transact has read or written it.
	marker    uint64
	recovered bool
}

// NewKafkaSink checks cfg and makes the client; it does not wait for the
// brokers.
func NewKafkaSink(cfg KafkaSinkConfig) (*KafkaSink, error) {
	if cfg.Topic == "" {
		return nil, errors.New("kafka sink: no topic")
	}
	if cfg.TransactionalID != "" && cfg.MarkerGroup == "" {
		return nil, errors.New("kafka sink: a transactional sink needs a marker group")
	}
	s := &KafkaSink{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("sink", cfg.Name, "topic", cfg.Topic)
	if len(cfg.KeyFields) > 0 {
		e, err := keys.NewExtractor(cfg.KeyFields)
		if err != nil {
			return nil, fmt.Errorf("kafka sink: key_fields: %w", err)
		}
		s.keys = e
	}
	opts, err := KafkaClientOpts(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	if cfg.TransactionalID != "" {
		opts = append(opts, kgo.TransactionalID(cfg.TransactionalID))
	}
	if s.cl, err = kgo.NewClient(append(opts, cfg.clientOpts...)...); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	s.adm = kadm.NewClient(s.cl)
	return s, nil
}

// Transactional reports whether the sink writes in transactions.
func (s *KafkaSink) Transactional() bool { return s.cfg.TransactionalID != "" }

// records turns sink records into Kafka records.
func (s *KafkaSink) records(records []SinkRecord) ([]*kgo.Record, error) {
	out := make([]*kgo.Record, len(records))
	for i := range records {
		r := &records[i]
		kr := &kgo.Record{Topic: s.cfg.Topic, Headers: []kgo.RecordHeader{
			{Key: "flowhost-message-id", Value: []byte(r.MessageID)},
			{Key: "flowhost-event-ts", Value: strconv.AppendInt(nil, r.EventTS, 10)},
			{Key: "flowhost-alignment-ts", Value: strconv.AppendInt(nil, r.AlignmentTS, 10)},
			{Key: "flowhost-parents", Value: []byte(strings.Join(r.Parents, ","))},
		}}
		payload, err := r.PayloadBytes()
		if err != nil {
			return nil, fmt.Errorf("kafka sink, record %s: %w", r.MessageID, err)
		}
		if s.cfg.PayloadOnly {
			kr.Value = payload
		} else if kr.Value, err = r.JSONLine(); err != nil {
			return nil, fmt.Errorf("kafka sink, record %s: %w", r.MessageID, err)
		}
		key := r.Key
		if s.keys != nil {
			if key, err = s.keys.Key(payload); err != nil {
				return nil, fmt.Errorf("kafka sink, record %s: key_fields: %w", r.MessageID, err)
			}
		}
		if key != "" {
			kr.Key = []byte(key)
		}
		out[i] = kr
	}
	return out, nil
}

// Write produces records and waits for every acknowledgement. A
// transactional sink writes them as the next batch, in one transaction
// ([KafkaSink.Transact]).
func (s *KafkaSink) Write(ctx context.Context, records []SinkRecord) error {
	if s.Transactional() {
		if !s.recovered {
			if _, err := s.Recover(ctx); err != nil {
				return err
			}
		}
		return s.Transact(ctx, s.marker+1, records)
	}
	out, err := s.records(records)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := s.cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return fmt.Errorf("kafka sink, topic %s: %w", s.cfg.Topic, err)
	}
	s.cfg.Metrics.produced(s.cfg.Name, s.cfg.Topic, len(out), time.Since(start))
	return nil
}

// Recover fences any earlier producer on the sink's transactional id and
// returns the marker: the number of the last batch committed in Kafka (0
// when the group has none). After it, no transaction of an earlier
// producer can commit any more, so the marker is final until this sink
// moves it.
func (s *KafkaSink) Recover(ctx context.Context) (uint64, error) {
	if !s.Transactional() {
		return 0, errors.New("kafka sink: Recover is for transactional sinks")
	}
	topics, err := s.adm.ListTopics(ctx, s.cfg.Topic)
	if err == nil {
		err = topics[s.cfg.Topic].Err
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("kafka sink: topic %s does not exist; create it (an exactly-once sink does not create topics)", s.cfg.Topic)
		}
		return 0, s.explain(fmt.Errorf("kafka sink: topic %s: %w", s.cfg.Topic, err))
	}
	s.topicID = topics[s.cfg.Topic].ID
	// InitProducerID: the broker aborts what an earlier producer on the
	// id left open, or finishes the commit it had started.
	if _, _, err := s.cl.ProducerID(ctx); err != nil {
		return 0, s.explain(fmt.Errorf("kafka sink: initializing transactional id %s: %w", s.cfg.TransactionalID, err))
	}
	m, err := s.fetchMarker(ctx)
	if err != nil {
		return 0, err
	}
	s.marker, s.recovered = m, true
	return m, nil
}

// fetchMarker reads the marker group's committed offset, waiting out
// transactions still being completed (RequireStable).
func (s *KafkaSink) fetchMarker(ctx context.Context) (uint64, error) {
	offs, err := s.adm.FetchOffsets(kadm.RequireStable(ctx), s.cfg.MarkerGroup)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0, nil // no transaction ever committed a marker
	}
	if err != nil {
		return 0, s.explain(fmt.Errorf("kafka sink: reading the marker of group %s: %w", s.cfg.MarkerGroup, err))
	}
	o, ok := offs.Lookup(s.cfg.Topic, 0)
	if !ok || o.At < 0 {
		return 0, nil
	}
	if o.Err != nil {
		return 0, s.explain(fmt.Errorf("kafka sink: reading the marker of group %s: %w", s.cfg.MarkerGroup, o.Err))
	}
	return uint64(o.At), nil
}

// Transact writes records as batch n in one transaction that also commits
// the marker n, retrying with backoff what fails for a reason that may
// pass (the transaction is aborted first, unless the marker shows it
// committed after all). n must be one more than the marker. It returns
// a [KafkaFatalError] when no retry can help: another producer took over
// the transactional id, or the client is not authorized.
func (s *KafkaSink) Transact(ctx context.Context, n uint64, records []SinkRecord) error {
	if !s.recovered {
		return errors.New("kafka sink: Transact before Recover")
	}
	if n != s.marker+1 {
		return fmt.Errorf("kafka sink: batch %d follows the marker %d in Kafka; expected batch %d", n, s.marker, s.marker+1)
	}
	out, err := s.records(records)
	if err != nil {
		return err
	}
	// unknown is set after a failed attempt: until the marker says what
	// it left, producing again could write the batch twice.
	unknown := false
	for attempt := 0; ; attempt++ {
		var err error
		if unknown {
			// Abort (a no-op if nothing is open) and find out what the
			// failed attempt left: a commit whose answer was lost may have
			// gone through.
			if err = s.cl.EndTransaction(ctx, kgo.TryAbort); err == nil {
				var m uint64
				if m, err = s.fetchMarker(ctx); err == nil {
					switch m {
					case n:
						s.log.Info("kafka sink: the transaction committed although its answer was an error", "batch", n)
						s.marker = n
						s.cfg.Metrics.transaction(s.cfg.Name, "committed")
						s.cfg.Metrics.wrote(s.cfg.Name, s.cfg.Topic, len(out))
						return nil
					case n - 1:
						s.cfg.Metrics.transaction(s.cfg.Name, "aborted")
						unknown = false
					default:
						return s.conflict(n, m)
					}
				}
			}
		}
		if err == nil {
			if err = s.transactOnce(ctx, n, out); err == nil {
				s.marker = n
				return nil
			}
			if errors.Is(err, errBeforeEnd) {
				return err
			}
			unknown = true
		}
		if fe := (*KafkaFatalError)(nil); errors.As(err, &fe) || ctx.Err() != nil {
			s.cfg.Metrics.transaction(s.cfg.Name, "aborted") // it never commits: the next producer on the id aborts it
			return err
		}
		wait := backoff(attempt)
		s.log.Warn("kafka sink: transaction failed; aborting it and retrying", "batch", n, "attempt", attempt+1,
			"brokers", strings.Join(s.cfg.Conn.Brokers, ","), "cause", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errBeforeEnd marks the error of the BeforeEnd hook, which leaves the
// transaction open.
var errBeforeEnd = errors.New("stopped before the transaction's end")

func (s *KafkaSink) transactOnce(ctx context.Context, n uint64, out []*kgo.Record) error {
	if err := s.cl.BeginTransaction(); err != nil {
		return s.explain(fmt.Errorf("kafka sink: beginning a transaction: %w", err))
	}
	start := time.Now()
	if err := s.cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return s.explain(fmt.Errorf("kafka sink, topic %s: %w", s.cfg.Topic, err))
	}
	elapsed := time.Since(start)
	if err := s.commitMarker(ctx, n); err != nil {
		return s.explain(err)
	}
	if s.cfg.BeforeEnd != nil {
		if err := s.cfg.BeforeEnd(); err != nil {
			return fmt.Errorf("%w: %w", errBeforeEnd, err)
		}
	}
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return s.explain(fmt.Errorf("kafka sink: committing batch %d: %w", n, err))
	}
	s.cfg.Metrics.produced(s.cfg.Name, s.cfg.Topic, len(out), elapsed)
	s.cfg.Metrics.transaction(s.cfg.Name, "committed")
	return nil
}

// commitMarker adds the marker n to the open transaction, as kgo's
// GroupTransactSession adds a group's offsets: AddOffsetsToTxn ties the
// group to the transaction, TxnOffsetCommit stages the offset, which
// becomes the group's committed offset when the transaction commits.
func (s *KafkaSink) commitMarker(ctx context.Context, n uint64) error {
	id, epoch, err := s.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("kafka sink: producer id: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = s.cfg.TransactionalID, id, epoch, s.cfg.MarkerGroup
	addResp, err := add.RequestWith(ctx, s.cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("kafka sink: adding the marker group %s to the transaction: %w", s.cfg.MarkerGroup, err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = s.cfg.TransactionalID, s.cfg.MarkerGroup, id, epoch
	req.Generation = -1 // not a group member: an admin-style commit
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.TopicID = s.cfg.Topic, s.topicID // the name below v6, the id from v6
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, int64(n), -1
	meta := "flowhost sink " + s.cfg.Name + " batch " + strconv.FormatUint(n, 10)
	p.Metadata = &meta
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return fmt.Errorf("kafka sink: committing the marker %d for group %s: %w", n, s.cfg.MarkerGroup, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("kafka sink: committing the marker %d for group %s: %w", n, s.cfg.MarkerGroup, err)
			}
		}
	}
	return nil
}

// KafkaFatalError is a Kafka error no retry can help with; its message
// says what to do.
type KafkaFatalError struct {
	Err error
	// Hint says what to do.
	Hint string
}

func (e *KafkaFatalError) Error() string { return e.Err.Error() + "; " + e.Hint }
func (e *KafkaFatalError) Unwrap() error { return e.Err }

// explain makes a fatal error a [KafkaFatalError] that says what to do;
// other errors are returned as they are.
func (s *KafkaSink) explain(err error) error {
	switch {
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.InvalidProducerIDMapping):
		return &KafkaFatalError{Err: err, Hint: fmt.Sprintf(
			"another producer (another flowhost?) took over the transactional id %s: run one pipeline per transactional id, or give this sink its own kafka.transactional_id", s.cfg.TransactionalID)}
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return &KafkaFatalError{Err: err, Hint: fmt.Sprintf("grant the user WRITE and DESCRIBE on the transactional id %s", s.cfg.TransactionalID)}
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return &KafkaFatalError{Err: err, Hint: fmt.Sprintf("grant the user WRITE and DESCRIBE on topic %s (and READ for the marker)", s.cfg.Topic)}
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return &KafkaFatalError{Err: err, Hint: fmt.Sprintf("grant the user READ on the consumer group %s, which holds the sink's marker", s.cfg.MarkerGroup)}
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return &KafkaFatalError{Err: err, Hint: "grant the user IDEMPOTENT_WRITE on the cluster"}
	}
	return err
}

// conflict is the error of a marker that is neither the batch nor the one
// before it.
func (s *KafkaSink) conflict(n, marker uint64) error {
	return &KafkaFatalError{
		Err: fmt.Errorf("kafka sink: the marker of group %s on %s/0 is %d, but this sink's store is writing batch %d (it expected %d or %d)",
			s.cfg.MarkerGroup, s.cfg.Topic, marker, n, n-1, n),
		Hint: "another writer uses this transactional id and marker group, or the topic or group was reset; " +
			"give each pipeline its own kafka.transactional_id and kafka.marker_group, or, to start over on purpose, delete the group's offsets and the pipeline's data directory",
	}
}

// Conflict is the error of a recovered marker that does not match what
// the store committed (pending: whether the store has a batch pending).
func (s *KafkaSink) Conflict(stored uint64, pending bool, marker uint64) error {
	if pending {
		return s.conflict(stored, marker)
	}
	return &KafkaFatalError{
		Err: fmt.Errorf("kafka sink: the marker of group %s on %s/0 is %d, but this sink's store committed %d batches",
			s.cfg.MarkerGroup, s.cfg.Topic, marker, stored),
		Hint: "another writer uses this transactional id and marker group, or the topic or group was reset; " +
			"give each pipeline its own kafka.transactional_id and kafka.marker_group, or, to start over on purpose, delete the group's offsets and the pipeline's data directory",
	}
}

// backoff is the wait before retry attempt+1: doubling from 100ms, at most
// 5s.
func backoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)
}

// Close closes the client. A transaction left open (by an error) stays
// open on the brokers until the next producer on the transactional id
// fences it or it times out; it never commits.
func (s *KafkaSink) Close() error {
	s.cl.Close()
	return nil
}
