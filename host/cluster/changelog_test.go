package cluster_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

func drawChange(t *rapid.T) cluster.Change {
	key := rapid.SampledFrom([]string{"", "a", `["k",1]`, "ü"}).Draw(t, "key")
	switch rapid.IntRange(0, 2).Draw(t, "kind") {
	case 0:
		return cluster.StateChange(key, rapid.SliceOf(rapid.Byte()).Draw(t, "state"), rapid.Bool().Draw(t, "delete"))
	case 1:
		tm := ordering.Timer{Key: key, Trigger: rapid.Int64().Draw(t, "trigger"), Event: rapid.Int64().Draw(t, "event"),
			ID: ordering.TransformID("count.timers", 1, rapid.Uint64().Draw(t, "seq")), Payload: rapid.SliceOf(rapid.Byte()).Draw(t, "payload")}
		return cluster.TimerChange(tm, rapid.Bool().Draw(t, "delete"))
	}
	return cluster.MetaChange(store.PartitionMeta{Epoch: rapid.Uint64().Draw(t, "epoch"), Clock: rapid.Int64().Draw(t, "clock"),
		Out:  store.Watermarks{Event: rapid.Int64().Draw(t, "wm"), System: 1, Partitions: []int64{ordering.NoWatermark, 5}},
		Bias: map[string]int64{"orders": rapid.Int64().Draw(t, "bias")}, Tasks: map[string]uint64{"sink:out": 3}})
}

// TestChangeRoundTrip: every change reads back as it was written, and a
// delete is Kafka's tombstone (a nil value) while an empty state is not.
func TestChangeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawChange(t)
		r, err := c.Record("cl", 2)
		require.NoError(t, err)
		require.Equal(t, "cl", r.Topic)
		require.Equal(t, int32(2), r.Partition)
		require.Equal(t, c.Delete, r.Value == nil, "a delete, and only a delete, is a tombstone")
		got, err := cluster.DecodeChange(r.Key, r.Value)
		require.NoError(t, err)
		want := c
		switch {
		case c.Delete:
			want.State, want.Timer = nil, ordering.Timer{}
		case c.Kind == cluster.ChangeState && len(c.State) == 0:
			want.State = []byte{}
		case c.Kind == cluster.ChangeTimer && len(c.Timer.Payload) == 0:
			want.Timer.Payload = nil
		}
		if c.Kind == cluster.ChangeState && !c.Delete {
			require.Equal(t, string(want.State), string(got.State))
			got.State, want.State = nil, nil
		}
		require.Equal(t, want, got)
	})
}

