package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/flowhost/flowhost/host/keys"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// sender is one sending partition's side of its routes: a source
// partition's reader or a computation partition. It numbers what it queues
// per destination (TaskIds), so that a message can be stored under its
// TaskId before it is handed over, and recovery hands every destination's
// queue back in the order it was queued.
type sender struct {
	id    ordering.Sender
	tasks map[string]uint64 // last TaskId per destination (its dest key)
	// copies holds the keyed copies sent to each partition, one slab per
	// destination so that each is drained in the order it was filled.
	copies map[*partition]*slab[ordering.Message]
	keys   keys.Interner // the keys this sender computed
}

func newSender(id ordering.Sender, last map[string]uint64) *sender {
	s := &sender{id: id, tasks: map[string]uint64{}, copies: map[*partition]*slab[ordering.Message]{}}
	for d, t := range last {
		s.tasks[d] = t
	}
	return s
}

// copyFor returns a new message to be sent to part.
func (s *sender) copyFor(part *partition) *ordering.Message {
	sl := s.copies[part]
	if sl == nil {
		sl = &slab[ordering.Message]{}
		s.copies[part] = sl
	}
	return sl.next()
}

func (s *sender) next(dest string) ordering.TaskID {
	s.tasks[dest]++
	return ordering.TaskID(s.tasks[dest])
}

// delivery is one message for one destination: a computation partition
// (with the copy keyed for it) or a sink.
type delivery struct {
	part *partition
	sink *sinkRunner
	task ordering.TaskID
	m    *ordering.Message
}

// plan works out where m goes: each reading computation computes its key
// (or takes the one the guest set) and gets its own copy in the partition
// that key selects; each sink gets a record. Every delivery gets snd's next
// TaskId for its destination. A message whose key cannot be computed goes
// to the reader's dead-letter route instead, planned here too.
func (r *Runtime) plan(ctx context.Context, snd *sender, m *ordering.Message, ds []delivery) ([]delivery, error) {
	s := r.streams[m.Stream]
	for _, c := range s.readers {
		key, err := c.key(m, &snd.keys)
		if err != nil {
			kerr := fmt.Errorf("computation %q group_by %v: %w", c.spec.Name, c.spec.GroupBy, err)
			origin := fmt.Sprintf("%s <- %s %s", c.spec.Name, m.Stream, m.ID)
			if ds, err = c.deadLetter(ctx, snd, ds, stageKey, origin, kerr, m.Payload, m.ID, m.Time); err != nil {
				return ds, err
			}
			continue
		}
		part := c.parts[ordering.PartitionOf(key, len(c.parts))]
		cp := snd.copyFor(part)
		*cp = *m
		cp.Key = key
		cp.Task = snd.next(part.destKey)
		ds = append(ds, delivery{part: part, task: cp.Task, m: cp})
	}
	// A sink's record is formatted by the sink's goroutine (sinkRunner.run).
	for _, sk := range s.sinks {
		ds = append(ds, delivery{sink: sk, task: snd.next(sk.destKey), m: m})
	}
	return ds, nil
}

// persist stores every delivery in its destination's queue.
func persist(b StorageBatch, from ordering.Sender, ds []delivery) {
	for i := range ds {
		d := &ds[i]
		if d.part != nil {
			b.Enqueue(d.part.dest, from, d.task, d.m)
		} else {
			b.Enqueue(d.sink.dest, from, d.task, d.m)
		}
	}
}

// deliver hands the deliveries over, in order, waiting where a destination
// is full (backpressure). They were committed first, so nothing
// uncommitted is ever seen downstream.
func (r *Runtime) deliver(ctx context.Context, from ordering.Sender, ds []delivery) error {
	for i := 0; i < len(ds); i++ {
		d := &ds[i]
		if d.part != nil {
			// A run of deliveries to one partition takes its lock once.
			j := i + 1
			for j < len(ds) && ds[j].part == d.part {
				j++
			}
			if err := d.part.sendAll(ctx, from, ds[i:j]); err != nil {
				return err
			}
			for k := i; k < j; k++ {
				s := r.streams[ds[k].m.Stream]
				s.mBuffered.Inc()
				s.mBufferedBytes.Add(float64(ds[k].m.Footprint()))
			}
			i = j - 1
			continue
		}
		if err := d.sink.send(ctx, sinkItem{m: d.m, from: from, task: d.task}); err != nil {
			return err
		}
	}
	return nil
}

// writeCommit adds a batch's state and timer changes to a store batch.
func writeCommit(b StorageBatch, comp string, part int, c *stateCommit) {
	for _, ch := range c.State {
		if ch.Delete {
			b.DeleteState(comp, part, ch.Key)
		} else {
			b.SetState(comp, part, ch.Key, ch.Value)
		}
	}
	for _, ref := range c.TimersDeleted {
		b.DeleteTimer(comp, part, ref.Key, ref.Trigger)
	}
	for _, t := range c.TimersSet {
		b.SetTimer(comp, part, t)
	}
}

// Fingerprint is the shape of a pipeline that a data directory's contents
// depend on: source streams and their partitions, computations with their
// partitions and streams, sinks and what they read. A store written by a
// pipeline of another shape is refused (store.ErrPipelineMismatch); plugin
// versions, batch limits and other settings may change between runs.
func Fingerprint(p *spec.Pipeline) string {
	var parts []string
	for _, s := range p.Sources {
		parts = append(parts, fmt.Sprintf("source %s->%s/%d", s.Name, s.Stream, s.Partitions))
	}
	for _, c := range p.Computations {
		outs := slices.Clone(c.OutputStreams)
		if c.DeadLetter != nil {
			outs = append(outs, c.DeadLetter.Stream)
		}
		parts = append(parts, fmt.Sprintf("computation %s/%d %s[%s]->[%s]", c.Name, c.Partitions, c.Kind,
			strings.Join(c.InputStreams, ","), strings.Join(outs, ",")))
	}
	for _, s := range p.Sinks {
		parts = append(parts, fmt.Sprintf("sink %s<-[%s]", s.Name, strings.Join(s.Streams, ",")))
	}
	return fmt.Sprintf("pipeline %s: %s", p.Name, strings.Join(parts, "; "))
}
