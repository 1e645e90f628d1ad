package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/keys"
)

// KafkaStart is where a kafka source without a resume position starts.
type KafkaStart struct {
	// Kind is "earliest", "latest", "time" or "committed".
	Kind string
	// Time is the start time of Kind "time": each partition starts at its
	// first record with a timestamp at or after it.
	Time time.Time
	// Group is the consumer group of Kind "committed": each partition
	// starts at the group's committed offset, or its earliest without one.
	Group string
}

// EventTimeSource says where a kafka record's event time is: the JSON
// value's top-level Field or the Header, written in Format (unix_s,
// unix_ms, unix_us, unix_ns or rfc3339). Both empty: the Kafka timestamp.
type EventTimeSource struct {
	Field, Header, Format string
}

// KafkaSourceConfig configures a [KafkaSource].
type KafkaSourceConfig struct {
	Conn  KafkaConnection
	Topic string
	// Name is the source's name, in metrics and logs.
	Name string
	// Stream is the source stream of the records.
	Stream string
	// Partitions must be the topic's partition count: Kafka partition p
	// is source partition p.
	Partitions int
	// Start is where a first run starts (Resume nil).
	Start KafkaStart
	// Group, when set, is the consumer group to which the source commits
	// the offsets the host has made durable ([KafkaSource.Committed]), for
	// monitoring tools; it is never read back (the store is the source of
	// truth; only Start of Kind "committed" reads a group, on a first run).
	Group string
	// ReadUncommitted reads records of open and aborted transactions too;
	// by default the source reads committed records only.
	ReadUncommitted bool
	// Format is how a value is read: json (also ""), whose event time
	// may be a field of it, or raw (see [SourceFormat]).
	Format    SourceFormat
	EventTime EventTimeSource
	// Reject receives the records that cannot be decoded (a value that is
	// not JSON, an event time that cannot be read), named by topic,
	// partition and offset. Nil: the first one stops the run.
	Reject func(Rejection) error
	// Resume is a token from a record's [Record.Resume]: the next offset
	// of every partition. It overrides Start.
	Resume []byte
	// Metrics, when set, receives lag, records in, broker errors and
	// group commits.
	Metrics *KafkaMetrics
	// Logger receives the retried faults; nil: slog.Default().
	Logger *slog.Logger
	// Backlog, when set, is told how far the source has caught up the
	// records its topic held when Run started: total is the records
	// between the start offsets and the end offsets then (the last
	// stable offsets when reading committed records), done those of them
	// read so far; caughtUp is set on the last call, once every partition
	// reached its end offset of then. It is called from Run's goroutine.
	Backlog func(done, total int64, caughtUp bool)
	// MetadataInterval is how often the source checks that the topic
	// still exists with its partition count; default 30s.
	MetadataInterval time.Duration
}

// KafkaSource reads a Kafka topic. Each Kafka partition is a source
// partition; a record's WriteTimestamp is its Kafka timestamp (kgo gives
// the broker's LogAppendTime when the topic uses it, the producer's
// CreateTime otherwise; the host keeps it non-decreasing per partition),
// its EventTimestamp the configured one, its key the Kafka key (as
// [keys.OfBytes] writes it; no key, no message key), its payload the
// Kafka value in the source's format (json: it must be JSON; raw: its
// bytes as they are; envelope: the payload, event_ts, id and parents of the
// wrapper, whose write_ts must be left out).
//
// The records are emitted in all-or-nothing groups ([Record.More]) of at
// most [KafkaGroupRecords]: the last record of a group carries the next
// offset of every partition as its resume token, so that a durable run
// continues exactly after the last group it committed, whatever the start
// position or the consumer group's offsets say, at the cost of one token
// per group instead of one per record.
//
// Faults: the client retries unreachable and restarting brokers and
// retriable errors itself, with backoff; the source logs them with the
// broker and the cause and counts them. A fatal error (the topic deleted
// or its partition count changed, an authorization failure, offsets that
// Kafka no longer holds) ends Run with an error that says what to do.
type KafkaSource struct {
	cfg      KafkaSourceConfig
	decoder  *RecordDecoder
	log      *slog.Logger
	logLimit logLimit // of fetch warnings

	lagMu sync.Mutex
	lag   []int64 // per partition; -1: not fetched yet

	// committed is the latest token the host made durable, for the group
	// committer; commitWake tells it one is there.
	committed  atomic.Pointer[[]byte]
	commitWake chan struct{}
}

