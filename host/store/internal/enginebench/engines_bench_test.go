package enginebench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The shape of an epoch commit. An output record is a 100-byte payload
// behind 40 bytes of message metadata (id and three timestamps); keyed state
// is one 64-byte value per key, over stateKeys keys per partition, and one
// state value is written per rowsPerState output records.
const (
	payloadSize  = 100
	stateSize    = 64
	stateKeys    = 1000
	rowsPerState = 10
)

// BenchmarkEpochCommit measures durable epoch commits, the writes that
// flowhost's exactly-once processing makes once per epoch of a computation
// partition. One op is one epoch of one partition: a single fsynced
// transaction that deletes the rows input records the epoch consumed,
// appends rows output records to the queue, writes rows/10 keyed-state
// values and the partition's position. With several committers each is a
// goroutine with its own partition, all committing at once as the
// partitions of one host do; ns/op is then wall time per epoch of any
// partition, and msg/s counts output records made durable per second over
// all of them. bbolt-batch is bbolt's own coalescing of concurrent
// transactions, so it runs only with several committers.
//
//	go test -run '^$' -bench EpochCommit -benchtime 3s ./host/store/internal/enginebench/
func BenchmarkEpochCommit(b *testing.B) {
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			for _, rows := range []int{100, 1000} {
				b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
					for _, committers := range []int{1, 4} {
						if eng.coalesces && committers == 1 {
							continue
						}
						b.Run(fmt.Sprintf("committers=%d", committers), func(b *testing.B) {
							benchmarkEpochCommit(b, eng.open, rows, committers)
						})
					}
				})
			}
		})
	}
}

func benchmarkEpochCommit(b *testing.B, open opener, rows, committers int) {
	e, err := open(b.TempDir(), committers)
	require.NoError(b, err)
	b.Cleanup(func() { assert.NoError(b, e.close()) })
	parts := newPartitions(committers, rows)
	// Epoch 0 of each partition only fills its queue, so that the first
	// timed epoch has inputs to delete.
	require.NoError(b, commitEpochs(e, parts, committers))
	b.ResetTimer()
	require.NoError(b, commitEpochs(e, parts, b.N))
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "msg/s")
}

// TestEnginesAgree runs the benchmark's epochs on every engine and checks
// that all end with the same keys and values, and that these are what the
// epochs mean: each partition's queue holds exactly its last epoch's output
// records and its position names that epoch. It is what makes the engines'
// figures comparable: the same work, done completely.
func TestEnginesAgree(t *testing.T) {
	const rows, committers, epochs = 100, 2, 6
	var first []kv
	for i, eng := range engines {
		e, err := eng.open(t.TempDir(), committers)
		require.NoError(t, err)
		parts := newPartitions(committers, rows)
		require.NoError(t, commitEpochs(e, parts, committers*epochs))
		got, err := e.contents()
		require.NoError(t, errors.Join(err, e.close()))

		checkContents(t, eng.name, got, parts)
		if i == 0 {
			first = got
			continue
		}
		require.Equal(t, len(first), len(got), "%s and %s hold different numbers of keys", engines[0].name, eng.name)
		for j := range got {
			require.Equal(t, first[j], got[j], "%s and %s differ at key %d", engines[0].name, eng.name, j)
		}
	}
}

// checkContents checks what the epochs committed on parts must have left.
func checkContents(t *testing.T, engine string, got []kv, parts []*partition) {
	byKey := map[string][]byte{}
	queued := 0
	for _, x := range got {
		byKey[string(x.key)] = x.value
		if bytes.HasPrefix(x.key, []byte("q/")) {
			queued++
		}
	}
	rows := parts[0].rows
	require.Equal(t, len(parts)*rows, queued, "%s: records left in the queues", engine)
	for _, p := range parts {
		last := p.epoch - 1
		for seq := last * uint64(rows); seq < (last+1)*uint64(rows); seq++ {
			require.Contains(t, byKey, string(queueKey(nil, p.id, seq)), "%s: partition %d", engine, p.id)
		}
		pos := byKey[string(positionKey(nil, p.id))]
		require.Len(t, pos, 24, "%s: partition %d position", engine, p.id)
		require.Equal(t, last, binary.BigEndian.Uint64(pos), "%s: partition %d position", engine, p.id)
	}
}

