package store

import (
	"encoding/binary"
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

// ingestGroups returns a source partition's ingest-time index in offset
// order.
func (s *Store) ingestGroups(stream string, partition int) ([]ingestGroup, error) {
	what := fmt.Sprintf("ingest times of %s/p%d", stream, partition)
	var out []ingestGroup
	err := s.scan(ingestTimePrefix(stream, partition), nil, what, func(rest, v []byte) error {
		r := keyReader{b: rest}
		first := r.u64("offset")
		if err := r.done(); err != nil {
			return s.corrupt(what, err)
		}
		if len(v) != 8 {
			return s.corrupt(what, fmt.Errorf("offset %d: ingest time of %d bytes, not 8", first, len(v)))
		}
		out = append(out, ingestGroup{first: first, wall: int64(binary.BigEndian.Uint64(v))})
		return nil
	})
	return out, err
}

// SourceOffsetIngestedAt returns the first offset of a source partition
// whose record was ingested at or after wall (Unix nanoseconds), by the
// ingest-time index; the partition's end if every stored record is older.
// Records stored below the index's first entry count as ingested with it.
func (s *Store) SourceOffsetIngestedAt(stream string, partition int, wall int64) (uint64, error) {
	groups, err := s.ingestGroups(stream, partition)
	if err != nil {
		return 0, err
	}
	first, end, err := s.SourceRange(stream, partition)
	if err != nil {
		return 0, err
	}
	for i, g := range groups {
		if g.wall >= wall {
			if i == 0 {
				return min(first, g.first), nil
			}
			return g.first, nil
		}
	}
	return end, nil
}

// IngestTime returns when the record at offset of a source partition was
// ingested (Unix nanoseconds), by the ingest-time index; ok is false when
// the index has no entry at or below offset.
func (s *Store) IngestTime(stream string, partition int, offset uint64) (wall int64, ok bool, err error) {
	groups, err := s.ingestGroups(stream, partition)
	if err != nil {
		return 0, false, err
	}
	for _, g := range groups {
		if g.first > offset {
			break
		}
		wall, ok = g.wall, true
	}
	return wall, ok, nil
}

// EnsureIngestTimes gives the stored records of a source partition that
// have no ingest time (written by a flowhost before ingest times were
// recorded) the time wall, in b. It reports whether it added one.
func (s *Store) EnsureIngestTimes(b *Batch, stream string, partition int, wall int64) (bool, error) {
	first, end, err := s.SourceRange(stream, partition)
	if err != nil || first == end {
		return false, err
	}
	groups, err := s.ingestGroups(stream, partition)
	if err != nil {
		return false, err
	}
	if len(groups) > 0 && groups[0].first <= first {
		return false, nil
	}
	b.SetIngestTime(stream, partition, first, wall)
	return true, nil
}

// trimIngestTimes deletes, in b, the index entries of a source partition's
// groups that lie wholly below offset (whose records are being deleted),
// keeping the entry that covers offset itself.
func (b *Batch) trimIngestTimes(stream string, partition int, offset uint64) {
	groups, err := b.s.ingestGroups(stream, partition)
	if err != nil {
		if b.err == nil {
			b.err = err
		}
		return
	}
	keep := -1 // the last group starting at or below offset
	for i, g := range groups {
		if g.first <= offset {
			keep = i
		}
	}
	if keep <= 0 {
		return
	}
	prefix := ingestTimePrefix(stream, partition)
	start := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(0)...)
	end := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(groups[keep].first)...)
	if b.err == nil {
		b.err = b.b.DeleteRange(start, end, nil)
	}
}
