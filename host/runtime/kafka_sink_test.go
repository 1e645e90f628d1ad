package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

const kafkaSinkPipeline = `
name: eos
sources:
  - name: in
    type: generator
    stream: events
    partitions: 2
    partition_by: [key]
    generator: {count: %d, keys: 20, seed: 9, payload_bytes: 4}
computations:
  - name: tally
    plugin: tally
    kind: transform
    partitions: 3
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 32}
sinks:
  - name: k
    type: kafka
    streams: [out]
    format: payload
    kafka: {brokers: [%q], topic: %s, key_fields: [key]%s}
`

const kafkaSinkRecords = 2000

// keyedTally is tally with the key in every output payload, for the sink's
// key_fields: each key's records go to one Kafka partition, in order.
var keyedTally = compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		var n int
		if k.State != nil {
			if err := json.Unmarshal(k.State, &n); err != nil {
				return nil, err
			}
		}
		rk := abi.ResponseKey{Key: k.Key}
		for range k.Timers {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `{"key":%q,"count":%d}`, k.Key, n)})
		}
		for j, m := range k.Messages {
			var p struct{ Seq int }
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return nil, err
			}
			n++
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `{"key":%q,"seq":%d}`, k.Key, p.Seq), Parents: []uint32{uint32(len(k.Timers) + j)}})
		}
		if len(k.Messages) > 0 {
			rk.TimersSet = []abi.Timer{{TriggerTimestamp: math.MaxInt64 - 1}}
		}
		rk.StateOp = abi.StateReplace
		rk.State = fmt.Appendf(nil, "%d", n)
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
})

// runKafkaSink runs the pipeline once on st (nil: in memory), with fault
// called at every step of the sink's commits.
func runKafkaSink(t *testing.T, st *store.Store, brokers []string, topic, extra string, fault func(string, runtime.KafkaSinkStep) error) (*runtime.Runtime, error) {
	t.Helper()
	p, err := spec.Parse("test.yaml", fmt.Appendf(nil, kafkaSinkPipeline, kafkaSinkRecords, brokers[0], topic, extra))
	require.NoError(t, err)
	opts := []runtime.Option{runtime.WithDeadLetter(&bytes.Buffer{})}
	if st != nil {
		opts = append(opts, runtime.WithStore(st))
	}
	rt, err := runtime.New(p, map[string]compute.Factory{"tally": compute.Native(keyedTally)}, opts...)
	if err != nil {
		return nil, err
	}
	runtime.SetKafkaSinkFault(rt, fault)
	return rt, rt.Run(context.Background())
}

// requireExactlyOnceOutput reads the topic as a read_committed consumer
// and checks that it holds every seq once and every key's count once,
// the counts adding up to the input, and each key's seqs in order in its
// partition.
func requireExactlyOnceOutput(t *testing.T, brokers []string, topic string) {
	t.Helper()
	seqs := map[int]int{}
	counts := map[string]int{}
	total := 0
	for part, recs := range kafkatest.ReadCommitted(t, brokers, topic, 3) {
		lastSeq := map[string]int{}
		for _, r := range recs {
			var p struct {
				Seq   *int
				Key   string
				Count int
			}
			require.NoError(t, json.Unmarshal(r.Value, &p), "partition %d offset %d", part, r.Offset)
			if p.Seq == nil {
				_, dup := counts[p.Key]
				require.False(t, dup, "key %s counted twice", p.Key)
				counts[p.Key] = p.Count
				total += p.Count
				continue
			}
			seqs[*p.Seq]++
			k := string(r.Key)
			if prev, ok := lastSeq[k]; ok {
				require.Less(t, prev, *p.Seq, "partition %d: key %s out of order", part, k)
			}
			lastSeq[k] = *p.Seq
		}
	}
	for seq := range kafkaSinkRecords {
		require.Equal(t, 1, seqs[seq], "seq %d is in the topic %d times", seq, seqs[seq])
	}
	require.Len(t, seqs, kafkaSinkRecords)
	require.Len(t, counts, 20)
	require.Equal(t, kafkaSinkRecords, total, "the state-derived counts add up to the input")
}

func TestKafkaSinkExactlyOnceAcrossCrashesAtEveryStep(t *testing.T) {
	steps := []runtime.KafkaSinkStep{runtime.KafkaStepPending, runtime.KafkaStepBeforeEnd, runtime.KafkaStepAfterEnd}
	for _, step := range steps {
		t.Run(string(step), func(t *testing.T) {
			brokers, topic := kafkatest.Topic(t, 3)
			st, err := store.Open(t.TempDir(), store.Options{})
			require.NoError(t, err)
			defer st.Close()
			// Crash at the step of the first commit of each of the first
			// two runs (the second's is the one that recovers the first's
			// batch, unless that had reached Kafka), then run to the end.
			failures := 0
			for run := 0; ; run++ {
				fired := false
				fault := func(_ string, s runtime.KafkaSinkStep) error {
					if s != step || run >= 2 || fired {
						return nil
					}
					fired = true
					return errInjected
				}
				rt, err := runKafkaSink(t, st, brokers, topic, "", fault)
				if err == nil {
					committed, ok := seriesValue(t, rt, "flowhost_kafka_transactions_total", map[string]string{"sink": "k", "outcome": "committed"})
					require.True(t, ok || run > 0, "the first run commits transactions")
					require.True(t, committed > 0 || run > 0)
					break
				}
				require.ErrorIs(t, err, errInjected, "run %d", run)
				failures++
				require.Less(t, run, 3, "the run never completed")
			}
			require.GreaterOrEqual(t, failures, 1)
			if step != runtime.KafkaStepAfterEnd {
				require.Equal(t, 2, failures, "the recovering run writes the first run's batch again, and crashes in it")
			}
			requireExactlyOnceOutput(t, brokers, topic)

			// A run after completion writes nothing.
			_, err = runKafkaSink(t, st, brokers, topic, "", nil)
			require.NoError(t, err)
			requireExactlyOnceOutput(t, brokers, topic)
		})
	}
}

