package connect

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flowhost/flowhost/host/connect/kafkatest"
)

func TestKafkaSourceKeys(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	produce(t, brokers,
		&kgo.Record{Topic: topic, Key: []byte("o-17"), Value: []byte(`1`)},
		&kgo.Record{Topic: topic, Value: []byte(`2`)},
		&kgo.Record{Topic: topic, Key: []byte{}, Value: []byte(`3`)},
		&kgo.Record{Topic: topic, Key: []byte{0xff, 0x00}, Value: []byte(`4`)},
		&kgo.Record{Topic: topic, Key: []byte(`say "hi"`), Value: []byte(`5`)},
	)
	recs, _ := runSource(t, KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 1}, 5, 0)
	var got []string
	for _, r := range recs {
		got = append(got, r.Key)
	}
	require.Equal(t, []string{`["o-17"]`, "", `[""]`, `[{"base64":"/wA="}]`, `["say \"hi\""]`}, got)
}

func TestKafkaSourceLagAndRecordsIn(t *testing.T) {
	brokers, topic := testKafka(t, 2)
	for i := range 7 {
		produce(t, brokers, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	reg := prometheus.NewRegistry()
	m := NewKafkaMetrics(reg)
	cfg := KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 2, Metrics: m}
	// Resume part way: partition 0 at 1 of 4, partition 1 at 3 of 3.
	cfg.Resume = kafkaResume([]int64{1, 3})
	src, err := NewKafkaSource(cfg)
	require.NoError(t, err)
	require.Empty(t, src.Lag(), "nothing fetched yet")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err = src.Run(ctx, func(r Record) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 3, n)
	require.Equal(t, 3.0, testutil.ToFloat64(m.RecordsIn.WithLabelValues("in", topic)))
	require.Contains(t, src.Lag(), KafkaPartitionLag{Topic: topic, Partition: 0, Lag: 0})
	require.Equal(t, 0.0, testutil.ToFloat64(m.Lag.WithLabelValues("in", topic, "0")))
}

// The lag is the high watermark minus the next offset: records of an
// open transaction count, as a read_committed reader cannot pass them.
func TestKafkaSourceLagCountsWhatItCannotReadYet(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	produce(t, brokers, &kgo.Record{Topic: topic, Value: []byte(`1`)})
	txn, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("lag-"+topic), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer txn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, kgo.StringRecord(`2`), kgo.StringRecord(`3`)).FirstErr())
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 1})
	require.NoError(t, err)
	done := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { done <- src.Run(rctx, func(Record) error { return nil }) }()
	require.Eventually(t, func() bool {
		l := src.Lag()
		return len(l) == 1 && l[0].Lag == 2
	}, 20*time.Second, 5*time.Millisecond, "lag %v", src.Lag())
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryAbort))
}

