package connect

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/connect/kafkatest"
)

// kafkaBatch makes count records with ids prefix-0.. and payloads
// {"n":from..}, keyed over keys keys.
func kafkaBatch(prefix string, from, count, keys int) []SinkRecord {
	recs := make([]SinkRecord, count)
	for i := range recs {
		n := from + i
		recs[i] = SinkRecord{Stream: "s", MessageID: fmt.Sprintf("%s-%d", prefix, n), Key: fmt.Sprintf("k%d", n%keys),
			Payload: fmt.Appendf(nil, `{"n":%d}`, n)}
	}
	return recs
}

func txnSink(t *testing.T, brokers []string, topic, txnID string, hook func() error) *KafkaSink {
	t.Helper()
	s, err := NewKafkaSink(KafkaSinkConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, PayloadOnly: true,
		TransactionalID: txnID, MarkerGroup: txnID + "-marker", Name: "out", BeforeEnd: hook})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// ids returns the message ids of the records, partition by partition.
func ids(parts [][]*kgo.Record) [][]string {
	out := make([][]string, len(parts))
	for p, recs := range parts {
		for _, r := range recs {
			out[p] = append(out[p], kafkatest.Header(r, "flowhost-message-id"))
		}
	}
	return out
}

// partitionsOf returns the ids of recs as kgo's default partitioner
// spreads them over partitions, each in the order written.
func wantByPartition(t *testing.T, parts [][]*kgo.Record, recs []SinkRecord) {
	t.Helper()
	key := map[string]string{}
	for _, r := range recs {
		key[r.MessageID] = r.Key
	}
	seen := map[string]int{}
	partOfKey := map[string]int{}
	for p, ps := range ids(parts) {
		for _, id := range ps {
			seen[id]++
			k := key[id]
			if q, ok := partOfKey[k]; ok {
				require.Equal(t, q, p, "key %s in two partitions", k)
			}
			partOfKey[k] = p
		}
	}
	for _, r := range recs {
		require.Equal(t, 1, seen[r.MessageID], "record %s seen %d times", r.MessageID, seen[r.MessageID])
	}
	require.Len(t, seen, len(recs), "records that were never written")
	// Per partition, in the order written.
	for p, ps := range ids(parts) {
		var want []string
		for _, r := range recs {
			if partOfKey[r.Key] == p {
				want = append(want, r.MessageID)
			}
		}
		require.Equal(t, want, ps, "partition %d out of order", p)
	}
}

func metricOf(t *testing.T, m prometheus.Metric) *dto.Metric {
	t.Helper()
	var out dto.Metric
	require.NoError(t, m.Write(&out))
	return &out
}

var errCrash = errors.New("injected crash")

func TestKafkaSinkTransactionsSurviveACrashBeforeTheEnd(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 3)
	const txnID = "flowhost-test-crash"
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	metrics, err := NewKafkaSinkMetrics(reg)
	require.NoError(t, err)

	first := txnSink(t, brokers, topic, txnID, nil)
	first.cfg.Metrics = metrics
	m, err := first.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, m, "a new group has no marker")
	b1 := kafkaBatch("a", 0, 50, 7)
	require.NoError(t, first.Transact(ctx, 1, b1))
	require.Error(t, first.Transact(ctx, 3, b1), "a batch that skips one is refused")
	require.NoError(t, first.Close())

	// The second producer stops after the batch and the marker are in its
	// transaction, before it ends: a crash leaves it open.
	b2 := kafkaBatch("a", 50, 50, 7)
	crashing := txnSink(t, brokers, topic, txnID, func() error { return errCrash })
	m, err = crashing.Recover(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, m)
	require.ErrorIs(t, crashing.Transact(ctx, 2, b2), errCrash)
	require.NoError(t, crashing.Close())

	// The next one on the same id fences it: its transaction is aborted
	// and the marker is still 1, so batch 2 is written again.
	again := txnSink(t, brokers, topic, txnID, nil)
	again.cfg.Metrics = metrics
	m, err = again.Recover(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, m, "the crashed transaction must not have committed")
	require.NoError(t, again.Write(ctx, b2), "Write writes the next batch")
	m, err = again.Recover(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, m)

	wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 3), append(b1, b2...))
	require.Equal(t, 2.0, metricOf(t, metrics.transactions.WithLabelValues("out", "committed")).GetCounter().GetValue())
	require.Equal(t, 100.0, metricOf(t, metrics.recordsOut.WithLabelValues("out", topic)).GetCounter().GetValue())
	h := metrics.produceSeconds.WithLabelValues("out", topic).(prometheus.Metric)
	require.EqualValues(t, 2, metricOf(t, h).GetHistogram().GetSampleCount(), "one produce latency per committed batch")
}

func TestKafkaSinkZombieIsFenced(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 2)
	const txnID = "flowhost-test-zombie"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := txnSink(t, brokers, topic, txnID, nil)
	_, err := old.Recover(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Transact(ctx, 1, kafkaBatch("old", 0, 10, 3)))

	newer := txnSink(t, brokers, topic, txnID, nil)
	m, err := newer.Recover(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, m)

	err = old.Transact(ctx, 2, kafkaBatch("zombie", 0, 10, 3))
	var fatal *KafkaFatalError
	require.ErrorAs(t, err, &fatal, "the old producer is fenced: %v", err)
	require.Contains(t, err.Error(), "took over the transactional id "+txnID)
	require.True(t, errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch), "%v", err)

	require.NoError(t, newer.Transact(ctx, 2, kafkaBatch("new", 0, 10, 3)))
	want := append(kafkaBatch("old", 0, 10, 3), kafkaBatch("new", 0, 10, 3)...)
	wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 2), want) // no zombie record
}

func TestKafkaSinkRecoverRefusesAMissingTopic(t *testing.T) {
	brokers, _ := kafkatest.Topic(t, 1)
	s := txnSink(t, brokers, "no-such-topic", "flowhost-test-missing", nil)
	_, err := s.Recover(context.Background())
	require.ErrorContains(t, err, "topic no-such-topic does not exist; create it")
}

func TestKafkaSinkConflictSaysWhatToDo(t *testing.T) {
	s := &KafkaSink{cfg: KafkaSinkConfig{Topic: "t", MarkerGroup: "g", TransactionalID: "x"}}
	tests := []struct {
		name    string
		stored  uint64
		pending bool
		marker  uint64
		want    string
	}{
		{"marker ahead of a pending batch", 4, true, 7, "the marker of group g on t/0 is 7, but this sink's store is writing batch 4 (it expected 3 or 4)"},
		{"marker behind a pending batch", 4, true, 1, "is 1, but this sink's store is writing batch 4"},
		{"marker ahead of the committed", 4, false, 9, "is 9, but this sink's store committed 4 batches"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Conflict(tt.stored, tt.pending, tt.marker)
			var fatal *KafkaFatalError
			require.ErrorAs(t, err, &fatal)
			require.Contains(t, err.Error(), tt.want)
			require.Contains(t, err.Error(), "give each pipeline its own kafka.transactional_id")
		})
	}
}

func TestKafkaSinkAtLeastOnceWritesEveryRecord(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 2)
	s, err := NewKafkaSink(KafkaSinkConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, PayloadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.Transactional())
	recs := kafkaBatch("alo", 0, 40, 5)
	require.NoError(t, s.Write(context.Background(), recs[:20]))
	require.NoError(t, s.Write(context.Background(), recs[20:]))
	wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 2), recs)
}
