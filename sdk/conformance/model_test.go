package conformance_test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
)

// hostModel does for the suite what the host's runtime does between
// batches, and no more: it keeps each key's state and pending timers from
// the responses, puts them into the next request (state with the key,
// timers due at the event watermark before the key's messages) and deletes
// a timer once it has been delivered.
type hostModel struct {
	states map[string][]byte
	timers map[string]map[int64]*pendingTimer // key → trigger → timer
	seq    int
}

type pendingTimer struct {
	id      string
	trigger int64
	eventTS int64
	payload []byte
}

func newHostModel() *hostModel {
	return &hostModel{states: map[string][]byte{}, timers: map[string]map[int64]*pendingTimer{}}
}

// Timestamps of the messages a case leaves to the model, far from 0 so
// that a guest mixing them up shows.
const (
	baseEvent  = 1_700_000_000_000_000_000
	baseSystem = 1_700_000_000_500_000_000
)

// request builds step i of case c: the step's messages, missing ids,
// streams and timestamps filled in, then the state of each key and its due
// timers; keys that only have due timers follow the step's keys, sorted.
func (h *hostModel) request(t *testing.T, c *testCase, i int) *abi.Request {
	t.Helper()
	st := &c.steps[i]
	in := c.initEnvelope()
	req := &abi.Request{ABI: abi.Version, Computation: in.Computation, Kind: in.Kind, Partition: in.Partition,
		Epoch: uint64(i + 1), Watermarks: st.watermarks, Keys: []abi.RequestKey{}}
	if st.epoch != 0 {
		req.Epoch = st.epoch
	}
	listed := map[string]bool{}
	for k, key := range st.keys {
		rk := abi.RequestKey{Key: key.Key, Messages: slices.Clone(key.Messages)}
		for j := range rk.Messages {
			m := &rk.Messages[j]
			if m.ID == "" {
				m.ID = fmt.Sprintf("m%d.%d.%d", i, k, j)
			}
			if m.Stream == "" {
				m.Stream = "in"
			}
			if m.EventTimestamp == 0 && m.SystemTimestamp == 0 && m.AlignmentTimestamp == 0 {
				n := int64(i*1000 + k*10 + j)
				m.EventTimestamp, m.SystemTimestamp, m.AlignmentTimestamp = baseEvent+n, baseSystem+n, baseSystem+n
			}
		}
		listed[key.Key] = true
		req.Keys = append(req.Keys, rk)
	}
	if req.Kind == abi.KindTransform {
		for _, key := range slices.Sorted(maps.Keys(h.timers)) {
			if !listed[key] && len(h.due(key, st.watermarks.Event)) > 0 {
				req.Keys = append(req.Keys, abi.RequestKey{Key: key})
			}
		}
		for k := range req.Keys {
			rk := &req.Keys[k]
			if s, ok := h.states[rk.Key]; ok {
				rk.State = append([]byte{}, s...)
			}
			for _, tm := range h.due(rk.Key, st.watermarks.Event) {
				rk.Timers = append(rk.Timers, abi.DueTimer{ID: tm.id, TriggerTimestamp: tm.trigger, EventTimestamp: tm.eventTS, Payload: tm.payload})
				delete(h.timers[rk.Key], tm.trigger)
			}
		}
	}
	require.NoError(t, req.Validate(), "case %s step %d builds an invalid request", c.name, i)
	return req
}

// due returns the key's timers with trigger <= watermark in fire order:
// by trigger, then id.
func (h *hostModel) due(key string, watermark int64) []*pendingTimer {
	var out []*pendingTimer
	for _, tm := range h.timers[key] {
		if tm.trigger <= watermark {
			out = append(out, tm)
		}
	}
	slices.SortFunc(out, func(a, b *pendingTimer) int {
		return cmp.Or(cmp.Compare(a.trigger, b.trigger), cmp.Compare(a.id, b.id))
	})
	return out
}

// apply keeps what a successful response changes: a failed batch or key
// changes nothing (the host dead-letters its inputs). Cancels apply before
// sets; timers of a key at one trigger are one timer with the smallest
// event_ts.
func (h *hostModel) apply(req *abi.Request, resp *abi.Response) {
	if resp.Error != "" {
		return
	}
	for _, rk := range resp.Keys {
		if rk.Error != "" {
			continue
		}
		switch rk.StateOp {
		case abi.StateReplace:
			h.states[rk.Key] = append([]byte{}, rk.State...)
		case abi.StateDelete:
			delete(h.states, rk.Key)
		}
		for _, tr := range rk.TimersCancel {
			delete(h.timers[rk.Key], tr)
		}
		for _, tm := range rk.TimersSet {
			ev := tm.TriggerTimestamp
			if tm.EventTimestamp != nil {
				ev = *tm.EventTimestamp
			}
			if h.timers[rk.Key] == nil {
				h.timers[rk.Key] = map[int64]*pendingTimer{}
			}
			if old, ok := h.timers[rk.Key][tm.TriggerTimestamp]; ok {
				old.eventTS = min(old.eventTS, ev)
				continue
			}
			h.seq++
			h.timers[rk.Key][tm.TriggerTimestamp] = &pendingTimer{id: fmt.Sprintf("timer-%06d", h.seq), trigger: tm.TriggerTimestamp,
				eventTS: ev, payload: bytes.Clone(tm.Payload)}
		}
	}
}

// pending returns the triggers of the key's pending timers, sorted.
func (h *hostModel) pending(key string) []int64 {
	return slices.Sorted(maps.Keys(h.timers[key]))
}
