package connect

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

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
}

// KafkaSink produces records to a topic, at least once: with the
// idempotent producer and acks from every in-sync replica (kgo's
// defaults), Write returns only when the brokers acknowledged every
// record, so the host's sink position never passes an unacknowledged
// one; a crash between the acknowledgement and the host's commit writes
// those records again. Each record carries the headers
// flowhost-message-id, flowhost-event-ts, flowhost-alignment-ts (decimal
// nanoseconds) and flowhost-parents (comma-separated message ids).
type KafkaSink struct {
	cfg  KafkaSinkConfig
	cl   *kgo.Client
	keys *keys.Extractor
}

// NewKafkaSink checks cfg and makes the client; it does not wait for the
// brokers.
func NewKafkaSink(cfg KafkaSinkConfig) (*KafkaSink, error) {
	if cfg.Topic == "" {
		return nil, errors.New("kafka sink: no topic")
	}
	s := &KafkaSink{cfg: cfg}
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
	if s.cl, err = kgo.NewClient(append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))...); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return s, nil
}

// Write produces records and waits for every acknowledgement.
func (s *KafkaSink) Write(ctx context.Context, records []SinkRecord) error {
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
			return fmt.Errorf("kafka sink, record %s: %w", r.MessageID, err)
		}
		if s.cfg.PayloadOnly {
			kr.Value = payload
		} else if kr.Value, err = r.JSONLine(); err != nil {
			return fmt.Errorf("kafka sink, record %s: %w", r.MessageID, err)
		}
		key := r.Key
		if s.keys != nil {
			if key, err = s.keys.Key(payload); err != nil {
				return fmt.Errorf("kafka sink, record %s: key_fields: %w", r.MessageID, err)
			}
		}
		if key != "" {
			kr.Key = []byte(key)
		}
		out[i] = kr
	}
	if err := s.cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return fmt.Errorf("kafka sink, topic %s: %w", s.cfg.Topic, err)
	}
	return nil
}

// Close flushes nothing (Write waits for its records) and closes the client.
func (s *KafkaSink) Close() error {
	s.cl.Close()
	return nil
}
