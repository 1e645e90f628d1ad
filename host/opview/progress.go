package opview

import (
	"sort"

	"github.com/flowhost/flowhost/host/progress"
	"github.com/flowhost/flowhost/host/runtime"
)

// Progress is how far one piece of long work has got: a replay (kind
// "replay", counted in records up to the end each replayed partition had
// when it started), a Kafka source catching up its backlog ("backlog",
// records behind the end offsets when it started) or a savepoint
// ("savepoint"). Name is the source or savepoint. Rate is units per
// second over the last [RateWindow] of samples; ETANanos is how long the
// rest takes at that rate: 0 once finished, null while the rate is zero
// or the total unknown.
type Progress struct {
	Kind     string  `json:"kind"`
	Name     string  `json:"name"`
	Done     int64   `json:"done"`
	Total    int64   `json:"total"`
	Rate     float64 `json:"rate"`
	ETANanos *int64  `json:"eta_nanos"`
	Finished bool    `json:"finished"`
}

// ETA is how long total-done more units take at rate units per second: 0
// when the work is finished (done reached total, which work of total 0
// has at once; a done past the total counts as finished), nil when it
// cannot be told (a rate of zero or less, or one so low that the wait
// overflows).
func ETA(done, total int64, rate float64) *int64 { return progress.ETA(done, total, rate) }

// progressKey names one piece of work in the samples.
func progressKey(kind, name string) string { return kind + "\x00" + name }

// buildProgress reads the progress gauges, with rates against base (nil:
// none yet) and records the done counts in cur.
func buildProgress(idx metricIndex, now int64, base, cur *sample) []Progress {
	out := []Progress{}
	totals := map[string]int64{}
	for _, m := range idx[runtime.ProgressTotalMetric] {
		totals[progressKey(labelOf(m, "kind"), labelOf(m, "name"))] = int64(metricValue(m))
	}
	for _, m := range idx[runtime.ProgressDoneMetric] {
		kind, name := labelOf(m, "kind"), labelOf(m, "name")
		key := progressKey(kind, name)
		p := Progress{Kind: kind, Name: name, Done: int64(metricValue(m)), Total: totals[key]}
		p.Finished = p.Done >= p.Total
		cur.progressDone[key] = p.Done
		if base != nil {
			if prev, ok := base.progressDone[key]; ok && now > base.time {
				p.Rate = float64(p.Done-prev) / (float64(now-base.time) / 1e9)
			}
		}
		p.ETANanos = ETA(p.Done, p.Total, p.Rate)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
