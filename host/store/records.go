package store

import (
	"fmt"
	"slices"

	"github.com/fxamacker/cbor/v2"

	"github.com/flowhost/flowhost/ordering"
)

// Dest is a queue's owner: a computation partition or a sink. Each has one
// queue holding what was committed for it and not yet consumed.
type Dest struct {
	// Sink is true for a sink, false for a computation partition.
	Sink bool
	// Name is the computation or sink name.
	Name string
	// Partition is the computation partition (0 for a sink).
	Partition int
}

// String is "computation/pN" or "sink:NAME", the form positions and
// inspect use.
func (d Dest) String() string {
	if d.Sink {
		return "sink:" + d.Name
	}
	return fmt.Sprintf("%s/p%d", d.Name, d.Partition)
}

func (d Dest) kind() string {
	if d.Sink {
		return "k"
	}
	return "c"
}

// Watermarks are published event and system watermarks.
type Watermarks struct {
	Event  int64 `cbor:"1,keyasint"`
	System int64 `cbor:"2,keyasint"`
	// Partitions holds, per source partition, the largest EventTimestamp
	// routed (ordering.NoWatermark for none): a restarted source's
	// partitions start from it, so one with nothing left to read does not
	// hold the watermark back. Stores written before it have none.
	Partitions []int64 `cbor:"3,keyasint,omitempty"`
}

// Equal reports whether w and o hold the same watermarks.
func (w Watermarks) Equal(o Watermarks) bool {
	return w.Event == o.Event && w.System == o.System && slices.Equal(w.Partitions, o.Partitions)
}

// IngestPosition is what a source partition has appended.
type IngestPosition struct {
	// Next is the offset the next record appended gets.
	Next uint64 `cbor:"1,keyasint"`
	// Clock is the partition's last AlignmentTimestamp, so that alignment
	// stays non-decreasing across restarts.
	Clock int64 `cbor:"2,keyasint"`
}

// ReadPosition is how far a source partition's records have been routed to
// the queues of its readers.
type ReadPosition struct {
	// Next is the offset of the first record not yet routed.
	Next uint64 `cbor:"1,keyasint"`
	// Tasks is the last TaskId given per destination ([Dest.String]).
	Tasks map[string]uint64 `cbor:"2,keyasint,omitempty"`
}

// PartitionMeta is what a computation partition commits with every epoch
// besides its state, timers and queues.
type PartitionMeta struct {
	// Epoch is the last committed epoch.
	Epoch uint64 `cbor:"1,keyasint"`
	// OutSeq is the next transform output sequence number (message ids).
	OutSeq uint64 `cbor:"2,keyasint"`
	// Clock is the last SystemTimestamp given to an output.
	Clock int64 `cbor:"3,keyasint"`
	// Out are the partition's published output watermarks.
	Out Watermarks `cbor:"4,keyasint"`
	// Bias is each input stream's last bias, kept by a stream whose buffer
	// is empty.
	Bias map[string]int64 `cbor:"5,keyasint,omitempty"`
	// Tasks is the last TaskId given per destination ([Dest.String]).
	Tasks map[string]uint64 `cbor:"6,keyasint,omitempty"`
	// Inputs are the partition's input watermarks when it committed.
	Inputs Watermarks `cbor:"7,keyasint"`
}

// SinkPosition is what a sink has committed.
type SinkPosition struct {
	// Bytes is the length of a file sink's committed content.
	Bytes int64 `cbor:"1,keyasint"`
	// Records is the number of records committed; a sink log's next
	// sequence number.
	Records uint64 `cbor:"2,keyasint"`
	// Batch is the number of the last sink batch an exactly-once Kafka
	// sink committed: the marker its transactions leave in Kafka.
	Batch uint64 `cbor:"3,keyasint,omitempty"`
	// Pending is the batch an exactly-once Kafka sink is writing in a
	// transaction whose outcome the store does not know yet; nil when
	// none is. Recovery compares it with the marker in Kafka.
	Pending *SinkBatch `cbor:"4,keyasint,omitempty"`
}

// SinkBatch names a sink batch by its number and, for every sender in it,
// the last TaskID it takes from that sender's queue: a batch takes a
// prefix of each sender's queue, so this is exactly the batch.
type SinkBatch struct {
	// N is the batch's number, one more than the last committed.
	N uint64 `cbor:"1,keyasint"`
	// Last is the last task of each sender in the batch.
	Last []SinkBatchSender `cbor:"2,keyasint"`
}

