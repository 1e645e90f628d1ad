// Package sdktest tests a computation written with the Go SDK natively,
// with go test and without WebAssembly: a test builds a batch as the host
// would send it (keys with their state, due timers and messages, the
// watermarks), passes it through the computation with the same envelopes
// the host uses (flowhost.Run), and reads the response: what each key
// emitted, the state it left and the timers it set or cancelled.
//
// A [Session] also carries the state and pending timers from one batch to
// the next, as the host does, so that a test can feed a computation
// batch after batch and fire its timers by raising the watermark. It is a
// model of the host's bookkeeping for one partition, not the host: for the
// host's ordering, routing, watermarks and exactly-once, test a pipeline
// with host/flowtest.
package sdktest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// Batch is a request under construction. The zero value is not usable:
// start with [NewBatch].
type Batch struct {
	req  abi.Request
	seq  int
	keys map[string]int
}

// NewBatch starts a transform batch of computation "test", partition 0,
// epoch 1, with no watermark yet.
func NewBatch() *Batch {
	return &Batch{req: abi.Request{ABI: abi.Version, Computation: "test", Kind: abi.KindTransform, Epoch: 1,
		Watermarks: abi.Watermarks{Event: noWatermark, System: noWatermark}}, keys: map[string]int{}}
}

// noWatermark is the watermark before the first one (the host's
// ordering.NoWatermark).
const noWatermark = -1 << 63

// Kind sets the computation's kind ("transform" or "map").
func (b *Batch) Kind(kind string) *Batch { b.req.Kind = abi.Kind(kind); return b }

// Epoch sets the batch's epoch.
func (b *Batch) Epoch(epoch uint64) *Batch { b.req.Epoch = epoch; return b }

// Watermarks sets the batch's event and system watermarks (int64
// nanoseconds since the Unix epoch).
func (b *Batch) Watermarks(event, system int64) *Batch {
	b.req.Watermarks = abi.Watermarks{Event: event, System: system}
	return b
}

func (b *Batch) key(key string) *abi.RequestKey {
	i, ok := b.keys[key]
	if !ok {
		i = len(b.req.Keys)
		b.keys[key] = i
		b.req.Keys = append(b.req.Keys, abi.RequestKey{Key: key})
	}
	return &b.req.Keys[i]
}

// State gives key the state the host holds for it.
func (b *Batch) State(key string, state []byte) *Batch {
	b.key(key).State = slices.Clone(state)
	return b
}

// Message adds a message of stream to key, with its event time as every
// timestamp of the message; ids are given in order ("m1", "m2", ...).
func (b *Batch) Message(key, stream string, event int64, payload []byte) *Batch {
	b.seq++
	k := b.key(key)
	k.Messages = append(k.Messages, abi.Message{ID: "m" + strconv.Itoa(b.seq), Stream: stream,
		EventTimestamp: event, SystemTimestamp: event, AlignmentTimestamp: event, Payload: slices.Clone(payload)})
	return b
}

// Timer adds a due timer of key, which the host delivers before the key's
// messages.
func (b *Batch) Timer(key string, trigger int64, payload []byte) *Batch {
	b.seq++
	k := b.key(key)
	k.Timers = append(k.Timers, abi.DueTimer{ID: "t" + strconv.Itoa(b.seq), TriggerTimestamp: trigger, EventTimestamp: trigger,
		Payload: slices.Clone(payload)})
	return b
}

// Request returns the request built so far.
func (b *Batch) Request() *abi.Request { return &b.req }

// Response is what a computation answered to one batch.
type Response struct {
	abi.Response
}

// Key returns the answer for key (the zero ResponseKey, with that key,
// when the computation said nothing of it).
func (r *Response) Key(key string) abi.ResponseKey {
	for _, k := range r.Keys {
		if k.Key == key {
			return k
		}
	}
	return abi.ResponseKey{Key: key}
}

// Emitted returns the payloads emitted to stream, over every key in
// response order, as text.
func (r *Response) Emitted(stream string) []string {
	var out []string
	for _, k := range r.Keys {
		for _, e := range k.Emits {
			if e.Stream == stream {
				out = append(out, string(e.Payload))
			}
		}
	}
	return out
}

// Init is the start of an instance: the computation's parameters and
// declared output streams.
type Init struct {
	Parameters map[string]any
	Outputs    []string
}

func (in Init) envelope(kind abi.Kind) *abi.Init {
	outs := in.Outputs
	if len(outs) == 0 {
		outs = []string{"out"}
	}
	return &abi.Init{ABI: abi.Version, Computation: "test", Kind: kind, OutputStreams: outs, Parameters: in.Parameters}
}

