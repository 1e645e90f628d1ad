package runtime_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// BenchmarkKafkaStoreBytesPerRecord measures what a data directory holds
// per Kafka record after b.N keyed records of about 100 bytes went from a
// kafka source of 4 partitions through an identity map to a sink: the
// store's files (after a compaction, the write-ahead log included) and
// its tables alone (the records kept: what grows with the records) over
// b.N, next to the Kafka value's
// bytes per record, with the default retention.sources (1h: every record
// is kept, so that `flowhost run --from` can replay it) and with 0s (a
// record is deleted once every reader has it). Run it with a fixed count:
//
//	go test ./host/runtime -run XXX -bench KafkaStoreBytes -benchtime 20000x
func BenchmarkKafkaStoreBytesPerRecord(b *testing.B) {
	for _, retention := range []string{"1h", "0s"} {
		b.Run("retention="+retention, func(b *testing.B) {
			brokers := kafkatest.Brokers(b)
			topic := kafkatest.Topic(b, brokers, 4, nil)
			var recs []*kgo.Record
			value := 0
			for i := range b.N {
				v := fmt.Appendf(nil, `{"order":"o-%08d","customer":"c-%04d","amount":%d.%02d,"note":"kafka record %08d"}`, i, i%1000, i%997, i%100, i)
				value += len(v)
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Key: fmt.Appendf(nil, "o-%08d", i), Value: v})
			}
			for len(recs) > 0 {
				n := min(len(recs), 5000)
				kafkatest.Produce(b, brokers, recs[:n]...)
				recs = recs[n:]
			}
			dir := b.TempDir()
			st, err := store.Open(dir, store.Options{})
			require.NoError(b, err)
			defer st.Close()
			pipe := fmt.Sprintf(`
name: k
retention: {sources: %s}
sources:
  - {name: in, type: kafka, stream: events, partitions: 4, kafka: {brokers: [%q], topic: %s}}
computations:
  - {name: ident, plugin: identity, kind: map, partitions: 2, input_streams: [events], output_streams: [out]}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`, retention, brokers[0], topic)
			pipeSpec, err := spec.Parse("bench.yaml", []byte(pipe))
			require.NoError(b, err)
			sink := &captureSink{}
			rt, err := runtime.New(pipeSpec, map[string]compute.Factory{"ident": compute.Native(identity)},
				runtime.WithStore(st), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
			require.NoError(b, err)
			b.ResetTimer()
			runUntil(b, rt, sink, b.N, nil)
			b.StopTimer()
			require.NoError(b, st.Compact())
			b.ReportMetric(float64(st.DiskBytes())/float64(b.N), "store-B/record")
			b.ReportMetric(float64(sstBytes(b, dir))/float64(b.N), "sst-B/record")
			b.ReportMetric(float64(value)/float64(b.N), "value-B/record")
		})
	}
}

// sstBytes is the size of the tables of the store in dir.
func sstBytes(b *testing.B, dir string) int64 {
	var n int64
	require.NoError(b, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sst") {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	}))
	return n
}
