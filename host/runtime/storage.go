package runtime

import (
	"maps"
	"slices"
	"sync"

	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// Storage is where a run's streams, queues, keyed state, timers, partition
// metadata and commits live: the one boundary between the runtime and
// what keeps its data. The runtime has one code path for every
// implementation: it reads what a Storage holds when it starts (recovery)
// and writes every step's effects into one [StorageBatch], which it
// commits before it hands anything on:
//
//   - ingest: records appended to a source partition, their ingest
//     position, ingest time, idempotency keys and the connector's resume
//     position;
//   - routing: a source reader's records copied into the queues of the
//     partitions and sinks that read them, with the read positions, the
//     TaskIds given and the source's watermarks;
//   - an epoch: a computation partition's state and timer changes, the
//     inputs taken off its queue, the outputs put on their destinations'
//     queues and the partition's metadata;
//   - a sink batch: taken off the sink's queue with the sink's position.
//
// Two implementations exist: [NewMemoryStorage], the default, and the
// pebble store ([WithStore]). An implementation is [Storage.Durable] or
// not; that is the one thing the runtime asks, in the places where a
// durable commit changes what may be shown before it (a source record is
// visible to its reader at once in memory, after its group committed
// otherwise) or what a feature needs (replay, a committed file sink, an
// exactly-once Kafka sink, an HTTP sink's log that outlives the process).
//
// Every method may be called from several goroutines at once; a
// computation partition's keys and timers are read and written by one
// goroutine at a time (the partition's), and a queue is written by its
// senders' commits and read only at start.
type Storage interface {
	// Bind ties the storage to a pipeline's shape ([Fingerprint]). A
	// durable storage written by a pipeline of another shape is refused
	// with store.ErrPipelineMismatch.
	Bind(fingerprint string) error
	// Durable reports whether what a committed batch wrote outlives the
	// process, so that a run started on the storage resumes from it.
	// When false the storage keeps, for runtimes run on it one after
	// another in one process, what a run that drained its inputs leaves
	// for the next: keyed state, timers, the source partitions' ingest
	// and routing positions, the source watermarks and the computation
	// partitions' metadata. It forgets what carries records (source
	// records, queues, sink logs, idempotency keys) and the connector and
	// sink positions: those live only in the runtime's buffers, which are
	// then their only copy.
	Durable() bool
	// NewBatch starts a batch of writes. Nothing it holds is visible to
	// any read before its Commit returns nil.
	NewBatch() StorageBatch

	// Ingest returns a source partition's committed append position; ok
	// is false when it has none.
	Ingest(stream string, partition int) (p store.IngestPosition, ok bool, err error)
	// Read returns a source partition's committed routing position.
	Read(stream string, partition int) (p store.ReadPosition, ok bool, err error)
	// SourceRecords calls fn, in offset order, for each retained record of
	// a source partition from offset from on.
	SourceRecords(stream string, partition int, from uint64, fn func(offset uint64, m *ordering.Message) error) error
	// SourceRange returns the offsets of the first retained record and one
	// past the last appended.
	SourceRange(stream string, partition int) (first, end uint64, err error)
	// SourceOffsetAt returns the offset of the first retained record whose
	// WriteTimestamp is at or after write (end when none is).
	SourceOffsetAt(stream string, partition int, write int64) (uint64, error)
	// SourceOffsetIngestedAt returns the offset of the first record
	// ingested at or after wall (by the wall clock).
	SourceOffsetIngestedAt(stream string, partition int, wall int64) (uint64, error)
	// EnsureIngestTimes gives records that have no ingest time the time
	// wall, in b; it reports whether it added any.
	EnsureIngestTimes(b StorageBatch, stream string, partition int, wall int64) (bool, error)
	// SourceWatermarks returns a source stream's committed watermarks.
	SourceWatermarks(stream string) (w store.Watermarks, ok bool, err error)
	// Connector returns a source connector's committed resume position
	// (nil when none).
	Connector(source string) ([]byte, error)
	// Idempotent reports whether a record with idempotency key id was
	// accepted by stream, and where.
	Idempotent(stream, id string) (rec store.Idempotency, ok bool, err error)
	// DeleteIdempotencyBelow forgets the keys of stream's records with an
	// EventTimestamp below event; it returns how many.
	DeleteIdempotencyBelow(stream string, event int64) (int, error)
	// QueuedSourceFloors returns, per source partition, the lowest offset a
	// queued message refers to (retention keeps records from there on).
	QueuedSourceFloors() (map[store.SourcePartition]uint64, error)

	// Queue calls fn for every message committed to d's queue and not yet
	// dequeued, each sender's in the order it was queued.
	Queue(d store.Dest, fn func(from ordering.Sender, m *ordering.Message) error) error

	// State returns a computation partition's committed state of key.
	State(computation string, partition int, key string) (value []byte, ok bool, err error)
	// Timers returns a computation partition's committed pending timers.
	Timers(computation string, partition int) ([]ordering.Timer, error)
	// Partition returns a computation partition's committed metadata; ok
	// is false before its first epoch commits.
	Partition(computation string, partition int) (m store.PartitionMeta, ok bool, err error)

	// Sink returns a sink's committed position.
	Sink(sink string) (p store.SinkPosition, ok bool, err error)
	// SinkLog calls fn for an HTTP sink's logged lines from seq from on.
	SinkLog(sink string, from uint64, fn func(seq uint64, line []byte) error) error
	// SinkLogRange returns the first retained and one past the last
	// sequence numbers of an HTTP sink's log.
	SinkLogRange(sink string) (first, end uint64, err error)

	// Reset empties what a replay with --reset-state reprocesses.
	Reset(p store.ResetPlan) error
	// DiskBytes is the space the storage takes on disk.
	DiskBytes() uint64
}

// StorageBatch is a group of writes that commits atomically: after a
// crash, either every write of a committed batch is there or none is. A
// batch is used by one goroutine.
type StorageBatch interface {
	// AppendSource appends m at offset of a source partition's log.
	AppendSource(stream string, partition int, offset uint64, m *ordering.Message)
	// SetIngest records a source partition's append position.
	SetIngest(stream string, partition int, p store.IngestPosition)
	// SetIngestTime records that the ingest group starting at offset first
	// was accepted at wall (retention counts from it).
	SetIngestTime(stream string, partition int, first uint64, wall int64)
	// SetConnector records a source connector's resume position.
	SetConnector(source string, token []byte)
	// SetIdempotency records that stream accepted the record with
	// idempotency key id at offset.
	SetIdempotency(stream, id string, offset uint64, event int64)
	// SetRead records a source partition's routing position.
	SetRead(stream string, partition int, p store.ReadPosition)
	// SetSourceWatermarks records a source stream's watermarks.
	SetSourceWatermarks(stream string, w store.Watermarks)
	// DeleteSourceBefore drops a source partition's records below offset
	// (retention).
	DeleteSourceBefore(stream string, partition int, offset uint64)

	// Enqueue puts m on d's queue as from's task; Dequeue takes it off a
	// computation partition's queue. A sink takes each sender's queue in
	// TaskId order, and TakeThrough takes every message of from up to
	// task off it.
	Enqueue(d store.Dest, from ordering.Sender, task ordering.TaskID, m *ordering.Message)
	Dequeue(d store.Dest, from ordering.Sender, task ordering.TaskID)
	TakeThrough(d store.Dest, from ordering.Sender, task ordering.TaskID)

	// SetState replaces a computation partition's state of key;
	// DeleteState removes it.
	SetState(computation string, partition int, key string, value []byte)
	DeleteState(computation string, partition int, key string)
	// SetTimer sets a pending timer (one per key and trigger); DeleteTimer
	// removes the one of key and trigger.
	SetTimer(computation string, partition int, t ordering.Timer)
	DeleteTimer(computation string, partition int, key string, trigger int64)
	// SetPartition records a computation partition's metadata; it keeps
	// nothing of m after it returns (the caller reuses m's maps).
	SetPartition(computation string, partition int, m store.PartitionMeta)

	// SetSink records a sink's position.
	SetSink(sink string, p store.SinkPosition)
	// AppendSinkLog appends an HTTP sink's line seq; DeleteSinkLogBefore
	// drops the lines below seq (retention).
	AppendSinkLog(sink string, seq uint64, line []byte)
	DeleteSinkLogBefore(sink string, seq uint64)

	// Len is the number of writes in the batch.
	Len() int
	// Commit makes the writes visible and, on a durable storage, durable.
	Commit() error
	// Discard drops the batch without writing anything.
	Discard()
}

// pebbleStorage is the embedded pebble store behind the boundary. A
// computation partition is the only writer of its keys, so the storage
// caches, per partition, the state it read or committed, up to
// stateCacheBytes (then that partition's cache starts over): most batches
// then read no state from pebble.
type pebbleStorage struct {
	*store.Store
	caches perPartition[stateCache]
}

// stateCache is one partition's cache; only its goroutine uses it.
type stateCache struct {
	values map[string]cachedState
	bytes  int
}

type cachedState struct {
	value []byte
	ok    bool
}

// stateCacheBytes bounds the state a partition caches.
const stateCacheBytes = 32 << 20

func newPebbleStorage(st *store.Store) *pebbleStorage {
	return &pebbleStorage{Store: st, caches: perPartition[stateCache]{create: func() *stateCache {
		return &stateCache{values: map[string]cachedState{}}
	}}}
}

var _ Storage = (*pebbleStorage)(nil)

func (*pebbleStorage) Durable() bool { return true }

func (s *pebbleStorage) NewBatch() StorageBatch { return &pebbleBatch{Batch: s.Store.NewBatch(), s: s} }

func (s *pebbleStorage) EnsureIngestTimes(b StorageBatch, stream string, partition int, wall int64) (bool, error) {
	return s.Store.EnsureIngestTimes(b.(*pebbleBatch).Batch, stream, partition, wall)
}

func (s *pebbleStorage) cache(computation string, partition int) *stateCache {
	return s.caches.get(computation, partition)
}

func (s *pebbleStorage) State(computation string, partition int, key string) ([]byte, bool, error) {
	c := s.cache(computation, partition)
	if v, hit := c.values[key]; hit {
		return v.value, v.ok, nil
	}
	v, ok, err := s.Store.State(computation, partition, key)
	if err == nil {
		c.remember(key, v, ok)
	}
	return v, ok, err
}

func (c *stateCache) remember(key string, v []byte, ok bool) {
	if c.bytes > stateCacheBytes {
		clear(c.values)
		c.bytes = 0
	}
	c.values[key] = cachedState{value: v, ok: ok}
	c.bytes += len(key) + len(v) + 64
}

// pebbleBatch is a store batch behind the boundary; it remembers its state
// changes for the caches, which learn them once the batch committed.
type pebbleBatch struct {
	*store.Batch
	s       *pebbleStorage
	changes []cacheChange
}

type cacheChange struct {
	cache *stateCache
	key   string
	value []byte
	ok    bool
}

func (b *pebbleBatch) SetState(computation string, partition int, key string, value []byte) {
	b.Batch.SetState(computation, partition, key, value)
	b.changes = append(b.changes, cacheChange{b.s.cache(computation, partition), key, value, true})
}

func (b *pebbleBatch) DeleteState(computation string, partition int, key string) {
	b.Batch.DeleteState(computation, partition, key)
	b.changes = append(b.changes, cacheChange{b.s.cache(computation, partition), key, nil, false})
}

func (b *pebbleBatch) Commit() error {
	if err := b.Batch.Commit(); err != nil {
		return err
	}
	for _, ch := range b.changes {
		ch.cache.remember(ch.key, ch.value, ch.ok)
	}
	b.changes = nil
	return nil
}

// NewMemoryStorage returns a storage that keeps in memory what a run that
// drained its inputs leaves for the next one (see [Storage.Durable]), for
// runtimes run on it one after another in one process: tests, embedding,
// and host/flowtest's Driver, whose steps are such runs. A run on it goes
// on where the last stopped: its message ids, TaskIds, watermarks, keyed
// state and timers continue, so a record behind a watermark the last run
// reached is late. It is the storage of a run without [WithStore] or
// [WithStorage].
func NewMemoryStorage() Storage {
	return &memoryStorage{
		parts: perPartition[memoryPartition]{create: func() *memoryPartition {
			return &memoryPartition{state: map[string][]byte{}, timers: map[timerRef]ordering.Timer{}}
		}},
		sources: perPartition[memorySourcePartition]{create: func() *memorySourcePartition { return &memorySourcePartition{} }},
		wms:     map[string]store.Watermarks{},
	}
}

type memoryStorage struct {
	parts   perPartition[memoryPartition]
	sources perPartition[memorySourcePartition] // by stream and partition
	mu      sync.Mutex
	shape   string                      // the fingerprint of the last Bind
	wms     map[string]store.Watermarks // by stream; under mu
}

// perPartition holds one value per computation partition, made by create
// on first use. Partitions look theirs up on every batch, concurrently, so
// a lookup of one that exists takes no lock.
type perPartition[T any] struct {
	m      sync.Map // memoryPartKey -> *T
	create func() *T
}

type memoryPartKey struct {
	computation string
	partition   int
}

func (pp *perPartition[T]) get(computation string, partition int) *T {
	k := memoryPartKey{computation, partition}
	if v, ok := pp.m.Load(k); ok {
		return v.(*T)
	}
	v, _ := pp.m.LoadOrStore(k, pp.create())
	return v.(*T)
}

// memoryPartition is one computation partition's state, timers and
// metadata; only the partition's goroutine reads and writes it.
type memoryPartition struct {
	state   map[string][]byte
	timers  map[timerRef]ordering.Timer
	meta    store.PartitionMeta
	resumed bool // meta was committed
}

// memorySourcePartition is a source partition's positions. The ingest and
// the routing goroutines write them; mu keeps a read at start and the
// writes of a run still stopping apart.
type memorySourcePartition struct {
	mu               sync.Mutex
	ingest           store.IngestPosition
	read             store.ReadPosition
	ingested, routed bool
}

func (s *memoryStorage) partition(computation string, partition int) *memoryPartition {
	return s.parts.get(computation, partition)
}

// Bind forgets the positions, watermarks and partition metadata when the
// pipeline's shape changed: they count partitions and streams of the old
// one. Keyed state and timers stay, by computation and partition.
func (s *memoryStorage) Bind(fingerprint string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shape != fingerprint {
		s.shape, s.wms = fingerprint, map[string]store.Watermarks{}
		s.sources.m.Clear()
		s.parts.m.Range(func(_, v any) bool {
			p := v.(*memoryPartition)
			p.meta, p.resumed = store.PartitionMeta{}, false
			return true
		})
	}
	return nil
}

func (s *memoryStorage) Durable() bool { return false }
func (s *memoryStorage) NewBatch() StorageBatch {
	return &memoryBatch{s: s}
}

func (s *memoryStorage) Ingest(stream string, partition int) (store.IngestPosition, bool, error) {
	p := s.sources.get(stream, partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ingest, p.ingested, nil
}
func (s *memoryStorage) Read(stream string, partition int) (store.ReadPosition, bool, error) {
	p := s.sources.get(stream, partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	rp := p.read
	rp.Tasks = maps.Clone(rp.Tasks)
	return rp, p.routed, nil
}
func (s *memoryStorage) SourceRecords(string, int, uint64, func(uint64, *ordering.Message) error) error {
	return nil
}
func (s *memoryStorage) SourceRange(string, int) (uint64, uint64, error)           { return 0, 0, nil }
func (s *memoryStorage) SourceOffsetAt(string, int, int64) (uint64, error)         { return 0, nil }
func (s *memoryStorage) SourceOffsetIngestedAt(string, int, int64) (uint64, error) { return 0, nil }
func (s *memoryStorage) EnsureIngestTimes(StorageBatch, string, int, int64) (bool, error) {
	return false, nil
}
func (s *memoryStorage) SourceWatermarks(stream string) (store.Watermarks, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.wms[stream]
	w.Partitions = slices.Clone(w.Partitions)
	return w, ok, nil
}
func (s *memoryStorage) Connector(string) ([]byte, error) { return nil, nil }
func (s *memoryStorage) Idempotent(string, string) (store.Idempotency, bool, error) {
	return store.Idempotency{}, false, nil
}
func (s *memoryStorage) DeleteIdempotencyBelow(string, int64) (int, error) { return 0, nil }
func (s *memoryStorage) QueuedSourceFloors() (map[store.SourcePartition]uint64, error) {
	return nil, nil
}
func (s *memoryStorage) Queue(store.Dest, func(ordering.Sender, *ordering.Message) error) error {
	return nil
}

func (s *memoryStorage) State(computation string, partition int, key string) ([]byte, bool, error) {
	v, ok := s.partition(computation, partition).state[key]
	return v, ok, nil
}

func (s *memoryStorage) Timers(computation string, partition int) ([]ordering.Timer, error) {
	p := s.partition(computation, partition)
	out := make([]ordering.Timer, 0, len(p.timers))
	for _, t := range p.timers {
		out = append(out, t)
	}
	return out, nil
}

func (s *memoryStorage) Partition(computation string, partition int) (store.PartitionMeta, bool, error) {
	p := s.partition(computation, partition)
	return clonePartitionMeta(p.meta), p.resumed, nil
}
func (s *memoryStorage) Sink(string) (store.SinkPosition, bool, error) {
	return store.SinkPosition{}, false, nil
}
func (s *memoryStorage) SinkLog(string, uint64, func(uint64, []byte) error) error { return nil }
func (s *memoryStorage) SinkLogRange(string) (uint64, uint64, error)              { return 0, 0, nil }
func (s *memoryStorage) Reset(store.ResetPlan) error                              { return nil }
func (s *memoryStorage) DiskBytes() uint64                                        { return 0 }

// clonePartitionMeta copies m's maps and slices, which the storage and
// its callers each reuse.
func clonePartitionMeta(m store.PartitionMeta) store.PartitionMeta {
	m.Bias, m.Tasks = maps.Clone(m.Bias), maps.Clone(m.Tasks)
	m.Out.Partitions, m.Inputs.Partitions = slices.Clone(m.Out.Partitions), slices.Clone(m.Inputs.Partitions)
	return m
}

// memoryBatch holds a batch's changes to what the storage keeps until
// Commit; its other writes have nowhere to go.
type memoryBatch struct {
	s       *memoryStorage
	ops     []memoryOp
	n       int
	lastKey memoryPartKey
	last    *memoryPartition
	wms     map[string]store.Watermarks
}

// memoryOp is one change to a computation or source partition.
type memoryOp struct {
	part        *memoryPartition
	key         string
	value       []byte
	deleteState bool
	timer       *ordering.Timer // set; with deleteTimer, deleted
	deleteTimer bool
	trigger     int64
	meta        *store.PartitionMeta
	source      *memorySourcePartition
	ingest      *store.IngestPosition
	read        *store.ReadPosition
}

func (b *memoryBatch) AppendSource(string, int, uint64, *ordering.Message) { b.n++ }
func (b *memoryBatch) SetIngest(stream string, partition int, p store.IngestPosition) {
	b.ops = append(b.ops, memoryOp{source: b.s.sources.get(stream, partition), ingest: &p})
	b.n++
}
func (b *memoryBatch) SetIngestTime(string, int, uint64, int64)     { b.n++ }
func (b *memoryBatch) SetConnector(string, []byte)                  { b.n++ }
func (b *memoryBatch) SetIdempotency(string, string, uint64, int64) { b.n++ }
func (b *memoryBatch) SetRead(stream string, partition int, p store.ReadPosition) {
	p.Tasks = maps.Clone(p.Tasks)
	b.ops = append(b.ops, memoryOp{source: b.s.sources.get(stream, partition), read: &p})
	b.n++
}
func (b *memoryBatch) SetSourceWatermarks(stream string, w store.Watermarks) {
	if b.wms == nil {
		b.wms = map[string]store.Watermarks{}
	}
	w.Partitions = slices.Clone(w.Partitions)
	b.wms[stream] = w
	b.n++
}
func (b *memoryBatch) DeleteSourceBefore(string, int, uint64)                                  { b.n++ }
func (b *memoryBatch) Enqueue(store.Dest, ordering.Sender, ordering.TaskID, *ordering.Message) { b.n++ }
func (b *memoryBatch) Dequeue(store.Dest, ordering.Sender, ordering.TaskID)                    { b.n++ }
func (b *memoryBatch) TakeThrough(store.Dest, ordering.Sender, ordering.TaskID)                { b.n++ }
func (b *memoryBatch) SetPartition(computation string, partition int, m store.PartitionMeta) {
	m = clonePartitionMeta(m)
	b.op(computation, partition, memoryOp{meta: &m})
}
func (b *memoryBatch) SetSink(string, store.SinkPosition)   { b.n++ }
func (b *memoryBatch) AppendSinkLog(string, uint64, []byte) { b.n++ }
func (b *memoryBatch) DeleteSinkLogBefore(string, uint64)   { b.n++ }

func (b *memoryBatch) op(computation string, partition int, o memoryOp) {
	// An epoch's changes are all of one partition: look it up once.
	if b.last == nil || b.lastKey != (memoryPartKey{computation, partition}) {
		b.lastKey, b.last = memoryPartKey{computation, partition}, b.s.partition(computation, partition)
	}
	o.part = b.last
	b.ops = append(b.ops, o)
	b.n++
}

func (b *memoryBatch) SetState(computation string, partition int, key string, value []byte) {
	b.op(computation, partition, memoryOp{key: key, value: value})
}

func (b *memoryBatch) DeleteState(computation string, partition int, key string) {
	b.op(computation, partition, memoryOp{key: key, deleteState: true})
}

func (b *memoryBatch) SetTimer(computation string, partition int, t ordering.Timer) {
	b.op(computation, partition, memoryOp{timer: &t})
}

func (b *memoryBatch) DeleteTimer(computation string, partition int, key string, trigger int64) {
	b.op(computation, partition, memoryOp{key: key, deleteTimer: true, trigger: trigger})
}

func (b *memoryBatch) Len() int { return b.n }

func (b *memoryBatch) Commit() error {
	for _, o := range b.ops {
		switch {
		case o.source != nil:
			o.source.mu.Lock()
			if o.ingest != nil {
				o.source.ingest, o.source.ingested = *o.ingest, true
			} else {
				o.source.read, o.source.routed = *o.read, true
			}
			o.source.mu.Unlock()
		case o.meta != nil:
			o.part.meta, o.part.resumed = *o.meta, true
		case o.timer != nil:
			o.part.timers[timerRef{o.timer.Key, o.timer.Trigger}] = *o.timer
		case o.deleteTimer:
			delete(o.part.timers, timerRef{o.key, o.trigger})
		case o.deleteState:
			delete(o.part.state, o.key)
		default:
			o.part.state[o.key] = o.value
		}
	}
	if len(b.wms) > 0 {
		b.s.mu.Lock()
		maps.Copy(b.s.wms, b.wms)
		b.s.mu.Unlock()
	}
	b.ops, b.wms = nil, nil
	return nil
}

func (b *memoryBatch) Discard() { b.ops, b.wms = nil, nil }
