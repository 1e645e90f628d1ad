package abi

import "strconv"

// The envelope types below are the Go form of the CBOR maps that cross the
// host-guest boundary. Their `cbor` tags are the wire names; the schema the
// strict decoder enforces is derived from these same tags (schema.go), so a
// field's tag is its whole contract:
//
//   - a field without omitempty/omitzero is required: a decoder rejects a map
//     that lacks it, and the encoder always writes it;
//   - a field with omitempty is optional and left out when empty;
//   - a field with omitzero is optional and left out only when nil, so that
//     an empty byte string stays distinguishable from an absent one;
//   - a pointer field is optional, nil meaning absent.
//
// abi/ABI.md documents every field for SDK authors in other languages.

// Kind is the kind of a computation. It decides how the host derives the
// timestamps of the computation's outputs and whether the computation may
// keep state and timers.
type Kind string

const (
	// KindTransform may keep keyed state and set timers; its outputs are
	// stamped SystemTimestamp = AlignmentTimestamp = now.
	KindTransform Kind = "transform"
	// KindMap is a deterministic per-message function without state or
	// timers; its outputs inherit their timestamps from their parents.
	KindMap Kind = "map"
)

// Valid reports whether k is one of the kinds this ABI version defines.
func (k Kind) Valid() bool { return k == KindTransform || k == KindMap }

// Request is one batch for one computation partition: every input the host
// delivers in one call of ExportProcess.
type Request struct {
	// ABI is the ABI version of the envelope; always Version.
	ABI uint64 `cbor:"abi"`
	// Computation is the computation's name in the pipeline spec.
	Computation string `cbor:"computation"`
	// Kind is the computation's kind.
	Kind Kind `cbor:"kind"`
	// Partition is the computation partition the batch belongs to.
	Partition uint64 `cbor:"partition"`
	// Epoch is the epoch the batch's effects will commit in.
	Epoch uint64 `cbor:"epoch"`
	// Watermarks are the partition's input watermarks when the batch was cut.
	Watermarks Watermarks `cbor:"watermarks"`
	// Keys holds one entry per key, in the host's chosen order. A key
	// appears at most once and always has at least one input.
	Keys []RequestKey `cbor:"keys"`
}

// Watermarks are the input watermarks of a computation partition, in
// nanoseconds since the Unix epoch.
type Watermarks struct {
	// Event is the EventWatermark: no input with a smaller EventTimestamp
	// is expected any more (a heuristic).
	Event int64 `cbor:"event"`
	// System is the SystemWatermark: exact for internal streams.
	System int64 `cbor:"system"`
}

// RequestKey holds everything a batch delivers for one key. Its inputs are
// numbered 0.. over Timers first, then Messages; an Emit names its parents
// by these numbers.
type RequestKey struct {
	// Key is the canonical key text; "" for an unkeyed computation.
	Key string `cbor:"key"`
	// State is the key's state. Nil means the key has no state; a non-nil
	// empty slice is a state that happens to be empty.
	State []byte `cbor:"state,omitzero"`
	// Timers are the key's due timers in fire order.
	Timers []DueTimer `cbor:"timers,omitempty"`
	// Messages are the key's messages in delivery order.
	Messages []Message `cbor:"messages,omitempty"`
}

// Inputs returns the number of inputs of k: the bound of a parent index.
func (k *RequestKey) Inputs() int { return len(k.Timers) + len(k.Messages) }

// DueTimer is a timer that fires in this batch. The host deletes it in the
// same commit as the batch's effects.
type DueTimer struct {
	// ID is the timer's canonical message_id.
	ID string `cbor:"id"`
	// TriggerTimestamp is the time the timer was set for.
	TriggerTimestamp int64 `cbor:"trigger_ts"`
	// EventTimestamp is the timer's EventTimestamp.
	EventTimestamp int64 `cbor:"event_ts"`
	// Payload is what the guest attached when it set the timer.
	Payload []byte `cbor:"payload,omitempty"`
}

// Message is one input message.
type Message struct {
	// ID is the message's canonical message_id.
	ID string `cbor:"id"`
	// Stream is the name of the stream the message was read from.
	Stream string `cbor:"stream"`
	// EventTimestamp is when the event happened.
	EventTimestamp int64 `cbor:"event_ts"`
	// SystemTimestamp is when the message was created.
	SystemTimestamp int64 `cbor:"system_ts"`
	// AlignmentTimestamp is the message's ordering timestamp.
	AlignmentTimestamp int64 `cbor:"alignment_ts"`
	// Payload is the message body.
	Payload []byte `cbor:"payload"`
}

