package runtime

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// Durable is true when the run commits to a durable storage (a data
	// directory): it is exactly-once across restarts. False: in memory,
	// everything but what was written out is lost when the process ends.
	Durable bool `json:"durable"`
	// Computations are in the spec's order.
	Computations []ComputationStatus `json:"computations"`
	// Streams are the pipeline's streams, by name, with the watermarks
	// their writers published (ordering.NoWatermark before the first).
	Streams []StreamStatus `json:"streams,omitempty"`
	// DeadLetters are the latest dead letters (at most
	// maxRecentDeadLetters), oldest first.
	DeadLetters []DeadLetterRecord `json:"dead_letters,omitempty"`
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

// StreamStatus is one stream's part of a [Status]: its writer's
// watermarks, in int64 nanoseconds since the Unix epoch.
type StreamStatus struct {
	Name            string `json:"name"`
	EventWatermark  int64  `json:"event_watermark"`
	SystemWatermark int64  `json:"system_watermark"`
	// Idle is true while the stream's writer is idle: its readers leave
	// it out of their event watermark.
	Idle bool `json:"idle,omitempty"`
	// Finished is true once the stream has ended.
	Finished bool `json:"finished,omitempty"`
}

// PartitionStatus is one computation partition's part of a [Status], as
// its worker last published it (after its last batch).
type PartitionStatus struct {
	Partition int `json:"partition"`
	// Epoch is the last epoch the partition processed.
	Epoch uint64 `json:"epoch"`
	// Queued counts the messages delivered to it and not yet processed.
	Queued int `json:"queued"`
	// LastBatchRows, LastBatchNanos and LastBatchAt are the last batch's
	// inputs, its processing time and when it ended (0: none yet).
	LastBatchRows  int   `json:"last_batch_rows"`
	LastBatchNanos int64 `json:"last_batch_nanos"`
	LastBatchAt    int64 `json:"last_batch_at"`
	// PendingTimers counts the timers set and not yet fired.
	PendingTimers int `json:"pending_timers"`
	// StateKeys and StateBytes count the keys with state and their
	// bytes among the keys this run wrote: state a resumed run has not
	// touched yet is not counted (flowhost inspect counts all of it).
	StateKeys  int   `json:"state_keys"`
	StateBytes int64 `json:"state_bytes"`
	// EventWatermark and SystemWatermark are the partition's output
	// watermarks.
	EventWatermark  int64 `json:"event_watermark"`
	SystemWatermark int64 `json:"system_watermark"`
}

// DeadLetterRecord is one recent dead letter: which node sent it, at which
// stage, why, and when (int64 nanoseconds since the Unix epoch).
type DeadLetterRecord struct {
	Node  string `json:"node"`
	Stage string `json:"stage"`
	Cause string `json:"cause"`
	Time  int64  `json:"time"`
}

// maxRecentDeadLetters bounds Status.DeadLetters.
const maxRecentDeadLetters = 20

// partitionView is what a partition's worker publishes for Status after
// each batch: atomics, so that Status never waits for a running batch.
// sizes is the worker's own.
type partitionView struct {
	epoch, lastAt, lastNanos, stateBytes atomic.Int64
	lastRows, timers, stateKeys          atomic.Int64
	sizes                                map[string]int
}

// publishView records batch b's figures, which ended now after started,
// and the state changes of its commit c (nil: none) for Status; only the
// partition's worker calls it.
func (p *partition) publishView(rows int, started time.Time, c *stateCommit) {
	v := &p.view
	if c != nil {
		if v.sizes == nil {
			v.sizes = map[string]int{}
		}
		for _, ch := range c.State {
			old, had := v.sizes[ch.Key]
			if ch.Delete {
				if had {
					delete(v.sizes, ch.Key)
					v.stateBytes.Add(-int64(old))
				}
				continue
			}
			v.sizes[ch.Key] = len(ch.Value)
			v.stateBytes.Add(int64(len(ch.Value) - old))
		}
		v.stateKeys.Store(int64(len(v.sizes)))
	}
	v.epoch.Store(int64(p.epoch))
	if !started.IsZero() {
		now := time.Now()
		v.lastRows.Store(int64(rows))
		v.lastNanos.Store(int64(now.Sub(started)))
		v.lastAt.Store(now.UnixNano())
	}
	if p.timers != nil {
		v.timers.Store(int64(p.timers.Len()))
	}
}