func TestKafkaSourceCommitsStoredOffsetsToItsGroup(t *testing.T) {
	brokers, topic := testKafka(t, 2)
	for i := range 6 {
		produce(t, brokers, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	m := NewKafkaMetrics(prometheus.NewRegistry())
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 2, Group: "monitor", Metrics: m})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	committed := func() string {
		o, err := adm.FetchOffsets(ctx, "monitor")
		if errors.Is(err, kerr.GroupIDNotFound) {
			return "[]"
		}
		if err != nil {
			return err.Error()
		}
		var s []string
		for p := range 2 {
			if c, ok := o.Lookup(topic, int32(p)); ok {
				s = append(s, fmt.Sprintf("%d:%d", p, c.At))
			}
		}
		return fmt.Sprint(s)
	}
	n := 0
	err = src.Run(ctx, func(r Record) error {
		n++
		if r.Resume == nil {
			return nil
		}
		// What the host has not said is durable is not committed.
		require.Equal(t, "[]", committed())
		if n == 6 {
			src.Committed(r.Resume) // as the host does after its commit
			// The broker may apply the commit before the source has its
			// answer and counts it: cancelling before then would count
			// an aborted commit.
			require.Eventually(t, func() bool {
				return committed() == "[0:3 1:3]" && testutil.ToFloat64(m.GroupCommits.WithLabelValues("in", "ok")) == 1
			}, 20*time.Second, 5*time.Millisecond, "committed %s", committed())
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1.0, testutil.ToFloat64(m.GroupCommits.WithLabelValues("in", "ok")))
}

// freePort returns a loopback port nothing listens on (for a moment).
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// runAsync runs src, collecting records in a channel.
func runAsync(t *testing.T, src *KafkaSource) (recs chan Record, done chan error, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	recs, done = make(chan Record, 1000), make(chan error, 1)
	go func() { done <- src.Run(ctx, func(r Record) error { recs <- r; return nil }) }()
	t.Cleanup(cancel)
	return recs, done, cancel
}

func brokerErrors(m *KafkaMetrics) float64 {
	n := 0.0
	ch := make(chan prometheus.Metric, 100)
	go func() { m.BrokerErrors.Collect(ch); close(ch) }()
	for x := range ch {
		var d dto.Metric
		if x.Write(&d) == nil {
			n += d.GetCounter().GetValue()
		}
	}
	return n
}

// A broker that is not up yet is retried, counted and logged; once it is
// up the source reads everything.
func TestKafkaSourceWaitsForAnUnreachableBroker(t *testing.T) {
	port := freePort(t)
	m := NewKafkaMetrics(prometheus.NewRegistry())
	const topic = "late"
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)}}, Topic: topic, Name: "in", Stream: "s", Partitions: 1, Metrics: m})
	require.NoError(t, err)
	recs, done, stop := runAsync(t, src)
	require.Eventually(t, func() bool { return brokerErrors(m) >= 2 }, 20*time.Second, 5*time.Millisecond, "the failed dials are counted")
	require.Equal(t, 0.0, testutil.ToFloat64(m.BrokerErrors.WithLabelValues("source in", fmt.Sprintf("127.0.0.1:%d", port), "other")), "a refused dial has its own cause")
	require.Positive(t, testutil.ToFloat64(m.BrokerErrors.WithLabelValues("source in", fmt.Sprintf("127.0.0.1:%d", port), "refused")))
	c := kafkatest.Cluster(t, kfake.Ports(port), kfake.SeedTopics(1, topic))
	for i := range 3 {
		produce(t, c.ListenAddrs(), &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	for i := range 3 {
		select {
		case r := <-recs:
			require.Equal(t, strconv.Itoa(i), string(r.Payload))
		case err := <-done:
			t.Fatalf("the source stopped: %v", err)
		}
	}
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
}

// Retriable fetch errors a broker answers are retried: nothing is lost or
// read twice, and they are counted by cause.
func TestKafkaSourceRetriesFetchErrors(t *testing.T) {
	c := kafkatest.Cluster(t)
	brokers := c.ListenAddrs()
	topic := kafkatest.Topic(t, brokers, 1, nil)
	for i := range 5 {
		produce(t, brokers, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	var injected atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if injected.Load() >= 3 {
			return nil, nil, false
		}
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(req.Version)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset = rp.Partition, kerr.NotLeaderForPartition.Code, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		injected.Add(1)
		return resp, nil, true
	})
	m := NewKafkaMetrics(prometheus.NewRegistry())
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 1, Metrics: m})
	require.NoError(t, err)
	recs, done, stop := runAsync(t, src)
	for i := range 5 {
		select {
		case r := <-recs:
			require.Equal(t, strconv.Itoa(i), string(r.Payload))
		case err := <-done:
			t.Fatalf("the source stopped: %v", err)
		}
	}
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Empty(t, recs, "nothing read twice")
	require.EqualValues(t, 3, injected.Load())
	require.Positive(t, testutil.ToFloat64(m.BrokerErrors.WithLabelValues("source in", "", kerr.NotLeaderForPartition.Message)))
}

// Fatal errors stop the run and say what to do.
func TestKafkaSourceFatalErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, adm *kadm.Client, topic string)
		want  string
	}{
		{"topic deleted", func(t *testing.T, adm *kadm.Client, topic string) {
			_, err := adm.DeleteTopic(context.Background(), topic)
			require.NoError(t, err)
		}, "the topic was deleted: create it again"},
		{"partitions added", func(t *testing.T, adm *kadm.Client, topic string) {
			_, err := adm.CreatePartitions(context.Background(), 1, topic)
			require.NoError(t, err)
		}, "the topic now has 3 partitions and the source 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.Cluster(t)
			brokers := c.ListenAddrs()
			topic := kafkatest.Topic(t, brokers, 2, nil)
			produce(t, brokers, &kgo.Record{Topic: topic, Value: []byte(`1`)})
			src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 2, MetadataInterval: 20 * time.Millisecond})
			require.NoError(t, err)
			recs, done, _ := runAsync(t, src)
			<-recs
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
			require.NoError(t, err)
			defer cl.Close()
			tc.fault(t, kadm.NewClient(cl), topic)
			err = <-done
			require.ErrorIs(t, err, errKafkaFatal)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// Records deleted before the source read them stop the run: they are
// never skipped.
func TestKafkaSourceStopsWhenItsOffsetIsGone(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	for i := range 4 {
		produce(t, brokers, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), offs)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 1, Resume: kafkaResume([]int64{1})})
	require.NoError(t, err)
	recs, done, _ := runAsync(t, src)
	err = <-done
	require.ErrorIs(t, err, errKafkaFatal)
	require.ErrorContains(t, err, "partition 0: the offset to read next is no longer in Kafka")
	require.Empty(t, recs)
}

// TestKafkaErrorClasses: what is retried and how causes are named.
// (kfake closes the connection on a wrong SASL password, which is
// retried; a real broker answers SASL_AUTHENTICATION_FAILED, which is
// not.)
func TestKafkaErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		err       error
		retriable bool
		cause     string
	}{
		{kerr.NotLeaderForPartition, true, "NOT_LEADER_FOR_PARTITION"},
		{fmt.Errorf("fetching: %w", kerr.SaslAuthenticationFailed), false, "SASL_AUTHENTICATION_FAILED"},
		{kerr.TopicAuthorizationFailed, false, "TOPIC_AUTHORIZATION_FAILED"},
		{io.EOF, true, "eof"},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true, "refused"},
		{os.ErrDeadlineExceeded, true, "timeout"},
		{syscall.ECONNRESET, true, "closed"},
		{fatalf("the topic was deleted"), false, "other"},
		{errors.New("strange"), true, "other"},
	} {
		require.Equal(t, tc.retriable, retriable(tc.err), "%v", tc.err)
		require.Equal(t, tc.cause, KafkaErrorCause(tc.err), "%v", tc.err)
	}
}

