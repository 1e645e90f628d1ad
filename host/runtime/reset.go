package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// ResetComputations returns, in topological order, the computations that
// `flowhost run --from ... --reset-state` resets when it replays the
// sources named: every computation that reads a replayed source's stream,
// and every computation that reads a stream one of those writes (outputs
// and dead-letter streams), transitively. The others keep their state,
// timers and queues and go on as in any run: nothing the replay derives
// reaches them.
func ResetComputations(p *spec.Pipeline, sources []string) []string {
	tainted := map[string]bool{} // streams the replay writes again
	for _, s := range p.Sources {
		if slices.Contains(sources, s.Name) {
			tainted[s.Stream] = true
		}
	}
	var out []string
	for _, c := range p.TopologicalOrder() {
		if !slices.ContainsFunc(c.InputStreams, func(s string) bool { return tainted[s] }) {
			continue
		}
		out = append(out, c.Name)
		for _, s := range c.OutputStreams {
			tainted[s] = true
		}
		if c.DeadLetter != nil {
			tainted[c.DeadLetter.Stream] = true
		}
	}
	return out
}

// resetForReplay empties, before anything is recovered, what
// [WithResetState] resets (see [ResetComputations] and [store.ResetPlan]):
// the replayed computations' state, timers and metadata, the messages the
// replay will derive again from every queue (theirs and the sinks'), and
// the replayed sources' watermarks; the replayed partitions' read
// positions move to where the replay starts.
func (r *Runtime) resetForReplay() error {
	st := r.storage
	var names []string
	for _, s := range r.pipe.Sources {
		if _, ok := r.opts.replay[s.Name]; ok {
			names = append(names, s.Name)
		}
	}
	plan := store.ResetPlan{Replayed: map[string][]uint64{}}
	resetSenders := map[string]bool{}
	for _, s := range r.pipe.Sources {
		rp, ok := r.opts.replay[s.Name]
		if !ok {
			continue
		}
		resetSenders["source:"+s.Stream] = true
		from := make([]uint64, s.Partitions)
		for part := range from {
			ip, _, err := st.Ingest(s.Stream, part)
			if err != nil {
				return err
			}
			if from[part], err = rp.offset(st, s.Stream, part, ip.Next); err != nil {
				return err
			}
		}
		plan.Replayed[s.Stream] = from
	}
	comps := ResetComputations(r.pipe, names)
	for _, name := range comps {
		resetSenders[name] = true
		c := r.pipe.Computation(name)
		for part := range c.Partitions {
			plan.Partitions = append(plan.Partitions, store.Dest{Name: name, Partition: part})
		}
	}
	for _, sk := range r.pipe.Sinks {
		plan.Sinks = append(plan.Sinks, store.Dest{Sink: true, Name: sk.Name})
	}
	plan.Reset = func(s ordering.Sender) bool { return resetSenders[s.Computation] }
	if err := st.Reset(plan); err != nil {
		return fmt.Errorf("--reset-state: %w", err)
	}
	r.log.Info("reset the replayed computations: they start from empty state and timers",
		"sources", strings.Join(names, ","), "computations", strings.Join(comps, ","))
	return nil
}
