// Package kafkatest gives tests a Kafka cluster: an in-process kfake
// cluster on 127.0.0.1, closed when the test ends, or, when
// FLOWHOST_KAFKA_BROKERS is set (host:port,host:port), that cluster. Each
// test creates topics of its own, with unique names, and on a real
// cluster leaves them behind.
package kafkatest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
