// Package opview is the operator's view of a running pipeline: a versioned
// JSON API (/api/v1/...), a live web page at / that draws it, and the
// terminal rendering `flowhost status` prints. It reads the runtime
// through [Config] only (its Status, its metrics registry and the spec),
// so that it never reaches into the runtime's locks; the HTTP server it
// mounts on is the run's metrics server (package host).
//
// Every figure is of this run of the process: counters start at 0 when
// the run starts, rates are computed over the snapshots the server keeps
// (the last [DefaultHistory] samples, one per [DefaultInterval]).
package opview

import (
	"math"
	"slices"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/ordering"
)

// APIVersion is the version of the JSON API, the N of /api/v1/. A field
// is only ever added within a version; a change of meaning or a removal
// makes a new one.
const APIVersion = 1

// OperatorTenant names the computations without a tenant in the tenant
// table, as the flowhost_tenant_* metrics do.
const OperatorTenant = "operator"

// Snapshot is the whole view at one moment: what /api/v1/snapshot returns
// and what /api/v1/events sends. Timestamps are int64 nanoseconds since
// the Unix epoch; a watermark is null before there is one and
// [EndOfStream] once its stream ended.
type Snapshot struct {
	APIVersion    int            `json:"api_version"`
	Time          int64          `json:"time"`
	Pipeline      Graph          `json:"pipeline"`
	Streams       []Stream       `json:"streams"`
	Partitions    []Partition    `json:"partitions"`
	Quarantines   []Quarantine   `json:"quarantines"`
	Tenants       []Tenant       `json:"tenants"`
	DeadLetters   DeadLetters    `json:"dead_letters"`
	WatermarkHold *WatermarkHold `json:"watermark_hold"`
	// Progress is the long work of the run (replays, Kafka backlogs,
	// savepoints), finished ones included, by kind and name.
	Progress []Progress `json:"progress"`
}

// EndOfStream is the watermark of a stream that ended.
const EndOfStream int64 = math.MaxInt64

// Graph is the pipeline: its nodes and the streams between them.
type Graph struct {
	Name    string   `json:"name"`
	Nodes   []Node   `json:"nodes"`
	Edges   []Edge   `json:"edges"`
	Tenants []string `json:"tenants"`
}

// Node kinds.
const (
	KindSource      = "source"
	KindComputation = "computation"
	KindSink        = "sink"
)

// Node is a source, computation or sink. ID is Kind + ":" + Name, unique
// in the graph (a source and a sink may share a name).
type Node struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Type is the source's or sink's type, or the computation's plugin.
	Type string `json:"type"`
	// Tenant is "" for the operator's nodes.
	Tenant     string `json:"tenant,omitempty"`
	Partitions int    `json:"partitions,omitempty"`
	// Version and Generation are a computation's running plugin version
	// (as the last reload labelled it) and its count of reloads.
	Version    string `json:"version,omitempty"`
	Generation uint64 `json:"generation,omitempty"`
	// Quarantined counts a computation's quarantined partitions.
	Quarantined int `json:"quarantined,omitempty"`
}

// Edge is a stream from the node that writes it to one that reads it.
type Edge struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Stream string `json:"stream"`
}

// Stream is one stream's figures. In counts what its writer put on it
// (records a source accepted, messages a computation emitted), Out what
// its readers took (messages delivered to computations, records written
// by sinks that read only this stream). Rates are per second over the
// last [RateWindow] of samples.
type Stream struct {
	Name   string `json:"name"`
	Writer string `json:"writer,omitempty"`
	In     int64  `json:"in"`
	Out    int64  `json:"out"`
	// RateIn and RateOut are messages per second.
	RateIn           float64 `json:"rate_in"`
	RateOut          float64 `json:"rate_out"`
	BufferedMessages int64   `json:"buffered_messages"`
	BufferedBytes    int64   `json:"buffered_bytes"`
	// BiasNanos is the average EventTimestamp - AlignmentTimestamp of
	// its queued messages, as a reader last saw it.
	BiasNanos       int64  `json:"bias_nanos"`
	EventWatermark  *int64 `json:"event_watermark"`
	SystemWatermark *int64 `json:"system_watermark"`
	// LagNanos is how far the event watermark is behind the wall clock;
	// null without a watermark or once the stream ended.
	LagNanos *int64 `json:"lag_nanos"`
	// BrokerLag is, for a Kafka source's stream, the records the broker
	// holds that the source has not read yet; null when the runtime does
	// not report it (see [BrokerLagMetric]).
	BrokerLag *int64 `json:"broker_lag,omitempty"`
	Idle      bool   `json:"idle,omitempty"`
	Finished  bool   `json:"finished,omitempty"`
}

