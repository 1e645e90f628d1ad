package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/devbroker"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// The Kafka benchmarks run the identity pipeline (native computation, 2
// partitions, records of about 100 bytes, 1000 keys) exactly-once into a
// store, from a kafka source of 2 partitions to a kafka sink, on a kfake
// broker in this process (host/devbroker), against the same pipeline from
// a file source to a file sink in the same iteration.
//
//	go test -run '^$' -bench 'Kafka' -benchtime 2x ./host/

// kafkaBenchDeliveries are the kafka sink's delivery modes measured: the
// sink's delivery field ("" for its default) by the name reported.
var kafkaBenchDeliveries = []struct{ name, field string }{{"exactly_once", "exactly_once"}, {"at_least_once", "at_least_once"}}

const kafkaBenchPartitions = 2

func startBenchBroker(b *testing.B) []string {
	b.Helper()
	br, err := devbroker.Start(devbroker.Config{})
	require.NoError(b, err)
	b.Cleanup(br.Close)
	return br.Addrs()
}

func benchTopic(b *testing.B, brokers []string, prefix string) string {
	b.Helper()
	topic := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(b, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), kafkaBenchPartitions, 1, nil, topic)
	require.NoError(b, err)
	require.NoError(b, resp.Err)
	return topic
}

// benchPayload is record i's payload; t is when it was produced, for the
// latency benchmark.
func benchPayload(i int, t int64) []byte {
	return fmt.Appendf(nil, `{"k":"key-%04d","seq":%d,"t":%d,"fill":"0123456789012345678901234567890123456789"}`, i%1000, i, t)
}

func produceBench(b *testing.B, brokers []string, topic string, from, to int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(b, err)
	defer cl.Close()
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Partition: int32(i % kafkaBenchPartitions), Value: benchPayload(i, 0)})
	}
	require.NoError(b, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// kafkaPipeline is the identity pipeline from topic in to topic out.
func kafkaPipeline(brokers []string, in, out, delivery string) []byte {
	q, _ := json.Marshal(brokers)
	return fmt.Appendf(nil, `name: kafka-identity
sources:
  - {name: in, type: kafka, stream: in, partitions: %d, kafka: {brokers: %s, topic: %s}}
computations:
  - {name: identity, plugin: identity, partitions: 2, group_by: [k], input_streams: [in], output_streams: [out]}
sinks:
  - {name: sink, type: kafka, streams: [out], format: payload, kafka: {brokers: %s, topic: %s%s}}
`, kafkaBenchPartitions, q, in, q, out, deliveryField(delivery))
}

// deliveryField is the kafka block's delivery field, or none for "".
func deliveryField(delivery string) string {
	if delivery == "" {
		return ""
	}
	return ", delivery: " + delivery
}

// runKafkaIdentity runs the Kafka pipeline on st until a read_committed
// consumer of out has seen want records, and returns how long that took
// and each record's produce-to-consume latency (now minus its t, for
// records whose t is set).
func runKafkaIdentity(b *testing.B, st *store.Store, brokers []string, pipeline []byte, out string, want int, during func()) (time.Duration, []time.Duration) {
	b.Helper()
	p, err := spec.Parse("kafka-identity.yaml", pipeline)
	require.NoError(b, err)
	rt, err := runtime.New(p, map[string]compute.Factory{"identity": compute.Native(nativeIdentity)},
		runtime.WithStore(st), runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet))
	require.NoError(b, err)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(b, err)
	defer consumer.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(ctx) }()
	if during != nil {
		go during()
	}
	var lat []time.Duration
	seen := 0
	deadline, stop := context.WithTimeout(ctx, 5*time.Minute)
	defer stop()
	for seen < want {
		fetches := consumer.PollFetches(deadline)
		require.NoError(b, deadline.Err(), "%d of %d records out", seen, want)
		now := time.Now().UnixNano()
		fetches.EachRecord(func(r *kgo.Record) {
			seen++
			var v struct{ T int64 }
			if json.Unmarshal(r.Value, &v) == nil && v.T > 0 {
				lat = append(lat, time.Duration(now-v.T))
			}
		})
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-ran; err != nil && ctx.Err() == nil {
		require.NoError(b, err)
	}
	return elapsed, lat
}

// runFileIdentity runs the identity pipeline from a file of n records to
// a file sink on st and returns how long it took.
func runFileIdentity(b *testing.B, st *store.Store, dir string, n int) time.Duration {
	b.Helper()
	in := filepath.Join(dir, "in.jsonl")
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `{"write_ts":%d,"payload":%s}`+"\n", int64(i+1), benchPayload(i, 0))
	}
	require.NoError(b, os.WriteFile(in, []byte(sb.String()), 0o644))
	p, err := spec.Parse(filepath.Join(dir, "file-identity.yaml"), fmt.Appendf(nil, `name: file-identity
sources:
  - {name: in, type: file, stream: in, file: {path: %q}}
computations:
  - {name: identity, plugin: identity, partitions: 2, group_by: [k], input_streams: [in], output_streams: [out]}
sinks:
  - {name: sink, type: file, streams: [out], file: {path: %q}}
`, in, filepath.Join(dir, "out.jsonl")))
	require.NoError(b, err)
	rt, err := runtime.New(p, map[string]compute.Factory{"identity": compute.Native(nativeIdentity)},
		runtime.WithStore(st), runtime.WithDeadLetter(io.Discard), runtime.WithLogger(quiet))
	require.NoError(b, err)
	start := time.Now()
	require.NoError(b, rt.Run(context.Background()))
	return time.Since(start)
}

