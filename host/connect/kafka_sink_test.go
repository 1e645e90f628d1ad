package connect

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// Faults the broker injects into the second transaction: the ones that
// may pass are retried (by kgo, or by the sink, which aborts and redoes
// the batch) and every record is still there once; the fatal ones stop
// the sink with what to do.
func TestKafkaSinkFaults(t *testing.T) {
	const txnID = "flowhost-test-faults"
	tests := []struct {
		name  string
		fault kfake.Fault
		// fatal is a part of the error's message; "" means the batch
		// goes through.
		fatal string
		// redone: the sink aborted a transaction and redid the batch.
		redone bool
	}{
		{"produce times out after it applied (kgo retries, the broker dedups)", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut}, "", false},
		{"marker commit fails", kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownServerError}, "", true},
		{"marker commit times out after it applied", kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.RequestTimedOut}, "", true},
		{"marker group not authorized", kfake.Fault{Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: kerr.GroupAuthorizationFailed, Count: -1},
			"grant the user READ on the consumer group " + txnID + "-marker", false},
		{"transactional id not authorized", kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.TransactionalIDAuthorizationFailed, Count: -1},
			"grant the user WRITE and DESCRIBE on the transactional id " + txnID, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, topic := kafkatest.FakeTopic(t, 2)
			brokers := c.ListenAddrs()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			reg := prometheus.NewRegistry()
			metrics, err := NewKafkaSinkMetrics(reg)
			require.NoError(t, err)
			s := txnSink(t, brokers, topic, txnID, nil)
			s.cfg.Metrics = metrics
			_, err = s.Recover(ctx)
			require.NoError(t, err)
			b1, b2 := kafkaBatch("f", 0, 30, 4), kafkaBatch("f", 30, 30, 4)
			require.NoError(t, s.Transact(ctx, 1, b1))

			h := c.Fault(tt.fault)
			err = s.Transact(ctx, 2, b2)
			h.Remove()
			require.Positive(t, h.Hits(), "the fault was never injected")
			aborted := metricOf(t, metrics.transactions.WithLabelValues("out", "aborted")).GetCounter().GetValue()
			if tt.fatal != "" {
				var fatal *KafkaFatalError
				require.ErrorAs(t, err, &fatal)
				require.ErrorContains(t, err, tt.fatal)
				require.NoError(t, s.Close())
				// The next sink on the id finds batch 2 never committed.
				again := txnSink(t, brokers, topic, txnID, nil)
				m, err := again.Recover(ctx)
				require.NoError(t, err)
				require.EqualValues(t, 1, m)
				wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 2), b1)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.redone, aborted > 0, "aborted transactions: %v", aborted)
			require.Equal(t, 2.0, metricOf(t, metrics.transactions.WithLabelValues("out", "committed")).GetCounter().GetValue())
			wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 2), append(b1, b2...))
		})
	}
}

// A broker restarting on its data directory, between two transactions and
// inside one (after the batch and the marker, before the commit): the
// sink reconnects, redoes what the restart lost, and every record is
// there once.
func TestKafkaSinkSurvivesBrokerRestarts(t *testing.T) {
	dir := t.TempDir()
	start := func(port int) *kfake.Cluster {
		opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(dir)} // binds 127.0.0.1
		if port != 0 {
			opts = append(opts, kfake.Ports(port))
		}
		c, err := kfake.NewCluster(opts...)
		require.NoError(t, err)
		return c
	}
	c := start(0)
	t.Cleanup(func() { c.Close() })
	brokers := c.ListenAddrs()
	_, portText, err := net.SplitHostPort(brokers[0])
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	restart := func() {
		c.Close()
		c = start(port)
	}
	topic := "restarts"
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 2, 1, nil, topic)
	cl.Close()
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	inside := false
	s := txnSink(t, brokers, topic, "flowhost-test-restarts", func() error {
		if inside {
			inside = false
			restart()
		}
		return nil
	})
	_, err = s.Recover(ctx)
	require.NoError(t, err)
	b1, b2, b3 := kafkaBatch("r", 0, 20, 4), kafkaBatch("r", 20, 20, 4), kafkaBatch("r", 40, 20, 4)
	require.NoError(t, s.Transact(ctx, 1, b1))
	restart()
	require.NoError(t, s.Transact(ctx, 2, b2), "after a restart between transactions")
	inside = true
	require.NoError(t, s.Transact(ctx, 3, b3), "after a restart inside the transaction")
	require.False(t, inside, "the restart inside the transaction never happened")
	wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 2), slices.Concat(b1, b2, b3))
}

// answerCutter is a connection that, once armed, lets the next EndTxn
// request through to the broker and then cuts the connection before the
// answer comes back: the broker commits, the client never learns it.
type answerCutter struct {
	net.Conn
	armed *atomic.Bool
	cut   atomic.Bool
}

func (c *answerCutter) Write(p []byte) (int, error) {
	// A request frame: int32 length, int16 api key, int16 version, ...
	if len(p) >= 6 && int16(binary.BigEndian.Uint16(p[4:6])) == int16(kmsg.EndTxn) && c.armed.CompareAndSwap(true, false) {
		c.cut.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *answerCutter) Read(p []byte) (int, error) {
	if c.cut.Load() {
		_ = c.Conn.Close()
		return 0, errors.New("test: connection cut before the EndTxn answer")
	}
	return c.Conn.Read(p)
}

func TestKafkaSinkCommitWhoseAnswerIsLost(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 2)
	var armed atomic.Bool
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &answerCutter{Conn: conn, armed: &armed}, nil
	}
	s, err := NewKafkaSink(KafkaSinkConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, PayloadOnly: true,
		TransactionalID: "flowhost-test-lost", MarkerGroup: "flowhost-test-lost-marker", Name: "out",
		BeforeEnd: func() error { armed.Store(true); return nil }, clientOpts: []kgo.Opt{kgo.Dialer(dial)}})
	require.NoError(t, err)
	metrics, err := NewKafkaSinkMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	s.cfg.Metrics = metrics
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = s.Recover(ctx)
	require.NoError(t, err)
	b1, b2 := kafkaBatch("l", 0, 20, 4), kafkaBatch("l", 20, 20, 4)
	require.NoError(t, s.Transact(ctx, 1, b1))
	require.False(t, armed.Load(), "the EndTxn request was never seen")
	require.NoError(t, s.Transact(ctx, 2, b2))
	// Both found committed by the marker, neither written again.
	require.Equal(t, 2.0, metricOf(t, metrics.transactions.WithLabelValues("out", "committed")).GetCounter().GetValue())
	require.Zero(t, metricOf(t, metrics.transactions.WithLabelValues("out", "aborted")).GetCounter().GetValue())
	require.Equal(t, 40.0, metricOf(t, metrics.recordsOut.WithLabelValues("out", topic)).GetCounter().GetValue())
	wantByPartition(t, kafkatest.ReadCommitted(t, brokers, topic, 2), slices.Concat(b1, b2))
}
