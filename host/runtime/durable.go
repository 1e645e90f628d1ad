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
	id ordering.Sender
	// routes holds, per destination (its dest key), the last TaskId given
	// and the keyed copies sent there, one slab per destination so that
	// each is drained in the order it was filled: one map lookup per
	// delivery.
	routes map[string]*route
	tasks  map[string]uint64 // the last TaskIds as stored, filled by storedTasks
	keys   keys.Interner     // the keys this sender computed
}

// route is a sender's side of one destination.
type route struct {
	task   uint64
	copies slab[ordering.Message]
}

func newSender(id ordering.Sender, last map[string]uint64) *sender {
	s := &sender{id: id, routes: make(map[string]*route, len(last)), tasks: make(map[string]uint64, len(last))}
	for d, t := range last {
		s.routes[d] = &route{task: t}
	}
	return s
}

func (s *sender) route(dest string) *route {
	r := s.routes[dest]
	if r == nil {
		r = &route{}
		s.routes[dest] = r
	}
	return r
}

// storedTasks returns the last TaskId per destination, for the store. The
// map is the sender's, refilled by every call: the storage keeps nothing of
// it (StorageBatch.SetRead, SetPartition).
func (s *sender) storedTasks() map[string]uint64 {
	for d, r := range s.routes {
		s.tasks[d] = r.task
	}
	return s.tasks
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
		rt := snd.route(part.destKey)
		rt.task++
		cp := rt.copies.next()
		*cp = *m
		cp.Key = key
		cp.Task = ordering.TaskID(rt.task)
		ds = append(ds, delivery{part: part, task: cp.Task, m: cp})
	}
	// A sink's record is formatted by the sink's goroutine (sinkRunner.run).
	for _, sk := range s.sinks {
		rt := snd.route(sk.destKey)
		rt.task++
		ds = append(ds, delivery{sink: sk, task: ordering.TaskID(rt.task), m: m})
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
