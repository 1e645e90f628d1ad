package runtime

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flowhost/flowhost/host/connect"
)

// Status is a snapshot of what runs: each computation's tenant, the
// version its partitions run and the partitions that are quarantined,
// with why. It is what an operator asks when a tenant's output stops.
type Status struct {
	// Pipeline is the pipeline's name.
	Pipeline string `json:"pipeline"`
	// Computations are in the spec's order.
	Computations []ComputationStatus `json:"computations"`
	// KafkaLag is the consumer lag of every partition the kafka sources
	// have fetched, by source in the spec's order.
	KafkaLag []KafkaLag `json:"kafka_lag,omitempty"`
}

// KafkaLag is the lag of one partition of a kafka source
// (flowhost_kafka_consumer_lag).
type KafkaLag struct {
	Source string `json:"source"`
	connect.KafkaPartitionLag
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
	for _, src := range r.sources {
		if k, ok := src.conn.(interface {
			Lag() []connect.KafkaPartitionLag
		}); ok {
			for _, l := range k.Lag() {
				st.KafkaLag = append(st.KafkaLag, KafkaLag{Source: src.spec.Name, KafkaPartitionLag: l})
			}
		}
	}
	return st
}

// Summary is what a run did, for the report at its end: the records each
// source accepted and each sink was given, each computation's messages,
// dead letters with their most common cause, quarantined partitions and
// timers left pending, and each source's refused records. Counts are of
// this run only (a resumed run does not count what its predecessors did).
type Summary struct {
	// Pipeline is the pipeline's name.
	Pipeline string `json:"pipeline"`
	// Sources, Computations and Sinks are in the spec's order.
	Sources      []SourceSummary      `json:"sources"`
	Computations []ComputationSummary `json:"computations"`
	Sinks        []SinkSummary        `json:"sinks"`
	// Interrupted is true when a stop's grace period ran out (see
	// [WithStopGrace]): running batches were interrupted and not
	// committed, and what was accepted and not yet delivered waits in the
	// store for the next run.
	Interrupted bool `json:"interrupted"`
}

// SourceSummary is one source's part of a [Summary].
type SourceSummary struct {
	Name   string `json:"name"`
	Stream string `json:"stream"`
	// Records counts the records the source accepted
	// (flowhost_source_records_total).
	Records int64 `json:"records"`
	// DeadLetters counts the records its connector could not read.
	DeadLetters int64 `json:"dead_letters"`
	// TopCause is the most common reason among them; nil without any.
	TopCause *DeadLetterCause `json:"top_cause,omitempty"`
}

// ComputationSummary is one computation's part of a [Summary].
type ComputationSummary struct {
	Name string `json:"name"`
	// Tenant is "" for the operator's computations.
	Tenant string `json:"tenant,omitempty"`
	// MessagesIn and MessagesOut count the messages delivered to it and
	// those it emitted (flowhost_messages_in_total, _out_total).
	MessagesIn  int64 `json:"messages_in"`
	MessagesOut int64 `json:"messages_out"`
	// DeadLetters counts its inputs sent to its dead-letter route
	// (flowhost_dead_letters_total{node}), TopCause the most common error
	// they were sent with.
	DeadLetters int64            `json:"dead_letters"`
	TopCause    *DeadLetterCause `json:"top_cause,omitempty"`
	// Quarantined lists its quarantined partitions, with why.
	Quarantined []QuarantinedPartition `json:"quarantined,omitempty"`
	// PendingTimers counts the timers set and not fired when the run
	// ended: they fire in a later run, when the watermark passes them.
	PendingTimers int `json:"pending_timers"`
}

// SinkSummary is one sink's part of a [Summary].
type SinkSummary struct {
	Name string `json:"name"`
	// Records counts the records written to it (flowhost_sink_records_total).
	Records int64 `json:"records"`
}

// DeadLetterCause is an error dead letters were sent with, and how many.
type DeadLetterCause struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// Quarantined returns every quarantined partition of the summary's
// computations, by computation name.
func (s Summary) Quarantined() map[string][]QuarantinedPartition {
	q := map[string][]QuarantinedPartition{}
	for _, c := range s.Computations {
		if len(c.Quarantined) > 0 {
			q[c.Name] = c.Quarantined
		}
	}
	return q
}

