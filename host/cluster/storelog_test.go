package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// kafkaStoreConfig is the StoreConfig of a fresh pipeline on the test's
// cluster, with its compact (nil on FLOWHOST_KAFKA_BROKERS).
func kafkaStoreConfig(t *testing.T) (cluster.StoreConfig, func()) {
	_, brokers, compact := testClusterWithCompact(t)
	return cluster.StoreConfig{Pipeline: &spec.Pipeline{Name: uniqueName(t)}, Replication: -1,
		Opts: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(10 * time.Millisecond)}}, compact
}

func openKafkaStore(t *testing.T, cfg cluster.StoreConfig) *store.Store {
	t.Helper()
	st, err := cluster.OpenStore(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func setState(st *store.Store, key, value string) error {
	b := st.NewBatch()
	b.SetState("count", 0, key, []byte(value))
	return b.Commit()
}

func stateOf(t *testing.T, st *store.Store, key string) string {
	t.Helper()
	v, ok, err := st.State("count", 0, key)
	require.NoError(t, err)
	if !ok {
		return "<none>"
	}
	return string(v)
}

// TestStoreOnKafkaFencesThePreviousHost: a second host opening the
// pipeline's store restores what the first committed, and fences it: the
// first's next commit fails with ErrFenced (its store stops accepting
// commits), and nothing of it reaches the topic.
func TestStoreOnKafkaFencesThePreviousHost(t *testing.T) {
	cfg, _ := kafkaStoreConfig(t)
	first := openKafkaStore(t, cfg)
	require.NoError(t, first.Bind("shape"))
	require.NoError(t, setState(first, "k", "first"))

	second := openKafkaStore(t, cfg)
	require.NoError(t, second.Bind("shape"))
	require.Equal(t, "first", stateOf(t, second, "k"))

	err := setState(first, "k", "zombie")
	require.ErrorIs(t, err, cluster.ErrFenced)
	require.ErrorContains(t, err, "another host took over")
	require.Equal(t, "first", stateOf(t, first, "k"), "a failed commit leaves the cache as it was")
	require.ErrorIs(t, setState(first, "other", "x"), cluster.ErrFenced, "a fenced host never commits again")

	require.NoError(t, setState(second, "k", "second"))
	third := openKafkaStore(t, cfg)
	require.Equal(t, "second", stateOf(t, third, "k"))
	require.Equal(t, "<none>", stateOf(t, third, "other"))
}

// TestStoreOnKafkaSurvivesCompaction: after compaction, which removes
// overwritten values, deleted keys and a range deletion's keys, a restore
// has exactly what was committed, and the topic kept less.
func TestStoreOnKafkaSurvivesCompaction(t *testing.T) {
	cfg, compact := kafkaStoreConfig(t)
	st := openKafkaStore(t, cfg)
	for i := range 200 {
		b := st.NewBatch()
		b.AppendSource("orders", 0, uint64(i), &ordering.Message{Key: "k", Payload: fmt.Appendf(nil, "%d", i)})
		b.SetState("count", 0, fmt.Sprint(i%10), fmt.Appendf(nil, "%d", i))
		if i%10 == 9 {
			b.DeleteState("count", 0, "3")
			b.DeleteSourceBefore("orders", 0, uint64(i-5))
		}
		require.NoError(t, b.Commit())
	}
	check := func(st *store.Store) {
		first, end, err := st.SourceRange("orders", 0)
		require.NoError(t, err)
		require.Equal(t, [2]uint64{194, 200}, [2]uint64{first, end})
		require.Equal(t, "<none>", stateOf(t, st, "3"))
		require.Equal(t, "199", stateOf(t, st, "9"))
		require.Equal(t, "194", stateOf(t, st, "4"))
	}
	check(st)
	records := func() int {
		restored := openKafkaStore(t, cfg)
		check(restored)
		require.NoError(t, restored.Close())
		n, err := keptRecords(t, cfg)
		require.NoError(t, err)
		return n
	}
	before := records()
	if compact == nil {
		t.Log("FLOWHOST_KAFKA_BROKERS: the brokers compact on their own schedule; the restore after compaction is not checked")
		return
	}
	compact()
	check(openKafkaStore(t, cfg))
	kept, err := keptRecords(t, cfg)
	require.NoError(t, err)
	require.Less(t, kept, before/2, "compaction kept %d of %d records", kept, before)
}

// keptRecords counts the records left in the store topic: it appends a
// restore point of its own and reads up to it.
func keptRecords(t *testing.T, cfg cluster.StoreConfig) (int, error) {
	topic := cluster.StoreTopic(cfg.Pipeline.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kgo.NewClient(append(cfg.Opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte{1, 0xff}, Value: []byte{1, 's', 'e', 'n', 't'}}).FirstErr(); err != nil {
		return 0, err
	}
	cl, err := kgo.NewClient(append(cfg.Opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	n := 0
	for found := false; !found; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "\x01sent" {
				found = true
			} else if !found {
				n++
			}
		})
	}
	return n, nil
}

// TestDecodeStoreRecordRefuses: what StoreRecord never writes is refused,
// naming the part at fault.
func TestDecodeStoreRecordRefuses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		key, value []byte
		want       string
	}{
		{"short key", []byte{1}, []byte{1}, "record key of 1 bytes: a store record's key has a format byte and a store key"},
		{"other format", []byte{2, 'k'}, []byte{1}, "record key: format 2, and this flowhost reads format 1"},
		{"value without format", []byte{1, 'k'}, []byte{}, `value of record key "\x01k": it does not start with format byte 1`},
		{"value of another format", []byte{1, 'k'}, []byte{2, 'v'}, `value of record key "\x01k": it does not start with format byte 1`},
		{"deleted restore point", []byte{1, 0xff}, nil, "a tombstone of the restore point, which is never deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cluster.DecodeStoreRecord(tc.key, tc.value)
			require.EqualError(t, err, tc.want)
		})
	}
}

