package host_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// BenchmarkStoreOnKafka runs the identity pipeline of BenchmarkExactlyOnce
// exactly-once on the embedded pebble store and on the store on Kafka
// (cluster.OpenStore), one after the other in every iteration, and reports
// both rates and their ratio. The Kafka side runs on kfake in this process
// (over 127.0.0.1), which keeps everything in memory, or on the cluster in
// FLOWHOST_KAFKA_BROKERS: on kfake the figure is the client's and the
// protocol's cost, not a broker's disk. -records sets the number of
// messages (200,000 by default).
//
//	go test -run '^$' -bench 'StoreOnKafka$' -benchtime 3x ./host/
func BenchmarkStoreOnKafka(b *testing.B) {
	n := *benchRecords
	brokers := kafkatest.Brokers(b)
	var pebbleTime, kafkaTime, restore time.Duration
	for i := range b.N {
		st, err := store.Open(b.TempDir(), store.Options{})
		require.NoError(b, err)
		pebbleTime += runIdentityOn(b, st, n, 1)
		require.NoError(b, st.Close())

		cfg := cluster.StoreConfig{Pipeline: &spec.Pipeline{Name: fmt.Sprintf("bench%d-%d", time.Now().UnixNano(), i)}, Replication: -1,
			Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}}
		st, err = cluster.OpenStore(context.Background(), cfg)
		require.NoError(b, err)
		kafkaTime += runIdentityOn(b, st, n, 1)
		require.NoError(b, st.Close())
		// What a host taking the pipeline over pays: the restore of what
		// the run left (its retained source records and positions).
		start := time.Now()
		st, err = cluster.OpenStore(context.Background(), cfg)
		require.NoError(b, err)
		restore += time.Since(start)
		require.NoError(b, st.Close())
	}
	pebbleRate := float64(n*b.N) / pebbleTime.Seconds()
	kafkaRate := float64(n*b.N) / kafkaTime.Seconds()
	b.ReportMetric(pebbleRate, "pebble-msgs/s")
	b.ReportMetric(kafkaRate, "kafka-msgs/s")
	b.ReportMetric(kafkaRate/pebbleRate, "kafka/pebble")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
}