// Response is a guest's answer to one Request.
type Response struct {
	// Keys holds one entry per key that has something to report, each a
	// key of the request at most once. Keys with nothing to report are
	// left out.
	Keys []ResponseKey `cbor:"keys"`
	// Error, when not empty, says the whole batch failed; Keys is then
	// empty and the host applies its failure policy to every input.
	Error string `cbor:"error,omitempty"`
}

// StateOp says what happens to a key's state.
type StateOp uint8

const (
	// StateKeep leaves the state as it is.
	StateKeep StateOp = 0
	// StateReplace replaces the state with ResponseKey.State (creating it
	// if the key had none).
	StateReplace StateOp = 1
	// StateDelete deletes the state.
	StateDelete StateOp = 2
)

// String returns the op's name, or a number for an op this version does
// not define.
func (op StateOp) String() string {
	switch op {
	case StateKeep:
		return "keep"
	case StateReplace:
		return "replace"
	case StateDelete:
		return "delete"
	}
	return "StateOp(" + strconv.Itoa(int(op)) + ")"
}

// ResponseKey holds the effects of a batch on one key.
type ResponseKey struct {
	// Key is the key's canonical text, as in the request.
	Key string `cbor:"key"`
	// Emits are the derived messages, in the order the guest produced them.
	Emits []Emit `cbor:"emits,omitempty"`
	// TimersSet are new timers for this key.
	TimersSet []Timer `cbor:"timers_set,omitempty"`
	// TimersCancel are trigger timestamps whose pending timers of this key
	// are deleted. The host applies cancels before sets.
	TimersCancel []int64 `cbor:"timers_cancel,omitempty"`
	// StateOp says what happens to the key's state.
	StateOp StateOp `cbor:"state_op,omitempty"`
	// State is the new state; present (non-nil, possibly empty) exactly
	// when StateOp is StateReplace.
	State []byte `cbor:"state,omitzero"`
	// Error, when not empty, says this key failed and its inputs go to
	// the dead-letter stream. It must then be the entry's only field
	// besides Key: a failed key has no effects.
	Error string `cbor:"error,omitempty"`
}

// Emit is one derived message.
type Emit struct {
	// Stream is the output stream; one of the computation's declared
	// output streams.
	Stream string `cbor:"stream"`
	// Payload is the message body.
	Payload []byte `cbor:"payload"`
	// Key is a key the output carries (for example a sink's record key);
	// "" means none.
	Key string `cbor:"key,omitempty"`
	// EventTimestamp overrides the EventTimestamp the host derives (the
	// minimum over the parents); nil keeps the derived one.
	EventTimestamp *int64 `cbor:"event_ts,omitempty"`
	// Parents are indexes of the key's inputs (timers first, then
	// messages) this output derives from, distinct. Nil means every input
	// of the key; an empty non-nil list is invalid.
	Parents []uint32 `cbor:"parents,omitempty"`
}

// Timer asks the host to fire a timer for the key at TriggerTimestamp.
type Timer struct {
	// TriggerTimestamp is the time the timer fires at: when the timer
	// stream's watermark reaches it.
	TriggerTimestamp int64 `cbor:"trigger_ts"`
	// EventTimestamp is the fired timer's EventTimestamp; nil means
	// TriggerTimestamp.
	EventTimestamp *int64 `cbor:"event_ts,omitempty"`
	// Payload is handed back to the guest when the timer fires.
	Payload []byte `cbor:"payload,omitempty"`
}

// Init is what the host passes to ExportInit once per instance, before the
// first batch.
type Init struct {
	// ABI is the ABI version of the envelope; always Version.
	ABI uint64 `cbor:"abi"`
	// Computation is the computation's name in the pipeline spec.
	Computation string `cbor:"computation"`
	// Kind is the computation's kind.
	Kind Kind `cbor:"kind"`
	// Partition is the computation partition the instance is started
	// for; every Request names the partition of its own batch.
	Partition uint64 `cbor:"partition"`
	// Parameters are the computation's parameters from the pipeline spec.
	// Values decode as int64, float64, string, []byte, bool, nil, []any
	// and map[string]any.
	Parameters map[string]any `cbor:"parameters,omitempty"`
	// OutputStreams are the computation's declared output streams.
	OutputStreams []string `cbor:"output_streams"`
}

// InitResult is a guest's answer to Init when it has something to say.
// A guest that returns 0 from ExportInit succeeded with nothing to say.
type InitResult struct {
	// Error, when not empty, says the computation refused to start.
	Error string `cbor:"error,omitempty"`
}

// Int64 returns a pointer to v: a convenience for the optional timestamp
// fields.
func Int64(v int64) *int64 { return &v }
