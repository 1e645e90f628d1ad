package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
)

// version is one version of a computation's implementation: the factory
// its partitions instantiate, numbered from 0 (the one the run started
// with) by every Reload.
type version struct {
	factory compute.Factory
	number  uint64
	label   string       // for logs: the plugin version and checksum, or ""
	users   atomic.Int32 // partitions whose instance is of this version
}

// Retirer is implemented by a Factory that holds resources (a compiled
// module, its engine) to release once no partition runs it any more:
// Reload calls Retire when the last partition has moved off a version it
// replaced.
type Retirer interface {
	Retire(ctx context.Context)
}

// use moves partition p onto version v, and retires the version it
// leaves if it was the last partition on it and a Reload replaced it.
func (p *partition) use(ctx context.Context, v *version) {
	old := p.version
	if old == v {
		return
	}
	v.users.Add(1)
	p.version = v
	if old != nil && old.users.Add(-1) == 0 && p.comp.version.Load() != old {
		if r, ok := old.factory.(Retirer); ok {
			r.Retire(ctx)
			p.comp.rt.log.Info("reloaded-away version retired: no partition runs it", "computation", p.comp.spec.Name, "version", old.label, "generation", old.number)
		}
	}
}

// ErrUnknownComputation is wrapped by Reload's error for a name the
// pipeline has no computation of.
var ErrUnknownComputation = errors.New("unknown computation")

// Reload replaces the implementation of computation name with f, at an
// epoch boundary of each partition: a partition finishes the batch it is
// processing on the version it started it with, and processes every
// later batch on an instance of f. A batch is therefore processed (and its
// epoch committed) by exactly one version, and nothing queued is lost:
// the queues, state and timers belong to the host, not to the instance.
//
// Reload first instantiates f once as partition 0 would (the probe), so a
// version whose Init fails is refused here and the running version keeps
// running; label names the version in logs. A partition that later
// cannot instantiate f keeps its old instance, logs why, and tries again
// at its next batch. Reloading lifts a quarantine: the partition's next
// batch calls the new version.
func (r *Runtime) Reload(ctx context.Context, name string, f compute.Factory, label string) error {
	i := slices.IndexFunc(r.comps, func(c *computation) bool { return c.spec.Name == name })
	if i < 0 {
		return fmt.Errorf("reload %q: %w", name, ErrUnknownComputation)
	}
	c := r.comps[i]
	probe, err := f.Instantiate(ctx, c.init(0))
	if err != nil {
		r.metrics.reloads.WithLabelValues(name, "refused").Inc()
		return fmt.Errorf("reload of computation %q refused, the running version keeps running: instantiating %s: %w", name, label, err)
	}
	_ = probe.Close(ctx)
	old := c.version.Load()
	c.version.Store(&version{factory: f, number: old.number + 1, label: label})
	r.metrics.reloads.WithLabelValues(name, "swapped").Inc()
	r.log.Info("computation reloaded: each partition switches at its next batch",
		"computation", name, "version", label, "generation", old.number+1)
	c.wakeAll()
	return nil
}

// adoptVersion moves the partition onto the computation's current
// version before a batch, if a Reload replaced the one its instance runs.
func (p *partition) adoptVersion(ctx context.Context) {
	c := p.comp
	v := c.version.Load()
	if p.version == v {
		return
	}
	next, err := v.factory.Instantiate(ctx, c.init(p.index))
	if err != nil {
		c.rt.log.Error("partition cannot instantiate the reloaded version; it keeps the running one and tries again at its next batch",
			"computation", c.spec.Name, "partition", p.index, "version", v.label, "err", err)
		return
	}
	if p.proc != nil {
		_ = p.proc.Close(ctx)
	}
	p.proc = next
	p.use(ctx, v)
	if p.failures.quarantine != nil {
		p.setQuarantine(nil)
		c.rt.log.Info("quarantine lifted by a reload", "computation", c.spec.Name, "partition", p.index)
	}
	c.rt.log.Info("partition switched to the reloaded version", "computation", c.spec.Name, "partition", p.index,
		"version", v.label, "epoch", p.epoch+1)
}

// init is the Init of partition index.
func (c *computation) init(index int) *abi.Init {
	params := make(map[string]any, len(c.spec.Parameters))
	for k, v := range c.spec.Parameters {
		params[k] = v
	}
	return &abi.Init{
		ABI:           abi.Version,
		Computation:   c.spec.Name,
		Kind:          c.kind,
		Partition:     uint64(index),
		Parameters:    params,
		OutputStreams: c.spec.OutputStreams,
	}
}

// RefuseReload records that a new version of computation name was refused
// before it reached Reload (it could not be read, verified or compiled):
// it is logged with err and counted as refused; the running version keeps
// running.
func (r *Runtime) RefuseReload(name string, err error) {
	r.metrics.reloads.WithLabelValues(name, "refused").Inc()
	r.log.Error("reload refused: the running version keeps running", "computation", name, "err", err)
}
