package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flowhost/flowhost/ordering"
)

// get reads one key; ok is false when it is absent. The value is a copy.
func (s *Store) get(k keyBuf, what string) (v []byte, ok bool, err error) {
	raw, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readError(what, err)
	}
	v = append([]byte{}, raw...)
	closer.Close()
	return v, true, nil
}

func (s *Store) getCBOR(k keyBuf, what string, v any) (bool, error) {
	raw, ok, err := s.get(k, what)
	if err != nil || !ok {
		return false, err
	}
	if err := decMode.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("%w: %s: %s: %v", ErrCorrupted, s.dir, what, err)
	}
	return true, nil
}

// scan calls fn for every key with prefix, in key order, with the key's
// remainder after the prefix. Keys and values are only valid during fn.
func (s *Store) scan(prefix keyBuf, from keyBuf, what string, fn func(rest, value []byte) error) error {
	lower := []byte(prefix)
	if from != nil {
		lower = from
	}
	if len(lower) == 0 {
		lower = nil // no bound (pebble's invariant checks reject an empty one)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return s.readError(what, err)
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return s.readError(what, err)
		}
		if err := fn(it.Key()[len(prefix):], v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return s.readError(what, err)
	}
	return it.Close()
}

func (s *Store) corrupt(what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %v", ErrCorrupted, s.dir, what, err)
}

// Ingest returns what a source partition has appended.
func (s *Store) Ingest(stream string, partition int) (IngestPosition, bool, error) {
	var p IngestPosition
	ok, err := s.getCBOR(newKey(tableIngest).str(stream).u32(partition), fmt.Sprintf("ingest position of %s/p%d", stream, partition), &p)
	return p, ok, err
}

// Connector returns a source connector's resume token, nil if none.
func (s *Store) Connector(source string) ([]byte, error) {
	v, _, err := s.get(newKey(tableMeta).rest("connector/"+source), "connector position of "+source)
	return v, err
}

// Read returns how far a source partition has been routed.
func (s *Store) Read(stream string, partition int) (ReadPosition, bool, error) {
	var p ReadPosition
	ok, err := s.getCBOR(newKey(tableRead).str(stream).u32(partition), fmt.Sprintf("read position of %s/p%d", stream, partition), &p)
	return p, ok, err
}

// SourceWatermarks returns a source stream's last published watermarks.
func (s *Store) SourceWatermarks(stream string) (Watermarks, bool, error) {
	var w Watermarks
	ok, err := s.getCBOR(newKey(tableSourceWM).str(stream), "watermarks of "+stream, &w)
	return w, ok, err
}

// SourceRecords calls fn for the records of a source partition from offset
// from on, in offset order.
func (s *Store) SourceRecords(stream string, partition int, from uint64, fn func(offset uint64, m *ordering.Message) error) error {
	prefix := sourceKey(stream, partition)
	what := fmt.Sprintf("source records of %s/p%d", stream, partition)
	return s.scan(prefix, append(append(keyBuf{}, prefix...), keyBuf(nil).u64(from)...), what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		off := r.u64("offset")
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		m, err := decodeRecord(stream, partition, off, v)
		if err != nil {
			return s.corrupt(fmt.Sprintf("%s offset %d", what, off), err)
		}
		return fn(off, m)
	})
}

// SourceRange returns the first and one past the last offset stored for a
// source partition; first == end when none is.
func (s *Store) SourceRange(stream string, partition int) (first, end uint64, err error) {
	return s.seqRange(sourceKey(stream, partition), fmt.Sprintf("source range of %s/p%d", stream, partition))
}

// SinkLogRange returns the first and one past the last sequence number in
// a sink's log; first == end when it is empty.
func (s *Store) SinkLogRange(sink string) (first, end uint64, err error) {
	return s.seqRange(newKey(tableSinkLog).str(sink), "log range of sink "+sink)
}