// SinkBatchSender is the last task a sink batch takes from one sender.
type SinkBatchSender struct {
	Computation string `cbor:"1,keyasint"`
	Partition   int    `cbor:"2,keyasint"`
	Task        uint64 `cbor:"3,keyasint"`
}

// wireMessage is a queued message. The id and parents are stored as their
// canonical text: they are parsed only at recovery.
type wireMessage struct {
	_         struct{} `cbor:",toarray"`
	ID        string
	Stream    string
	Key       string
	Event     int64
	System    int64
	Write     int64
	Alignment int64
	Parents   []string
	Payload   []byte
}

// wireRecord is a source record; its id and stream follow from its key.
type wireRecord struct {
	_         struct{} `cbor:",toarray"`
	Event     int64
	System    int64
	Write     int64
	Alignment int64
	Payload   []byte
}

// wireKeyedRecord is a source record with a key (a kafka source's): one
// more element than wireRecord, so that records without a key, and those
// stored before keys were, keep their encoding.
type wireKeyedRecord struct {
	_         struct{} `cbor:",toarray"`
	Event     int64
	System    int64
	Write     int64
	Alignment int64
	Payload   []byte
	Key       string
}

// wireTimer is a pending timer; key and trigger are in its store key.
type wireTimer struct {
	_       struct{} `cbor:",toarray"`
	Event   int64
	ID      string
	Payload []byte
}

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = (cbor.EncOptions{Sort: cbor.SortCoreDeterministic}).EncMode(); err != nil {
		panic(err)
	}
	if decMode, err = (cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}).DecMode(); err != nil {
		panic(err)
	}
}

func encodeMessage(m *ordering.Message) ([]byte, error) {
	w := wireMessage{
		ID: m.ID.String(), Stream: m.Stream, Key: m.Key,
		Event: m.Time.Event, System: m.Time.System, Write: m.Time.Write, Alignment: m.Time.Alignment,
		Payload: m.Payload,
	}
	if len(m.Parents) > 0 {
		w.Parents = make([]string, len(m.Parents))
		for i, p := range m.Parents {
			w.Parents[i] = p.String()
		}
	}
	return encMode.Marshal(&w)
}

func decodeMessage(b []byte) (*ordering.Message, error) {
	var w wireMessage
	if err := decMode.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	id, err := ordering.ParseMessageID(w.ID)
	if err != nil {
		return nil, fmt.Errorf("message id: %w", err)
	}
	m := &ordering.Message{
		ID: id, Stream: w.Stream, Key: w.Key,
		Time:    ordering.Timestamps{Event: w.Event, System: w.System, Write: w.Write, Alignment: w.Alignment},
		Payload: w.Payload,
	}
	if len(w.Parents) > 0 {
		m.Parents = make([]ordering.MessageID, len(w.Parents))
		for i, p := range w.Parents {
			if m.Parents[i], err = ordering.ParseMessageID(p); err != nil {
				return nil, fmt.Errorf("parent %d: %w", i, err)
			}
		}
	}
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	return m, nil
}

func encodeRecord(m *ordering.Message) ([]byte, error) {
	if m.Key != "" {
		return encMode.Marshal(&wireKeyedRecord{Event: m.Time.Event, System: m.Time.System, Write: m.Time.Write, Alignment: m.Time.Alignment, Payload: m.Payload, Key: m.Key})
	}
	return encMode.Marshal(&wireRecord{Event: m.Time.Event, System: m.Time.System, Write: m.Time.Write, Alignment: m.Time.Alignment, Payload: m.Payload})
}

func decodeRecord(stream string, partition int, offset uint64, b []byte) (*ordering.Message, error) {
	var w wireKeyedRecord
	if len(b) > 0 && b[0] == 0x86 { // a CBOR array of 6: keyed
		if err := decMode.Unmarshal(b, &w); err != nil {
			return nil, err
		}
	} else {
		var u wireRecord
		if err := decMode.Unmarshal(b, &u); err != nil {
			return nil, err
		}
		w = wireKeyedRecord{Event: u.Event, System: u.System, Write: u.Write, Alignment: u.Alignment, Payload: u.Payload}
	}
	if w.Payload == nil {
		w.Payload = []byte{}
	}
	return &ordering.Message{
		ID:      ordering.SourceID(stream, int32(partition), offset),
		Stream:  stream,
		Key:     w.Key,
		Time:    ordering.Timestamps{Event: w.Event, System: w.System, Write: w.Write, Alignment: w.Alignment},
		Payload: w.Payload,
	}, nil
}
