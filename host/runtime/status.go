package runtime

import "sync"

// Status is a snapshot of what runs: each computation's tenant, the
// version its partitions run and the partitions that are quarantined,
// with why. It is what an operator asks when a tenant's output stops.
type Status struct {
	// Pipeline is the pipeline's name.
	Pipeline string `json:"pipeline"`
	// Computations are in the spec's order.
	Computations []ComputationStatus `json:"computations"`
}

// ComputationStatus is one computation's part of a [Status].
type ComputationStatus struct {
	Name string `json:"name"`
	// Tenant is "" for the operator's computations.
	Tenant string `json:"tenant,omitempty"`
	// Version names the version the computation runs, as the last
	// Reload labelled it; "" for the one the run started with.
	Version string `json:"version,omitempty"`
	// Generation counts the reloads swapped in.
	Generation uint64 `json:"generation"`
	// Partitions is the number of partitions.
	Partitions int `json:"partitions"`
	// Quarantined lists the partitions that no longer call their guest
	// and dead-letter their batches.
	Quarantined []QuarantinedPartition `json:"quarantined,omitempty"`
}

// QuarantinedPartition is a quarantined partition and why.
type QuarantinedPartition struct {
	Partition int    `json:"partition"`
	Reason    string `json:"reason"`
}

// quarantines records the quarantined partitions of a computation for
// Status and the quarantined gauge; the partitions' own failure state
// belongs to their workers.
type quarantines struct {
	mu     sync.Mutex
	reason map[int]string
}

// setQuarantine quarantines partition p for reason (nil lifts it): the
// one place that changes a quarantine, so that the partition's state,
// Status and flowhost_computation_quarantined always agree.
func (p *partition) setQuarantine(reason error) {
	c := p.comp
	p.failures.quarantine = reason
	if reason == nil {
		p.failures.allFailed = 0
	}
	q := &c.quarantined
	q.mu.Lock()
	defer q.mu.Unlock()
	if reason == nil {
		delete(q.reason, p.index)
	} else {
		if q.reason == nil {
			q.reason = map[int]string{}
		}
		q.reason[p.index] = reason.Error()
	}
	gauge := 0.0
	if len(q.reason) > 0 {
		gauge = 1
	}
	c.rt.metrics.quarantined.WithLabelValues(c.spec.Name).Set(gauge)
}

// Status returns a snapshot of the run; it is safe to call at any time
// from any goroutine.
func (r *Runtime) Status() Status {
	st := Status{Pipeline: r.pipe.Name}
	for _, c := range r.comps {
		v := c.version.Load()
		cs := ComputationStatus{Name: c.spec.Name, Tenant: c.spec.Tenant, Version: v.label, Generation: v.number, Partitions: len(c.parts)}
		c.quarantined.mu.Lock()
		for i := range len(c.parts) {
			if reason, ok := c.quarantined.reason[i]; ok {
				cs.Quarantined = append(cs.Quarantined, QuarantinedPartition{Partition: i, Reason: reason})
			}
		}
		c.quarantined.mu.Unlock()
		st.Computations = append(st.Computations, cs)
	}
	return st
}
