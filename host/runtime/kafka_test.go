package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// kafkaPipeline reads a topic of two partitions into an unkeyed identity
// map of one partition.
func kafkaPipeline(brokers []string, topic, extra string) string {
	return fmt.Sprintf(`
name: k
sources:
  - {name: in, type: kafka, stream: events, partitions: 2, kafka: {brokers: [%q], topic: %s, group: monitor}%s}
computations:
  - {name: ident, plugin: identity, kind: map, partitions: 1, input_streams: [events], output_streams: [out]}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`, strings.Join(brokers, `","`), topic, extra)
}

// runUntil runs rt until sink holds n records, then stops it.
func runUntil(t testing.TB, rt *runtime.Runtime, sink *captureSink, n int, while func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	require.Eventually(t, func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.records) >= n
	}, 30*time.Second, time.Millisecond)
	if while != nil {
		while()
	}
	cancel()
	require.NoError(t, <-done)
}

// TestKafkaSourceThroughTheRuntime: Kafka keys become message keys, kept
// in the store; a CreateTime that steps back is raised to the partition's
// last, so WriteTimestamp never decreases in a partition; the partitions
// are read earliest WriteTimestamp first; the stored offsets reach the
// consumer group, and the lag is in Status.
func TestKafkaSourceThroughTheRuntime(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, 2, nil)
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	var recs []*kgo.Record
	for i, at := range []int{30, 10, 20} { // partition 0 steps back
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k0"), Timestamp: ms(at), Value: fmt.Appendf(nil, `{"p":0,"i":%d}`, i)})
	}
	for i, at := range []int{5, 15, 25} {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Key: []byte("k1"), Timestamp: ms(at), Value: fmt.Appendf(nil, `{"p":1,"i":%d}`, i)})
	}
	kafkatest.Produce(t, brokers, recs...)

	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	sink := &captureSink{}
	var mu sync.Mutex
	var keys []string // the keys the computation got
	keyed := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
		mu.Lock()
		for _, k := range req.Keys {
			for range k.Messages {
				keys = append(keys, k.Key)
			}
		}
		mu.Unlock()
		return identity(ctx, req)
	})
	rt, err := runtime.New(mustSpec(t, kafkaPipeline(brokers, topic, "")), map[string]compute.Factory{"ident": compute.Native(keyed)},
		runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	runUntil(t, rt, sink, 6, func() {
		require.Eventually(t, func() bool {
			o, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "monitor")
			if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
				t.Logf("fetching the group's offsets: %v", err)
				return false
			}
			a, _ := o.Lookup(topic, 0)
			b, _ := o.Lookup(topic, 1)
			return a.At == 3 && b.At == 3
		}, 30*time.Second, 5*time.Millisecond, "the stored offsets are committed to the group")
		lag := rt.Status().KafkaLag
		require.Len(t, lag, 2)
		for _, l := range lag {
			require.Equal(t, "in", l.Source)
			require.Zero(t, l.Lag, "everything was read: %+v", l)
		}
		require.Equal(t, 6.0, counterValue(t, rt, "flowhost_kafka_records_in_total", map[string]string{"source": "in", "topic": topic}))
	})

	var order []string
	var align []int64
	for _, r := range sink.records {
		order = append(order, string(r.Payload))
		align = append(align, r.AlignmentTS-base.UnixNano())
	}
	require.ElementsMatch(t, []string{`["k0"]`, `["k0"]`, `["k0"]`, `["k1"]`, `["k1"]`, `["k1"]`}, keys, "the Kafka key is the message key of a computation without group_by")
	ns := int64(time.Millisecond)
	require.Equal(t, []int64{5 * ns, 15 * ns, 25 * ns, 30 * ns, 30 * ns, 30 * ns}, align, "earliest WriteTimestamp first: %v", order)
	for p, want := range map[int][]int64{0: {30, 30, 30}, 1: {5, 15, 25}} {
		var writes []int64
		require.NoError(t, st.SourceRecords("events", p, 0, func(_ uint64, m *ordering.Message) error {
			writes = append(writes, (m.Time.Write-base.UnixNano())/ns)
			require.Equal(t, fmt.Sprintf(`["k%d"]`, p), m.Key, "the store keeps the key")
			return nil
		}))
		require.Equal(t, want, writes, "partition %d: WriteTimestamp never decreases", p)
	}
}