// Summary reports what the run did. It is meant for after [Runtime.Run]
// has returned: the pending timers are read from the partitions, which
// only their workers may touch while the run lasts.
func (r *Runtime) Summary() Summary {
	m := r.metrics
	s := Summary{Pipeline: r.pipe.Name, Interrupted: r.interrupted.Load()}
	for _, src := range r.sources {
		ss := SourceSummary{Name: src.spec.Name, Stream: src.stream.name, Records: counterValue(src.mRecords),
			DeadLetters: counterSum(m.deadLetters, "node", src.spec.Name), TopCause: r.dead.causes.top(src.spec.Name)}
		s.Sources = append(s.Sources, ss)
	}
	status := r.Status()
	for i, c := range r.comps {
		cs := ComputationSummary{Name: c.spec.Name, Tenant: c.spec.Tenant,
			DeadLetters: counterSum(m.deadLetters, "node", c.spec.Name), TopCause: r.dead.causes.top(c.spec.Name),
			Quarantined: status.Computations[i].Quarantined}
		for _, n := range c.mIn {
			cs.MessagesIn += counterValue(n)
		}
		for _, n := range c.mOut {
			cs.MessagesOut += counterValue(n)
		}
		for _, p := range c.parts {
			if p.timers != nil {
				cs.PendingTimers += p.timers.Len()
			}
		}
		s.Computations = append(s.Computations, cs)
	}
	for _, sk := range r.sinks {
		s.Sinks = append(s.Sinks, SinkSummary{Name: sk.name, Records: counterValue(m.sinkRecords.WithLabelValues(sk.name))})
	}
	return s
}

// counterValue reads a counter's value.
func counterValue(c prometheus.Counter) int64 {
	var d dto.Metric
	if c.Write(&d) != nil {
		return 0
	}
	return int64(d.GetCounter().GetValue())
}

// counterSum adds up the series of vec whose label is value.
func counterSum(vec *prometheus.CounterVec, label, value string) int64 {
	ch := make(chan prometheus.Metric)
	go func() { vec.Collect(ch); close(ch) }()
	var sum float64
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil {
			continue
		}
		for _, lp := range d.GetLabel() {
			if lp.GetName() == label && lp.GetValue() == value {
				sum += d.GetCounter().GetValue()
			}
		}
	}
	return int64(sum)
}

// Bounds of deadLetterCauses: the errors of dead letters name their
// record (a line, an offset), so a node may have as many as it has dead
// letters; past maxCausesPerNode distinct ones the rest are not told
// apart, and each is cut to maxCauseBytes.
const (
	maxCausesPerNode = 64
	maxCauseBytes    = 300
	otherCauses      = "(other errors)"
)

// deadLetterCauses tallies, per node, the errors its dead letters were
// sent with, so that the summary can name the most common one. The
// counts of dead letters themselves are the flowhost_dead_letters_total
// metric's; this only tells their errors apart, which a metric label may
// not (an error is unbounded).
type deadLetterCauses struct {
	mu     sync.Mutex
	byNode map[string]map[string]int64
}

func (d *deadLetterCauses) add(node string, err error) {
	cause := "(no error)"
	if err != nil {
		cause = err.Error()
	}
	if len(cause) > maxCauseBytes {
		cause = strings.ToValidUTF8(cause[:maxCauseBytes], "") + "…"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byNode == nil {
		d.byNode = map[string]map[string]int64{}
	}
	causes := d.byNode[node]
	if causes == nil {
		causes = map[string]int64{}
		d.byNode[node] = causes
	}
	if _, ok := causes[cause]; !ok && len(causes) >= maxCausesPerNode {
		cause = otherCauses
	}
	causes[cause]++
}

// top returns node's most common cause (of equal counts, the first in
// byte order), or nil without any.
func (d *deadLetterCauses) top(node string) *DeadLetterCause {
	d.mu.Lock()
	defer d.mu.Unlock()
	var best *DeadLetterCause
	for cause, n := range d.byNode[node] {
		if best == nil || n > best.Count || n == best.Count && cause < best.Error {
			best = &DeadLetterCause{Error: cause, Count: n}
		}
	}
	return best
}