func TestKafkaSinkDeliveryModes(t *testing.T) {
	tests := []struct {
		name    string
		store   bool
		extra   string
		wantErr string
	}{
		{"exactly once by default with a store", true, "", ""},
		{"at least once asked for, with a store", true, ", delivery: at_least_once", ""},
		{"at least once by default in memory", false, "", ""},
		{"exactly once asked for in memory", false, ", delivery: exactly_once",
			`sinks[0].kafka.delivery: sink "k": exactly_once needs a data directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brokers, topic := kafkatest.Topic(t, 3)
			var st *store.Store
			if tt.store {
				var err error
				st, err = store.Open(t.TempDir(), store.Options{})
				require.NoError(t, err)
				defer st.Close()
			}
			rt, err := runKafkaSink(t, st, brokers, topic, tt.extra, nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			_, transactional := seriesValue(t, rt, "flowhost_kafka_transactions_total", map[string]string{"sink": "k", "outcome": "committed"})
			require.Equal(t, tt.store && tt.extra == "", transactional, "transactions only when exactly once")
			out, ok := seriesValue(t, rt, "flowhost_kafka_records_out_total", map[string]string{"sink": "k", "topic": topic})
			require.True(t, ok)
			require.Equal(t, float64(kafkaSinkRecords+20), out)
			requireExactlyOnceOutput(t, brokers, topic) // no crash: at least once writes everything once too
		})
	}
}

func TestKafkaSinkRefusesAMarkerAheadOfItsStore(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 3)
	first, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer first.Close()
	_, err = runKafkaSink(t, first, brokers, topic, "", nil)
	require.NoError(t, err)

	// A store that committed one batch, with the group far ahead: another
	// writer on the same transactional id and group.
	second, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer second.Close()
	b := second.NewBatch()
	b.SetSink("k", store.SinkPosition{Batch: 1, Records: 1})
	require.NoError(t, b.Commit())
	_, err = runKafkaSink(t, second, brokers, topic, "", nil)
	require.ErrorContains(t, err, "but this sink's store committed 1 batches")
	require.ErrorContains(t, err, "give each pipeline its own kafka.transactional_id")
}

func TestKafkaSinkFencedByAnotherWriterStopsTheRun(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 3)
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	// Before the run's second transaction, another producer takes over
	// its transactional id, as a second flowhost on the same id would.
	pending := 0
	usurp := func(_ string, s runtime.KafkaSinkStep) error {
		if s != runtime.KafkaStepPending {
			return nil
		}
		if pending++; pending != 2 {
			return nil
		}
		other, err := connect.NewKafkaSink(connect.KafkaSinkConfig{Conn: connect.KafkaConnection{Brokers: brokers}, Topic: topic,
			TransactionalID: "flowhost-eos-k", MarkerGroup: "flowhost-sink-eos-k"})
		if err != nil {
			return err
		}
		defer other.Close()
		_, err = other.Recover(context.Background())
		return err
	}
	_, err = runKafkaSink(t, st, brokers, topic, "", usurp)
	var fatal *connect.KafkaFatalError
	require.ErrorAs(t, err, &fatal)
	require.ErrorContains(t, err, "took over the transactional id flowhost-eos-k")

	// Once the other writer is gone, the next run finishes the job, and
	// nothing of the fenced transaction is visible.
	_, err = runKafkaSink(t, st, brokers, topic, "", nil)
	require.NoError(t, err)
	requireExactlyOnceOutput(t, brokers, topic)
}

func TestKafkaSinkSwitchedToAtLeastOnceDropsThePendingBatch(t *testing.T) {
	brokers, topic := kafkatest.Topic(t, 3)
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	crash := func(_ string, s runtime.KafkaSinkStep) error {
		if s == runtime.KafkaStepBeforeEnd {
			return errInjected
		}
		return nil
	}
	_, err = runKafkaSink(t, st, brokers, topic, "", crash)
	require.ErrorIs(t, err, errInjected)
	pos, _, err := st.Sink("k")
	require.NoError(t, err)
	require.NotNil(t, pos.Pending, "the crash left batch 1 pending")

	_, err = runKafkaSink(t, st, brokers, topic, ", delivery: at_least_once", nil)
	require.NoError(t, err)
	pos, _, err = st.Sink("k")
	require.NoError(t, err)
	require.Nil(t, pos.Pending, "at least once has no batch pending")

	// Back to exactly once: the store and the marker agree, and taking
	// over the transactional id aborts what the crash left open (which
	// until then holds read_committed consumers back).
	_, err = runKafkaSink(t, st, brokers, topic, "", nil)
	require.NoError(t, err)
	requireExactlyOnceOutput(t, brokers, topic)
}
