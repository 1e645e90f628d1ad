package flowhost

import (
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/flowhost/flowhost/abi"
)

// Watermarks are a partition's input watermarks, in nanoseconds since the
// Unix epoch.
type Watermarks struct {
	// Event is the EventWatermark: inputs with a smaller EventTimestamp
	// are no longer expected (a heuristic).
	Event int64
	// System is the SystemWatermark: exact for internal streams.
	System int64
}

// Batch is one call of the computation: the inputs of several keys of one
// partition. It is valid only during the Process call it was passed to.
type Batch struct {
	req     *abi.Request
	keys    []Key
	outputs []string // declared output streams; nil when unknown
	// The copies of emitted payloads and the one-element parent lists of
	// emits come from chunks shared by the batch's emits, so that an emit
	// costs no allocation of its own: in WebAssembly, allocation and GC
	// are a large part of a guest's time. Only the response encoder reads
	// them, before the next batch.
	payloads []byte
	parents  []uint32
	// maxState is the configured typed state limit (0: the ABI's).
	maxState int
}

// chunkSize is the size the batch's chunks grow by.
const chunkSize = 64 << 10

// copyPayload returns a copy of p from the batch's payload chunk, capped
// at its length so that an append to it cannot reach its neighbour.
func (b *Batch) copyPayload(p []byte) []byte {
	if cap(b.payloads)-len(b.payloads) < len(p) {
		b.payloads = make([]byte, 0, max(len(p), chunkSize))
	}
	start := len(b.payloads)
	b.payloads = append(b.payloads, p...)
	return b.payloads[start:len(b.payloads):len(b.payloads)]
}

// parent returns the one-element parent list [i] from the batch's chunk.
func (b *Batch) parent(i int) []uint32 {
	if len(b.parents) == cap(b.parents) {
		b.parents = make([]uint32, 0, chunkSize/4)
	}
	b.parents = append(b.parents, uint32(i))
	n := len(b.parents)
	return b.parents[n-1 : n : n]
}

func newBatch(req *abi.Request, outputs []string) *Batch {
	b := &Batch{req: req, keys: make([]Key, len(req.Keys)), outputs: outputs}
	for i := range req.Keys {
		b.keys[i] = Key{batch: b, in: &req.Keys[i], current: -1}
	}
	return b
}

// Computation returns the computation's name in the pipeline spec.
func (b *Batch) Computation() string { return b.req.Computation }

// Kind returns the computation's kind: "transform" or "map".
func (b *Batch) Kind() string { return string(b.req.Kind) }

// Partition returns the computation partition the batch belongs to.
func (b *Batch) Partition() uint64 { return b.req.Partition }

// Epoch returns the epoch the batch's effects commit in.
func (b *Batch) Epoch() uint64 { return b.req.Epoch }

// Watermarks returns the partition's input watermarks when the batch was
// cut.
func (b *Batch) Watermarks() Watermarks {
	return Watermarks{Event: b.req.Watermarks.Event, System: b.req.Watermarks.System}
}

// Len returns the number of keys in the batch.
func (b *Batch) Len() int { return len(b.keys) }

// Keys iterates over the batch's keys in the host's order. Every key has
// at least one due timer or message.
func (b *Batch) Keys() iter.Seq[*Key] {
	return func(yield func(*Key) bool) {
		for i := range b.keys {
			if !yield(&b.keys[i]) {
				return
			}
		}
	}
}

// Message is one input message of a key.
type Message struct {
	// ID is the message's message_id, unique and stable across replays.
	ID string
	// Stream is the stream the message was read from.
	Stream string
	// EventTimestamp is when the event happened.
	EventTimestamp int64
	// SystemTimestamp is when the message was created.
	SystemTimestamp int64
	// AlignmentTimestamp is the message's ordering timestamp.
	AlignmentTimestamp int64
	// Payload is the message body. It stays valid after the batch, but
	// must not be modified.
	Payload []byte
	// Input is the message's index among the key's inputs (timers first,
	// then messages); WithParents takes it.
	Input int
}

// Timer is a due timer of a key, firing in this batch.
type Timer struct {
	// ID is the timer's message_id.
	ID string
	// TriggerTimestamp is the time the timer was set for.
	TriggerTimestamp int64
	// EventTimestamp is the timer's EventTimestamp.
	EventTimestamp int64
	// Payload is what was attached when the timer was set.
	Payload []byte
	// Input is the timer's index among the key's inputs; WithParents
	// takes it.
	Input int
}

// Key is one key of a batch: its state, its inputs and the effects the
// computation produces for it. It is valid only during the Process call.
type Key struct {
	batch   *Batch
	in      *abi.RequestKey
	out     abi.ResponseKey
	current int // input being iterated, or -1
	err     error
	typed   *typedState // the typed cells, once a cell was used
}

// Key returns the key's canonical text; "" for an unkeyed computation.
func (k *Key) Key() string { return k.in.Key }

