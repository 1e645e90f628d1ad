// Package kafkatest holds the helpers the Kafka tests of several packages
// share: a cluster with a fresh topic, and reading a topic to its end as
// a read_committed consumer sees it.
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

// Topic returns the brokers of a cluster holding a fresh topic of
// partitions partitions, and its name: an in-process kfake cluster on
// 127.0.0.1, stopped in t.Cleanup, or the cluster FLOWHOST_KAFKA_BROKERS
// names (host:port,host:port), where the topic has a unique name and is
// left behind.
func Topic(t testing.TB, partitions int) (brokers []string, topic string) {
	t.Helper()
	if env := os.Getenv("FLOWHOST_KAFKA_BROKERS"); env != "" {
		brokers = strings.Split(env, ",")
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1)) // binds 127.0.0.1
		require.NoError(t, err)
		t.Cleanup(c.Close)
		brokers = c.ListenAddrs()
	}
	return brokers, createTopic(t, brokers, partitions)
}

func createTopic(t testing.TB, brokers []string, partitions int) string {
	t.Helper()
	topic := fmt.Sprintf("flowhost-test-%d-%d", time.Now().UnixNano(), topicSeq.Add(1))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return topic
}

// FakeTopic is [Topic] on an in-process kfake cluster whatever
// FLOWHOST_KAFKA_BROKERS says, for tests that inject faults with the
// cluster's Fault and Control.
func FakeTopic(t testing.TB, partitions int) (c *kfake.Cluster, topic string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1)) // binds 127.0.0.1
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, createTopic(t, c.ListenAddrs(), partitions)
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