// queueKey appends q/<partition>/<seq as 8 bytes big-endian> to dst: the
// key of a record in a partition's queue, which sorts in append order.
func queueKey(dst []byte, partition int, seq uint64) []byte {
	dst = append(dst, "q/"...)
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, '/')
	return binary.BigEndian.AppendUint64(dst, seq)
}

// stateKey appends s/<partition>/<key> to dst, the key of one keyed-state
// value; key is its index among the partition's stateKeys keys.
func stateKey(dst []byte, partition, key int) []byte {
	return fmt.Appendf(dst, "s/%d/key-%04d", partition, key)
}

// positionKey appends p/<partition> to dst, the key of the partition's
// position: the last epoch it committed and where its queue stands.
func positionKey(dst []byte, partition int) []byte {
	dst = append(dst, "p/"...)
	return strconv.AppendInt(dst, int64(partition), 10)
}

type kv struct{ key, value []byte }

// epochOps is one epoch commit as plain data, built before it is handed to
// an engine so that every engine writes the same bytes.
type epochOps struct {
	deletes [][]byte
	sets    []kv
}

// partition is one committer's computation partition. Its queue always
// holds exactly the records its previous epoch appended, so every epoch
// deletes rows records and appends as many new ones.
type partition struct {
	id    int
	rows  int
	epoch uint64 // the next epoch to build; epoch 0 only fills the queue
	arena []byte // the keys and values of the epoch last built
	ops   epochOps
}

func newPartitions(n, rows int) []*partition {
	parts := make([]*partition, n)
	for i := range parts {
		parts[i] = &partition{id: i, rows: rows}
	}
	return parts
}

// next builds the partition's next epoch, reusing the memory of the one
// before, which must be committed by then. Its bytes come from a generator
// seeded by partition and epoch, so every engine gets the same ones; the
// payloads and state values are random, hence incompressible, which keeps
// Pebble's block compression from doing less I/O than bbolt on data real
// payloads would not compress as well.
func (p *partition) next() *epochOps {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(p.id))
	binary.BigEndian.PutUint64(seed[8:], p.epoch)
	src := rand.NewChaCha8(seed)
	r := rand.New(src)

	p.arena = p.arena[:0]
	p.ops.deletes = p.ops.deletes[:0]
	p.ops.sets = p.ops.sets[:0]
	rows := uint64(p.rows)
	first := p.epoch * rows // the first output record's seq
	if p.epoch > 0 {
		for seq := first - rows; seq < first; seq++ {
			start := len(p.arena)
			p.arena = queueKey(p.arena, p.id, seq)
			p.ops.deletes = append(p.ops.deletes, p.since(start))
		}
	}
	for seq := first; seq < first+rows; seq++ {
		start := len(p.arena)
		p.arena = queueKey(p.arena, p.id, seq)
		key := p.since(start)
		// Metadata: message id (partition, seq), then write, event and
		// alignment timestamps.
		start = len(p.arena)
		ts := uint64(1e18) + seq*1000
		p.arena = binary.BigEndian.AppendUint64(p.arena, uint64(p.id))
		p.arena = binary.BigEndian.AppendUint64(p.arena, seq)
		p.arena = binary.BigEndian.AppendUint64(p.arena, ts)
		p.arena = binary.BigEndian.AppendUint64(p.arena, ts-500)
		p.arena = binary.BigEndian.AppendUint64(p.arena, ts-500)
		p.arena = appendRandom(p.arena, src, payloadSize)
		p.ops.sets = append(p.ops.sets, kv{key, p.since(start)})
	}
	for range p.rows / rowsPerState {
		start := len(p.arena)
		p.arena = stateKey(p.arena, p.id, r.IntN(stateKeys))
		key := p.since(start)
		start = len(p.arena)
		p.arena = appendRandom(p.arena, src, stateSize)
		p.ops.sets = append(p.ops.sets, kv{key, p.since(start)})
	}
	start := len(p.arena)
	p.arena = positionKey(p.arena, p.id)
	key := p.since(start)
	start = len(p.arena)
	p.arena = binary.BigEndian.AppendUint64(p.arena, p.epoch)
	p.arena = binary.BigEndian.AppendUint64(p.arena, first)
	p.arena = binary.BigEndian.AppendUint64(p.arena, first+rows)
	p.ops.sets = append(p.ops.sets, kv{key, p.since(start)})

	p.epoch++
	return &p.ops
}

// since returns what was appended to the arena from start on. Slices
// handed out before the arena grew keep the old array, which still holds
// them.
func (p *partition) since(start int) []byte {
	return p.arena[start:len(p.arena):len(p.arena)]
}