// Records come in groups of at most KafkaGroupRecords; the last record of
// each carries the next offsets after it, and resuming from any group's
// token reads exactly what follows it.
func TestKafkaSourceGroupsRecordsUnderOneToken(t *testing.T) {
	const n = 2*KafkaGroupRecords + 500
	brokers, topic := testKafka(t, 1)
	var sent []*kgo.Record
	for i := range n {
		sent = append(sent, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	produce(t, brokers, sent...)
	cfg := KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 1}
	all, _ := runSource(t, cfg, n, 0)
	var tokens []int // indexes of the records with a token
	size := 0
	for i, r := range all {
		require.Equal(t, strconv.Itoa(i), string(r.Payload))
		size++
		require.LessOrEqual(t, size, KafkaGroupRecords)
		if !r.More {
			require.Equal(t, fmt.Sprintf("[%d]", i+1), string(r.Resume))
			tokens = append(tokens, i)
			size = 0
		}
	}
	require.GreaterOrEqual(t, len(tokens), 3)
	mid := tokens[len(tokens)/2]
	cfg.Resume = all[mid].Resume
	rest, _ := runSource(t, cfg, n-mid-1, 0)
	require.Equal(t, strconv.Itoa(mid+1), string(rest[0].Payload))
}

// A broker that restarts in the middle of a run (on its port and data
// directory) is retried: every record is read once, none lost.
func TestKafkaSourceSurvivesABrokerRestart(t *testing.T) {
	port, dir := freePort(t), t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir))
	require.NoError(t, err)
	closeFirst := sync.OnceFunc(c.Close)
	t.Cleanup(closeFirst)
	brokers := c.ListenAddrs()
	topic := kafkatest.Topic(t, brokers, 2, nil)
	send := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
		}
		produce(t, brokers, recs...)
	}
	send(0, 10)
	m := NewKafkaMetrics(prometheus.NewRegistry())
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 2, Metrics: m})
	require.NoError(t, err)
	recs, done, stop := runAsync(t, src)
	seen := map[string]bool{}
	take := func(n int) {
		for range n {
			select {
			case r := <-recs:
				require.False(t, seen[string(r.Payload)], "read twice: %s", r.Payload)
				seen[string(r.Payload)] = true
			case err := <-done:
				t.Fatalf("the source stopped: %v", err)
			}
		}
	}
	take(10)
	closeFirst()
	require.Eventually(t, func() bool { return brokerErrors(m) > 0 }, 20*time.Second, 5*time.Millisecond, "the lost broker is counted")
	c2 := kafkatest.Cluster(t, kfake.Ports(port), kfake.DataDir(dir))
	require.Equal(t, brokers, c2.ListenAddrs())
	send(10, 20)
	take(10)
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Len(t, seen, 20)
}

// read_committed (the default) skips the records of aborted transactions;
// read_uncommitted reads them too.
func TestKafkaSourceIsolation(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	txn, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("iso-"+topic), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer txn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		values []string
		commit kgo.TransactionEndTry
	}{{[]string{`"c1"`, `"c2"`}, kgo.TryCommit}, {[]string{`"a1"`, `"a2"`}, kgo.TryAbort}, {[]string{`"c3"`}, kgo.TryCommit}} {
		require.NoError(t, txn.BeginTransaction())
		for _, v := range tc.values {
			require.NoError(t, txn.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr())
		}
		require.NoError(t, txn.EndTransaction(ctx, tc.commit))
	}
	read := func(uncommitted bool, n int) []string {
		recs, _ := runSource(t, KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 1, ReadUncommitted: uncommitted}, n, 0)
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Payload))
		}
		return got
	}
	require.Equal(t, []string{`"c1"`, `"c2"`, `"c3"`}, read(false, 3))
	require.Equal(t, []string{`"c1"`, `"c2"`, `"a1"`, `"a2"`, `"c3"`}, read(true, 5))
}

// A source reads over TLS, checking the broker against tls.ca_file.
func TestKafkaSourceOverTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	c := kafkatest.Cluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}),
		kfake.SeedTopics(1, "secure"))
	brokers := c.ListenAddrs()
	conn := KafkaConnection{Brokers: brokers, TLS: &KafkaTLS{CAFile: caFile}}
	opts, err := KafkaClientOpts(conn)
	require.NoError(t, err)
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("secure"))...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord(`"over tls"`)).FirstErr())
	recs, _ := runSource(t, KafkaSourceConfig{Conn: conn, Topic: "secure", Stream: "s", Partitions: 1}, 1, 0)
	require.Equal(t, `"over tls"`, string(recs[0].Payload))
}