// seqRange returns the first and one past the last number of the keys
// prefix + 8-byte number.
func (s *Store) seqRange(prefix keyBuf, what string) (first, end uint64, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, 0, s.readError(what, err)
	}
	defer it.Close()
	if !it.First() {
		if err := it.Error(); err != nil {
			return 0, 0, s.readError(what, err)
		}
		return 0, 0, nil
	}
	r := keyReader{b: it.Key()[len(prefix):]}
	first = r.u64("number")
	if !it.Last() {
		return 0, 0, s.readError(what, it.Error())
	}
	r = keyReader{b: it.Key()[len(prefix):]}
	end = r.u64("number") + 1
	if err := r.done(); err != nil {
		return 0, 0, s.corrupt(what, err)
	}
	return first, end, nil
}

// SourceOffsetAt returns the first offset of a source partition whose
// record was written at or after write (its WriteTimestamp); end if none.
func (s *Store) SourceOffsetAt(stream string, partition int, write int64) (uint64, error) {
	_, end, err := s.SourceRange(stream, partition)
	if err != nil {
		return 0, err
	}
	found := end
	errStop := errors.New("stop")
	err = s.SourceRecords(stream, partition, 0, func(off uint64, m *ordering.Message) error {
		if m.Time.Write >= write {
			found = off
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, err
	}
	return found, nil
}

// Queue calls fn for every message in d's queue, per sender in TaskId
// order (senders in name and partition order): the FIFO order in which
// they were queued.
func (s *Store) Queue(d Dest, fn func(from ordering.Sender, m *ordering.Message) error) error {
	what := "queue of " + d.String()
	taken, err := s.taken(d)
	if err != nil {
		return err
	}
	return s.scan(queuePrefix(d), nil, what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		from := ordering.Sender{Computation: r.str("sender"), Partition: r.u32("sender partition")}
		task := ordering.TaskID(r.u64("task"))
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		if isRun(v) {
			// TakeThrough deleted every run it took whole; what it took
			// of this one is skipped.
			through := taken[from]
			ms, err := decodeRun(v, task)
			if err != nil {
				return s.corrupt(fmt.Sprintf("%s run from %v ending at task %d", what, from, task), err)
			}
			for _, m := range ms {
				if m.Task <= through {
					continue
				}
				if err := fn(from, m); err != nil {
					return err
				}
			}
			return nil
		}
		m, err := s.queued(v)
		if err != nil {
			return s.corrupt(fmt.Sprintf("%s message from %v task %d", what, from, task), err)
		}
		m.Task = task
		return fn(from, m)
	})
}

// taken returns, per sender, the last task sink d took ([Batch.TakeThrough]).
func (s *Store) taken(d Dest) (map[ordering.Sender]ordering.TaskID, error) {
	what := "taken positions of " + d.String()
	taken := map[ordering.Sender]ordering.TaskID{}
	err := s.scan(newKey(tableTaken).str(d.kind()).str(d.Name).u32(d.Partition), nil, what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		from := ordering.Sender{Computation: r.str("sender"), Partition: r.u32("sender partition")}
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		task, n := binary.Uvarint(v)
		if n <= 0 || n != len(v) {
			return s.corrupt(what, fmt.Errorf("%w: sender %v: not one uvarint", errCodec, from))
		}
		taken[from] = ordering.TaskID(task)
		return nil
	})
	return taken, err
}

// State returns a key's state.
func (s *Store) State(computation string, partition int, key string) ([]byte, bool, error) {
	return s.get(stateKey(computation, partition, key), fmt.Sprintf("state of %s/p%d key %q", computation, partition, key))
}

// States calls fn for every key with state in a computation partition, in
// key order.
func (s *Store) States(computation string, partition int, fn func(key string, value []byte) error) error {
	return s.scan(newKey(tableState).str(computation).u32(partition), nil, "state of "+computation, func(rest, v []byte) error {
		return fn(string(rest), v)
	})
}

