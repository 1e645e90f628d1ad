package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/keys"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// FuzzWhatParsesRuns requires every spec that spec.Parse accepts to be
// accepted by the constructors the runtime builds it with, so that a value
// out of range is reported at parse time with its file, line and column,
// never when the run starts. The seeds sit on the bounds of the ranges.
func FuzzWhatParsesRuns(f *testing.F) {
	for _, seed := range []string{
		"name: p\nsources: [{name: in, type: generator, stream: s, watermark: {idle_partitions: {max_ratio: 1}}}]\n",
		"name: p\nsources: [{name: in, type: generator, stream: s, watermark: {out_of_orderness_bound: 0, idle_partitions: {duration: 0, max_ratio: 0}}}]\n",
		"name: p\nsources: [{name: in, type: generator, stream: s, partitions: 65536, partition_by: [key, seq], watermark: {idle_partitions: {duration: 1ns, max_ratio: 0.99}}}]\n",
		"name: p\nsources: [{name: in, type: generator, stream: s, generator: {count: 0, rate: 1.0e-10, keys: 1, payload_bytes: 64MiB, event_lag: 2562047h47m16.854775806s}}]\n",
		"name: p\nsources: [{name: in, type: file, stream: s, file: {path: x}, partitions: 3, partition_by: [user.id, region]}]\n" +
			"computations: [{name: c, plugin: p, partitions: 65536, group_by: [a.b.c], input_streams: [s], input_ordering: {time_type: alignment, stream_delays: {s: 0s}},\n" +
			"  batch: {max_rows: 1, max_bytes: 1, max_duration: 1ns}, buffer_bytes: 1, on_failure: {retries: 0, backoff: 0s, max_backoff: 0s, quarantine_after: 0}}]\n",
		"name: t\ntenants: [{name: a, plugin_dirs: [d], quotas: {cpu_limit: 0.001, ingest_rate: 1.0e9}}]\nsources: [{name: in, type: generator, stream: s, tenant: a}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := spec.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for i := range p.Sources {
			ss := &p.Sources[i]
			_, err := ordering.NewSourceWatermark(ss.Partitions, watermarkConfig(ss), 0)
			require.NoError(t, err, "source %q", ss.Name)
			_, err = connect.NewPartitioner(ss.Partitions, ss.PartitionBy)
			require.NoError(t, err, "source %q", ss.Name)
			if ss.Type == spec.SourceGenerator {
				_, err = connect.NewGenerator(generatorConfig(ss, nil))
				require.NoError(t, err, "source %q", ss.Name)
				require.Less(t, int64(ss.Generator.EventLag), int64(1<<63-1), "a lag drawn in [0, event_lag] needs event_lag+1")
				if ss.Generator.Rate > 0 {
					require.Positive(t, float64(time.Second)/ss.Generator.Rate, "the pause between records fits a duration")
					require.Less(t, float64(time.Second)/ss.Generator.Rate, float64(1<<63-1))
				}
			}
		}
		for i := range p.Computations {
			cs := &p.Computations[i]
			if len(cs.GroupBy) > 0 {
				_, err := keys.NewExtractor(cs.GroupBy)
				require.NoError(t, err, "computation %q", cs.Name)
			}
			_, err := ordering.NewBatcher(ordering.BatchLimits{MaxRows: cs.Batch.MaxRows, MaxBytes: cs.Batch.MaxBytes, MaxAge: int64(cs.Batch.MaxDuration)})
			require.NoError(t, err, "computation %q", cs.Name)
			delays := map[string]int64{}
			for s, d := range cs.InputOrdering.StreamDelays {
				delays[s] = int64(d)
			}
			_, err = ordering.NewMerge(cs.InputStreams, ordering.WithStreamDelays(delays))
			require.NoError(t, err, "computation %q", cs.Name)
			require.LessOrEqual(t, cs.Partitions, 1<<31-1, "message ids hold 31 bits of a partition")
		}
		for _, tn := range p.Tenants {
			q := tn.Quotas
			require.LessOrEqual(t, q.IngestRate, float64(1<<62), "the ingest bucket's size is an int")
			if q.CPULimit > 0 {
				require.Less(t, float64(cpuPeriod)/q.CPULimit, float64(1<<63-1), "a wait for CPU credit fits a duration")
			}
		}
	})
}
