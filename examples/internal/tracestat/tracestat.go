// Package tracestat reads flowhost --trace files and measures how far the
// order a computation received its messages in strays from event time:
// the figure the demo prints to show the cross-stream merge at work.
package tracestat

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/flowhost/flowhost/host/runtime"
)

// Read returns the records of the trace file at path, in file order. A
// line that does not decode is an error naming the file and line.
func Read(path string) ([]runtime.TraceRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []runtime.TraceRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var r runtime.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// Inversions counts event-time inversions among the messages delivered to
// one computation: pairs of consecutive message deliveries to the same
// partition where the second has a smaller EventTimestamp than the first.
// Timer deliveries are left out (their event time is the timer's, not an
// input's).
type Inversions struct {
	// Deliveries is the number of messages delivered; Pairs the number of
	// consecutive pairs looked at (Deliveries minus one per partition).
	Deliveries, Pairs int
	// Count is the number of inversions.
	Count int
	// Total and Max are the sum and the largest of how far back the event
	// time went.
	Total, Max time.Duration
	// Partitions is the number of partitions that received messages.
	Partitions int
}

// Mean returns the average step back of an inversion; 0 when there is none.
func (v Inversions) Mean() time.Duration {
	if v.Count == 0 {
		return 0
	}
	return v.Total / time.Duration(v.Count)
}

// EventInversions measures the inversions of the message deliveries to
// computation in recs, which must be in trace file order (the order of
// delivery within each partition).
func EventInversions(recs []runtime.TraceRecord, computation string) Inversions {
	prev := map[int]int64{} // partition -> event time of its last delivery
	var v Inversions
	for i := range recs {
		r := &recs[i]
		if r.Computation != computation || r.Kind != runtime.TraceMessage {
			continue
		}
		v.Deliveries++
		last, seen := prev[r.Partition]
		prev[r.Partition] = r.EventTS
		if !seen {
			continue
		}
		v.Pairs++
		if r.EventTS >= last {
			continue
		}
		back := time.Duration(last - r.EventTS)
		v.Count++
		v.Total += back
		v.Max = max(v.Max, back)
	}
	v.Partitions = len(prev)
	return v
}

// MeanBias returns, per input stream of computation, the average bias the
// merge ordered its messages by (the trace's bias field: the stream's
// average EventTimestamp - AlignmentTimestamp over what was buffered when
// the message was chosen). It is 0 for a merge without bias.
func MeanBias(recs []runtime.TraceRecord, computation string) map[string]time.Duration {
	sums := map[string]float64{}
	counts := map[string]int{}
	for i := range recs {
		r := &recs[i]
		if r.Computation != computation || r.Kind != runtime.TraceMessage {
			continue
		}
		sums[r.Stream] += float64(r.Bias) // float64: a sum of many int64 biases may overflow
		counts[r.Stream]++
	}
	out := make(map[string]time.Duration, len(sums))
	for s, sum := range sums {
		out[s] = time.Duration(sum / float64(counts[s]))
	}
	return out
}