// Process passes one batch through c, with init's parameters and outputs
// (default: one output stream "out"), and checks the response as the host
// does: a response the host would refuse (an emit to an undeclared
// stream, state from a map) is an error naming the rule.
func Process(c flowhost.Computation, init Init, b *Batch) (*Response, error) {
	in := init.envelope(b.req.Kind)
	resp, err := flowhost.Run(c, in, &b.req)
	if err != nil {
		return nil, err
	}
	if err := abi.ValidateResponse(resp, &b.req, in.OutputStreams); err != nil {
		return nil, fmt.Errorf("sdktest: the host would refuse the response: %w", err)
	}
	return &Response{*resp}, nil
}

// Session feeds a computation batch after batch and keeps, per key, the
// state and pending timers its responses leave, as the host does for one
// partition: each [Session.Process] gives every key its state, and the
// timers due at the batch's event watermark (trigger <= watermark, by
// trigger) before its messages.
type Session struct {
	c      flowhost.Computation
	init   Init
	state  map[string][]byte
	timers map[string][]abi.Timer
	epoch  uint64
	ids    int
}

// NewSession starts a session of c, a transform, with init.
func NewSession(c flowhost.Computation, init Init) *Session {
	return &Session{c: c, init: init, state: map[string][]byte{}, timers: map[string][]abi.Timer{}}
}

// Process sends b, with each of its keys' state and due timers filled in
// (and every key with a due timer added), and applies the response to the
// session's state and timers. b's own State and Timer calls are
// overridden by the session's bookkeeping: build b with messages only.
func (s *Session) Process(b *Batch) (*Response, error) {
	s.epoch++
	b.req.Epoch = s.epoch
	wm := b.req.Watermarks.Event
	for _, key := range slices.Sorted(maps.Keys(s.timers)) {
		if slices.ContainsFunc(s.timers[key], func(t abi.Timer) bool { return t.TriggerTimestamp <= wm }) {
			b.key(key) // a key with only due timers takes part too
		}
	}
	for i := range b.req.Keys {
		k := &b.req.Keys[i]
		k.State = slices.Clone(s.state[k.Key])
		k.Timers = nil
		due := s.due(k.Key, wm)
		for _, t := range due {
			s.ids++
			ev := t.TriggerTimestamp
			if t.EventTimestamp != nil {
				ev = *t.EventTimestamp
			}
			k.Timers = append(k.Timers, abi.DueTimer{ID: "t" + strconv.Itoa(s.ids), TriggerTimestamp: t.TriggerTimestamp, EventTimestamp: ev, Payload: t.Payload})
		}
	}
	resp, err := Process(s.c, s.init, b)
	if err != nil {
		return nil, err
	}
	for _, k := range resp.Keys {
		if k.Error != "" {
			continue // a failed key changes nothing
		}
		switch k.StateOp {
		case abi.StateReplace:
			s.state[k.Key] = slices.Clone(k.State)
		case abi.StateDelete:
			delete(s.state, k.Key)
		}
		for _, c := range k.TimersCancel {
			s.timers[k.Key] = slices.DeleteFunc(s.timers[k.Key], func(t abi.Timer) bool { return t.TriggerTimestamp == c })
		}
		for _, t := range k.TimersSet {
			// One timer per (key, trigger): setting it again replaces it.
			s.timers[k.Key] = slices.DeleteFunc(s.timers[k.Key], func(o abi.Timer) bool { return o.TriggerTimestamp == t.TriggerTimestamp })
			s.timers[k.Key] = append(s.timers[k.Key], t)
		}
		if len(s.timers[k.Key]) == 0 {
			delete(s.timers, k.Key)
		}
	}
	return resp, nil
}

// due takes key's timers due at watermark out of the session, by trigger.
func (s *Session) due(key string, watermark int64) []abi.Timer {
	ts := s.timers[key]
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].TriggerTimestamp < ts[j].TriggerTimestamp })
	n := 0
	for n < len(ts) && ts[n].TriggerTimestamp <= watermark {
		n++
	}
	due := slices.Clone(ts[:n])
	if n == len(ts) {
		delete(s.timers, key)
	} else {
		s.timers[key] = slices.Clone(ts[n:])
	}
	return due
}

// State returns key's state and whether it has any.
func (s *Session) State(key string) ([]byte, bool) {
	v, ok := s.state[key]
	return v, ok
}

// Timers returns the trigger times of key's pending timers, in order.
func (s *Session) Timers(key string) []int64 {
	var out []int64
	for _, t := range s.timers[key] {
		out = append(out, t.TriggerTimestamp)
	}
	slices.Sort(out)
	return out
}
