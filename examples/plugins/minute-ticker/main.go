// Command minute-ticker is an example flowhost computation of kind
// transform that ticks every event-time period per key and so shows where
// the host fires timers among a key's messages. On its output stream it
// emits, each time a key's timer fires,
//
//	{"key":"ann","tick":1714557660000000000,"count":10,"seen":10}
//
// tick is the timer's TriggerTimestamp (the end of a period, aligned to
// the Unix epoch), count the key's messages since its previous tick, seen
// all of the key's messages so far. The parameter every (a duration,
// default 1m) sets the period.
//
// A key's first message arms a timer at the end of its period; a fired
// timer emits a tick and arms the next period if messages came since the
// last tick, so an idle key stops ticking until its next message. Because
// the host fires a timer where the watermark passes it in the merge order
// (host/spec/README.md, "When a timer fires"), count is the number of the
// key's messages of that period, whatever the batch limits.
package main

import (
	"encoding/json"
	"fmt"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var config struct {
	every  int64
	output string
}

func init() {
	flowhost.Register(flowhost.Computation{Init: initialize, Process: process})
}

func initialize(p flowhost.Params) error {
	config.every = int64(time.Minute)
	if p.Has("every") {
		d, err := p.Duration("every")
		if err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("parameter \"every\": must be positive, got %s", d)
		}
		config.every = int64(d)
	}
	outs := p.OutputStreams()
	if len(outs) != 1 {
		return fmt.Errorf("minute-ticker writes exactly one output stream; the pipeline declares %d", len(outs))
	}
	config.output = outs[0]
	return nil
}

// state is a key's state.
type state struct {
	Count int   `json:"count"` // messages since the last tick
	Seen  int   `json:"seen"`  // messages in all
	Armed int64 `json:"armed"` // the pending timer's trigger; 0: none
}

// tick is what a fired timer emits.
type tick struct {
	Key   string `json:"key"`
	Tick  int64  `json:"tick"`
	Count int    `json:"count"`
	Seen  int    `json:"seen"`
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		var st state
		if raw, ok := k.State(); ok {
			if err := json.Unmarshal(raw, &st); err != nil {
				k.Fail(fmt.Errorf("state of key %s: %w", k.Key(), err))
				continue
			}
		}
		for t := range k.Timers() {
			out, err := json.Marshal(tick{Key: k.Key(), Tick: t.TriggerTimestamp, Count: st.Count, Seen: st.Seen})
			if err != nil {
				return err
			}
			k.Emit(config.output, out) // parent: this timer
			st.Armed = 0
			if st.Count > 0 {
				st.Armed = t.TriggerTimestamp + config.every
				k.SetTimer(st.Armed)
			}
			st.Count = 0
		}
		for m := range k.Messages() {
			st.Count++
			st.Seen++
			if st.Armed == 0 {
				st.Armed = (floorDiv(m.EventTimestamp, config.every) + 1) * config.every
				k.SetTimer(st.Armed)
			}
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		k.SetState(raw)
	}
	return nil
}

// floorDiv rounds toward negative infinity, so that periods before 1970
// are aligned the same way as those after.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func main() {}
