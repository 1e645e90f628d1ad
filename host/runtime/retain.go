package runtime

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// satSub is a - b, saturating at the int64 range.
func satSub(a, b int64) int64 {
	if d := a - b; (d < a) == (b > 0) {
		return d
	}
	if b > 0 {
		return math.MinInt64
	}
	return math.MaxInt64
}

// Replay is where `flowhost run --from` reprocesses a source from: every
// partition of the source is read again from that position, as far as the
// store still holds its records (see spec.Retention). Replayed records keep
// their message ids. Without [WithResetState], downstream they are new
// input (state is not rolled back: counts go on from the last run's), and
// they are late with respect to the watermarks already published; with
// it, the computations downstream start as on a first run.
type Replay struct {
	// Offset is the first offset of every partition to read again, when
	// ByOffset; otherwise WriteTime is: the first record written at or
	// after it (Unix nanoseconds).
	Offset    uint64
	ByOffset  bool
	WriteTime int64
}

// offset resolves the replay position in one partition whose records end
// before end.
func (rp Replay) offset(st Storage, stream string, part int, end uint64) (uint64, error) {
	first, stored, err := st.SourceRange(stream, part)
	if err != nil {
		return 0, err
	}
	if first == stored { // nothing retained
		first = end
	}
	from := rp.Offset
	if !rp.ByOffset {
		if from, err = st.SourceOffsetAt(stream, part, rp.WriteTime); err != nil {
			return 0, err
		}
		if from < first {
			from = first
		}
	}
	if from > end {
		from = end
	}
	if from < first {
		return 0, fmt.Errorf("replay of %s/p%d from offset %d: records before %d are no longer retained (retention.sources)", stream, part, from, first)
	}
	return from, nil
}

// retain deletes, every retention interval until ctx ends, the source
// records every reader has, that no queue entry refers to, and that were
// ingested longer than
// retention.sources ago (by the wall clock, whatever their
// WriteTimestamps), and
// the HTTP sink log records beyond retention.sink_log_records, so the
// store does not grow without bound.
func (r *Runtime) retain(ctx context.Context) error {
	pol := r.pipe.Retention
	tick := time.NewTicker(pol.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := r.retainOnce(pol); err != nil {
			return fmt.Errorf("retention: %w", err)
		}
	}
}

func (r *Runtime) retainOnce(pol spec.Retention) error {
	st := r.storage
	cutoff := r.opts.now() - int64(pol.Sources)
	b := st.NewBatch()
	deleted := 0
	// Every read position is taken before the queues are scanned: a
	// message routed after its partition's position was read refers to
	// an offset at or above it, so no record below the bound is referred
	// to by an entry the scan did not see.
	routed := map[store.SourcePartition]uint64{}
	for _, src := range r.sources {
		for part := range src.parts {
			read, _, err := st.Read(src.stream.name, part)
			if err != nil {
				return err
			}
			routed[store.SourcePartition{Stream: src.stream.name, Partition: part}] = read.Next
		}
	}
	floors, err := st.QueuedSourceFloors()
	if err != nil {
		return err
	}
	for _, src := range r.sources {
		name := src.stream.name
		src.mu.Lock()
		wm := src.eventWM.Value()
		src.mu.Unlock()
		if wm != ordering.NoWatermark {
			n, err := st.DeleteIdempotencyBelow(name, satSub(wm, int64(pol.Idempotency)))
			if err != nil {
				return err
			}
			r.metrics.retained.Add(float64(n))
		}
		for part := range src.parts {
			sp := store.SourcePartition{Stream: name, Partition: part}
			first, _, err := st.SourceRange(name, part)
			if err != nil {
				return err
			}
			upTo, err := st.SourceOffsetIngestedAt(name, part, cutoff)
			if err != nil {
				return err
			}
			upTo = min(upTo, routed[sp])
			if floor, ok := floors[sp]; ok {
				upTo = min(upTo, floor) // queued messages refer to these records
			}
			if upTo > first {
				b.DeleteSourceBefore(name, part, upTo)
				deleted += int(upTo - first)
			}
		}
	}
	for _, sk := range r.sinks {
		if sk.http == nil {
			continue
		}
		first, end, err := st.SinkLogRange(sk.name)
		if err != nil {
			return err
		}
		if keep := uint64(pol.SinkLogRecords); end-first > keep {
			b.DeleteSinkLogBefore(sk.name, end-keep)
			deleted += int(end - keep - first)
		}
	}
	if deleted == 0 {
		b.Discard()
		return nil
	}
	if err := b.Commit(); err != nil {
		return err
	}
	r.metrics.retained.Add(float64(deleted))
	r.metrics.storeBytes.Set(float64(st.DiskBytes()))
	return nil
}
