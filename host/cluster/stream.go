package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// A stream topic's records are of two kinds, told apart by the value's
// second byte (after the format byte): a message, and a sender's
// watermark. A watermark is a record of the same partition as the
// sender's messages and is written in the same transaction as the epoch
// whose outputs it covers, so a reader meets it after every message it
// covers, on every host: a watermark never overtakes data written before
// it.
const (
	streamMessage   = 'm'
	streamWatermark = 'w'
)

// StreamRecord is one record of a stream topic: a message from a sender
// (a computation partition or a source reader), or that sender's
// watermarks.
type StreamRecord struct {
	// From is the sender; Task its TaskId of a message.
	From ordering.Sender
	Task ordering.TaskID
	// Message is the message, nil for a watermark; decoded, its Task and
	// From are the record's.
	Message *ordering.Message
	// Event and System are a watermark's: the sender promises no later
	// message of this partition with a smaller EventTimestamp (or
	// SystemTimestamp).
	Event, System int64
}

// MessageRecord returns m, sent by from as task, as a record of partition
// of topic. The partition is the reader's (flowhost's partition function
// of the reader's key): Kafka's partitioner is not used. The record key is
// the message's key, for tools that show it.
func MessageRecord(topic string, partition int32, from ordering.Sender, task ordering.TaskID, m *ordering.Message) *kgo.Record {
	v := appendSender([]byte{recordFormat, streamMessage}, from)
	v = binary.AppendUvarint(v, uint64(task))
	v = store.AppendMessage(v, m)
	var key []byte
	if m.Key != "" {
		key = []byte(m.Key)
	}
	return &kgo.Record{Topic: topic, Partition: partition, Key: key, Value: v}
}

// WatermarkRecord returns from's watermarks as a record of partition of
// topic. A sender writes one to every partition of every topic it sends
// to whenever its watermarks move, after the messages they cover.
func WatermarkRecord(topic string, partition int32, from ordering.Sender, event, system int64) *kgo.Record {
	v := appendSender([]byte{recordFormat, streamWatermark}, from)
	v = binary.AppendVarint(v, event)
	v = binary.AppendVarint(v, system)
	return &kgo.Record{Topic: topic, Partition: partition, Value: v}
}

func appendSender(b []byte, s ordering.Sender) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.Computation)))
	b = append(b, s.Computation...)
	return binary.AppendUvarint(b, uint64(s.Partition))
}

// DecodeStreamRecord reads a stream topic's record value back, refusing
// anything [MessageRecord] and [WatermarkRecord] do not write with an
// error naming the field.
func DecodeStreamRecord(value []byte) (StreamRecord, error) {
	if len(value) < 2 {
		return StreamRecord{}, fmt.Errorf("stream record of %d bytes: it has a format byte and a kind", len(value))
	}
	if value[0] != recordFormat {
		return StreamRecord{}, fmt.Errorf("stream record: format %d, and this flowhost reads format %d", value[0], recordFormat)
	}
	kind, b := value[1], value[2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return StreamRecord{}, errors.New("stream record: sender: bad computation name length")
	}
	var r StreamRecord
	r.From.Computation, b = string(b[k:k+int(n)]), b[k+int(n):]
	if !utf8.ValidString(r.From.Computation) {
		return StreamRecord{}, fmt.Errorf("stream record: sender %q is not UTF-8", r.From.Computation)
	}
	part, k := binary.Uvarint(b)
	if k <= 0 || part > 1<<31-1 {
		return StreamRecord{}, fmt.Errorf("stream record: sender %q: bad partition", r.From.Computation)
	}
	r.From.Partition, b = int(part), b[k:]
	switch kind {
	case streamMessage:
		task, k := binary.Uvarint(b)
		if k <= 0 {
			return StreamRecord{}, fmt.Errorf("stream record: message of %s/%d: bad task id", r.From.Computation, r.From.Partition)
		}
		m, err := store.DecodeMessage(b[k:])
		if err != nil {
			return StreamRecord{}, fmt.Errorf("stream record: message of %s/%d, task %d: %w", r.From.Computation, r.From.Partition, task, err)
		}
		// The message as its reader receives it: in its sender's lane.
		r.Task, r.Message = ordering.TaskID(task), m
		m.Task, m.From = r.Task, r.From
	case streamWatermark:
		var k int
		if r.Event, k = binary.Varint(b); k <= 0 {
			return StreamRecord{}, fmt.Errorf("stream record: watermark of %s/%d: bad event watermark", r.From.Computation, r.From.Partition)
		}
		b = b[k:]
		if r.System, k = binary.Varint(b); k <= 0 {
			return StreamRecord{}, fmt.Errorf("stream record: watermark of %s/%d: bad system watermark", r.From.Computation, r.From.Partition)
		}
		if k != len(b) {
			return StreamRecord{}, fmt.Errorf("stream record: watermark of %s/%d: %d bytes after it", r.From.Computation, r.From.Partition, len(b)-k)
		}
	default:
		return StreamRecord{}, fmt.Errorf("stream record: unknown kind %q", kind)
	}
	return r, nil
}

// InputWatermark is a reader's watermark over one partition of a stream
// topic, from its senders' in-band watermark records: the minimum over
// every sender the reader expects (each upstream partition that writes
// the topic), [ordering.NoWatermark] until each has sent one. A sender's
// watermark never goes back: a record below its last is a repeat (a
// sender restarted from an older epoch commit) and changes nothing.
type InputWatermark struct {
	event, system map[ordering.Sender]int64
}

// NewInputWatermark tracks the watermarks of senders.
func NewInputWatermark(senders []ordering.Sender) *InputWatermark {
	w := &InputWatermark{event: map[ordering.Sender]int64{}, system: map[ordering.Sender]int64{}}
	for _, s := range senders {
		w.event[s], w.system[s] = ordering.NoWatermark, ordering.NoWatermark
	}
	return w
}

// Observe takes a watermark record (a message changes nothing) and
// returns the partition's watermarks after it. A watermark of a sender the
// reader does not expect is refused: the pipeline's shape and the topic's
// writers disagree.
func (w *InputWatermark) Observe(r StreamRecord) (event, system int64, err error) {
	if r.Message == nil {
		prev, ok := w.event[r.From]
		if !ok {
			return 0, 0, fmt.Errorf("cluster: a watermark from %s/%d, which does not write this topic partition", r.From.Computation, r.From.Partition)
		}
		w.event[r.From] = max(prev, r.Event)
		w.system[r.From] = max(w.system[r.From], r.System)
	}
	event, system = w.Current()
	return event, system, nil
}

// Current returns the partition's watermarks: the minimum over the
// senders.
func (w *InputWatermark) Current() (event, system int64) {
	event, system = math.MaxInt64, math.MaxInt64
	for s, e := range w.event {
		event, system = min(event, e), min(system, w.system[s])
	}
	if len(w.event) == 0 {
		return ordering.NoWatermark, ordering.NoWatermark
	}
	return event, system
}
