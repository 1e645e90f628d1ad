package store

import (
	"context"
	"fmt"
)

// DeleteSourceBefore deletes a source partition's records below offset (one
// range tombstone, however many records), and the ingest times of the
// groups that held only those records.
func (b *Batch) DeleteSourceBefore(stream string, partition int, offset uint64) {
	prefix := sourceKey(stream, partition)
	start := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(0)...)
	end := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(offset)...)
	if b.err == nil {
		b.err = b.b.DeleteRange(start, end, nil)
	}
	b.trimIngestTimes(stream, partition, offset)
}

// DeleteSinkLogBefore deletes a sink log's records below seq.
func (b *Batch) DeleteSinkLogBefore(sink string, seq uint64) {
	prefix := newKey(tableSinkLog).str(sink)
	start := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(0)...)
	end := append(append(keyBuf{}, prefix...), keyBuf(nil).u64(seq)...)
	if b.err == nil {
		b.err = b.b.DeleteRange(start, end, nil)
	}
}

// DeleteIdempotencyBelow deletes a source's idempotency records of events
// older than event (the watermark minus the dedup window): a retry that
// late is not deduplicated any more. It returns how many it deleted.
func (s *Store) DeleteIdempotencyBelow(stream string, event int64) (int, error) {
	prefix := newKey(tableIdempotent).str(stream)
	b := s.NewBatch()
	n := 0
	err := s.scan(prefix, nil, "idempotency records of "+stream, func(rest, v []byte) error {
		var r Idempotency
		if err := decMode.Unmarshal(v, &r); err != nil {
			return s.corrupt("idempotency record", err)
		}
		if r.Event < event {
			b.del(append(append(keyBuf{}, prefix...), rest...))
			n++
		}
		return nil
	})
	if err != nil || n == 0 {
		b.Discard()
		return 0, err
	}
	if err := b.Commit(); err != nil {
		return 0, fmt.Errorf("deleting idempotency records of %s: %w", stream, err)
	}
	return n, nil
}

// Compact asks the store to reclaim the space of deleted records now
// rather than when its background compactions get to them.
func (s *Store) Compact() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

// DiskBytes returns the size of the store's files.
func (s *Store) DiskBytes() uint64 { return s.db.Metrics().DiskSpaceUsage() }