// Timers returns a computation partition's pending timers.
func (s *Store) Timers(computation string, partition int) ([]ordering.Timer, error) {
	var out []ordering.Timer
	what := fmt.Sprintf("timers of %s/p%d", computation, partition)
	err := s.scan(newKey(tableTimer).str(computation).u32(partition), nil, what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		key := r.str("key")
		trigger := r.i64("trigger")
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		var w wireTimer
		if err := decMode.Unmarshal(v, &w); err != nil {
			return s.corrupt(what, err)
		}
		id, err := ordering.ParseMessageID(w.ID)
		if err != nil {
			return s.corrupt(what, err)
		}
		out = append(out, ordering.Timer{Key: key, Trigger: trigger, Event: w.Event, ID: id, Payload: w.Payload})
		return nil
	})
	return out, err
}

// Partition returns a computation partition's last committed metadata.
func (s *Store) Partition(computation string, partition int) (PartitionMeta, bool, error) {
	var m PartitionMeta
	ok, err := s.getCBOR(newKey(tablePartition).str(computation).u32(partition), fmt.Sprintf("metadata of %s/p%d", computation, partition), &m)
	return m, ok, err
}

// Sink returns a sink's committed position.
func (s *Store) Sink(sink string) (SinkPosition, bool, error) {
	var p SinkPosition
	ok, err := s.getCBOR(newKey(tableSink).str(sink), "position of sink "+sink, &p)
	return p, ok, err
}

// SinkLog calls fn for a sink log's records from seq from on.
func (s *Store) SinkLog(sink string, from uint64, fn func(seq uint64, line []byte) error) error {
	prefix := newKey(tableSinkLog).str(sink)
	what := "log of sink " + sink
	return s.scan(prefix, append(append(keyBuf{}, prefix...), keyBuf(nil).u64(from)...), what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		seq := r.u64("seq")
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		return fn(seq, v)
	})
}

// Idempotent returns the record of a client-given id a source accepted.
func (s *Store) Idempotent(stream, id string) (Idempotency, bool, error) {
	var r Idempotency
	ok, err := s.getCBOR(newKey(tableIdempotent).str(stream).rest(id), "idempotency record", &r)
	return r, ok, err
}

// queued decodes a queue value: a message, or a reference to a source
// record, whose payload it reads from the source log.
func (s *Store) queued(v []byte) (*ordering.Message, error) {
	if !isSourceRef(v) {
		return decodeMessage(v)
	}
	ref, m, timed, err := decodeSourceRef(v)
	if err != nil {
		return nil, err
	}
	raw, ok, err := s.get(sourceKey(ref.stream, int(ref.partition)).u64(ref.offset), "source record")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("it refers to source record %s/p%d offset %d, which the source log no longer holds", ref.stream, ref.partition, ref.offset)
	}
	rec, err := decodeRecord(ref.stream, int(ref.partition), ref.offset, raw)
	if err != nil {
		return nil, fmt.Errorf("source record %s/p%d offset %d: %w", ref.stream, ref.partition, ref.offset, err)
	}
	m.Payload = rec.Payload
	if !timed {
		m.Time = rec.Time
	}
	return m, nil
}

// SourcePartition names a source stream's partition.
type SourcePartition struct {
	Stream    string
	Partition int
}

// QueuedSourceFloors returns, for every source partition that queued
// messages refer to, the lowest offset referred to: the source log must
// keep its records from there on, since those queue entries hold no copy of
// their payloads (retention deletes below the floor only).
func (s *Store) QueuedSourceFloors() (map[SourcePartition]uint64, error) {
	floors := map[SourcePartition]uint64{}
	err := s.scan(newKey(tableQueue), nil, "queues", func(_, v []byte) error {
		if !isSourceRef(v) {
			return nil
		}
		ref, _, _, err := decodeSourceRef(v)
		if err != nil {
			return s.corrupt("queued source reference", err)
		}
		sp := SourcePartition{Stream: ref.stream, Partition: int(ref.partition)}
		if f, ok := floors[sp]; !ok || ref.offset < f {
			floors[sp] = ref.offset
		}
		return nil
	})
	return floors, err
}
