package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Kafka tests through the binary run against a development broker
// (`flowhost kafka serve`, a kfake cluster) the test starts in a process of
// its own on 127.0.0.1, or, when FLOWHOST_KAFKA_BROKERS is set
// (host:port,host:port), against that cluster, in topics of their own
// with unique names.

// kafkaTopic returns the brokers of a test cluster and a fresh topic of
// partitions partitions on it.
func kafkaTopic(t *testing.T, partitions int) (brokers []string, topic string) {
	t.Helper()
	brokers, _ = kafkaCluster(t, "")
	topic = fmt.Sprintf("flowhost-cli-%d", time.Now().UnixNano())
	createKafkaTopic(t, brokers, topic, partitions)
	return brokers, topic
}

// kafkaCluster returns the brokers of the test cluster: those of
// FLOWHOST_KAFKA_BROKERS when it is set (and a nil broker: the cluster is
// not the test's), otherwise of a development broker the test starts in a
// process of its own, persisted in dataDir when it is not empty.
func kafkaCluster(t *testing.T, dataDir string) ([]string, *devBroker) {
	t.Helper()
	if env := os.Getenv("FLOWHOST_KAFKA_BROKERS"); env != "" {
		return strings.Split(env, ","), nil
	}
	b := startDevBroker(t, dataDir, "--ports", "0")
	return b.addrs, b
}

// createKafkaTopic creates topic with partitions partitions.
func createKafkaTopic(t *testing.T, brokers []string, topic string, partitions int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// TestCLIKafkaSourceIsExactlyOnceAcrossKill9 produces records to a topic
// of three partitions, runs a kafka source into a file sink with a data
// directory, kills the process with SIGKILL once part of the input is
// written, produces more, and restarts on the same directory: the file
// holds every record exactly once, so the source resumed from the
// offsets it stored, not from the start.
func TestCLIKafkaSourceIsExactlyOnceAcrossKill9(t *testing.T) {
	brokers, topic := kafkaTopic(t, 3)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	spec := fmt.Sprintf(`name: kafka-in
sources:
  - name: in
    type: kafka
    stream: s
    partitions: 3
    kafka: {brokers: [%q], topic: %s, event_time: {field: ts, format: unix_ms}}
sinks:
  - {name: out, type: file, streams: [s], file: {path: out.jsonl}}
`, brokers[0], topic)
	specPath := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(spec), 0o644))

	produceN := func(from, to int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		require.NoError(t, err)
		defer cl.Close()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3),
				Value: fmt.Appendf(nil, `{"n":%d,"ts":%d}`, i, 1714557600000+int64(i))})
		}
		require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
	}
	written := func() map[int]int {
		data, _ := os.ReadFile(out)
		counts := map[int]int{}
		for _, line := range strings.Split(string(data), "\n") {
			var rec struct {
				Payload struct{ N int } `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil {
				counts[rec.Payload.N]++
			}
		}
		return counts
	}
	const first, total = 300, 600
	produceN(0, first)
	data := filepath.Join(dir, "data")
	run := startFlowhost(t, "run", "-f", specPath, "--data-dir", data, "--metrics-addr", "")
	run.waitFor(t, "the first records in the sink", func() bool { return len(written()) >= first })
	require.NoError(t, run.cmd.Process.Kill())
	run.waitExit(t)

	produceN(first, total)
	run = startFlowhost(t, "run", "-f", specPath, "--data-dir", data, "--metrics-addr", "")
	run.waitFor(t, "every record in the sink", func() bool { return len(written()) >= total })
	counts := written()
	for i := range total {
		require.Equal(t, 1, counts[i], "record %d in the sink %d times; stderr:\n%s", i, counts[i], run.log())
	}
	require.Len(t, counts, total)
}

// TestCLIKafkaToKafka runs a kafka source straight into a kafka sink and
// reads the output topic read_committed: every input record arrives, once,
// with the flowhost-* headers that trace it.
func TestCLIKafkaToKafka(t *testing.T) {
	brokers, in := kafkaTopic(t, 3)
	out := in + "-out"
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, out)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	const n = 90
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 3), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())

	dir := t.TempDir()
	specPath := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(specPath, fmt.Appendf(nil, `name: kafka-kafka
sources:
  - {name: in, type: kafka, stream: s, partitions: 3, kafka: {brokers: [%q], topic: %s}}
sinks:
  - {name: out, type: kafka, streams: [s], format: payload, kafka: {brokers: [%q], topic: %s}}
`, brokers[0], in, brokers[0], out), 0o644))
	run := startFlowhost(t, "run", "-f", specPath, "--data-dir", filepath.Join(dir, "data"), "--metrics-addr", "")

	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), exitDeadline)
	defer cancel()
	seen := map[string]int{}
	ids := map[string]bool{}
	for len(seen) < n && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			require.NotEmpty(t, h["flowhost-message-id"])
			require.False(t, ids[h["flowhost-message-id"]], "message id %s twice", h["flowhost-message-id"])
			ids[h["flowhost-message-id"]] = true
			require.NotEmpty(t, h["flowhost-event-ts"])
			require.NotEmpty(t, h["flowhost-alignment-ts"])
			require.Contains(t, h, "flowhost-parents")
		})
	}
	require.Len(t, seen, n, "stderr:\n%s", run.log())
	for i := range n {
		require.Equal(t, 1, seen[fmt.Sprintf(`{"n":%d}`, i)], "record %d", i)
	}
}