// KafkaGroupRecords bounds the records of one group a kafka source emits
// (see [KafkaSource]).
const KafkaGroupRecords = 1024

// NewKafkaSource checks cfg; it does not connect.
func NewKafkaSource(cfg KafkaSourceConfig) (*KafkaSource, error) {
	if cfg.Topic == "" {
		return nil, errors.New("kafka source: no topic")
	}
	if cfg.Partitions < 1 {
		return nil, fmt.Errorf("kafka source: partitions must be at least 1, not %d", cfg.Partitions)
	}
	if _, err := KafkaClientOpts(cfg.Conn); err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	if cfg.Resume != nil {
		next, err := parseKafkaResume(cfg.Resume)
		if err != nil {
			return nil, fmt.Errorf("kafka source: %w", err)
		}
		if len(next) != cfg.Partitions {
			return nil, fmt.Errorf("kafka source: the data directory holds offsets of %d partitions, the source has %d: use a fresh data directory after changing partitions", len(next), cfg.Partitions)
		}
	}
	if f := cfg.EventTime.Format; (cfg.EventTime.Field != "" || cfg.EventTime.Header != "") && !validTimeFormat(f) {
		return nil, fmt.Errorf("kafka source: event time format %q is unknown", f)
	}
	if cfg.Format == "" {
		cfg.Format = SourceJSON
	}
	if cfg.EventTime.Field != "" && cfg.EventTime.Header != "" {
		return nil, errors.New("kafka source: the event time is in a field or a header, not both")
	}
	d, err := NewRecordDecoder(cfg.Format, EventTimeSource{Field: cfg.EventTime.Field, Format: cfg.EventTime.Format})
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	if cfg.MetadataInterval <= 0 {
		cfg.MetadataInterval = 30 * time.Second
	}
	s := &KafkaSource{cfg: cfg, decoder: d, log: cfg.Logger, lag: make([]int64, cfg.Partitions), commitWake: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.Default()
	}
	for i := range s.lag {
		s.lag[i] = -1
	}
	return s, nil
}

// errKafkaFatal marks the errors that retrying cannot cure.
var errKafkaFatal = errors.New("fatal")

type kafkaFatal struct{ err error }

func (e kafkaFatal) Error() string         { return e.err.Error() }
func (e kafkaFatal) Unwrap() []error       { return []error{e.err, errKafkaFatal} }
func fatalf(format string, a ...any) error { return kafkaFatal{fmt.Errorf(format, a...)} }

// retriable reports whether err may pass by itself: a connection failure
// or a Kafka error code that Kafka calls retriable.
func retriable(err error) bool {
	if errors.Is(err, errKafkaFatal) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true // dial and I/O errors, timeouts
}

