package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// storageUnderTest is one implementation of [Storage] for the shared
// suite: every test below runs once per implementation. reopen stands for
// a restart: a durable storage is closed and opened again on the same
// files (pebble) or topic (Kafka, see cluster.OpenStore); the memory
// storage is handed to the next runtime as it is.
type storageUnderTest struct {
	name string
	open func(t testing.TB) (s Storage, reopen func() Storage)
}

// kafkaStores numbers the Kafka storages' pipelines, which share a
// cluster on FLOWHOST_KAFKA_BROKERS.
var kafkaStores atomic.Int64

func storagesUnderTest() []storageUnderTest {
	var brokers []string // one cluster per test, started by its first open
	return []storageUnderTest{
		{"memory", func(testing.TB) (Storage, func() Storage) {
			s := NewMemoryStorage()
			return s, func() Storage { return s }
		}},
		{"kafka", func(t testing.TB) (Storage, func() Storage) {
			if brokers == nil {
				brokers = kafkatest.Brokers(t)
			}
			cfg := cluster.StoreConfig{Pipeline: &spec.Pipeline{Name: fmt.Sprintf("storage%d", kafkaStores.Add(1))}, Replication: -1,
				Opts: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(10 * time.Millisecond)}}
			return reopenable(t, func() (*store.Store, error) { return cluster.OpenStore(context.Background(), cfg) })
		}},
		{"pebble", func(t testing.TB) (Storage, func() Storage) {
			fs := vfs.NewMem()
			return reopenable(t, func() (*store.Store, error) { return store.Open("/data", store.Options{FS: fs}) })
		}},
	}
}

// reopenable opens a store behind the boundary, with the reopen of
// storageUnderTest: close it, and open it again as a restart does.
func reopenable(t testing.TB, open func() (*store.Store, error)) (Storage, func() Storage) {
	cur, err := open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cur.Close() })
	return newPebbleStorage(cur), func() Storage {
		require.NoError(t, cur.Close())
		cur, err = open()
		require.NoError(t, err)
		return newPebbleStorage(cur)
	}
}

// stateModel is what a partition's committed state and timers must be.
type stateModel struct {
	state  map[string]string
	timers map[timerRef]ordering.Timer
}

// TestStorageStateAndTimers runs random batches of state and timer writes
// over two partitions, committing, discarding or restarting between them,
// and requires every read to show exactly the committed writes: nothing
// of a batch before its Commit, nothing of a discarded one, everything
// of a committed one (across a restart too), and no partition seeing
// another's keys.
func TestStorageStateAndTimers(t *testing.T) {
	for _, impl := range storagesUnderTest() {
		t.Run(impl.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				s, reopen := impl.open(t)
				models := [2]stateModel{}
				for i := range models {
					models[i] = stateModel{state: map[string]string{}, timers: map[timerRef]ordering.Timer{}}
				}
				keys := []string{"a", "b", `["k",1]`}
				check := func(when string) {
					for part, m := range models {
						for _, k := range keys {
							v, ok, err := s.State("c", part, k)
							require.NoError(rt, err)
							want, wantOK := m.state[k]
							require.Equal(rt, wantOK, ok, "%s: partition %d key %q present", when, part, k)
							require.Equal(rt, want, string(v), "%s: partition %d key %q", when, part, k)
						}
						got, err := s.Timers("c", part)
						require.NoError(rt, err)
						require.Equal(rt, sortedTimers(m.timers), sortedTimers(timerMap(got)), "%s: partition %d timers", when, part)
					}
				}
				steps := rapid.IntRange(1, 12).Draw(rt, "steps")
				for step := range steps {
					part := rapid.IntRange(0, 1).Draw(rt, "partition")
					next := stateModel{state: maps.Clone(models[part].state), timers: maps.Clone(models[part].timers)}
					b := s.NewBatch()
					for range rapid.IntRange(1, 5).Draw(rt, "writes") {
						k := rapid.SampledFrom(keys).Draw(rt, "key")
						trigger := rapid.Int64Range(-3, 3).Draw(rt, "trigger")
						switch rapid.IntRange(0, 3).Draw(rt, "write") {
						case 0:
							v := fmt.Sprintf("v%d", step)
							b.SetState("c", part, k, []byte(v))
							next.state[k] = v
						case 1:
							b.DeleteState("c", part, k)
							delete(next.state, k)
						case 2:
							tm := ordering.Timer{Key: k, Trigger: trigger, Event: trigger - 1,
								ID: ordering.TransformID("c.timers", int32(part), uint64(step)), Payload: []byte{byte(step)}}
							b.SetTimer("c", part, tm)
							next.timers[timerRef{k, trigger}] = tm
						case 3:
							b.DeleteTimer("c", part, k, trigger)
							delete(next.timers, timerRef{k, trigger})
						}
					}
					check("before the batch commits")
					switch rapid.IntRange(0, 3).Draw(rt, "then") {
					case 0:
						b.Discard()
					default:
						require.NoError(rt, b.Commit())
						models[part] = next
					}
					check("after the batch")
					if rapid.IntRange(0, 3).Draw(rt, "restart") == 0 {
						s = reopen()
						check("after a restart")
					}
				}
			})
		})
	}
}