// appendRandom appends n bytes from src to dst.
func appendRandom(dst []byte, src *rand.ChaCha8, n int) []byte {
	dst = slices.Grow(dst, n)
	_, _ = src.Read(dst[len(dst) : len(dst)+n]) // never fails
	return dst[:len(dst)+n]
}

// commitEpochs commits ops epochs, spread as evenly as they go over parts,
// with one goroutine per partition committing its epochs in order. The
// spread is fixed, not first come first served, so that the same ops leave
// every engine with the same contents.
func commitEpochs(e engine, parts []*partition, ops int) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		n := ops / len(parts)
		if i < ops%len(parts) {
			n++
		}
		wg.Go(func() {
			for range n {
				if errs[i] = e.commit(p.next()); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// engine is a store reduced to what the benchmark asks of it. commit is
// durable when it returns, and may be called from several goroutines.
type engine interface {
	commit(ops *epochOps) error
	// contents returns every key and value, in key order.
	contents() ([]kv, error)
	close() error
}

// opener opens an engine in an empty directory for the given number of
// concurrent committers.
type opener func(dir string, committers int) (engine, error)

// engines are the configurations measured, each with its durable defaults.
// coalesces marks one that differs from another only in how concurrent
// commits join.
var engines = []struct {
	name      string
	coalesces bool
	open      opener
}{
	{"pebble", false, openPebble},
	{"bbolt-update", false, func(dir string, _ int) (engine, error) { return openBolt(dir, 0) }},
	{"bbolt-batch", true, openBolt},
}

// pebbleEngine commits each epoch as one batch synced to the write-ahead
// log; Pebble lets concurrent synced batches share a WAL write and fsync.
type pebbleEngine struct{ db *pebble.DB }

func openPebble(dir string, _ int) (engine, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{pebble.DefaultLogger}})
	if err != nil {
		return nil, err
	}
	return pebbleEngine{db}, nil
}

func (e pebbleEngine) commit(ops *epochOps) (err error) {
	b := e.db.NewBatch()
	defer func() { err = errors.Join(err, b.Close()) }()
	for _, k := range ops.deletes {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	for _, s := range ops.sets {
		if err := b.Set(s.key, s.value, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (e pebbleEngine) contents() (all []kv, err error) {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		all = append(all, kv{bytes.Clone(it.Key()), bytes.Clone(v)})
	}
	return all, it.Error()
}

func (e pebbleEngine) close() error { return e.db.Close() }

// quietLogger drops Pebble's informational lines, one per Open, which would
// interleave with the benchmark's results; errors still reach the log.
type quietLogger struct{ pebble.Logger }

func (quietLogger) Infof(string, ...any) {}

// boltBucket holds every key, so that bbolt's key space is Pebble's.
var boltBucket = []byte("flowhost")

// boltEngine commits each epoch as one read-write transaction, which bbolt
// makes durable with an fsync of the data pages and another of the meta
// page; only one such transaction runs at a time.
type boltEngine struct {
	db    *bolt.DB
	batch bool
}

// openBolt opens a bbolt file in dir. With batchSize 0 every commit is its
// own db.Update; otherwise commits go through db.Batch, which runs up to
// batchSize concurrent ones in one transaction. The benchmark passes the
// number of committers, so that a batch commits as soon as every committer
// has joined instead of waiting out MaxBatchDelay (10 ms): bbolt's best
// case.
func openBolt(dir string, batchSize int) (engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(boltBucket)
		return err
	})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	if batchSize > 0 {
		db.MaxBatchSize = batchSize
	}
	return boltEngine{db, batchSize > 0}, nil
}

func (e boltEngine) commit(ops *epochOps) error {
	// apply may run more than once under db.Batch, which retries the
	// calls of a failed batch one by one; it only deletes and puts, so a
	// second run leaves the same contents.
	apply := func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for _, k := range ops.deletes {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		for _, s := range ops.sets {
			if err := b.Put(s.key, s.value); err != nil {
				return err
			}
		}
		return nil
	}
	if e.batch {
		return e.db.Batch(apply)
	}
	return e.db.Update(apply)
}

func (e boltEngine) contents() (all []kv, err error) {
	err = e.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBucket).ForEach(func(k, v []byte) error {
			all = append(all, kv{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
	})
	return all, err
}

func (e boltEngine) close() error { return e.db.Close() }