// Run reads the topic until ctx is cancelled. It fails at once when the
// topic does not exist or has another partition count than the source,
// and on every fatal error (see [KafkaSource]); it retries the others.
func (s *KafkaSource) Run(ctx context.Context, emit func(Record) error) error {
	cfg := &s.cfg
	opts, err := KafkaClientOpts(cfg.Conn)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	isolation := kgo.ReadCommitted()
	if cfg.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	client := "source " + cfg.Name
	opts = append(opts, kgo.FetchIsolationLevel(isolation),
		// Offsets Kafka no longer holds must stop the run, not be skipped.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		// Retriable fetch errors reach us only to be logged and counted:
		// kgo retries them.
		kgo.KeepRetryableFetchErrors(),
		// kgo answers metadata requests from a cache this young: the
		// topic watch must see changes within its interval.
		kgo.MetadataMinAge(min(cfg.MetadataInterval, 5*time.Second)),
		kgo.WithHooks(cfg.Metrics.BrokerHook(client, s.log)))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var next []int64
	for attempt := 0; ; attempt++ {
		if next, err = s.startOffsets(ctx, adm); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retriable(err) {
			return fmt.Errorf("kafka source, topic %s: %w", cfg.Topic, err)
		}
		cfg.Metrics.CountBrokerError(client, "", err)
		wait := kafkaBackoff(attempt)
		s.log.Warn("kafka source cannot list its start offsets; retrying", "source", cfg.Name, "topic", cfg.Topic, "cause", KafkaErrorCause(err), "err", err, "retry_in", wait)
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
	assign := make(map[int32]kgo.Offset, len(next))
	for p, o := range next {
		assign[int32(p)] = kgo.NewOffset().At(o)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: assign})
	backlog := s.startBacklog(ctx, adm, next)

	run, stop := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after stop, which ends the goroutines
	defer stop(nil)
	wg.Add(1)
	go func() { defer wg.Done(); s.watchTopic(run, adm, stop) }()
	if cfg.Group != "" {
		wg.Add(1)
		go func() { defer wg.Done(); s.commitGroup(run, adm) }()
	}
	var mIn prometheus.Counter
	if cfg.Metrics != nil {
		mIn = cfg.Metrics.RecordsIn.WithLabelValues(cfg.Name, cfg.Topic)
	}
	chunk := make([]Record, 0, KafkaGroupRecords)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		chunk[len(chunk)-1].Resume = kafkaResume(next)
		defer func() { clear(chunk); chunk = chunk[:0] }()
		for i := range chunk {
			chunk[i].More = i < len(chunk)-1
			if err := emit(chunk[i]); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		fetches := cl.PollFetches(run)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := context.Cause(run); err != nil {
			return fmt.Errorf("kafka source, topic %s: %w", cfg.Topic, err)
		}
		if err := s.fetchErrors(run, adm, client, fetches); err != nil {
			return fmt.Errorf("kafka source, topic %s: %w", cfg.Topic, err)
		}
		var emitErr error
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if emitErr != nil || fp.Topic != cfg.Topic {
				return
			}
			for _, r := range fp.Records {
				if emitErr = s.handle(r, next, &chunk); emitErr != nil {
					return
				}
				if len(chunk) == KafkaGroupRecords {
					if emitErr = flush(); emitErr != nil {
						return
					}
				}
			}
			if mIn != nil {
				mIn.Add(float64(len(fp.Records)))
			}
			if p := int(fp.Partition); p >= 0 && p < len(next) && fp.HighWatermark >= 0 {
				s.setLag(p, fp.HighWatermark-next[p])
			}
		})
		if emitErr == nil {
			emitErr = flush()
		}
		if emitErr != nil {
			return emitErr
		}
		// After the flush: what is reported as read was handed over.
		backlog.report(next)
	}
}

// kafkaBacklog follows the catch-up of the records a topic held when the
// source started (KafkaSourceConfig.Backlog).
type kafkaBacklog struct {
	fn         func(done, total int64, caughtUp bool)
	start, end []int64
	total      int64
	last       int64 // done at the last report; -1: none yet
	caughtUp   bool
}

