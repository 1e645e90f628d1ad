package ordering

// Timer is a request, made by a computation for one key, to be called back
// when the watermark of its timer stream reaches Trigger.
type Timer struct {
	// Key is the canonical key text the timer belongs to.
	Key string
	// Trigger is the TriggerTimestamp: the timer fires once the
	// watermark is >= Trigger.
	Trigger int64
	// Event is the EventTimestamp the timer carries into what it derives;
	// of two timers with one Key and Trigger, the smaller Event is kept.
	Event int64
	// ID orders timers of equal Trigger and names the timer as a parent.
	ID MessageID
	// Payload is opaque data the computation attached.
	Payload []byte
}
