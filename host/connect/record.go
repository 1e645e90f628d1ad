// Package connect is the edge of flowhost's data path: sources that bring
// records in (file replay, HTTP ingest, Kafka, a generator), sinks that
// hand committed outputs out (file, stdout, HTTP subscribers, Kafka), and
// the dead letter that keeps every record the host refused.
//
// # Source formats
//
// File and HTTP sources read records one a line ("\n" or "\r\n" ends a
// line and is not part of it), a Kafka source one a record value; a
// [SourceFormat] says what the bytes are, and one [RecordDecoder] reads
// them for every source:
//
//   - [SourceEnvelope] (the default of file and HTTP sources): the record
//     line format below, which carries timestamps and an idempotency key;
//   - [SourceJSON] (the default of Kafka sources): the bytes are the
//     payload and must be valid JSON; the event time may be a top-level
//     field of it ([EventTimeSource], parsed by [ParseEventTime]) or, for
//     Kafka, a header;
//   - [SourceRaw]: the bytes are the payload, as they are; the event time
//     is the Kafka timestamp (or a header) or the arrival.
//
// Without an envelope a file or HTTP record has no write time of its own
// (the host stamps its arrival) and no id. Blank lines are skipped except
// in format raw, where every line is a record.
//
// # Record line format
//
// Format envelope is JSON lines, each an object
//
//	{"write_ts": 1714557600000000000, "event_ts": 1714557599000000000, "id": "order-17", "parents": ["raw/p0:2"], "payload": {...}}
//
// payload (any JSON value, kept as its raw bytes) is required; write_ts,
// event_ts, id and parents are optional. parents (at most [MaxParents]
// message ids in their canonical text form) become the parents of the
// record's message, as those of a computation's output are (they are
// lineage only: the record's timestamps and order are a source record's):
// flowhost dead-letters replay names there the message that was refused,
// so that the lineage of the replayed record reaches back to it. id is an
// idempotency key (see
// [Record.ID]): a non-empty string of at most [MaxIDBytes] bytes. A timestamp is an integer of nanoseconds since the
// Unix epoch or an RFC 3339 string ("2024-05-01T10:00:00.5Z"); null counts
// as absent. Without write_ts the host stamps the ingest time (give write_ts
// for a deterministic replay); without event_ts the event time is the write
// time. Other fields are refused, so that a typo such as "evnt_ts" cannot go
// unnoticed.
//
// Bad lines never stop a file source and are never dropped silently: each
// goes to the dead letter ([Rejection]) with file:line:column and the
// error; a Kafka record that cannot be decoded goes there with
// topic/partition@offset. Only a failing dead letter stops the run (as
// does the first bad record of a source configured without one). An HTTP
// request with a bad line is refused whole, and its answer says what is
// wrong where (see [HTTPSource]).
//
// # Sink formats
//
// Sinks write a record as [FormatJSON] (the [SinkRecord] with every
// timestamp and id, one object a line), [FormatPayload] (the payload
// alone, one a line; a payload that is not JSON and holds a newline is
// refused with [ErrPayloadNewline] rather than split) or, for people,
// [FormatText]. A Kafka sink's value is the JSON record or the payload.
//
// # Exactly-once Kafka sink
//
// Flink's KafkaSink pre-commits a transaction per checkpoint and, after a
// crash, resumes and commits it from another producer with the same
// transactional id. kgo has no way to resume another producer's
// transaction, so the sink does it the other way round, as Kafka Streams
// does when it commits its input offsets inside its transaction: the
// Kafka transaction itself is the commit point, and the host's store
// learns its outcome from Kafka on recovery. A sink batch n is written in
// three steps:
//
//  1. the store records batch n as pending (its last task per sender,
//     which defines the batch exactly);
//  2. one Kafka transaction, under a deterministic transactional id,
//     produces the batch and commits the offset n for a marker group on
//     partition 0 of the topic (AddOffsetsToTxn + TxnOffsetCommit), then
//     commits;
//  3. the store dequeues the batch and records n as committed.
//
// On recovery, a client with the same transactional id fences the
// previous producer (InitProducerID aborts its open transaction, or
// completes one the coordinator was already committing), and the sink
// reads the marker with RequireStable. A pending n with the marker at n
// reached Kafka: the store finishes step 3 without producing it again. A
// marker at n-1 means the transaction was aborted and the batch is
// produced again. Anything else means another writer, or a reset topic or
// group, and the run stops saying so rather than guess.
//
// The marker is a group offset on the output topic itself, so the store
// needs nothing in Kafka besides the topic, the marker dies with the topic
// (a recreated topic is noticed, not written over), and the commit point
// is a single atomic Kafka operation. The price is a transaction and two
// store commits per sink batch, so batches are as large as the sink's
// queue allows. Without a store there is nothing to reconcile with, and a
// Kafka sink is at least once (the idempotent producer).
package connect

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/flowhost/flowhost/host/keys"
	"github.com/flowhost/flowhost/ordering"
)