// startBacklog lists the end offsets (one attempt: without them the
// source runs, with no backlog figures) and reports the backlog behind
// them; nil without a Backlog hook.
func (s *KafkaSource) startBacklog(ctx context.Context, adm *kadm.Client, next []int64) *kafkaBacklog {
	cfg := &s.cfg
	if cfg.Backlog == nil {
		return nil
	}
	var listed kadm.ListedOffsets
	var err error
	if cfg.ReadUncommitted {
		listed, err = adm.ListEndOffsets(ctx, cfg.Topic)
	} else {
		listed, err = adm.ListCommittedOffsets(ctx, cfg.Topic)
	}
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		s.log.Warn("kafka source cannot list its end offsets: no backlog progress this run", "source", cfg.Name, "topic", cfg.Topic, "err", err)
		return nil
	}
	b := &kafkaBacklog{fn: cfg.Backlog, start: slices.Clone(next), end: make([]int64, len(next)), last: -1}
	for p := range next {
		o, ok := listed.Lookup(cfg.Topic, int32(p))
		b.end[p] = next[p]
		if ok && o.Offset > next[p] {
			b.end[p] = o.Offset
		}
		b.total += b.end[p] - next[p]
	}
	b.report(next)
	return b
}

// report tells the hook the backlog read up to next, when it changed.
func (b *kafkaBacklog) report(next []int64) {
	if b == nil || b.caughtUp {
		return
	}
	var done int64
	caughtUp := true
	for p := range b.end {
		done += min(next[p], b.end[p]) - b.start[p]
		caughtUp = caughtUp && next[p] >= b.end[p]
	}
	if done == b.last && !caughtUp {
		return
	}
	b.last, b.caughtUp = done, caughtUp
	b.fn(done, b.total, caughtUp)
}

// kafkaBackoff is the wait before retry attempt+1: 100ms doubling to 5s.
func kafkaBackoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchErrors logs and counts the retriable errors of fetches (kgo goes
// on retrying them) and returns the first fatal one, saying what to do.
// It ignores the client closing and contexts ending (Run reports those).
func (s *KafkaSource) fetchErrors(ctx context.Context, adm *kadm.Client, client string, fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		err := fe.Err
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			continue
		}
		s.cfg.Metrics.CountBrokerError(client, "", err)
		var loss *kgo.ErrDataLoss
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange):
			return fatalf("partition %d: the offset to read next is no longer in Kafka (retention deleted records flowhost had not read, or the topic was recreated), so records would be lost: %v. To go on from what Kafka holds, start with a fresh data directory (or replay what the store holds first)", fe.Partition, err)
		case errors.As(err, &loss):
			return fatalf("partition %d: %v: Kafka lost records (an unclean leader election?); check the cluster, then start with a fresh data directory to go on", fe.Partition, err)
		case errors.Is(err, kerr.UnknownTopicID):
			return fatalf("partition %d: the topic was deleted and created again: its offsets are new, so the stored ones mean nothing; start with a fresh data directory", fe.Partition)
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.SaslAuthenticationFailed):
			return fatalf("partition %d: %v: grant the source's principal Read and Describe on topic %s, or fix its sasl settings, then run again (it resumes where it stopped)", fe.Partition, err, s.cfg.Topic)
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			if gone := s.topicGone(ctx, adm); gone != nil {
				return gone
			}
		case !retriable(err):
			return fatalf("partition %d: %v: the error is not retriable; fix its cause and run again (a run with a data directory resumes where it stopped)", fe.Partition, err)
		}
		if !s.logLimit.allow(fmt.Sprintf("%d %s", fe.Partition, KafkaErrorCause(err))) {
			continue
		}
		s.log.Warn("kafka fetch failed; the client retries", "source", s.cfg.Name, "topic", s.cfg.Topic, "partition", fe.Partition, "cause", KafkaErrorCause(err), "err", err)
	}
	return nil
}

// topicGone returns a fatal error when the topic no longer exists or has
// another partition count, nil when it is as the source needs it or
// cannot be looked at now (a fault retried later).
func (s *KafkaSource) topicGone(ctx context.Context, adm *kadm.Client) error {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(lctx, s.cfg.Topic)
	if err != nil {
		return nil
	}
	td, ok := topics[s.cfg.Topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return fatalf("the topic was deleted: create it again (records it held and flowhost had not read are lost) or remove the source")
	}
	if td.Err == nil && len(td.Partitions) != s.cfg.Partitions {
		return fatalf("the topic now has %d partitions and the source %d: each Kafka partition is a source partition, so the run cannot go on; set the source's partitions to %d and start with a fresh data directory", len(td.Partitions), s.cfg.Partitions, len(td.Partitions))
	}
	return nil
}

