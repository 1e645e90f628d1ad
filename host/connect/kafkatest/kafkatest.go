// Package kafkatest holds the helpers the Kafka tests of several packages
// share. They run on an in-process kfake cluster on 127.0.0.1, closed
// when the test ends, or, when FLOWHOST_KAFKA_BROKERS is set
// (host:port,host:port), on that cluster. Each test creates topics of its
// own, with unique names, and on a real cluster leaves them behind.
// [ReadCommitted] reads a topic to its end as a read_committed consumer
// sees it.
package kafkatest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var topicSeq atomic.Int64

// Brokers returns the brokers of the test's cluster: FLOWHOST_KAFKA_BROKERS
// when set and opts is empty, otherwise a new kfake cluster of one broker
// with opts, which kfake binds on 127.0.0.1.
func Brokers(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	if env := os.Getenv("FLOWHOST_KAFKA_BROKERS"); env != "" && len(opts) == 0 {
		return strings.Split(env, ",")
	}
	return Cluster(t, opts...).ListenAddrs()
}

// Cluster returns a new in-process kfake cluster of one broker with opts,
// on 127.0.0.1, closed when the test ends, whatever FLOWHOST_KAFKA_BROKERS
// says: for the tests that inject faults into it.
func Cluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Topic creates a topic of partitions partitions with a unique name, and
// topic configs (nil: the broker's defaults).
func Topic(t testing.TB, brokers []string, partitions int, configs map[string]*string) string {
	t.Helper()
	topic := fmt.Sprintf("flowhost-test-%d-%d", time.Now().UnixNano(), topicSeq.Add(1))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
	return topic
}

// Produce writes recs synchronously, each to the partition it names.
func Produce(t testing.TB, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// NewTopic returns the brokers of the test's cluster ([Brokers]) and a
// fresh topic of partitions partitions on it ([Topic]).
func NewTopic(t testing.TB, partitions int) (brokers []string, topic string) {
	t.Helper()
	brokers = Brokers(t)
	return brokers, Topic(t, brokers, partitions, nil)
}

// FakeTopic is [NewTopic] on an in-process kfake cluster whatever
// FLOWHOST_KAFKA_BROKERS says, for tests that inject faults with the
// cluster's Fault and Control.
func FakeTopic(t testing.TB, partitions int) (c *kfake.Cluster, topic string) {
	t.Helper()
	c = Cluster(t)
	return c, Topic(t, c.ListenAddrs(), partitions, nil)
}

const endHeader = "flowhost-test-end"

// ReadCommitted returns every record of topic a read_committed consumer
// sees, in offset order per partition (partition by partition). To know it
// has read everything, it first appends an end record to each of the
// partitions partitions and reads until it has met them all; they are
// not returned. A transaction left open holds the end records back, and
// the test fails at its deadline.
func ReadCommitted(t testing.TB, brokers []string, topic string, partitions int) [][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	for i := range partitions {
		r := &kgo.Record{Topic: topic, Partition: int32(i), Headers: []kgo.RecordHeader{{Key: endHeader}}}
		require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	out := make([][]*kgo.Record, partitions)
	ended := 0
	for ended < partitions {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "the end records never became visible: a transaction is still open? %d of %d seen", ended, partitions)
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) == 1 && r.Headers[0].Key == endHeader {
				ended++
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
		})
	}
	return out
}

// Header returns the value of r's header key.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
