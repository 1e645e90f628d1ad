// Command window-count is an example flowhost computation of kind
// transform that uses keyed state and timers: it counts each key's
// messages in tumbling windows of event time and, once the watermark says
// a window is complete, emits
//
//	{"key":"ann","window_start":1714557600000000000,"window_end":1714557660000000000,"count":42}
//
// on its output stream (timestamps in nanoseconds since the Unix epoch;
// key is the value of the group_by field, or the list of values when
// there are several). The parameter window (a duration, default 1m) sets
// the window length; windows are aligned to the Unix epoch.
//
// How it works, and what the host does for it:
//
//   - A message with EventTimestamp t belongs to the window
//     [floor(t/window)*window, +window). The key's state holds the open
//     windows and their counts.
//   - Opening a window sets a timer at its end. The host fires it when the
//     watermark of the computation's timer stream reaches the end
//     (TriggerTimestamp <= watermark): the host decides when a window is
//     complete, not this code. Its EventTimestamp is window_end-1, the
//     window's last instant, which the emitted count inherits.
//   - A fired timer emits the windows that ended, removes them from the
//     state and deletes the state when no window is left open.
//
// Late data: a message that arrives after its window's timer fired opens
// the window again, and it is emitted a second time, counting only the
// late messages. The watermark's out_of_orderness_bound (spec) decides how
// late is too late; within it, each window is emitted exactly once.
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var config struct {
	window time.Duration
	output string
}

func init() {
	flowhost.Register(flowhost.Computation{Init: initialize, Process: process})
}

func initialize(p flowhost.Params) error {
	config.window = time.Minute
	if p.Has("window") {
		d, err := p.Duration("window")
		if err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("parameter \"window\": must be positive, got %s", d)
		}
		config.window = d
	}
	outs := p.OutputStreams()
	if len(outs) != 1 {
		return fmt.Errorf("window-count writes exactly one output stream; the pipeline declares %d", len(outs))
	}
	config.output = outs[0]
	return nil
}

// window is one open window of a key.
type window struct {
	Start int64 `json:"start"`
	Count int64 `json:"count"`
}

// state is a key's state: its open windows, sorted by start.
type state struct {
	Windows []window `json:"windows"`
}

// result is what a completed window emits.
type result struct {
	Key         any   `json:"key"`
	WindowStart int64 `json:"window_start"`
	WindowEnd   int64 `json:"window_end"`
	Count       int64 `json:"count"`
}

func process(b *flowhost.Batch) error {
	size := int64(config.window)
	for k := range b.Keys() {
		var st state
		if raw, ok := k.State(); ok {
			if err := json.Unmarshal(raw, &st); err != nil {
				k.Fail(fmt.Errorf("state of key %s: %w", k.Key(), err))
				continue
			}
		}
		key, err := keyValue(k.Key())
		if err != nil {
			k.Fail(err)
			continue
		}
		for t := range k.Timers() {
			// Every window that ended by the trigger is complete; normally
			// exactly the one the timer was set for.
			done := 0
			for done < len(st.Windows) && st.Windows[done].Start+size <= t.TriggerTimestamp {
				w := st.Windows[done]
				out, err := json.Marshal(result{Key: key, WindowStart: w.Start, WindowEnd: w.Start + size, Count: w.Count})
				if err != nil {
					return err
				}
				k.Emit(config.output, out) // parent: this timer
				done++
			}
			st.Windows = st.Windows[done:]
		}
		for m := range k.Messages() {
			start := floorDiv(m.EventTimestamp, size) * size
			i, found := slices.BinarySearchFunc(st.Windows, start, func(w window, s int64) int { return cmp.Compare(w.Start, s) })
			if found {
				st.Windows[i].Count++
				continue
			}
			st.Windows = slices.Insert(st.Windows, i, window{Start: start, Count: 1})
			end := start + size
			k.SetTimer(end, flowhost.WithTimerEventTimestamp(end-1))
		}
		if len(st.Windows) == 0 {
			if _, had := k.State(); had {
				k.DeleteState()
			}
			continue
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		k.SetState(raw)
	}
	return nil
}

// keyValue turns the host's canonical key text (a JSON array of the
// group_by values) into what the output's "key" holds: the value itself
// for one group_by field, the list for several, null for none.
func keyValue(text string) (any, error) {
	if text == "" {
		return nil, nil
	}
	// UseNumber keeps a numeric key's digits: a float64 would round
	// integers beyond 2^53.
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var values []any
	if err := dec.Decode(&values); err != nil {
		return nil, fmt.Errorf("key %s is not a JSON array: %w", text, err)
	}
	if len(values) == 1 {
		return values[0], nil
	}
	return values, nil
}

// floorDiv rounds toward negative infinity, so that windows before 1970
// are aligned the same way as those after.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func main() {}
