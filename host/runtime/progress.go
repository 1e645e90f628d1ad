package runtime

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Kinds of long work whose progress the runtime reports ([WorkProgress]).
const (
	// WorkReplay is a replayed source (--from) routing again the records
	// it had stored, up to the offsets that were the end of each of its
	// partitions when the replay started; counted in records.
	WorkReplay = "replay"
	// WorkBacklog is a Kafka source catching up the records its topic
	// held behind its end offsets when the source started; counted in
	// records.
	WorkBacklog = "backlog"
	// WorkSavepoint is a savepoint being written or restored; counted in
	// bytes of the store's files (package host reports it, through
	// [Runtime.ReportWork] for one taken while the pipeline runs).
	WorkSavepoint = "savepoint"
)

// Progress metric names: the gauges of [WorkProgress] by kind and name,
// which the operator view reads.
const (
	ProgressDoneMetric  = "flowhost_progress_done"
	ProgressTotalMetric = "flowhost_progress_total"
)

// WorkProgress is how far one piece of long work has got. Done never
// exceeds Total once Total is known; Finished is set once, on the last
// report of that work.
type WorkProgress struct {
	Kind     string
	Name     string
	Done     int64
	Total    int64
	Finished bool
}

// WithWorkProgress calls fn as replays and Kafka backlogs advance, for
// progress displays; calls come from several goroutines, but those of one
// piece of work (kind and name) come one at a time.
func WithWorkProgress(fn func(WorkProgress)) Option {
	return func(o *options) { o.workProgress = fn }
}

// ReportWork publishes the progress of long work done beside the
// runtime, such as a savepoint the host takes while the pipeline runs: in
// the progress gauges and to the [WithWorkProgress] hook, as the
// runtime's own work is.
func (r *Runtime) ReportWork(p WorkProgress) {
	p.Total = max(p.Total, 0)
	p.Done = min(max(p.Done, 0), p.Total)
	if p.Finished {
		p.Done = p.Total
	}
	p.Finished = p.Done >= p.Total
	r.metrics.progress.done.WithLabelValues(p.Kind, p.Name).Set(float64(p.Done))
	r.metrics.progress.total.WithLabelValues(p.Kind, p.Name).Set(float64(p.Total))
	if r.opts.workProgress != nil {
		r.opts.workProgress(p)
	}
}

// ForgetWork removes the progress of the work kind/name that
// [Runtime.ReportWork] published, for work that failed: it would
// otherwise show as never finishing.
func (r *Runtime) ForgetWork(kind, name string) {
	r.metrics.progress.done.DeleteLabelValues(kind, name)
	r.metrics.progress.total.DeleteLabelValues(kind, name)
}

// progressGauges are the done and total gauges of long work, by kind and
// name; registered by newProgressGauges.
type progressGauges struct {
	done, total *prometheus.GaugeVec
}

func newProgressGauges(reg prometheus.Registerer) progressGauges {
	g := progressGauges{
		done: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: ProgressDoneMetric,
			Help: "Units of long work done (kind replay or backlog: records; savepoint: bytes), by kind and name (the source, or the savepoint).",
		}, []string{"kind", "name"}),
		total: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: ProgressTotalMetric,
			Help: "Units of long work to do in all, as known when it started, by kind and name; done equals it once the work finished.",
		}, []string{"kind", "name"}),
	}
	reg.MustRegister(g.done, g.total)
	return g
}

// workCounter reports one piece of work to the gauges and the hook.
type workCounter struct {
	mu       sync.Mutex
	p        WorkProgress
	done     prometheus.Gauge
	total    prometheus.Gauge
	hook     func(WorkProgress)
	finished bool
}

// work starts reporting the work kind/name of total units, none done yet.
func (r *Runtime) work(kind, name string, total int64) *workCounter {
	c := &workCounter{p: WorkProgress{Kind: kind, Name: name, Total: max(total, 0)},
		done: r.metrics.progress.done.WithLabelValues(kind, name), total: r.metrics.progress.total.WithLabelValues(kind, name),
		hook: r.opts.workProgress}
	c.report()
	return c
}

// add counts n more units done; reaching the total finishes the work.
func (c *workCounter) add(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return
	}
	c.p.Done = min(c.p.Done+n, c.p.Total)
	c.report()
}

// set reports done of total units; finished ends the work (then later
// calls do nothing).
func (c *workCounter) set(done, total int64, finished bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return
	}
	c.p.Total = max(total, 0)
	c.p.Done = min(max(done, 0), c.p.Total)
	if finished {
		c.p.Done = c.p.Total
	}
	c.report()
}

// report publishes c.p, with c.mu held (or before c is shared).
func (c *workCounter) report() {
	if c.p.Done >= c.p.Total {
		c.p.Finished = true
	}
	c.finished = c.p.Finished
	c.done.Set(float64(c.p.Done))
	c.total.Set(float64(c.p.Total))
	if c.hook != nil {
		c.hook(c.p)
	}
}