func (p *partition) status() PartitionStatus {
	v := &p.view
	p.mu.Lock()
	queued := p.events.Len()
	p.mu.Unlock()
	return PartitionStatus{Partition: p.index, Epoch: uint64(v.epoch.Load()), Queued: queued,
		LastBatchRows: int(v.lastRows.Load()), LastBatchNanos: v.lastNanos.Load(), LastBatchAt: v.lastAt.Load(),
		PendingTimers: int(v.timers.Load()), StateKeys: int(v.stateKeys.Load()), StateBytes: v.stateBytes.Load(),
		EventWatermark: p.outWM.Load(), SystemWatermark: p.outSysWM.Load()}
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
	// PartitionDetails has one entry per partition, in order.
	PartitionDetails []PartitionStatus `json:"partition_details,omitempty"`
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
	st := Status{Pipeline: r.pipe.Name, Durable: r.storage.Durable()}
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
		for _, p := range c.parts {
			cs.PartitionDetails = append(cs.PartitionDetails, p.status())
		}
		st.Computations = append(st.Computations, cs)
	}
	for _, name := range slices.Sorted(maps.Keys(r.streams)) {
		s := r.streams[name]
		st.Streams = append(st.Streams, StreamStatus{Name: name, EventWatermark: s.eventWM.Load(), SystemWatermark: s.systemWM.Load(),
			Idle: s.idle.Load(), Finished: s.finished.Load()})
	}
	if r.dead != nil {
		st.DeadLetters = r.dead.causes.recentCopy()
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
	// Durable is true when the run commits to a durable storage (a data
	// directory): it is exactly-once across restarts. False: in memory,
	// everything but what was written out is lost when the process ends.
	Durable bool `json:"durable"`
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
	// recent are the latest dead letters, oldest first, for Status.
	recent []DeadLetterRecord
}

// recentCopy returns the latest dead letters, oldest first.
func (d *deadLetterCauses) recentCopy() []DeadLetterRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.recent)
}

func (d *deadLetterCauses) add(node, stage string, err error) {
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
	d.recent = append(d.recent, DeadLetterRecord{Node: node, Stage: stage, Cause: cause, Time: time.Now().UnixNano()})
	if len(d.recent) > maxRecentDeadLetters {
		d.recent = slices.Delete(d.recent, 0, len(d.recent)-maxRecentDeadLetters)
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

// WithLiveTrace keeps the last n deliveries of every computation
// partition, with the fields of a --trace line, for RecentDeliveries (the
// operator's live trace). It costs what --trace costs to build the records,
// without the writing; 0 (the default) keeps none.
func WithLiveTrace(n int) Option { return func(o *options) { o.liveTrace = max(0, n) } }

// recentDeliveries is a partition's ring of its last deliveries: written
// by its worker, read by RecentDeliveries.
type recentDeliveries struct {
	mu   sync.Mutex
	ring []TraceRecord
	next int // where the next one goes, once the ring is full
}

// add keeps recs, the deliveries of one batch in order, in a ring of n.
func (d *recentDeliveries) add(recs []TraceRecord, n int) {
	if n <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range recs {
		r.Parents = slices.Clone(r.Parents)
		if len(d.ring) < n {
			d.ring = append(d.ring, r)
			continue
		}
		d.ring[d.next] = r
		d.next = (d.next + 1) % n
	}
}

func (d *recentDeliveries) copy() []TraceRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]TraceRecord, 0, len(d.ring))
	out = append(out, d.ring[d.next:]...)
	return append(out, d.ring[:d.next]...)
}

// RecentDeliveries returns the last deliveries of partition part of
// computation, oldest first, as many as WithLiveTrace keeps; an error
// names what does not exist, or says the live trace is off.
func (r *Runtime) RecentDeliveries(computation string, part int) ([]TraceRecord, error) {
	if r.opts.liveTrace <= 0 {
		return nil, errors.New("the live trace is off: start the run with --live-trace N")
	}
	for _, c := range r.comps {
		if c.spec.Name != computation {
			continue
		}
		if part < 0 || part >= len(c.parts) {
			return nil, fmt.Errorf("computation %q has partitions 0 to %d, not %d", computation, len(c.parts)-1, part)
		}
		return c.parts[part].recent.copy(), nil
	}
	return nil, fmt.Errorf("no computation %q in pipeline %q", computation, r.pipe.Name)
}