// BrokerLagMetric is the gauge of the records a Kafka source has not read
// yet, by source, topic and partition; the view shows its sum over a
// source's partitions as the stream's lag behind the broker.
const BrokerLagMetric = "flowhost_kafka_consumer_lag"

// Partition is one computation partition's figures.
type Partition struct {
	Computation string `json:"computation"`
	Tenant      string `json:"tenant,omitempty"`
	runtime.PartitionStatus
	// EventWatermark and SystemWatermark are the partition's output
	// watermarks, null before it has one (they hide the runtime's
	// ordering.NoWatermark).
	EventWatermark  *int64 `json:"event_watermark"`
	SystemWatermark *int64 `json:"system_watermark"`
	// Quarantine is why the partition is quarantined; "" when it is not.
	Quarantine string `json:"quarantine,omitempty"`
	// Owner is the id of the host that runs the partition
	// ([Config.HostID]). There is no cluster mode yet: one host runs
	// every partition, so every partition names the same owner.
	Owner string `json:"owner"`
}

// Quarantine is a quarantined partition and why.
type Quarantine struct {
	Computation string `json:"computation"`
	Tenant      string `json:"tenant,omitempty"`
	Partition   int    `json:"partition"`
	Reason      string `json:"reason"`
}

// Tenant is one tenant's use of the workers. CPUShare is the part of the
// worker time all tenants used over the last [RateWindow] that this one
// used (0..1), WeightShare the part its weight asks for when every
// tenant has work.
type Tenant struct {
	Name                string  `json:"name"`
	Weight              int     `json:"weight"`
	WeightShare         float64 `json:"weight_share"`
	CPUShare            float64 `json:"cpu_share"`
	WorkerSeconds       float64 `json:"worker_seconds"`
	ThrottledSeconds    float64 `json:"throttled_seconds"`
	QuotaRefusals       int64   `json:"quota_refusals"`
	RunningBatches      int64   `json:"running_batches"`
	SourceThrottledSecs float64 `json:"source_throttled_seconds"`
}

// DeadLetters are the counts of dead letters per node (computation, or
// source whose connector could not read them) and the latest few.
type DeadLetters struct {
	Total  int64                      `json:"total"`
	ByNode map[string]int64           `json:"by_node"`
	Latest []runtime.DeadLetterRecord `json:"latest"`
}

// WatermarkHold is where event time is held back: the stream, not ended,
// with the lowest event watermark, and the computation partition with the
// lowest output event watermark. A watermark of null (none yet) is the
// lowest of all.
type WatermarkHold struct {
	Stream          string `json:"stream,omitempty"`
	StreamWatermark *int64 `json:"stream_watermark"`
	Computation     string `json:"computation,omitempty"`
	Partition       int    `json:"partition"`
	// PartitionWatermark is the partition's output event watermark.
	PartitionWatermark *int64 `json:"partition_watermark"`
	LagNanos           *int64 `json:"lag_nanos"`
}

// sample is what the server keeps of each snapshot to compute rates and
// draw charts: counters only.
type sample struct {
	time          int64
	streamIn      map[string]int64
	streamOut     map[string]int64
	workerSeconds map[string]float64
	progressDone  map[string]int64
}

// metricIndex gives the series of a gathered registry by name.
type metricIndex map[string][]*dto.Metric