// FuzzDecodeStoreRecord: whatever DecodeStoreRecord accepts as a store
// write, StoreRecord writes back byte for byte.
func FuzzDecodeStoreRecord(f *testing.F) {
	for _, op := range []store.Op{{Key: []byte("kstate"), Value: []byte("v")}, {Key: []byte("q1"), Delete: true}, {Key: []byte("m"), Value: []byte{}}} {
		r := cluster.StoreRecord("t", op)
		f.Add(r.Key, r.Value, r.Value == nil)
	}
	f.Add([]byte{1, 0xff}, []byte{1, 9, 9}, false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		op, point, err := cluster.DecodeStoreRecord(key, value)
		if err != nil || point != nil {
			return
		}
		r := cluster.StoreRecord("t", op)
		require.Equal(t, key, r.Key)
		require.Equal(t, value, r.Value)
	})
}

// TestIdleStoreOnKafkaLearnsItWasFenced: a host that commits nothing
// still learns, from its lease, that another host opened the store: its
// OnFenced is called with ErrFenced, and its store takes no commit.
func TestIdleStoreOnKafkaLearnsItWasFenced(t *testing.T) {
	cfg, _ := kafkaStoreConfig(t)
	fenced := make(chan error, 1)
	idle := cfg
	idle.OnFenced = func(err error) { fenced <- err }
	first := openKafkaStore(t, idle)
	require.NoError(t, setState(first, "k", "first"))
	openKafkaStore(t, cfg)
	select {
	case err := <-fenced:
		require.ErrorIs(t, err, cluster.ErrFenced)
	case <-time.After(30 * cluster.LeaseInterval):
		t.Fatalf("the idle host was not told within %v that it was fenced", 30*cluster.LeaseInterval)
	}
	require.ErrorIs(t, setState(first, "k", "zombie"), cluster.ErrFenced)
}
