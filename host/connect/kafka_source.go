package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	// Stream is the source stream of the records.
	Stream string
	// Partitions must be the topic's partition count: Kafka partition p
	// is source partition p.
	Partitions int
	// Start is where a first run starts (Resume nil).
	Start KafkaStart
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
}

// KafkaSource reads a Kafka topic. Each Kafka partition is a source
// partition; a record's WriteTimestamp is its Kafka timestamp (the
// broker's LogAppendTime when the topic uses it, the producer's
// CreateTime otherwise), its EventTimestamp the configured one, its
// payload the Kafka value, which must be JSON. Every record carries the
// next offset of every partition as its resume token, so that a durable
// run continues exactly after the last record it committed, whatever the
// start position or the consumer group's offsets say.
type KafkaSource struct {
	cfg     KafkaSourceConfig
	decoder *RecordDecoder
}

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
	if cfg.Format == SourceEnvelope {
		return nil, errors.New("kafka source: a record's write time is its Kafka timestamp; format envelope is for file and HTTP sources")
	}
	if cfg.EventTime.Field != "" && cfg.EventTime.Header != "" {
		return nil, errors.New("kafka source: the event time is in a field or a header, not both")
	}
	d, err := NewRecordDecoder(cfg.Format, EventTimeSource{Field: cfg.EventTime.Field, Format: cfg.EventTime.Format})
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	return &KafkaSource{cfg: cfg, decoder: d}, nil
}

// Run reads the topic until ctx is cancelled. It fails at once when the
// topic does not exist or has another partition count than the source.
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
	cl, err := kgo.NewClient(append(opts, kgo.FetchIsolationLevel(isolation))...)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	defer cl.Close()
	next, err := s.startOffsets(ctx, kadm.NewClient(cl))
	if err != nil {
		return fmt.Errorf("kafka source, topic %s: %w", cfg.Topic, err)
	}
	assign := make(map[int32]kgo.Offset, len(next))
	for p, o := range next {
		assign[int32(p)] = kgo.NewOffset().At(o)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: assign})
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetchError(fetches); err != nil {
			return fmt.Errorf("kafka source, topic %s: %w", cfg.Topic, err)
		}
		var emitErr error
		fetches.EachRecord(func(r *kgo.Record) {
			if emitErr != nil {
				return
			}
			emitErr = s.handle(r, next, emit)
		})
		if emitErr != nil {
			return emitErr
		}
	}
}

// fetchError returns the first error of fetches that is not the client
// closing or a context ending (Run reports those as ctx.Err()).
func fetchError(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, kgo.ErrClientClosed) {
			continue
		}
		return fmt.Errorf("partition %d: %w", fe.Partition, fe.Err)
	}
	return nil
}

// handle emits or rejects one record and moves next past it.
func (s *KafkaSource) handle(r *kgo.Record, next []int64, emit func(Record) error) error {
	p := int(r.Partition)
	if p < 0 || p >= len(next) {
		return fmt.Errorf("kafka source, topic %s: a record of partition %d, which the source does not have", s.cfg.Topic, p)
	}
	next[p] = r.Offset + 1
	origin := fmt.Sprintf("kafka:%s/%d@%d", r.Topic, r.Partition, r.Offset)
	rec := Record{
		Stream: s.cfg.Stream, Partition: p,
		Write: r.Timestamp.UnixNano(), HasWrite: true,
		Payload: r.Value, Origin: origin, Resume: kafkaResume(next),
	}
	lr, err := s.decoder.decode(r.Value, false)
	event := lr.Event
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
	rec.Payload, rec.Event, rec.HasEvent = lr.Payload, event, true
	return emit(rec)
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
		return nil, fmt.Errorf("cannot read the topic: %s", cause)
	}
	if n := len(td.Partitions); n != cfg.Partitions {
		return nil, fmt.Errorf("the topic has %d partitions and the source %d: set the source's partitions to %d (each Kafka partition is a source partition)", n, cfg.Partitions, n)
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
		return nil, fmt.Errorf("start %q is unknown", cfg.Start.Kind)
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
