package store

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Changelog is a log that holds a store's committed writes (Kafka
// Streams' model of a local store and its changelog): a store opened with
// one ([Options.Changelog]) is a cache of the log. It is rebuilt from the
// log when opened, and each batch it commits is appended to the log first
// and applied to the cache only once the log has it. What the log holds
// is then the store, wherever the cache was.
type Changelog interface {
	// Restore calls apply for every write the log holds, oldest first, up
	// to its end as of the call: the writes of every Append that returned
	// nil, and none of one that returned an error. apply copies what it
	// keeps of an Op.
	Restore(apply func(Op) error) error
	// Append writes ops, all or none of them: after an error a Restore
	// sees none. The store calls it from one goroutine at a time. The
	// ops' bytes are the store's and valid only until Append returns: a
	// log that keeps them copies them.
	Append(ops []Op) error
	// Close releases the log; the store's Close calls it.
	Close() error
}

// Op is one write of a committed batch: the key's new value, or its
// deletion.
type Op struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// logged is a batch waiting for its group to reach the changelog.
type logged struct {
	b    *pebble.Batch
	done chan error
}

// commitLogged appends b to the changelog and then applies it to the
// cache. Batches committed meanwhile by other goroutines wait and go to
// the log together in the next Append (group commit): the log's round
// trip, not the number of committers, bounds the rate.
func (s *Store) commitLogged(b *pebble.Batch) error {
	req := logged{b: b, done: make(chan error, 1)}
	s.logMu.Lock()
	s.logPending = append(s.logPending, req)
	if s.logLeading {
		s.logMu.Unlock()
		return <-req.done
	}
	s.logLeading = true
	for len(s.logPending) > 0 {
		group := s.logPending
		s.logPending = nil
		s.logMu.Unlock()
		s.commitGroup(group)
		s.logMu.Lock()
	}
	s.logLeading = false
	s.logMu.Unlock()
	return <-req.done
}

// commitGroup writes a group of batches to the log in one Append, then
// applies them to the cache in order, and answers each.
func (s *Store) commitGroup(group []logged) {
	var ops []Op
	var err error
	for _, req := range group {
		if ops, err = s.appendOps(ops, req.b); err != nil {
			break
		}
	}
	if err == nil && len(ops) > 0 {
		err = s.log.Append(ops)
	}
	if err != nil {
		err = dirError(s.dir, fmt.Errorf("commit to the changelog: %w", err))
		for _, req := range group {
			req.done <- err
		}
		return
	}
	for _, req := range group {
		// The log is the durable copy: the cache need not sync.
		if err := req.b.Commit(pebble.NoSync); err != nil {
			req.done <- s.writeError(err)
			continue
		}
		req.done <- nil
	}
}

// appendOps appends b's writes to ops. A range deletion becomes one
// deletion per key it removes (those in the cache and those written
// before it in ops, which the cache does not have yet): a compacted log
// forgets a key only on a deletion of that key.
func (s *Store) appendOps(ops []Op, b *pebble.Batch) ([]Op, error) {
	r := b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			return ops, fmt.Errorf("reading a batch: %w", err)
		}
		if !ok {
			return ops, nil
		}
		switch kind {
		// key and value point into the batch, which stays open until
		// its committer has its answer, after the Append.
		case pebble.InternalKeyKindSet:
			ops = append(ops, Op{Key: key, Value: value})
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
			ops = append(ops, Op{Key: key, Delete: true})
		case pebble.InternalKeyKindRangeDelete:
			if ops, err = s.appendRangeDelete(ops, key, value); err != nil {
				return ops, err
			}
		case pebble.InternalKeyKindLogData:
		default:
			return ops, fmt.Errorf("a batch write of kind %v has no changelog form", kind)
		}
	}
}

func (s *Store) appendRangeDelete(ops []Op, start, end []byte) ([]Op, error) {
	n := len(ops)
	for i := range n {
		if !ops[i].Delete && bytes.Compare(ops[i].Key, start) >= 0 && bytes.Compare(ops[i].Key, end) < 0 {
			ops = append(ops, Op{Key: ops[i].Key, Delete: true})
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return ops, s.readError("a range to delete", err)
	}
	for it.First(); it.Valid(); it.Next() {
		ops = append(ops, Op{Key: bytes.Clone(it.Key()), Delete: true})
	}
	return ops, errors.Join(it.Error(), it.Close())
}

// restoreFrom fills the empty cache from the changelog, in batches that
// are not logged again.
func (s *Store) restoreFrom(log Changelog) (restored int, err error) {
	const perBatch = 4096
	b := s.db.NewBatch()
	flush := func() error {
		if b.Count() == 0 {
			return nil
		}
		err := b.Commit(pebble.NoSync)
		_ = b.Close()
		b = s.db.NewBatch()
		return err
	}
	err = log.Restore(func(op Op) error {
		restored++
		var err error
		if op.Delete {
			err = b.Delete(op.Key, nil)
		} else {
			err = b.Set(op.Key, op.Value, nil)
		}
		if err == nil && b.Count() >= perBatch {
			err = flush()
		}
		return err
	})
	if err == nil {
		err = flush()
	}
	_ = b.Close()
	if err != nil {
		return restored, fmt.Errorf("store: restoring %s from its changelog: %w", s.dir, err)
	}
	return restored, nil
}
