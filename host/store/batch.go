package store

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flowhost/flowhost/ordering"
)

// Batch collects writes that commit together: one epoch of a computation
// partition, one step of a source reader or a sink, one group of ingested
// records. Nothing of it is visible to reads, or survives a crash, before
// [Batch.Commit] returns nil. A Batch is used by one goroutine.
type Batch struct {
	s   *Store
	b   *pebble.Batch
	err error // the first encoding error; Commit returns it
	// scratch is reused for every compact value: pebble copies a value
	// into the batch, so one buffer serves the whole batch.
	scratch []byte
	// runs are the messages queued for sinks in this batch, one run per
	// sender and sink, written as one value each by Commit.
	runs []run
}

// run is a sender's messages with consecutive TaskIds for one sink.
type run struct {
	d     Dest
	from  ordering.Sender
	last  ordering.TaskID
	n     int
	value []byte // each message's value, length-prefixed
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch()} }

// Len returns the number of writes in the batch.
func (b *Batch) Len() int { return int(b.b.Count()) + len(b.runs) }

// Commit writes the batch durably (fsync) and releases it. After an error
// nothing of the batch is stored; the store may still accept later
// batches, but a write error usually means the disk is full or failing,
// and the caller should stop.
func (b *Batch) Commit() error {
	b.writeRuns()
	if b.err != nil {
		b.b.Close()
		return b.err
	}
	return b.s.commit(b.b)
}

// Discard releases a batch without committing it.
func (b *Batch) Discard() { _ = b.b.Close() }

func (b *Batch) set(k keyBuf, v []byte) {
	if b.err == nil {
		b.err = b.b.Set(k, v, nil)
	}
}

func (b *Batch) del(k keyBuf) {
	if b.err == nil {
		b.err = b.b.Delete(k, nil)
	}
}

func (b *Batch) setCBOR(k keyBuf, what string, v any) {
	enc, err := encMode.Marshal(v)
	if err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("store: encoding %s: %w", what, err)
		}
		return
	}
	b.set(k, enc)
}

func sourceKey(stream string, partition int) keyBuf {
	return newKey(tableSource).str(stream).u32(partition)
}

// AppendSource stores the source record m at offset of a source partition.
func (b *Batch) AppendSource(stream string, partition int, offset uint64, m *ordering.Message) {
	b.scratch = appendRecord(b.scratch[:0], m)
	b.set(sourceKey(stream, partition).u64(offset), b.scratch)
}

// SetIngest records what a source partition has appended.
func (b *Batch) SetIngest(stream string, partition int, p IngestPosition) {
	b.setCBOR(newKey(tableIngest).str(stream).u32(partition), "ingest position", &p)
}

// SetConnector records a source connector's resume token: where it
// continues after a restart (a file offset, a generator count).
func (b *Batch) SetConnector(source string, token []byte) {
	b.set(newKey(tableMeta).rest("connector/"+source), token)
}

// SetRead records how far a source partition has been routed.
func (b *Batch) SetRead(stream string, partition int, p ReadPosition) {
	b.setCBOR(newKey(tableRead).str(stream).u32(partition), "read position", &p)
}

// SetSourceWatermarks records a source stream's published watermarks.
func (b *Batch) SetSourceWatermarks(stream string, w Watermarks) {
	b.setCBOR(newKey(tableSourceWM).str(stream), "source watermarks", &w)
}

func queuePrefix(d Dest) keyBuf {
	return newKey(tableQueue).str(d.kind()).str(d.Name).u32(d.Partition)
}

func queueKey(d Dest, from ordering.Sender, task ordering.TaskID) keyBuf {
	return queuePrefix(d).str(from.Computation).u32(from.Partition).u64(uint64(task))
}

// Enqueue stores m in d's queue under its sender and the TaskId task the
// sender gave it for d: the order in which recovery hands the queue back.
// A source record a source reader routes is stored by reference to the
// source log, which keeps it until every queue has consumed it (see
// [Store.QueuedSourceFloors]).
//
// The messages a computation partition queues for a sink in one batch are
// stored as runs, one value per run of consecutive TaskIds under the
// run's last one: a sink takes each sender's queue in TaskId order
// ([Batch.TakeThrough]), so a run is never needed in part after a
// restart, except for what the sink took of it, which [Store.Queue] skips.
func (b *Batch) Enqueue(d Dest, from ordering.Sender, task ordering.TaskID, m *ordering.Message) {
	ref, isRef := asSourceRef(from, m)
	switch {
	case isRef:
		b.scratch = appendSourceRef(b.scratch[:0], ref, m)
	case d.Sink:
		b.appendToRun(d, from, task, m)
		return
	default:
		b.scratch = appendMessage(b.scratch[:0], m)
	}
	b.set(queueKey(d, from, task), b.scratch)
}