// dirSize is the total size of the files under dir.
func dirSize(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	require.NoError(b, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	}))
	return n
}

// BenchmarkKafkaIdentity measures the Kafka pipeline's throughput, with
// the sink exactly-once (a transaction per sink batch) and at least once,
// against file -> identity -> file in the same iteration, all exactly-once
// into a store; and the store's size growth per Kafka record (the data
// directory after the run, closed, less an empty store's, over the
// records), next to the same for the file source.
func BenchmarkKafkaIdentity(b *testing.B) {
	const n = 50_000
	brokers := startBenchBroker(b)
	in := benchTopic(b, brokers, "bench-in")
	produceBench(b, brokers, in, 0, n)
	empty := b.TempDir()
	st, err := store.Open(empty, store.Options{})
	require.NoError(b, err)
	require.NoError(b, st.Close())
	emptySize := dirSize(b, empty)

	var file time.Duration
	kafka := map[string]time.Duration{}
	var grown, fileGrown int64
	for range b.N {
		dir := b.TempDir()
		st, err := store.Open(filepath.Join(dir, "data"), store.Options{})
		require.NoError(b, err)
		file += runFileIdentity(b, st, dir, n)
		require.NoError(b, st.Close())
		fileGrown += dirSize(b, filepath.Join(dir, "data")) - emptySize
		for _, d := range kafkaBenchDeliveries {
			out := benchTopic(b, brokers, "bench-out")
			data := filepath.Join(b.TempDir(), "data")
			st, err := store.Open(data, store.Options{})
			require.NoError(b, err)
			elapsed, _ := runKafkaIdentity(b, st, brokers, kafkaPipeline(brokers, in, out, d.field), out, n, nil)
			kafka[d.name] += elapsed
			require.NoError(b, st.Close())
			if d == kafkaBenchDeliveries[0] {
				grown += dirSize(b, data) - emptySize
			}
		}
	}
	fileRate := float64(n*b.N) / file.Seconds()
	b.ReportMetric(fileRate, "file-msgs/s")
	for _, d := range kafkaBenchDeliveries {
		rate := float64(n*b.N) / kafka[d.name].Seconds()
		b.ReportMetric(rate, d.name+"-msgs/s")
		b.ReportMetric(rate/fileRate, d.name+"/file")
	}
	b.ReportMetric(float64(grown)/float64(n*b.N), "store-bytes/kafka-record")
	b.ReportMetric(float64(fileGrown)/float64(n*b.N), "store-bytes/file-record")
}

// BenchmarkKafkaLatency measures the latency from produce to a
// read_committed consume through the Kafka identity pipeline, records
// produced at a steady 2,000 per second for 3 seconds while it runs, for
// each delivery mode: p50 and p99 in milliseconds.
func BenchmarkKafkaLatency(b *testing.B) {
	const rate, span = 2000, 3 * time.Second
	const n = int(rate * span / time.Second)
	brokers := startBenchBroker(b)
	lat := map[string][]time.Duration{}
	for range b.N {
		for _, d := range kafkaBenchDeliveries {
			in, out := benchTopic(b, brokers, "lat-in"), benchTopic(b, brokers, "lat-out")
			st, err := store.Open(filepath.Join(b.TempDir(), "data"), store.Options{})
			require.NoError(b, err)
			_, l := runKafkaIdentity(b, st, brokers, kafkaPipeline(brokers, in, out, d.field), out, n, func() {
				pacedProduce(brokers, in, rate, n)
			})
			lat[d.name] = append(lat[d.name], l...)
			require.NoError(b, st.Close())
		}
	}
	for _, d := range kafkaBenchDeliveries {
		l := lat[d.name]
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2])/1e6, d.name+"-p50-ms")
		b.ReportMetric(float64(l[min(len(l)-1, len(l)*99/100)])/1e6, d.name+"-p99-ms")
	}
}

// pacedProduce produces n records to topic at rate per second, each
// stamped with its produce time; errors show as records never consumed.
func pacedProduce(brokers []string, topic string, rate, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return
	}
	defer cl.Close()
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			<-tick.C
		}
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Partition: int32(i % kafkaBenchPartitions), Value: benchPayload(i, time.Now().UnixNano())},
			func(*kgo.Record, error) { wg.Done() })
	}
	wg.Wait()
}