// watchTopic checks the topic every MetadataInterval and stops the run
// with the fatal error topicGone finds.
func (s *KafkaSource) watchTopic(ctx context.Context, adm *kadm.Client, stop context.CancelCauseFunc) {
	t := time.NewTicker(s.cfg.MetadataInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.topicGone(ctx, adm); err != nil {
				stop(err)
				return
			}
		}
	}
}

// Committed tells the source that the host has made the records up to
// the one carrying resume durable. With a Group it commits those offsets
// to the group, asynchronously: it never blocks, and a failed commit is
// only logged and counted (the next one carries on).
func (s *KafkaSource) Committed(resume []byte) {
	if s.cfg.Group == "" {
		return
	}
	s.committed.Store(&resume)
	select {
	case s.commitWake <- struct{}{}:
	default:
	}
}

// commitGroup commits the latest token Committed was given to the group,
// until ctx ends.
func (s *KafkaSource) commitGroup(ctx context.Context, adm *kadm.Client) {
	var done []byte
	var mOK, mErr prometheus.Counter
	if m := s.cfg.Metrics; m != nil {
		mOK, mErr = m.GroupCommits.WithLabelValues(s.cfg.Name, "ok"), m.GroupCommits.WithLabelValues(s.cfg.Name, "error")
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.commitWake:
		}
		tok := s.committed.Load()
		if tok == nil || bytes.Equal(*tok, done) {
			continue
		}
		next, err := parseKafkaResume(*tok)
		if err != nil { // the host gives back what the source made
			s.log.Error("kafka source: a committed resume position does not parse", "source", s.cfg.Name, "err", err)
			continue
		}
		var offs kadm.Offsets
		for p, o := range next {
			offs.Add(kadm.Offset{Topic: s.cfg.Topic, Partition: int32(p), At: o, LeaderEpoch: -1})
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := adm.CommitOffsets(cctx, s.cfg.Group, offs)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if mErr != nil {
				mErr.Inc()
			}
			s.log.Warn("kafka source: committing offsets to the consumer group failed (for monitoring only; the store holds the truth)", "source", s.cfg.Name, "group", s.cfg.Group, "cause", KafkaErrorCause(err), "err", err)
			continue
		}
		done = *tok
		if mOK != nil {
			mOK.Inc()
		}
	}
}

// setLag records partition p's lag, for Lag and the metric.
func (s *KafkaSource) setLag(p int, lag int64) {
	lag = max(lag, 0)
	s.lagMu.Lock()
	s.lag[p] = lag
	s.lagMu.Unlock()
	if m := s.cfg.Metrics; m != nil {
		m.Lag.WithLabelValues(s.cfg.Name, s.cfg.Topic, strconv.Itoa(p)).Set(float64(lag))
	}
}

// KafkaPartitionLag is the consumer lag of one partition of a kafka
// source: its high watermark at the last fetch minus the next offset the
// source reads (with read_committed, records of open transactions count
// until they are decided).
type KafkaPartitionLag struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Lag       int64  `json:"lag"`
}

// Lag returns the lag of every partition fetched so far; it is safe to
// call from any goroutine.
func (s *KafkaSource) Lag() []KafkaPartitionLag {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	var out []KafkaPartitionLag
	for p, l := range s.lag {
		if l >= 0 {
			out = append(out, KafkaPartitionLag{Topic: s.cfg.Topic, Partition: p, Lag: l})
		}
	}
	return out
}