// State returns the key's state as this batch has left it so far: the
// stored state, or what SetState last set; ok is false when the key has
// no state (never had one, or DeleteState was called).
func (k *Key) State() (state []byte, ok bool) {
	switch k.out.StateOp {
	case abi.StateReplace:
		return k.out.State, true
	case abi.StateDelete:
		return nil, false
	}
	return k.in.State, k.in.State != nil
}

// requireTransform panics when the computation is a map, which the host
// would reject for keeping state or timers: the panic points at the call.
func (k *Key) requireTransform(call string) {
	if k.batch.req.Kind == abi.KindMap {
		panic("flowhost: " + call + " in a map computation; only a transform keeps state and timers")
	}
}

// SetState replaces the key's state with a copy of state, creating it if
// the key had none. An empty state is still a state: State reports it
// with ok true. It panics in a map computation.
func (k *Key) SetState(state []byte) {
	k.requireTransform("SetState")
	k.checkRawState("SetState")
	k.out.StateOp = abi.StateReplace
	k.out.State = append(make([]byte, 0, len(state)), state...)
}

// DeleteState deletes the key's state. It panics in a map computation.
func (k *Key) DeleteState() {
	k.requireTransform("DeleteState")
	k.checkRawState("DeleteState")
	k.out.StateOp = abi.StateDelete
	k.out.State = nil
}

// Inputs returns the number of the key's inputs: due timers plus messages.
func (k *Key) Inputs() int { return k.in.Inputs() }

// Timers iterates over the key's due timers in fire order. While a timer
// is being iterated it is the default parent of Emit.
func (k *Key) Timers() iter.Seq[Timer] {
	return func(yield func(Timer) bool) {
		prev := k.current
		defer func() { k.current = prev }()
		for i := range k.in.Timers {
			t := &k.in.Timers[i]
			k.current = i
			if !yield(Timer{ID: t.ID, TriggerTimestamp: t.TriggerTimestamp, EventTimestamp: t.EventTimestamp, Payload: t.Payload, Input: i}) {
				return
			}
		}
	}
}

// Messages iterates over the key's messages in delivery order. While a
// message is being iterated it is the default parent of Emit.
func (k *Key) Messages() iter.Seq[Message] {
	return func(yield func(Message) bool) {
		prev := k.current
		defer func() { k.current = prev }()
		first := len(k.in.Timers)
		for i := range k.in.Messages {
			m := &k.in.Messages[i]
			k.current = first + i
			if !yield(Message{ID: m.ID, Stream: m.Stream, EventTimestamp: m.EventTimestamp, SystemTimestamp: m.SystemTimestamp,
				AlignmentTimestamp: m.AlignmentTimestamp, Payload: m.Payload, Input: first + i}) {
				return
			}
		}
	}
}

// EmitOption adjusts one Emit.
type EmitOption func(*emitConfig)

type emitConfig struct {
	key      string
	eventTS  *int64
	explicit bool // WithParents was given
	parents  []int
	all      bool
}

// WithKey gives the output a key (for example the record key a Kafka sink
// writes). It does not change which key's state or timers the emit
// belongs to.
func WithKey(key string) EmitOption {
	key = strings.ToValidUTF8(key, "\uFFFD") // the envelope carries text
	return func(c *emitConfig) { c.key = key }
}

// WithEventTimestamp sets the output's EventTimestamp instead of the one
// the host derives (the minimum over the parents).
func WithEventTimestamp(ts int64) EmitOption {
	return func(c *emitConfig) { c.eventTS = &ts }
}

// WithParents names the inputs (Message.Input, Timer.Input) the output
// derives from, instead of the default. Repeated indexes count once.
// Emit panics on an index that is not an input of the key, or when no
// index is given.
func WithParents(inputs ...int) EmitOption {
	return func(c *emitConfig) { c.explicit, c.all, c.parents = true, false, append(c.parents, inputs...) }
}

// WithAllParents makes every input of the key a parent of the output,
// even while a timer or message is being iterated.
func WithAllParents() EmitOption {
	return func(c *emitConfig) { c.explicit, c.all, c.parents = false, true, nil }
}

// Emit produces an output message on stream with a copy of payload.
//
// Its parents (the inputs it derives from, which decide its timestamps and
// lineage) are, unless WithParents or WithAllParents says otherwise: the
// timer or message being iterated by Timers or Messages, or every input of
// the key when none is. Emit panics when stream is not one of the
// computation's declared output streams, so that the mistake is reported
// with this call's stack rather than as a rejected batch.
func (k *Key) Emit(stream string, payload []byte, opts ...EmitOption) {
	if out := k.batch.outputs; out != nil && !slices.Contains(out, stream) {
		panic("flowhost: Emit to " + strconv.Quote(stream) + ", which is not a declared output stream (declared: " + strings.Join(out, ", ") + ")")
	}
	var c emitConfig
	if len(opts) > 0 {
		c = emitOptions(opts)
	}
	e := abi.Emit{Stream: stream, Payload: k.batch.copyPayload(payload), Key: c.key, EventTimestamp: c.eventTS}
	switch {
	case c.explicit:
		e.Parents = k.parents(c.parents)
	case !c.all && k.current >= 0:
		e.Parents = k.batch.parent(k.current)
	}
	if k.out.Emits == nil {
		// One emit per input is the common shape; more grow as usual.
		k.out.Emits = make([]abi.Emit, 0, k.Inputs())
	}
	k.out.Emits = append(k.out.Emits, e)
}