func timerMap(ts []ordering.Timer) map[timerRef]ordering.Timer {
	m := map[timerRef]ordering.Timer{}
	for _, t := range ts {
		m[timerRef{t.Key, t.Trigger}] = t
	}
	return m
}

// sortedTimers lists timers by (key, trigger), their ids as text (a
// decoded id and the one written compare by value, not by layout).
func sortedTimers(m map[timerRef]ordering.Timer) []string {
	var out []string
	for _, t := range m {
		out = append(out, fmt.Sprintf("%s@%d ev=%d id=%s payload=%x", t.Key, t.Trigger, t.Event, t.ID, t.Payload))
	}
	slices.Sort(out)
	return out
}

// TestStorageKeepsWhatItPromises commits one batch with every kind of
// write, restarts, and requires a durable storage to give each back and
// the memory storage to give back what a drained run leaves for the next
// (state, timers, positions, watermarks, partition metadata) with none of
// what carries records (its [Storage.Durable] contract). A batch that is
// discarded changes nothing on either.
func TestStorageKeepsWhatItPromises(t *testing.T) {
	for _, impl := range storagesUnderTest() {
		t.Run(impl.name, func(t *testing.T) {
			s, reopen := impl.open(t)
			require.NoError(t, s.Bind("shape 1"))
			durable := s.Durable()
			rec := &ordering.Message{ID: ordering.SourceID("orders", 1, 7), Stream: "orders", Payload: []byte(`{"x":1}`),
				Time: ordering.Timestamps{Event: 95, System: 101, Write: 100, Alignment: 100}}
			from := [2]ordering.Sender{{Computation: "enrich", Partition: 0}, {Computation: "source:orders", Partition: 1}}
			d := store.Dest{Name: "count", Partition: 1}
			b := s.NewBatch()
			b.AppendSource("orders", 1, 7, rec)
			b.SetIngest("orders", 1, store.IngestPosition{Next: 8, Clock: 100})
			b.SetIngestTime("orders", 1, 7, 1000)
			b.SetConnector("orders-in", []byte("offset=42"))
			b.SetIdempotency("orders", "order-7", 7, 95)
			b.SetRead("orders", 1, store.ReadPosition{Next: 8, Tasks: map[string]uint64{"count/p1": 1}})
			wm := store.Watermarks{Event: 90, System: 101, Partitions: []int64{ordering.NoWatermark, 95}}
			b.SetSourceWatermarks("orders", wm)
			var queued []string
			for task := 3; task >= 1; task-- { // queued out of order: each sender's queue is in task order
				m := &ordering.Message{ID: ordering.TransformID("enrich", 0, uint64(task)), Stream: "enriched", Key: "k",
					Payload: []byte("p"), Time: ordering.Timestamps{Event: int64(task), System: int64(task), Alignment: int64(task)},
					Task: ordering.TaskID(task), Parents: []ordering.MessageID{rec.ID}}
				b.Enqueue(d, from[0], m.Task, m)
			}
			sourceCopy := *rec
			sourceCopy.Key, sourceCopy.Task = "k", 1
			b.Enqueue(d, from[1], 1, &sourceCopy)
			b.SetState("count", 1, "k", []byte("state"))
			b.SetTimer("count", 1, ordering.Timer{Key: "k", Trigger: 9, Event: 8, ID: ordering.TransformID("count.timers", 1, 0)})
			meta := store.PartitionMeta{Epoch: 4, OutSeq: 10, Clock: 77, Out: store.Watermarks{Event: 5, System: 6},
				Bias: map[string]int64{"enriched": -3}, Tasks: map[string]uint64{"sink:out": 5}}
			b.SetPartition("count", 1, meta)
			b.SetSink("out", store.SinkPosition{Bytes: 123, Records: 2})
			b.AppendSinkLog("out", 0, []byte("line0"))
			b.AppendSinkLog("out", 1, []byte("line1"))
			require.Positive(t, b.Len())
			require.NoError(t, b.Commit())

			// A sink's queue, taken by TaskId: through the middle of one
			// batch's run of messages, and a source record by reference.
			sink := store.Dest{Sink: true, Name: "out"}
			b = s.NewBatch()
			for task := 1; task <= 4; task++ {
				b.Enqueue(sink, from[0], ordering.TaskID(task), &ordering.Message{ID: ordering.TransformID("enrich", 0, uint64(10+task)),
					Stream: "enriched", Payload: fmt.Appendf(nil, "out %d", task), Time: ordering.Timestamps{Event: int64(task)}, Task: ordering.TaskID(task)})
			}
			b.Enqueue(sink, from[1], 1, &sourceCopy)
			require.NoError(t, b.Commit())

			b = s.NewBatch()
			b.Dequeue(d, from[0], 1)
			b.TakeThrough(sink, from[0], 2)
			require.NoError(t, b.Commit())

			// A caller reuses the maps it handed over; a discarded batch
			// changes nothing.
			sentBias, sentTasks := meta.Bias, meta.Tasks
			meta = store.PartitionMeta{Epoch: 4, OutSeq: 10, Clock: 77, Out: store.Watermarks{Event: 5, System: 6},
				Bias: map[string]int64{"enriched": -3}, Tasks: map[string]uint64{"sink:out": 5}}
			sentBias["enriched"], sentTasks["sink:out"] = 99, 99
			b = s.NewBatch()
			b.SetIngest("orders", 1, store.IngestPosition{Next: 50})
			b.SetRead("orders", 1, store.ReadPosition{Next: 50})
			b.SetSourceWatermarks("orders", store.Watermarks{Event: 500})
			b.SetPartition("count", 1, store.PartitionMeta{Epoch: 50})
			b.SetState("count", 1, "k", []byte("discarded"))
			b.Discard()

			s = reopen()
			require.NoError(t, s.Bind("shape 1"))
			require.Equal(t, durable, s.Durable())

			v, ok, err := s.State("count", 1, "k")
			require.NoError(t, err)
			require.True(t, ok, "state is kept by every storage")
			require.Equal(t, "state", string(v))
			timers, err := s.Timers("count", 1)
			require.NoError(t, err)
			require.Len(t, timers, 1, "timers are kept by every storage")

			// Every storage keeps what a run that drained its inputs
			// leaves for the next.
			ip, _, err := s.Ingest("orders", 1)
			require.NoError(t, err)
			require.Equal(t, store.IngestPosition{Next: 8, Clock: 100}, ip, "ingest position")
			rp, _, err := s.Read("orders", 1)
			require.NoError(t, err)
			require.Equal(t, store.ReadPosition{Next: 8, Tasks: map[string]uint64{"count/p1": 1}}, rp, "read position")
			gotWM, _, err := s.SourceWatermarks("orders")
			require.NoError(t, err)
			require.Equal(t, wm, gotWM, "source watermarks")
			gotMeta, resumed, err := s.Partition("count", 1)
			require.NoError(t, err)
			require.True(t, resumed, "partition resumed")
			require.Equal(t, meta, gotMeta, "partition metadata")

			// The rest is kept only by a durable storage.
			keep := func(what string, got, want, none any) {
				t.Helper()
				if durable {
					require.Equal(t, want, got, what)
				} else {
					require.Equal(t, none, got, what)
				}
			}
			tok, err := s.Connector("orders-in")
			require.NoError(t, err)
			keep("connector position", string(tok), "offset=42", "")
			idem, _, err := s.Idempotent("orders", "order-7")
			require.NoError(t, err)
			keep("idempotency key", idem, store.Idempotency{Offset: 7, Event: 95}, store.Idempotency{})
			var recs []string
			require.NoError(t, s.SourceRecords("orders", 1, 0, func(off uint64, m *ordering.Message) error {
				recs = append(recs, fmt.Sprintf("%d %s %s", off, m.ID, m.Payload))
				return nil
			}))
			keep("source records", recs, []string{fmt.Sprintf("7 %s {\"x\":1}", rec.ID)}, []string(nil))
			first, end, err := s.SourceRange("orders", 1)
			require.NoError(t, err)
			keep("source range", [2]uint64{first, end}, [2]uint64{7, 8}, [2]uint64{0, 0})
			require.NoError(t, s.Queue(d, func(f ordering.Sender, m *ordering.Message) error {
				queued = append(queued, fmt.Sprintf("%s/%d %s task %d", f.Computation, f.Partition, m.Stream, m.Task))
				return nil
			}))
			slices.SortStableFunc(queued, func(a, b string) int { return cmp.Compare(a[:5], b[:5]) })
			keep("queue", queued, []string{
				"enrich/0 enriched task 2", "enrich/0 enriched task 3", "source:orders/1 orders task 1",
			}, []string(nil))
			var sinkQueued []string
			require.NoError(t, s.Queue(sink, func(f ordering.Sender, m *ordering.Message) error {
				sinkQueued = append(sinkQueued, fmt.Sprintf("%s/%d task %d %s", f.Computation, f.Partition, m.Task, m.Payload))
				return nil
			}))
			keep("sink queue", sinkQueued, []string{
				"enrich/0 task 3 out 3", "enrich/0 task 4 out 4", `source:orders/1 task 1 {"x":1}`,
			}, []string(nil))
			floors, err := s.QueuedSourceFloors()
			require.NoError(t, err)
			if durable {
				require.Equal(t, map[store.SourcePartition]uint64{{Stream: "orders", Partition: 1}: 7}, floors,
					"a queued copy of a source record refers to it")
			} else {
				require.Empty(t, floors)
			}
			sp, _, err := s.Sink("out")
			require.NoError(t, err)
			keep("sink position", sp, store.SinkPosition{Bytes: 123, Records: 2}, store.SinkPosition{})
			var lines []string
			require.NoError(t, s.SinkLog("out", 1, func(_ uint64, line []byte) error {
				lines = append(lines, string(line))
				return nil
			}))
			keep("sink log", lines, []string{"line1"}, []string(nil))

			err = s.Bind("shape 2")
			if durable {
				require.True(t, errors.Is(err, store.ErrPipelineMismatch), "a durable storage refuses a pipeline of another shape: %v", err)
			} else {
				// A memory storage forgets what counts the old shape's
				// partitions and streams, and keeps the keyed state.
				require.NoError(t, err)
				_, ok, err := s.Ingest("orders", 1)
				require.NoError(t, err)
				require.False(t, ok, "ingest position after a new shape")
				_, ok, err = s.Read("orders", 1)
				require.NoError(t, err)
				require.False(t, ok, "read position after a new shape")
				_, ok, err = s.SourceWatermarks("orders")
				require.NoError(t, err)
				require.False(t, ok, "watermarks after a new shape")
				_, ok, err = s.Partition("count", 1)
				require.NoError(t, err)
				require.False(t, ok, "partition metadata after a new shape")
				_, ok, err = s.State("count", 1, "k")
				require.NoError(t, err)
				require.True(t, ok, "state after a new shape")
			}
		})
	}
}
