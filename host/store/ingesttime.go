package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Ingest times. Retention counts a source record's age from when the host
// ingested it (the wall clock when its group committed), not from its
// WriteTimestamp, which a file of historical records sets years back. The
// time is kept per ingest group and partition, not per record: key
// (stream, partition, first offset of the group) -> the group's wall
// clock, so a record's ingest time is that of the nearest group start at
// or below its offset.
//
// A store written before ingest times were recorded has none for its
// older records: [Store.EnsureIngestTimes] gives those the time of the
// first run that finds them, so that they are kept for a full retention
// period from then instead of being deleted at once (or never).

func ingestTimePrefix(stream string, partition int) keyBuf {
	return newKey(tableIngestTime).str(stream).u32(partition)
}

// SetIngestTime records that the records of a source partition from
// offset first on (up to the next group's first offset) were ingested at
// wall, in Unix nanoseconds.
func (b *Batch) SetIngestTime(stream string, partition int, first uint64, wall int64) {
	b.set(ingestTimePrefix(stream, partition).u64(first), binary.BigEndian.AppendUint64(nil, uint64(wall)))
}

// ingestGroup is one entry of the ingest-time index.
type ingestGroup struct {
	first uint64
	wall  int64
}

// errStopScan ends a scan early from inside its callback.
var errStopScan = errors.New("stop")

// eachIngestGroup calls fn for a source partition's ingest-time index
// entries in offset order until fn returns false. Retention reads only
// the entries it is about to delete and the first it keeps.
func (s *Store) eachIngestGroup(stream string, partition int, fn func(ingestGroup) bool) error {
	what := fmt.Sprintf("ingest times of %s/p%d", stream, partition)
	err := s.scan(ingestTimePrefix(stream, partition), nil, what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		first := r.u64("offset")
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		if len(v) != 8 {
			return s.corrupt(what, fmt.Errorf("offset %d: ingest time of %d bytes, not 8", first, len(v)))
		}
		if !fn(ingestGroup{first: first, wall: int64(binary.BigEndian.Uint64(v))}) {
			return errStopScan
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// SourceOffsetIngestedAt returns the first offset of a source partition
// whose record was ingested at or after wall (Unix nanoseconds), by the
// ingest-time index; the partition's end if every stored record is older.
// Records stored below the index's first entry count as ingested with it.
func (s *Store) SourceOffsetIngestedAt(stream string, partition int, wall int64) (uint64, error) {
	first, end, err := s.SourceRange(stream, partition)
	if err != nil {
		return 0, err
	}
	found, i := end, 0
	// The index is in offset order, and so, but for a clock set back, in
	// time: the first entry at or after wall ends the scan. After a clock
	// set back the records after it are kept longer, never deleted early.
	err = s.eachIngestGroup(stream, partition, func(g ingestGroup) bool {
		if g.wall >= wall {
			found = g.first
			if i == 0 {
				found = min(first, g.first)
			}
			return false
		}
		i++
		return true
	})
	return found, err
}

// IngestTime returns when the record at offset of a source partition was
// ingested (Unix nanoseconds), by the ingest-time index; ok is false when
// the index has no entry at or below offset.
func (s *Store) IngestTime(stream string, partition int, offset uint64) (wall int64, ok bool, err error) {
	err = s.eachIngestGroup(stream, partition, func(g ingestGroup) bool {
		if g.first > offset {
			return false
		}
		wall, ok = g.wall, true
		return true
	})
	return wall, ok, err
}

// EnsureIngestTimes gives the stored records of a source partition that
// have no ingest time (written by a flowhost before ingest times were
// recorded) the time wall, in b. It reports whether it added one.
func (s *Store) EnsureIngestTimes(b *Batch, stream string, partition int, wall int64) (bool, error) {
	first, end, err := s.SourceRange(stream, partition)
	if err != nil || first == end {
		return false, err
	}
	covered := false
	err = s.eachIngestGroup(stream, partition, func(g ingestGroup) bool {
		covered = g.first <= first
		return false // only the first entry matters
	})
	if err != nil || covered {
		return false, err
	}
	b.SetIngestTime(stream, partition, first, wall)
	return true, nil
}

// trimIngestTimes deletes, in b, the index entries of a source partition's
// groups that lie wholly below offset (whose records are being deleted),
// keeping the entry that covers offset itself.
func (b *Batch) trimIngestTimes(stream string, partition int, offset uint64) {
	var keep uint64 // the first offset of the last group starting at or below offset
	n := 0
	err := b.s.eachIngestGroup(stream, partition, func(g ingestGroup) bool {
		if g.first > offset {
			return false
		}
		keep = g.first
		n++
		return true
	})
	if err != nil {
		if b.err == nil {
			b.err = err
		}
		return
	}
	if n <= 1 {
		return
	}
	prefix := ingestTimePrefix(stream, partition)
	start := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(0)...)
	end := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(keep)...)
	if b.err == nil {
		b.err = b.b.DeleteRange(start, end, nil)
	}
}