func (b *Batch) appendToRun(d Dest, from ordering.Sender, task ordering.TaskID, m *ordering.Message) {
	i := slices.IndexFunc(b.runs, func(r run) bool { return r.d == d && r.from == from })
	if i >= 0 && b.runs[i].last+1 != task {
		b.writeRun(&b.runs[i])
		b.runs = slices.Delete(b.runs, i, i+1)
		i = -1
	}
	if i < 0 {
		b.runs = append(b.runs, run{d: d, from: from})
		i = len(b.runs) - 1
	}
	r := &b.runs[i]
	b.scratch = appendMessage(b.scratch[:0], m)
	r.value = appendBytes(r.value, b.scratch)
	r.last, r.n = task, r.n+1
}

func (b *Batch) writeRuns() {
	for i := range b.runs {
		b.writeRun(&b.runs[i])
	}
	b.runs = b.runs[:0]
}

func (b *Batch) writeRun(r *run) {
	b.scratch = appendRun(b.scratch[:0], r.n, r.value)
	b.set(queueKey(r.d, r.from, r.last), b.scratch)
}

func takenKey(d Dest, from ordering.Sender) keyBuf {
	return newKey(tableTaken).str(d.kind()).str(d.Name).u32(d.Partition).str(from.Computation).u32(from.Partition)
}

// TakeThrough removes from sink d's queue every message of from up to
// TaskId task. A sink takes each sender's queue in TaskId order (what it
// writes in one batch is a prefix of every sender's queue), so one range
// deletion and one position per sender replace a deletion per message.
func (b *Batch) TakeThrough(d Dest, from ordering.Sender, task ordering.TaskID) {
	b.writeRuns() // the batch's writes apply in their order
	if b.err == nil {
		// The end is the first key after task's: the sender's next task,
		// or past the sender's keys when task is the last there can be.
		b.err = b.b.DeleteRange(queueKey(d, from, 0), prefixEnd(queueKey(d, from, task)), nil)
	}
	b.set(takenKey(d, from), binary.AppendUvarint(b.scratch[:0], uint64(task)))
}

// Dequeue removes a consumed message from computation partition d's queue
// (a sink's is taken with [Batch.TakeThrough]). A queue key is written
// once and deleted once, so the deletion is a single delete: it and the
// write cancel out in the next flush or compaction, leaving nothing behind.
func (b *Batch) Dequeue(d Dest, from ordering.Sender, task ordering.TaskID) {
	if d.Sink && b.err == nil {
		b.err = fmt.Errorf("store: Dequeue of %s task %d from sink %q: a sink's queue is taken with TakeThrough", from, task, d.Name)
	}
	if b.err == nil {
		b.err = b.b.SingleDelete(queueKey(d, from, task), nil)
	}
}

func stateKey(computation string, partition int, key string) keyBuf {
	return newKey(tableState).str(computation).u32(partition).rest(key)
}

// SetState replaces a key's state.
func (b *Batch) SetState(computation string, partition int, key string, value []byte) {
	b.set(stateKey(computation, partition, key), value)
}

// DeleteState deletes a key's state.
func (b *Batch) DeleteState(computation string, partition int, key string) {
	b.del(stateKey(computation, partition, key))
}

func timerKey(computation string, partition int, key string, trigger int64) keyBuf {
	return newKey(tableTimer).str(computation).u32(partition).str(key).i64(trigger)
}

// SetTimer stores a pending timer (replacing the key's timer with the same
// trigger).
func (b *Batch) SetTimer(computation string, partition int, t ordering.Timer) {
	b.setCBOR(timerKey(computation, partition, t.Key, t.Trigger), "timer", &wireTimer{Event: t.Event, ID: t.ID.String(), Payload: t.Payload})
}

// DeleteTimer removes a fired or cancelled timer.
func (b *Batch) DeleteTimer(computation string, partition int, key string, trigger int64) {
	b.del(timerKey(computation, partition, key, trigger))
}

// SetPartition records a computation partition's epoch metadata.
func (b *Batch) SetPartition(computation string, partition int, m PartitionMeta) {
	b.setCBOR(newKey(tablePartition).str(computation).u32(partition), "partition metadata", &m)
}

// SetSink records a sink's committed position.
func (b *Batch) SetSink(sink string, p SinkPosition) {
	b.setCBOR(newKey(tableSink).str(sink), "sink position", &p)
}

// AppendSinkLog stores record line seq of a sink's log (what HTTP
// subscribers resume from).
func (b *Batch) AppendSinkLog(sink string, seq uint64, line []byte) {
	b.set(newKey(tableSinkLog).str(sink).u64(seq), line)
}

// SetIdempotency records that a source accepted the record with a
// client-given id, at offset, with its event time (for garbage collection
// by watermark).
func (b *Batch) SetIdempotency(stream, id string, offset uint64, event int64) {
	b.setCBOR(newKey(tableIdempotent).str(stream).rest(id), "idempotency record", &Idempotency{Offset: offset, Event: event})
}

// Idempotency is the record of a client-given id a source accepted.
type Idempotency struct {
	Offset uint64 `cbor:"1,keyasint"`
	Event  int64  `cbor:"2,keyasint"`
}
