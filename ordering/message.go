package ordering

import "unsafe"

// Timestamps are the times a message carries, int64 nanoseconds since the
// Unix epoch.
type Timestamps struct {
	// Event is when the event really happened; computations may set it.
	Event int64
	// System is when this message was created (for a source record: the
	// remote system's time, or the ingest time).
	System int64
	// Write is when a source record was appended to its source queue; zero
	// for derived messages.
	Write int64
	// Alignment is the ordering timestamp; see the assignment functions.
	Alignment int64
}

// TaskID is the number a sending partition gives every message it queues,
// from a counter that only grows. It breaks ties of the cross-stream merge.
type TaskID uint64

// Message is the metadata the ordering rules read, plus the payload the
// host carries along. The ordering package never looks inside Payload; it
// only counts its bytes.
type Message struct {
	// ID is unique within the pipeline and breaks in-stream ties.
	ID MessageID
	// Stream is the name of the stream the message travels on.
	Stream string
	// Key is the canonical text of the receiving computation's key ("" for
	// the unkeyed). It selects the partition, the state and the FIFO lane.
	Key string
	// Time holds the message's timestamps.
	Time Timestamps
	// Task is assigned by the sending partition when the message is queued.
	Task TaskID
	// From is the sending partition that queued the message ([Router]
	// sets it); with Task it names the message's place in its lane.
	From Sender
	// Parents are the ids of the messages and timers it derives from.
	Parents []MessageID
	// Payload is opaque to this package.
	Payload []byte
}

// Size is the number of bytes the message counts for in batch and buffer
// limits: its payload plus a fixed overhead for its metadata, so that empty
// payloads still fill buffers.
func (m *Message) Size() int64 { return int64(len(m.Payload)) + MessageOverhead }

// MessageOverhead is the metadata cost counted per message by [Message.Size].
const MessageOverhead = 64

// Footprint is the memory a buffered message holds, which buffer bounds
// (a partition's buffer_bytes, a source's queue) count, so that a bound in
// bytes bounds memory: the Message itself, its payload, key, id segments
// and parents, and [BufferedOverhead] for the entries that buffers and the
// host keep per message. Payloads and keys shared between copies are
// counted in each, so the figure errs high.
func (m *Message) Footprint() int64 {
	n := messageBytes + int64(len(m.Payload)) + int64(len(m.Key)) + int64(len(m.ID.more))*segmentBytes +
		int64(cap(m.Parents))*idBytes + BufferedOverhead
	for i := range m.Parents {
		n += int64(len(m.Parents[i].more)) * segmentBytes
	}
	return n
}

// BufferedOverhead is what a buffered message costs besides its own
// memory: its slots in the queues, lanes and heaps it passes through and
// the host's per-message bookkeeping (its priority, the slab chunk it
// shares with 63 others). BenchmarkBufferFootprint in host/runtime
// measures the heap a full buffer really takes against what Footprint
// counts.
const BufferedOverhead = 160

var (
	messageBytes = int64(unsafe.Sizeof(Message{}))
	segmentBytes = int64(unsafe.Sizeof(Segment{}))
	idBytes      = int64(unsafe.Sizeof(MessageID{}))
)

// less reports whether a comes before b in one stream's order:
// (AlignmentTimestamp, MessageID).
func inStreamLess(a, b *Message) bool {
	if a.Time.Alignment != b.Time.Alignment {
		return a.Time.Alignment < b.Time.Alignment
	}
	return a.ID.Compare(b.ID) < 0
}