// TestKafkaPartitionWithoutDataTurnsIdle: a Kafka partition that gets no
// records becomes idle after watermark.idle_partitions.duration and no
// longer holds back the windows of the partition that has data (with
// max_ratio 0.5: the default 0.4 leaves no partition of two out).
func TestKafkaPartitionWithoutDataTurnsIdle(t *testing.T) {
	const sec = int64(time.Second)
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, 2, nil)
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	pipe := fmt.Sprintf(`
name: k
sources:
  - {name: in, type: kafka, stream: events, partitions: 2, kafka: {brokers: [%q], topic: %s}, watermark: {out_of_orderness_bound: 0s, idle_partitions: {duration: 1m, max_ratio: 0.5}}}
computations:
  - {name: count, plugin: window-count, group_by: [user], input_streams: [events], output_streams: [counts], batch: {max_rows: 1}}
sinks:
  - {name: sink, type: stdout, streams: [counts]}
`, strings.Join(brokers, `","`), topic)
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, pipe), map[string]compute.Factory{"count": compute.Native(windowCount)},
		runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}), runtime.WithClock(clock.Load))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	send := func(at int) {
		kafkatest.Produce(t, brokers, &kgo.Record{Topic: topic, Partition: 0, Timestamp: start.Add(time.Duration(at) * time.Second), Value: []byte(`{"user":"ann"}`)})
	}
	read := func(n float64) {
		require.Eventually(t, func() bool {
			return counterValue(t, rt, "flowhost_source_records_total", map[string]string{"source": "in"}) == n
		}, 30*time.Second, time.Millisecond)
	}
	for i := range 5 {
		send(i)
	}
	read(5)
	clock.Store(start.UnixNano() + 59*sec)
	runtime.CheckIdle(rt)
	require.Equal(t, 0.0, counterValue(t, rt, "flowhost_source_idle_partitions", map[string]string{"source": "in"}))
	require.Empty(t, windowCounts(t, sink), "partition 1 holds the watermark back while it is not idle")

	clock.Store(start.UnixNano() + 60*sec)
	send(5) // partition 0 stays active
	read(6)
	runtime.CheckIdle(rt)
	require.Equal(t, 1.0, counterValue(t, rt, "flowhost_source_idle_partitions", map[string]string{"source": "in"}))
	s := start.UnixNano()
	want := [][2]int64{{s, 1}, {s + sec, 1}, {s + 2*sec, 1}, {s + 3*sec, 1}, {s + 4*sec, 1}}
	require.Eventually(t, func() bool { return len(windowCounts(t, sink)) == len(want) }, 30*time.Second, time.Millisecond,
		"partition 0's watermark closes the windows once partition 1 is idle: %v", windowCounts(t, sink))
	require.Equal(t, want, windowCounts(t, sink))
}

// TestKafkaSourceResumesFromTheStore: a second run on the same data
// directory reads exactly the records produced after what the first one
// committed, whatever the start position says.
func TestKafkaSourceResumesFromTheStore(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, 2, nil)
	send := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
		}
		kafkatest.Produce(t, brokers, recs...)
	}
	dir := t.TempDir()
	run := func(want int) []string {
		st, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		defer st.Close()
		sink := &captureSink{}
		rt, err := runtime.New(mustSpec(t, kafkaPipeline(brokers, topic, "")), map[string]compute.Factory{"ident": compute.Native(identity)},
			runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
		require.NoError(t, err)
		runUntil(t, rt, sink, want, nil)
		var got []string
		for _, r := range sink.records {
			got = append(got, string(r.Payload))
		}
		return got
	}
	send(0, 3000) // more than one group of records
	first := run(3000)
	require.Len(t, first, 3000)
	send(3000, 3010)
	second := run(10)
	var want []string
	for i := 3000; i < 3010; i++ {
		want = append(want, fmt.Sprintf(`{"i":%d}`, i))
	}
	require.ElementsMatch(t, want, second, "the second run reads only what is new")
}
