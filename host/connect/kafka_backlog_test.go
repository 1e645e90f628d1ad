package connect

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

type backlogReport struct {
	done, total int64
	caughtUp    bool
}

// The backlog is what the topic held past the start offsets when the
// source started: records produced after it are not in it, and the source
// reports it caught up once it read what was there.
func TestKafkaSourceBacklog(t *testing.T) {
	brokers, topic := testKafka(t, 2)
	for i := range 7 { // partition 0: offsets 0..3, partition 1: 0..2
		produce(t, brokers, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var reports []backlogReport
	cfg := KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 2,
		// Resume part way: 3 of partition 0 and 3 of partition 1 are left.
		Resume: kafkaResume([]int64{1, 0}),
		Backlog: func(done, total int64, caughtUp bool) {
			if len(reports) == 0 {
				// Produced once the backlog was measured: not part of it.
				produce(t, brokers, &kgo.Record{Topic: topic, Partition: 1, Value: []byte(`7`)})
			}
			reports = append(reports, backlogReport{done, total, caughtUp})
			if caughtUp {
				cancel()
			}
		}}
	src, err := NewKafkaSource(cfg)
	require.NoError(t, err)
	emitted := 0
	err = src.Run(ctx, func(Record) error { emitted++; return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, reports)
	require.Equal(t, backlogReport{0, 6, false}, reports[0])
	require.Equal(t, backlogReport{6, 6, true}, reports[len(reports)-1])
	for i := 1; i < len(reports); i++ {
		require.Equal(t, int64(6), reports[i].total, "report %d", i)
		require.GreaterOrEqual(t, reports[i].done, reports[i-1].done, "report %d", i)
		require.Equal(t, i == len(reports)-1, reports[i].caughtUp, "report %d", i)
	}
	require.GreaterOrEqual(t, emitted, 6)
}

// A source at the end of its topic has no backlog: it is caught up at once.
func TestKafkaSourceNoBacklog(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	produce(t, brokers, &kgo.Record{Topic: topic, Value: []byte(`1`)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var reports []backlogReport
	cfg := KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Name: "in", Stream: "s", Partitions: 1,
		Resume: kafkaResume([]int64{1}),
		Backlog: func(done, total int64, caughtUp bool) {
			reports = append(reports, backlogReport{done, total, caughtUp})
			cancel()
		}}
	src, err := NewKafkaSource(cfg)
	require.NoError(t, err)
	err = src.Run(ctx, func(Record) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []backlogReport{{0, 0, true}}, reports)
}
