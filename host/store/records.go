package store

import (
	"fmt"
	"slices"

	"github.com/fxamacker/cbor/v2"
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

// MarshalCBOR encodes v as flowhost encodes every record it keeps, here
// and in a cluster's changelog: deterministic CBOR, map keys sorted.
func MarshalCBOR(v any) ([]byte, error) { return encMode.Marshal(v) }

// UnmarshalCBOR decodes what [MarshalCBOR] wrote into v, refusing
// duplicate map keys and fields v does not have.
func UnmarshalCBOR(b []byte, v any) error { return decMode.Unmarshal(b, v) }

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
