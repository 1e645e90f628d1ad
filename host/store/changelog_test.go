package store

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/ordering"
)

// memLog is a Changelog in memory: the appends that succeeded, in order.
// failNext makes the next Append fail without keeping anything.
type memLog struct {
	mu       sync.Mutex
	appends  [][]Op
	failNext bool
	closed   int
}

func (l *memLog) Restore(apply func(Op) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ops := range l.appends {
		for _, op := range ops {
			if err := apply(op); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *memLog) Append(ops []Op) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failNext {
		l.failNext = false
		return errors.New("broker unreachable")
	}
	kept := make([]Op, len(ops))
	for i, op := range ops {
		kept[i] = Op{Key: bytes.Clone(op.Key), Value: bytes.Clone(op.Value), Delete: op.Delete}
	}
	l.appends = append(l.appends, kept)
	return nil
}

func (l *memLog) Close() error { l.closed++; return nil }

// compacted is what a compacted topic keeps of the log: each key's last
// value, and no deleted key.
func (l *memLog) compacted() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for _, ops := range l.appends {
		for _, op := range ops {
			if op.Delete {
				delete(out, string(op.Key))
			} else {
				out[string(op.Key)] = string(op.Value)
			}
		}
	}
	return out
}

// contents is every key and value of the store's cache.
func contents(t require.TestingT, s *Store) map[string]string {
	it, err := s.db.NewIter(&pebble.IterOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for it.First(); it.Valid(); it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	require.NoError(t, it.Close())
	return out
}

func openLogged(t require.TestingT, l *memLog) *Store {
	s, err := Open("/cache", Options{FS: vfs.NewMem(), Changelog: l})
	require.NoError(t, err)
	return s
}

// TestChangelogHoldsTheStore commits random batches (appends, retention's
// range deletions, state, queues, ingest times) from several goroutines
// at once, with failed appends among them, and requires:
//   - the log, compacted as Kafka compacts a topic, is exactly the
//     cache: a range deletion reaches the log as a deletion of each key,
//     including keys written earlier in the same group;
//   - a failed append leaves nothing in the cache and nothing in the log;
//   - a store rebuilt from the log (a restart, on another machine) has
//     the same contents.
func TestChangelogHoldsTheStore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := &memLog{}
		s := openLogged(t, l)
		defer s.Close()
		const writers = 3
		plans := make([][]func(*Batch), writers)
		for w := range plans {
			for range rapid.IntRange(1, 12).Draw(t, "batches") {
				plans[w] = append(plans[w], drawBatch(t, w))
			}
		}
		failAt := rapid.IntRange(-1, 10).Draw(t, "failAt")
		var wg sync.WaitGroup
		var mu sync.Mutex
		commits := 0
		for w := range writers {
			wg.Go(func() {
				for _, fill := range plans[w] {
					b := s.NewBatch()
					fill(b)
					mu.Lock()
					if commits == failAt {
						l.mu.Lock()
						l.failNext = true
						l.mu.Unlock()
					}
					commits++
					mu.Unlock()
					if err := b.Commit(); err != nil {
						require.ErrorContains(t, err, "commit to the changelog: broker unreachable")
					}
				}
			})
		}
		wg.Wait()
		cache := contents(t, s)
		require.Equal(t, l.compacted(), cache, "the compacted log is not the cache")
		again := openLogged(t, l)
		defer again.Close()
		require.Equal(t, cache, contents(t, again), "a store rebuilt from the log differs")
	})
}

// drawBatch draws the writes of one batch of writer w. Each writer has
// a source partition, a state partition and a queue of its own, as a
// runtime's goroutines do.
func drawBatch(t *rapid.T, w int) func(*Batch) {
	type write func(*Batch)
	stream := fmt.Sprintf("s%d", w)
	comp := fmt.Sprintf("c%d", w)
	d := Dest{Name: comp, Partition: w}
	sinkDest := Dest{Sink: true, Name: fmt.Sprintf("k%d", w)}
	from := ordering.Sender{Computation: "up", Partition: w}
	var writes []write
	for range rapid.IntRange(0, 6).Draw(t, "writes") {
		n := uint64(rapid.IntRange(0, 20).Draw(t, "n"))
		key := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key")
		switch rapid.IntRange(0, 9).Draw(t, "kind") {
		case 0:
			writes = append(writes, func(b *Batch) {
				b.AppendSource(stream, 0, n, &ordering.Message{Key: key, Payload: []byte("p")})
			})
		case 1:
			writes = append(writes, func(b *Batch) { b.DeleteSourceBefore(stream, 0, n) })
		case 2:
			writes = append(writes, func(b *Batch) { b.SetState(comp, w, key, []byte(fmt.Sprint(n))) })
		case 3:
			writes = append(writes, func(b *Batch) { b.DeleteState(comp, w, key) })
		case 4:
			writes = append(writes, func(b *Batch) {
				b.Enqueue(d, from, ordering.TaskID(n), &ordering.Message{Key: key, Payload: []byte("q")})
			})
		case 5:
			writes = append(writes, func(b *Batch) { b.Dequeue(d, from, ordering.TaskID(n)) })
		case 6:
			writes = append(writes, func(b *Batch) { b.SetIngestTime(stream, 0, n, int64(n)*1000) })
		case 7:
			writes = append(writes, func(b *Batch) { b.AppendSinkLog(comp, n, []byte("line")); b.DeleteSinkLogBefore(comp, n/2) })
		case 8: // a run of messages for a sink
			writes = append(writes, func(b *Batch) {
				for task := n + 1; task <= n+3; task++ {
					b.Enqueue(sinkDest, from, ordering.TaskID(task), &ordering.Message{ID: ordering.SourceID("x", 0, task).Derive("y", 0), Payload: []byte("r")})
				}
			})
		case 9:
			writes = append(writes, func(b *Batch) { b.TakeThrough(sinkDest, from, ordering.TaskID(n)) })
		}
	}
	return func(b *Batch) {
		for _, wr := range writes {
			wr(b)
		}
	}
}

// TestChangelogStoreOpensOnce checks the edges of Open with a changelog:
// a cache directory that already holds a store is refused, and the log
// is closed by a failed Open and by Close, once each.
func TestChangelogStoreOpensOnce(t *testing.T) {
	fs := vfs.NewMem()
	plain, err := Open("/d", Options{FS: fs})
	require.NoError(t, err)
	require.NoError(t, plain.Close())
	l := &memLog{}
	_, err = Open("/d", Options{FS: fs, Changelog: l})
	require.ErrorContains(t, err, "/d already holds a store")
	require.Equal(t, 1, l.closed)

	l = &memLog{}
	s := openLogged(t, l)
	require.NoError(t, s.Bind("shape"))
	require.NoError(t, s.Close())
	require.Equal(t, 1, l.closed)
	again := openLogged(t, l)
	defer again.Close()
	require.NoError(t, again.Bind("shape"), "the fingerprint is in the log")
	require.ErrorIs(t, again.Bind("other"), ErrPipelineMismatch)
	require.True(t, maps.Equal(l.compacted(), contents(t, again)))
}