// handle decodes one record into *chunk or rejects it, and moves next
// past it.
func (s *KafkaSource) handle(r *kgo.Record, next []int64, chunk *[]Record) error {
	p := int(r.Partition)
	if p < 0 || p >= len(next) {
		return fmt.Errorf("kafka source, topic %s: a record of partition %d, which the source does not have", s.cfg.Topic, p)
	}
	next[p] = r.Offset + 1
	origin := fmt.Sprintf("kafka:%s/%d@%d", r.Topic, r.Partition, r.Offset)
	rec := Record{
		Stream: s.cfg.Stream, Partition: p,
		Write: r.Timestamp.UnixNano(), HasWrite: true,
		Payload: r.Value, Origin: origin, Key: keys.OfBytes(r.Key),
	}
	lr, err := s.decoder.decode(r.Value, false)
	event := lr.Event
	if err == nil && lr.HasWrite {
		// The seed's WriteTimestamp of a Kafka record is the broker's.
		err = errors.New("write_ts: a kafka record's write time is its Kafka timestamp; leave write_ts out of the envelope")
	}
	if err == nil && !lr.HasEvent {
		event, err = s.eventTime(r)
	}
	if err != nil {
		rej := Rejection{Origin: origin, Stage: StageIngest, Err: fmt.Errorf("topic %s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err), Record: r.Value}
		if s.cfg.Reject == nil {
			return rej.Err
		}
		return s.cfg.Reject(rej)
	}
	rec.Payload, rec.Event, rec.HasEvent, rec.ID, rec.Parents = lr.Payload, event, true, lr.ID, lr.Parents
	*chunk = append(*chunk, rec)
	return nil
}

// eventTime returns the event time of r when its value has none (the
// decoder reads a field): from the header, or the Kafka timestamp.
func (s *KafkaSource) eventTime(r *kgo.Record) (int64, error) {
	et := &s.cfg.EventTime
	switch {
	case et.Header != "":
		for _, h := range r.Headers {
			if h.Key == et.Header {
				t, err := ParseEventTime(string(h.Value), et.Format)
				if err != nil {
					return 0, fmt.Errorf("header %s: %w", et.Header, err)
				}
				return t, nil
			}
		}
		return 0, fmt.Errorf("no header %s (the event time)", et.Header)
	}
	return r.Timestamp.UnixNano(), nil
}

// startOffsets returns the next offset of every partition: from the resume
// token, else from the start position. It checks the partition count.
func (s *KafkaSource) startOffsets(ctx context.Context, adm *kadm.Client) ([]int64, error) {
	cfg := &s.cfg
	topics, err := adm.ListTopics(ctx, cfg.Topic)
	if err != nil {
		return nil, err
	}
	td, ok := topics[cfg.Topic]
	if !ok || td.Err != nil {
		cause := "it does not exist"
		if ok {
			cause = td.Err.Error()
		}
		if ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) && retriable(td.Err) {
			return nil, fmt.Errorf("cannot read the topic: %w", td.Err)
		}
		return nil, fatalf("cannot read the topic: %s", cause)
	}
	if n := len(td.Partitions); n != cfg.Partitions {
		return nil, fatalf("the topic has %d partitions and the source %d: set the source's partitions to %d (each Kafka partition is a source partition)", n, cfg.Partitions, n)
	}
	if cfg.Resume != nil {
		return parseKafkaResume(cfg.Resume)
	}
	next := make([]int64, cfg.Partitions)
	var listed kadm.ListedOffsets
	switch cfg.Start.Kind {
	case "", "earliest", "committed":
		listed, err = adm.ListStartOffsets(ctx, cfg.Topic)
	case "latest":
		if cfg.ReadUncommitted {
			listed, err = adm.ListEndOffsets(ctx, cfg.Topic)
		} else {
			listed, err = adm.ListCommittedOffsets(ctx, cfg.Topic)
		}
	case "time":
		listed, err = adm.ListOffsetsAfterMilli(ctx, cfg.Start.Time.UnixMilli(), cfg.Topic)
	default:
		return nil, fatalf("start %q is unknown", cfg.Start.Kind)
	}
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the start offsets: %w", err)
	}
	for p := range next {
		o, ok := listed.Lookup(cfg.Topic, int32(p))
		if !ok || o.Offset < 0 {
			return nil, fmt.Errorf("no start offset listed for partition %d", p)
		}
		next[p] = o.Offset
	}
	if cfg.Start.Kind == "committed" {
		committed, err := adm.FetchOffsets(ctx, cfg.Start.Group)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("fetching the committed offsets of group %s: %w", cfg.Start.Group, err)
		}
		for p := range next {
			if o, ok := committed.Lookup(cfg.Topic, int32(p)); ok && o.At >= next[p] {
				next[p] = o.At
			}
		}
	}
	return next, nil
}

