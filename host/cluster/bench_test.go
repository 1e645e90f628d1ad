package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// BenchmarkEpochCommit commits the same epoch, 100 state changes and 100
// outputs of 100 bytes with the partition's metadata, to the embedded
// pebble store (synced) and as a Kafka transaction through a Committer,
// in one run, and reports each one's epochs per second and their ratio.
// The Kafka side runs on the development broker (kfake, in this process,
// over 127.0.0.1), which keeps everything in memory and replicates
// nothing, or on the cluster in FLOWHOST_KAFKA_BROKERS: on kfake the
// figure is the client's and the protocol's cost, not a broker's disk.
//
//	go test -run '^$' -bench '^BenchmarkEpochCommit$' -benchtime 200x ./host/cluster/
func BenchmarkEpochCommit(b *testing.B) {
	const changes = 100
	value := make([]byte, 100)
	meta := store.PartitionMeta{Epoch: 1, Bias: map[string]int64{"orders": 5}, Tasks: map[string]uint64{"sink:out": 9}}
	ctx := context.Background()

	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	from := ordering.Sender{Computation: "count", Partition: 0}
	dest := store.Dest{Name: "report", Partition: 0}

	pipeline, input, output, opts := epochTopics(b)
	c, err := cluster.NewCommitter(ctx, cluster.CommitterConfig{Pipeline: pipeline, Computation: "count",
		Partition: 0, Inputs: []string{input}, Opts: opts})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	// The two alternate, epoch by epoch, so that the machine's noise
	// falls on both alike.
	var pebbleTime, kafkaTime time.Duration
	n := 0
	for b.Loop() {
		n++
		start := time.Now()
		bt := st.NewBatch()
		for k := range changes {
			bt.SetState("count", 0, fmt.Sprintf("key-%d", k), value)
			m := &ordering.Message{ID: ordering.TransformID("count", 0, uint64(n*changes+k)), Stream: "counts", Payload: value,
				Task: ordering.TaskID(n*changes + k + 1)}
			bt.Enqueue(dest, from, m.Task, m)
		}
		bt.SetPartition("count", 0, meta)
		if err := bt.Commit(); err != nil {
			b.Fatal(err)
		}
		pebbleTime += time.Since(start)

		start = time.Now()
		e := cluster.Epoch{Consumed: map[string]int64{input: int64(n)}}
		for k := range changes {
			e.Changes = append(e.Changes, cluster.StateChange(fmt.Sprintf("key-%d", k), value, false))
			e.Outputs = append(e.Outputs, &kgo.Record{Topic: output, Partition: 0, Value: value})
		}
		e.Changes = append(e.Changes, cluster.MetaChange(meta))
		if err := c.Commit(ctx, e); err != nil {
			b.Fatal(err)
		}
		kafkaTime += time.Since(start)
	}
	b.ReportMetric(float64(n)*float64(time.Second)/float64(pebbleTime), "pebble-epochs/s")
	b.ReportMetric(float64(n)*float64(time.Second)/float64(kafkaTime), "kafka-epochs/s")
	b.ReportMetric(float64(kafkaTime)/float64(pebbleTime), "kafka/pebble-time")
}