// Record is one record a source hands to the host.
type Record struct {
	// Stream is the source stream the record belongs to.
	Stream string
	// Partition is the stream partition, in [0, partitions).
	Partition int
	// RoundRobin says the source has no partition_by: the host, not the
	// source, picks the partition, dealing the records it accepts out in
	// turn and counting on from its last commit after a restart, so that
	// a record gets the same partition (and message id) whether or not
	// the run was interrupted. Partition is then only a hint.
	RoundRobin bool
	// Event is the event time when HasEvent; otherwise the host uses the
	// write time.
	Event    int64
	HasEvent bool
	// Write is the write time the source supplies when HasWrite (for
	// deterministic replay); otherwise the host stamps the time it appends
	// the record to the source queue.
	Write    int64
	HasWrite bool
	// Payload is the record's bytes; the receiver owns them (sources never
	// reuse a payload's memory).
	Payload []byte
	// Key is the record's key text (see package keys), "" for none: the
	// key of the record's message, which a computation without group_by
	// takes as its key. A kafka source sets it from the Kafka key with
	// [keys.OfBytes].
	Key string
	// Origin says where the record came from for error reports, e.g.
	// "orders.jsonl:17" or "http:/ingest#3:2" (request 3, line 2).
	Origin string
	// Resume is where the source continues after this record when the
	// host restarts from a commit that holds it (a file offset, a
	// generator count); the host stores it with the record. Nil for
	// sources that do not resume: an HTTP client sends again what was not
	// acknowledged.
	Resume []byte
	// ID, when not empty, is the record's idempotency key, given by its
	// producer: with a data directory, a source accepts a key once, and a
	// record sent again with the same key (an HTTP client retrying after
	// a lost answer) is acknowledged but not appended a second time.
	// Keys are remembered until the source's event watermark passes the
	// record's event time by retention.idempotency.
	ID string
	// Parents, when not nil, become the parents of the record's message
	// (field "parents" of the record line format): a replayed dead letter
	// names the message that was refused.
	Parents []ordering.MessageID
	// Sync asks the host to make this record and every earlier one durable
	// before emit returns: an HTTP source acknowledges a request only
	// then. Without it the host commits records in groups.
	Sync bool
	// More says that the next record emitted belongs to the same
	// all-or-nothing group as this one: the host accepts a group's records
	// together, when the first record without More arrives, in one commit.
	// An emit of a record with More that returns nil has accepted nothing
	// yet; when any emit of the group fails, or Run returns before the
	// group ends, none of the group is accepted. An HTTP source emits each
	// request as one group, so that a request is accepted whole or not at
	// all, crashes and store failures included.
	More bool
}

// Source produces records.
//
// Run calls emit for each record, in order, from the goroutine that called
// Run; emit blocks while the host applies backpressure and returns an error
// when the host will take no more records (Run then stops and returns that
// error). Run returns nil when a finite source is exhausted and ctx.Err()
// when ctx is cancelled. Run is called at most once per Source.
type Source interface {
	Run(ctx context.Context, emit func(Record) error) error
}

// Partitioner picks the partition of a record: with partition_by fields,
// the FNV-1a 64-bit hash of the record's key text (see package keys) modulo
// the partition count, which is the same on every machine, run and Go
// version; without them, round robin. It is safe for concurrent use.
type Partitioner struct {
	partitions int
	keys       *keys.Extractor // nil: round robin
	next       atomic.Uint64
}

// NewPartitioner checks the partition count (at least 1) and the
// partition_by fields.
func NewPartitioner(partitions int, partitionBy []string) (*Partitioner, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("partitions must be at least 1, not %d", partitions)
	}
	p := &Partitioner{partitions: partitions}
	if len(partitionBy) > 0 {
		e, err := keys.NewExtractor(partitionBy)
		if err != nil {
			return nil, fmt.Errorf("partition_by: %w", err)
		}
		p.keys = e
	}
	return p, nil
}

// Partitions returns the partition count.
func (p *Partitioner) Partitions() int { return p.partitions }

// RoundRobin reports whether the partitioner has no partition_by fields:
// the records it partitions are dealt out in turn (see [Record.RoundRobin]).
func (p *Partitioner) RoundRobin() bool { return p.keys == nil }

// Partition returns the partition of a record with payload. It fails only
// with partition_by fields, when the key cannot be extracted.
func (p *Partitioner) Partition(payload []byte) (int, error) {
	if p.keys == nil {
		return int((p.next.Add(1) - 1) % uint64(p.partitions)), nil
	}
	key, err := p.keys.Key(payload)
	if err != nil {
		return 0, err
	}
	return int(fnv1a64(key) % uint64(p.partitions)), nil
}

// fnv1a64 is FNV-1a as hash/fnv computes it, without the allocation of a
// hash.Hash.
func fnv1a64(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}
