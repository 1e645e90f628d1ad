// Command crash-tally is the computation of flowhost's crash test
// (examples/crash_test.go): a transform with keyed state and timers whose
// output shows every way a crash can break exactly-once processing.
//
// Its input payloads are {"key":"k123","seq":7,"value":42,"stream":"a"}
// (examples/internal/crashload writes them), grouped by key. It emits two
// kinds of record on its one output stream:
//
//	{"kind":"msg","stream":"a","seq":7,"key":"k123"}
//	{"kind":"window","key":"k123","window_start":1714557600000000000,"count":12,"sum":513}
//
// Each kind shows a different fault:
//
//   - One msg record per input message, echoing its stream, seq and key.
//     Each input is named by (stream, seq), so an input lost in a crash is
//     a missing msg record and an input processed twice a doubled one.
//   - One window record per key and tumbling window of event time
//     (parameter window, a duration, default 10s, aligned to the Unix
//     epoch), with the number of the key's messages in it and the sum of
//     their values. These are the state-derived results: the count and the
//     sum live in the key's state between batches and the record comes out
//     when the window's timer fires, so a state update lost or applied
//     twice shows as a wrong count or sum, and a timer lost or fired twice
//     as a missing or doubled window.
//
// As in window-count, from which the state and timer handling is taken:
// opening a window sets a timer at its end (the host fires it when the
// watermark reaches the end), the fired timer emits every window that has
// ended and removes it from the state, and the state is deleted when no
// window is left open. A message later than its window's timer would open
// the window again; the crash test's workload is never late.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	config.window = 10 * time.Second
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
		return fmt.Errorf("crash-tally writes exactly one output stream; the pipeline declares %d", len(outs))
	}
	config.output = outs[0]
	return nil
}

// input is an input message's payload. The pointers tell a missing field
// from a zero: a record without seq or value is refused rather than
// counted as 0.
type input struct {
	Key    json.RawMessage `json:"key"`
	Seq    *int64          `json:"seq"`
	Value  *int64          `json:"value"`
	Stream *string         `json:"stream"`
}

// msgRecord is what every input message emits.
type msgRecord struct {
	Kind   string          `json:"kind"`
	Stream string          `json:"stream"`
	Seq    int64           `json:"seq"`
	Key    json.RawMessage `json:"key"`
}

// windowRecord is what a completed window emits.
type windowRecord struct {
	Kind        string          `json:"kind"`
	Key         json.RawMessage `json:"key"`
	WindowStart int64           `json:"window_start"`
	Count       int64           `json:"count"`
	Sum         int64           `json:"sum"`
}

// window is one open window of a key.
type window struct {
	Start int64 `json:"start"`
	Count int64 `json:"count"`
	Sum   int64 `json:"sum"`
}

// state is a key's state: its open windows, sorted by start.
type state struct {
	Windows []window `json:"windows"`
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
				out, err := json.Marshal(windowRecord{Kind: "window", Key: key, WindowStart: w.Start, Count: w.Count, Sum: w.Sum})
				if err != nil {
					return err
				}
				k.Emit(config.output, out) // parent: this timer
				done++
			}
			st.Windows = st.Windows[done:]
		}
		if err := tallyMessages(k, &st, size); err != nil {
			k.Fail(err)
			continue
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

// tallyMessages emits the msg record of each of the key's messages and
// adds it to its window in st, opening the window (and setting its timer)
// when it is new. An unreadable message fails the whole key: the host then
// drops what the batch did for it, so no half-tallied state is kept.
func tallyMessages(k *flowhost.Key, st *state, size int64) error {
	for m := range k.Messages() {
		var in input
		if err := json.Unmarshal(m.Payload, &in); err != nil {
			return fmt.Errorf("message %s: %w", m.ID, err)
		}
		if len(in.Key) == 0 || in.Seq == nil || in.Value == nil || in.Stream == nil {
			return fmt.Errorf("message %s: the payload needs key, seq, value and stream", m.ID)
		}
		out, err := json.Marshal(msgRecord{Kind: "msg", Stream: *in.Stream, Seq: *in.Seq, Key: in.Key})
		if err != nil {
			return err
		}
		k.Emit(config.output, out) // parent: this message
		start := floorDiv(m.EventTimestamp, size) * size
		i, found := slices.BinarySearchFunc(st.Windows, start, func(w window, s int64) int { return cmp.Compare(w.Start, s) })
		if !found {
			st.Windows = slices.Insert(st.Windows, i, window{Start: start})
			end := start + size
			k.SetTimer(end, flowhost.WithTimerEventTimestamp(end-1))
		}
		st.Windows[i].Count++
		st.Windows[i].Sum += *in.Value
	}
	return nil
}

// keyValue is the key value that window records carry: the one group_by
// value in the host's canonical key text (a JSON array of the values).
func keyValue(text string) (json.RawMessage, error) {
	var values []json.RawMessage
	if err := json.Unmarshal([]byte(text), &values); err != nil {
		return nil, fmt.Errorf("key %q is not a JSON array: %w", text, err)
	}
	if len(values) != 1 {
		return nil, errors.New("crash-tally needs exactly one group_by field (key); the key is " + text)
	}
	return values[0], nil
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