// TestDecodeChangeRefuses: what Change.Record never writes is refused,
// naming the part at fault.
func TestDecodeChangeRefuses(t *testing.T) {
	timerKey := func(key string) []byte {
		r, err := cluster.TimerChange(ordering.Timer{Key: key, Trigger: 7}, true).Record("cl", 0)
		require.NoError(t, err)
		return r.Key
	}
	for _, tc := range []struct {
		name       string
		key, value []byte
		want       string
	}{
		{"empty key", nil, nil, "record key of 0 bytes: a changelog key has a format byte and a kind"},
		{"other format", []byte{2, 's'}, []byte{1}, "record key: format 2, and this flowhost reads format 1"},
		{"unknown kind", []byte{1, 'x'}, []byte{1}, `record key: unknown kind 'x'`},
		{"short timer", []byte{1, 't', 0, 0}, nil, "record key of a timer: 2 bytes after the kind, and the trigger alone takes 8"},
		{"metadata with a key", []byte{1, 'm', 'a'}, []byte{1}, "record key of the metadata: 1 bytes after the kind, and it has none"},
		{"metadata tombstone", []byte{1, 'm'}, nil, "a tombstone of the metadata, which is never deleted"},
		{"restore point with a key", []byte{1, 'r', 'a'}, []byte{1}, "record key of the restore point: 1 bytes after the kind, and it has none"},
		{"key not UTF-8", []byte{1, 's', 0xff}, []byte{1}, `record key of a state: key "\xff" is not UTF-8`},
		{"empty value", []byte{1, 's', 'a'}, []byte{}, `value of a state of key "a": it does not start with format byte 1`},
		{"value of another format", []byte{1, 's', 'a'}, []byte{2, 'x'}, `value of a state of key "a": it does not start with format byte 1`},
		{"timer value not CBOR", timerKey("k"), []byte{1, 0xff}, `value of the timer of key "k" at 7: `},
		{"timer with an unknown field", timerKey("k"), []byte{1, 0xa1, 0x09, 0x01}, `value of the timer of key "k" at 7: cbor: found unknown field`},
		{"timer with a bad id", timerKey("k"), []byte{1, 0xa1, 0x02, 0x61, 'x'}, `value of the timer of key "k" at 7: id: `},
		{"metadata not CBOR", []byte{1, 'm'}, []byte{1, 0x1f}, "value of the metadata: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.DecodeChange(tc.key, tc.value)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzDecodeChange: whatever DecodeChange accepts is written back by
// Change.Record as the same record key, and reads back as the same change.
func FuzzDecodeChange(f *testing.F) {
	for _, c := range []cluster.Change{
		cluster.StateChange("a", []byte("v"), false),
		cluster.StateChange("a", nil, true),
		cluster.TimerChange(ordering.Timer{Key: "k", Trigger: -5, Event: 3, ID: ordering.TransformID("c.timers", 0, 9), Payload: []byte("p")}, false),
		cluster.MetaChange(store.PartitionMeta{Epoch: 3, Bias: map[string]int64{"s": 1}}),
		{Kind: cluster.ChangeRestorePoint, Point: []byte("token")},
	} {
		r, err := c.Record("cl", 0)
		require.NoError(f, err)
		f.Add(r.Key, r.Value, r.Value == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		c, err := cluster.DecodeChange(key, value)
		if err != nil {
			return
		}
		r, err := c.Record("cl", 0)
		require.NoError(t, err)
		require.Equal(t, key, r.Key)
		again, err := cluster.DecodeChange(r.Key, r.Value)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%+v", c), fmt.Sprintf("%+v", again))
	})
}

// epochTopics makes the topics a committer of computation "count" of a
// fresh pipeline needs: its changelog (compacted, 2 partitions), one
// input topic and one output topic.
func epochTopics(t testing.TB) (pipeline, input, output string, opts []kgo.Opt) {
	pipeline, input, output, opts, _ = epochTopicsWithCompact(t)
	return pipeline, input, output, opts
}

// epochTopicsWithCompact is epochTopics with testClusterWithCompact's
// compact.
func epochTopicsWithCompact(t testing.TB) (pipeline, input, output string, opts []kgo.Opt, compact func()) {
	adm, brokers, compact := testClusterWithCompact(t)
	pipeline = uniqueName(t)
	input, output = cluster.StreamTopic(pipeline, "orders", "count"), cluster.StreamTopic(pipeline, "counts", "report")
	policy := "compact"
	ctx := context.Background()
	_, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": &policy}, cluster.ChangelogTopic(pipeline, "count"))
	require.NoError(t, err)
	_, err = adm.CreateTopics(ctx, 2, 1, nil, input, output)
	require.NoError(t, err)
	return pipeline, input, output, []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(10 * time.Millisecond)}, compact
}

func newCommitter(t *testing.T, pipeline, input string, partition int32, opts []kgo.Opt) *cluster.Committer {
	t.Helper()
	c, err := cluster.NewCommitter(context.Background(), cluster.CommitterConfig{Pipeline: pipeline, Computation: "count",
		Partition: partition, Inputs: []string{input}, Opts: opts})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// imageModel folds committed epochs' changes as a restore must.
type imageModel struct {
	state  map[string]string
	timers map[cluster.TimerRef]ordering.Timer
	meta   *store.PartitionMeta
}

func (m *imageModel) apply(cs []cluster.Change) {
	for _, c := range cs {
		switch c.Kind {
		case cluster.ChangeState:
			if c.Delete {
				delete(m.state, c.Key)
			} else {
				m.state[c.Key] = string(c.State)
			}
		case cluster.ChangeTimer:
			if c.Delete {
				delete(m.timers, cluster.TimerRef{Key: c.Key, Trigger: c.Trigger})
			} else {
				m.timers[cluster.TimerRef{Key: c.Key, Trigger: c.Trigger}] = c.Timer
			}
		case cluster.ChangeMeta:
			meta := c.Meta
			m.meta = &meta
		}
	}
}

func requireImage(t *testing.T, m *imageModel, im *cluster.Image) {
	t.Helper()
	state := map[string]string{}
	for k, v := range im.State {
		state[k] = string(v)
	}
	require.Equal(t, m.state, state, "state")
	require.Equal(t, m.timers, im.Timers, "timers")
	require.Equal(t, m.meta != nil, im.HasMeta, "has metadata")
	if m.meta != nil {
		require.Equal(t, *m.meta, im.Meta, "metadata")
	}
}

// randomEpoch draws an epoch's changes over a few keys.
func randomEpoch(rng *rand.Rand, n uint64) []cluster.Change {
	var cs []cluster.Change
	for range 1 + rng.IntN(6) {
		key := fmt.Sprintf("k%d", rng.IntN(5))
		switch rng.IntN(3) {
		case 0:
			cs = append(cs, cluster.StateChange(key, fmt.Appendf(nil, "v%d", rng.IntN(100)), rng.IntN(4) == 0))
		case 1:
			tm := ordering.Timer{Key: key, Trigger: int64(rng.IntN(4)), Event: int64(rng.IntN(9)), ID: ordering.TransformID("count.timers", 0, n)}
			cs = append(cs, cluster.TimerChange(tm, rng.IntN(3) == 0))
		}
	}
	return append(cs, cluster.MetaChange(store.PartitionMeta{Epoch: n, OutSeq: n * 10, Bias: map[string]int64{"orders": int64(n)}}))
}

// TestRestoreSeesOnlyCommittedEpochs commits random epochs on partition 1,
// some of them failing (an output to a partition the topic does not have,
// which aborts the transaction after its changelog records were sent),
// and requires a restore to give exactly what the committed epochs left,
// and the group to hold the last committed epoch's consumed offset;
// partition 0 stays empty.
func TestRestoreSeesOnlyCommittedEpochs(t *testing.T) {
	pipeline, input, output, opts, compact := epochTopicsWithCompact(t)
	ctx := context.Background()
	c := newCommitter(t, pipeline, input, 1, opts)
	model := &imageModel{state: map[string]string{}, timers: map[cluster.TimerRef]ordering.Timer{}}
	rng := rand.New(rand.NewPCG(1, 2))
	var consumed int64 = -1
	aborted := 0
	for n := uint64(1); n <= 30; n++ {
		cs := randomEpoch(rng, n)
		out := &kgo.Record{Topic: output, Partition: 1, Value: fmt.Appendf(nil, "epoch %d", n)}
		fail := rng.IntN(4) == 0
		if fail {
			out.Partition = 7
		}
		err := c.Commit(ctx, cluster.Epoch{Changes: cs, Outputs: []*kgo.Record{out}, Consumed: map[string]int64{input: int64(n)}})
		if fail {
			require.Error(t, err, "epoch %d", n)
			require.NotErrorIs(t, err, cluster.ErrFenced)
			aborted++
			continue
		}
		require.NoError(t, err, "epoch %d", n)
		model.apply(cs)
		consumed = int64(n)
	}
	require.Positive(t, aborted)
	// The last epoch fails too: the changelog ends with an aborted
	// transaction and its marker, which compaction removes below.
	err := c.Commit(ctx, cluster.Epoch{Changes: randomEpoch(rng, 31), Outputs: []*kgo.Record{{Topic: output, Partition: 7}}})
	require.Error(t, err)
	im, err := c.Restore(ctx)
	require.NoError(t, err)
	requireImage(t, model, im)
	again, err := c.Restore(ctx)
	require.NoError(t, err)
	requireImage(t, model, again)
	require.Equal(t, im.Records, again.Records, "a restore point is not read as data")
	got, err := c.Consumed(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{input: consumed}, got)

	// Compaction removes overwritten records, aborted transactions and
	// their markers: the restore reads fewer records and the same image.
	if compact == nil {
		t.Log("FLOWHOST_KAFKA_BROKERS: its brokers compact on their own schedule; the restore after compaction is not checked")
	} else {
		compact()
		after, err := newCommitter(t, pipeline, input, 1, opts).Restore(ctx)
		require.NoError(t, err)
		requireImage(t, model, after)
		require.Less(t, after.Records, im.Records, "compaction removed records")
	}

	empty, err := newCommitter(t, pipeline, input, 0, opts).Restore(ctx)
	require.NoError(t, err)
	require.Empty(t, empty.State)
	require.False(t, empty.HasMeta)
}

// TestZombieIsFenced: a second committer of a partition (its new owner)
// fences the first; the first's next epoch fails with ErrFenced and is
// never visible: not in the restored changelog, not in the output read
// with read_committed, not in the group's offsets.
func TestZombieIsFenced(t *testing.T) {
	pipeline, input, output, opts := epochTopics(t)
	ctx := context.Background()
	epoch := func(n int64, who string) cluster.Epoch {
		return cluster.Epoch{
			Changes:  []cluster.Change{cluster.StateChange("k", []byte(who), false), cluster.MetaChange(store.PartitionMeta{Epoch: uint64(n)})},
			Outputs:  []*kgo.Record{{Topic: output, Partition: 0, Value: fmt.Appendf(nil, "%s %d", who, n)}},
			Consumed: map[string]int64{input: n},
		}
	}
	old := newCommitter(t, pipeline, input, 0, opts)
	require.NoError(t, old.Commit(ctx, epoch(1, "old")))

	successor := newCommitter(t, pipeline, input, 0, opts)
	err := old.Commit(ctx, epoch(2, "zombie"))
	require.ErrorIs(t, err, cluster.ErrFenced)
	require.NoError(t, successor.Commit(ctx, epoch(3, "new")))

	_, err = old.Restore(ctx)
	require.ErrorIs(t, err, cluster.ErrFenced, "a zombie cannot restore either")
	im, err := successor.Restore(ctx)
	require.NoError(t, err)
	require.Equal(t, "new", string(im.State["k"]))
	require.Equal(t, uint64(3), im.Meta.Epoch)
	got, err := successor.Consumed(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{input: 3}, got)

	// The output, read_committed, to its last stable offset.
	r, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{output: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	require.NoError(t, err)
	defer r.Close()
	var values []string
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(values) < 2 {
		fs := r.PollFetches(pollCtx)
		require.NoError(t, pollCtx.Err(), "read so far: %q", values)
		fs.EachRecord(func(rec *kgo.Record) { values = append(values, string(rec.Value)) })
	}
	require.Equal(t, []string{"old 1", "new 3"}, values)
}

// TestRestoreOfALargeChangelog: a restore reads many epochs of many keys
// back (several fetches), the newest value of each key winning.
func TestRestoreOfALargeChangelog(t *testing.T) {
	pipeline, input, _, opts := epochTopics(t)
	ctx := context.Background()
	c := newCommitter(t, pipeline, input, 0, opts)
	model := &imageModel{state: map[string]string{}, timers: map[cluster.TimerRef]ordering.Timer{}}
	for n := range 20 {
		var cs []cluster.Change
		for k := range 500 {
			cs = append(cs, cluster.StateChange(fmt.Sprintf("key-%d", k), fmt.Appendf(nil, "%d-%d", n, k), n == 19 && k%7 == 0))
		}
		cs = append(cs, cluster.TimerChange(ordering.Timer{Key: "t", Trigger: math.MinInt64 + int64(n), ID: ordering.TransformID("count.timers", 0, uint64(n))}, false))
		require.NoError(t, c.Commit(ctx, cluster.Epoch{Changes: cs}))
		model.apply(cs)
	}
	im, err := c.Restore(ctx)
	require.NoError(t, err)
	requireImage(t, model, im)
	require.Equal(t, 20*501, im.Records)
	require.Len(t, im.SortedTimers(), 20)
	require.Equal(t, math.MinInt64, int(im.SortedTimers()[0].Trigger))
}

// TestOpenTransactionOfADeadOwnerIsAborted: an owner that died in the
// middle of an epoch left its transaction open; the new owner's committer
// aborts it on start, and the restore shows none of it.
func TestOpenTransactionOfADeadOwnerIsAborted(t *testing.T) {
	pipeline, input, _, opts := epochTopics(t)
	ctx := context.Background()
	first := newCommitter(t, pipeline, input, 0, opts)
	require.NoError(t, first.Commit(ctx, cluster.Epoch{Changes: []cluster.Change{cluster.StateChange("k", []byte("committed"), false)}}))

	// The dead owner: its transactional id, a transaction begun and sent,
	// never ended.
	dead, err := kgo.NewClient(append(opts, kgo.TransactionalID(cluster.TransactionalID(pipeline, "count", 0)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer dead.Close()
	require.NoError(t, dead.BeginTransaction())
	r, err := cluster.StateChange("k", []byte("half an epoch"), false).Record(cluster.ChangelogTopic(pipeline, "count"), 0)
	require.NoError(t, err)
	require.NoError(t, dead.ProduceSync(ctx, r).FirstErr())

	successor := newCommitter(t, pipeline, input, 0, opts)
	im, err := successor.Restore(ctx)
	require.NoError(t, err)
	require.Equal(t, "committed", string(im.State["k"]))
	require.NoError(t, successor.Commit(ctx, cluster.Epoch{Changes: []cluster.Change{cluster.StateChange("k", []byte("next"), false)}}))
	im, err = successor.Restore(ctx)
	require.NoError(t, err)
	require.Equal(t, "next", string(im.State["k"]))
	require.Equal(t, 2, im.Records, "the aborted record is not read")
}