func indexMetrics(families []*dto.MetricFamily) metricIndex {
	idx := metricIndex{}
	for _, f := range families {
		idx[f.GetName()] = f.GetMetric()
	}
	return idx
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// sum adds up the series of name whose label is value ("" label: all).
func (idx metricIndex) sum(name, label, value string) float64 {
	var s float64
	for _, m := range idx[name] {
		if label == "" || labelOf(m, label) == value {
			s += metricValue(m)
		}
	}
	return s
}

// has reports whether a series of name has label = value.
func (idx metricIndex) has(name, label, value string) bool {
	for _, m := range idx[name] {
		if labelOf(m, label) == value {
			return true
		}
	}
	return false
}

// build makes the snapshot, as host hostID sees it, of status and the gathered metrics at now,
// with rates against the samples kept before it (oldest first).
func build(pipe *spec.Pipeline, hostID string, st runtime.Status, idx metricIndex, now time.Time, history []sample) (Snapshot, sample) {
	nowNs := now.UnixNano()
	snap := Snapshot{APIVersion: APIVersion, Time: nowNs}
	cur := sample{time: nowNs, streamIn: map[string]int64{}, streamOut: map[string]int64{}, workerSeconds: map[string]float64{}, progressDone: map[string]int64{}}
	base := rateBase(history, nowNs)

	// The graph.
	g := Graph{Name: pipe.Name, Nodes: []Node{}, Edges: []Edge{}, Tenants: []string{}}
	writer := map[string]string{}
	for _, s := range pipe.Sources {
		id := KindSource + ":" + s.Name
		g.Nodes = append(g.Nodes, Node{ID: id, Kind: KindSource, Name: s.Name, Type: string(s.Type), Tenant: s.Tenant, Partitions: s.Partitions})
		writer[s.Stream] = id
	}
	compStatus := map[string]runtime.ComputationStatus{}
	for _, c := range st.Computations {
		compStatus[c.Name] = c
	}
	for _, c := range pipe.Computations {
		id := KindComputation + ":" + c.Name
		cs := compStatus[c.Name]
		g.Nodes = append(g.Nodes, Node{ID: id, Kind: KindComputation, Name: c.Name, Type: c.Plugin, Tenant: c.Tenant, Partitions: c.Partitions,
			Version: cs.Version, Generation: cs.Generation, Quarantined: len(cs.Quarantined)})
		for _, out := range c.OutputStreams {
			writer[out] = id
		}
	}
	for _, c := range pipe.Computations {
		for _, in := range c.InputStreams {
			g.Edges = append(g.Edges, Edge{From: writer[in], To: KindComputation + ":" + c.Name, Stream: in})
		}
	}
	for _, s := range pipe.Sinks {
		id := KindSink + ":" + s.Name
		g.Nodes = append(g.Nodes, Node{ID: id, Kind: KindSink, Name: s.Name, Type: string(s.Type)})
		for _, in := range s.Streams {
			g.Edges = append(g.Edges, Edge{From: writer[in], To: id, Stream: in})
		}
	}
	for _, t := range pipe.Tenants {
		g.Tenants = append(g.Tenants, t.Name)
	}
	snap.Pipeline = g

	// Streams.
	soleSink := map[string][]string{} // stream -> sinks that read it alone
	for _, s := range pipe.Sinks {
		if len(s.Streams) == 1 {
			soleSink[s.Streams[0]] = append(soleSink[s.Streams[0]], s.Name)
		}
	}
	sourceOf := map[string]string{}
	for _, s := range pipe.Sources {
		sourceOf[s.Stream] = s.Name
	}
	snap.Streams = []Stream{}
	for _, ss := range st.Streams {
		name := ss.Name
		in := idx.sum("flowhost_source_records_total", "stream", name) + idx.sum("flowhost_messages_out_total", "stream", name)
		out := idx.sum("flowhost_messages_in_total", "stream", name)
		for _, sk := range soleSink[name] {
			out += idx.sum("flowhost_sink_records_total", "sink", sk)
		}
		s := Stream{Name: name, Writer: writer[name], In: int64(in), Out: int64(out),
			BufferedMessages: int64(idx.sum("flowhost_stream_buffered_messages", "stream", name)),
			BufferedBytes:    int64(idx.sum("flowhost_stream_buffered_bytes", "stream", name)),
			BiasNanos:        int64(idx.sum("flowhost_stream_bias_seconds", "stream", name) * 1e9),
			EventWatermark:   watermark(ss.EventWatermark), SystemWatermark: watermark(ss.SystemWatermark),
			Idle: ss.Idle, Finished: ss.Finished}
		s.LagNanos = lag(s.EventWatermark, nowNs)
		if src, ok := sourceOf[name]; ok && idx.has(BrokerLagMetric, "source", src) {
			v := int64(idx.sum(BrokerLagMetric, "source", src))
			s.BrokerLag = &v
		}
		cur.streamIn[name], cur.streamOut[name] = s.In, s.Out
		if base != nil {
			dt := float64(nowNs-base.time) / 1e9
			s.RateIn = float64(s.In-base.streamIn[name]) / dt
			s.RateOut = float64(s.Out-base.streamOut[name]) / dt
		}
		snap.Streams = append(snap.Streams, s)
	}

	// Partitions and quarantines.
	snap.Partitions, snap.Quarantines = []Partition{}, []Quarantine{}
	hold := &WatermarkHold{Partition: -1}
	holdSet := false
	for _, c := range st.Computations {
		reasons := map[int]string{}
		for _, q := range c.Quarantined {
			reasons[q.Partition] = q.Reason
			snap.Quarantines = append(snap.Quarantines, Quarantine{Computation: c.Name, Tenant: c.Tenant, Partition: q.Partition, Reason: q.Reason})
		}
		for _, p := range c.PartitionDetails {
			snap.Partitions = append(snap.Partitions, Partition{Computation: c.Name, Tenant: c.Tenant, PartitionStatus: p, Quarantine: reasons[p.Partition],
				EventWatermark: watermark(p.EventWatermark), SystemWatermark: watermark(p.SystemWatermark), Owner: hostID})
			if p.EventWatermark == EndOfStream {
				continue
			}
			if !holdSet || p.EventWatermark < *orMin(hold.PartitionWatermark) {
				hold.Computation, hold.Partition, hold.PartitionWatermark, holdSet = c.Name, p.Partition, watermark(p.EventWatermark), true
			}
		}
	}
	for _, s := range snap.Streams {
		if s.Finished || s.Idle || s.EventWatermark != nil && *s.EventWatermark == EndOfStream {
			continue
		}
		if hold.Stream == "" || *orMin(s.EventWatermark) < *orMin(hold.StreamWatermark) {
			hold.Stream, hold.StreamWatermark = s.Name, s.EventWatermark
			holdSet = true
		}
	}
	if holdSet {
		hold.LagNanos = lag(hold.StreamWatermark, nowNs)
		if hold.Stream == "" {
			hold.LagNanos = lag(hold.PartitionWatermark, nowNs)
		}
		snap.WatermarkHold = hold
	}

	// Tenants.
	names := []string{}
	weights := map[string]int{}
	if hasOperatorNodes(pipe) {
		names = append(names, OperatorTenant)
		weights[OperatorTenant] = 1
	}
	for _, t := range pipe.Tenants {
		names = append(names, t.Name)
		weights[t.Name] = max(t.Weight, 1)
	}
	var weightSum, usedSum float64
	for _, n := range names {
		weightSum += float64(weights[n])
		cur.workerSeconds[n] = idx.sum("flowhost_tenant_worker_seconds_total", "tenant", n)
		if base != nil {
			usedSum += cur.workerSeconds[n] - base.workerSeconds[n]
		}
	}
	snap.Tenants = []Tenant{}
	for _, n := range names {
		t := Tenant{Name: n, Weight: weights[n], WeightShare: float64(weights[n]) / weightSum,
			WorkerSeconds:    cur.workerSeconds[n],
			ThrottledSeconds: idx.sum("flowhost_tenant_throttled_seconds_total", "tenant", n),
			QuotaRefusals:    int64(idx.sum("flowhost_quota_exceeded_total", "tenant", n)),
			RunningBatches:   int64(idx.sum("flowhost_tenant_running_batches", "tenant", n))}
		if base != nil && usedSum > 0 {
			t.CPUShare = (cur.workerSeconds[n] - base.workerSeconds[n]) / usedSum
		}
		for _, s := range pipe.Sources {
			if s.Tenant == n || s.Tenant == "" && n == OperatorTenant {
				t.SourceThrottledSecs += idx.sum("flowhost_source_throttled_seconds_total", "source", s.Name)
			}
		}
		snap.Tenants = append(snap.Tenants, t)
	}

	// Dead letters.
	dl := DeadLetters{ByNode: map[string]int64{}, Latest: st.DeadLetters}
	for _, m := range idx["flowhost_dead_letters_total"] {
		n := int64(metricValue(m))
		dl.ByNode[labelOf(m, "node")] += n
		dl.Total += n
	}
	if dl.Latest == nil {
		dl.Latest = []runtime.DeadLetterRecord{}
	}
	snap.DeadLetters = dl
	snap.Progress = buildProgress(idx, nowNs, base, &cur)
	return snap, cur
}

// RateWindow is how far back rates look: the oldest sample kept within
// it is the base.
const RateWindow = 10 * time.Second

// rateBase is the sample rates are computed against: the oldest of
// history within RateWindow of now, or the latest before it when none is.
func rateBase(history []sample, now int64) *sample {
	var base *sample
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].time >= now {
			continue
		}
		if base != nil && now-history[i].time > int64(RateWindow) {
			break
		}
		base = &history[i]
	}
	return base
}

func hasOperatorNodes(p *spec.Pipeline) bool {
	return slices.ContainsFunc(p.Computations, func(c spec.Computation) bool { return c.Tenant == "" }) || len(p.Tenants) == 0
}

// watermark is nil for ordering.NoWatermark.
func watermark(wm int64) *int64 {
	if wm == ordering.NoWatermark {
		return nil
	}
	return &wm
}

var minWatermark = int64(math.MinInt64)

// orMin is wm, or the lowest watermark for none.
func orMin(wm *int64) *int64 {
	if wm == nil {
		return &minWatermark
	}
	return wm
}

// lag is how far wm is behind now; nil without one or at the end.
func lag(wm *int64, now int64) *int64 {
	if wm == nil || *wm == EndOfStream {
		return nil
	}
	d := now - *wm
	return &d
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