// kafkaResume is the resume token of next offsets: a JSON array, one
// offset per partition.
func kafkaResume(next []int64) []byte {
	b := make([]byte, 0, 2+len(next)*8)
	b = append(b, '[')
	for i, o := range next {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, o, 10)
	}
	return append(b, ']')
}

func parseKafkaResume(tok []byte) ([]int64, error) {
	var next []int64
	if err := json.Unmarshal(tok, &next); err != nil || len(next) == 0 {
		return nil, fmt.Errorf("the stored resume position %q is not a list of Kafka offsets", tok)
	}
	for p, o := range next {
		if o < 0 {
			return nil, fmt.Errorf("the stored resume position has offset %d for partition %d", o, p)
		}
	}
	return next, nil
}

func validTimeFormat(f string) bool {
	switch f {
	case "unix_s", "unix_ms", "unix_us", "unix_ns", "rfc3339":
		return true
	}
	return false
}

// parseEventTimeJSON reads an event time from a JSON value: a number for
// the unix formats, a string for rfc3339 (a string of digits is taken for
// a unix format too, as some producers quote their numbers).
func parseEventTimeJSON(raw json.RawMessage, format string) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return ParseEventTime(s, format)
	}
	if format == "rfc3339" {
		return 0, fmt.Errorf("expected an RFC 3339 string; got %s", truncate(string(raw), 64))
	}
	return ParseEventTime(string(raw), format)
}

// ParseEventTime reads an event time written in format: unix_s, unix_ms,
// unix_us or unix_ns (an integer count since the Unix epoch), or rfc3339.
// It returns nanoseconds since the Unix epoch and fails on anything else,
// a time outside the int64 nanosecond range included.
func ParseEventTime(text, format string) (int64, error) {
	text = strings.TrimSpace(text)
	var unit int64
	switch format {
	case "unix_s":
		unit = int64(time.Second)
	case "unix_ms":
		unit = int64(time.Millisecond)
	case "unix_us":
		unit = int64(time.Microsecond)
	case "unix_ns":
		unit = 1
	case "rfc3339":
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return 0, fmt.Errorf("expected an RFC 3339 time such as 2024-05-01T10:00:00Z; got %q", truncate(text, 64))
		}
		if t.Year() < 1678 || t.Year() > 2261 {
			return 0, fmt.Errorf("%s is outside the years 1678 to 2261 that int64 nanoseconds hold", text)
		}
		return t.UnixNano(), nil
	default:
		return 0, fmt.Errorf("unknown time format %q", format)
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("expected an integer (%s); got %q", format, truncate(text, 64))
	}
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		return 0, fmt.Errorf("%d %s is outside the int64 nanosecond range", n, format)
	}
	return n * unit, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ResumeCommitter is a source that hears which resume position the host
// has made durable: with a data directory, the host calls Committed after
// each commit of the source's records with the Resume of the last record
// committed. Committed must not block.
type ResumeCommitter interface {
	Committed(resume []byte)
}

var _ ResumeCommitter = (*KafkaSource)(nil)