// emitOptions applies opts. It is apart from Emit because the options
// move the config to the heap: an Emit without options stays free of
// allocations.
func emitOptions(opts []EmitOption) emitConfig {
	var c emitConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// parents checks and converts explicit parent indexes, dropping repeats.
func (k *Key) parents(inputs []int) []uint32 {
	if len(inputs) == 0 {
		panic("flowhost: WithParents without inputs; use WithAllParents for every input")
	}
	n := k.Inputs()
	out := make([]uint32, 0, len(inputs))
	for _, i := range inputs {
		if i < 0 || i >= n {
			panic("flowhost: WithParents(" + strconv.Itoa(i) + "): key " + strconv.Quote(k.in.Key) + " has " + strconv.Itoa(n) + " inputs")
		}
		if !slices.Contains(out, uint32(i)) {
			out = append(out, uint32(i))
		}
	}
	return out
}

// TimerOption adjusts one SetTimer.
type TimerOption func(*timerConfig)

type timerConfig = abi.Timer

// WithTimerEventTimestamp sets the EventTimestamp the timer carries when it
// fires; by default it is the trigger timestamp.
func WithTimerEventTimestamp(ts int64) TimerOption {
	return func(t *timerConfig) { t.EventTimestamp = &ts }
}

// WithTimerPayload attaches a copy of payload to the timer; Timer.Payload
// returns it when the timer fires.
func WithTimerPayload(payload []byte) TimerOption {
	return func(t *timerConfig) { t.Payload = slices.Clone(payload) }
}

// SetTimer asks the host to fire a timer for this key when the watermark
// of the computation's timer stream reaches trigger (nanoseconds since the
// Unix epoch). Timers of one key with the same trigger are one timer. It
// panics in a map computation.
func (k *Key) SetTimer(trigger int64, opts ...TimerOption) {
	k.requireTransform("SetTimer")
	t := timerConfig{TriggerTimestamp: trigger}
	for _, o := range opts {
		o(&t)
	}
	if len(t.Payload) == 0 {
		t.Payload = nil
	}
	k.out.TimersSet = append(k.out.TimersSet, t)
}

// CancelTimer deletes the key's pending timers at trigger, including those
// set earlier in this batch; a later SetTimer at trigger sets a new one.
// It panics in a map computation.
func (k *Key) CancelTimer(trigger int64) {
	k.requireTransform("CancelTimer")
	k.out.TimersSet = slices.DeleteFunc(k.out.TimersSet, func(t abi.Timer) bool { return t.TriggerTimestamp == trigger })
	if !slices.Contains(k.out.TimersCancel, trigger) {
		k.out.TimersCancel = append(k.out.TimersCancel, trigger)
	}
}

// Fail marks the key as failed with err: everything the batch did for the
// key is dropped and the host sends the key's inputs to the dead-letter
// stream. Other keys are not affected. Fail(nil) does nothing.
func (k *Key) Fail(err error) {
	if err != nil && k.err == nil {
		k.err = err
	}
}

// Err returns the error the key was failed with, or nil.
func (k *Key) Err() error { return k.err }

// result returns the key's entry in the response, and whether it has one.
func (k *Key) result() (abi.ResponseKey, bool) {
	if k.err != nil {
		return abi.ResponseKey{Key: k.in.Key, Error: errorText(k.err)}, true
	}
	r := k.out
	r.Key = k.in.Key
	if len(r.TimersSet) == 0 {
		r.TimersSet = nil // CancelTimer may have emptied it
	}
	has := len(r.Emits) > 0 || len(r.TimersSet) > 0 || len(r.TimersCancel) > 0 || r.StateOp != abi.StateKeep
	return r, has
}

// errorText is err's message, never empty: an empty error field means
// success on the wire.
func errorText(err error) string {
	// The envelope carries text, so bytes that are not UTF-8 become
	// U+FFFD rather than make the whole response undecodable.
	if s := strings.ToValidUTF8(err.Error(), "\uFFFD"); s != "" {
		return s
	}
	return "failed (the error has no message)"
}

// response builds the envelope of a finished batch; failed is what
// Process returned.
func (b *Batch) response(failed error) *abi.Response {
	if failed != nil {
		return &abi.Response{Keys: []abi.ResponseKey{}, Error: errorText(failed)}
	}
	resp := &abi.Response{Keys: make([]abi.ResponseKey, 0, len(b.keys))}
	for i := range b.keys {
		if ts := b.keys[i].typed; ts != nil && ts.finish != nil {
			ts.finish(&b.keys[i])
		}
		if r, ok := b.keys[i].result(); ok {
			resp.Keys = append(resp.Keys, r)
		}
	}
	return resp
}
