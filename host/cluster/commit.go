package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrFenced is wrapped by the error of a [Committer] whose partition
// another host has taken over: a newer Committer on the same partition
// started, and this one's transactions can never commit again. The host
// must drop the partition (its state, timers and buffers) and not retry.
var ErrFenced = errors.New("cluster: another host took over the partition")

// CommitterConfig names the computation partition a [Committer] commits.
type CommitterConfig struct {
	Pipeline    string
	Computation string
	Partition   int32
	// Inputs are the computation's input topics (see [Topics]), whose
	// consumed offsets each epoch commits.
	Inputs []string
	// Opts are the connection's options: seed brokers, TLS, SASL. The
	// Committer adds its transactional id and a manual partitioner.
	Opts []kgo.Opt
}

// TransactionalID is the transactional id of a computation partition's
// [Committer]: one per partition, so that the broker fences the
// partition's previous owner, and only it, when a new owner starts.
func TransactionalID(pipeline, computation string, partition int32) string {
	return fmt.Sprintf("flowhost.%s.%s.p%d", pipeline, computation, partition)
}

// Group is the consumer group that holds a computation's consumed input
// offsets, committed with its epochs.
func Group(pipeline, computation string) string {
	return fmt.Sprintf("flowhost.%s.%s", pipeline, computation)
}

// Committer commits a computation partition's epochs to Kafka, each in
// one transaction holding its outputs, its changelog records and its
// consumed input offsets: a read_committed reader sees all of an epoch or
// none of it, and a partition restored from the changelog and the
// committed offsets is exactly what the committed epochs left.
//
// Starting a Committer fences every earlier one of the same partition (on
// any host): the broker aborts the transaction a predecessor left open,
// and a predecessor still running (a zombie: a host paused past its
// session, then back) gets [ErrFenced] from its next Commit, whose writes
// no read_committed reader ever sees.
//
// A Committer is used by one goroutine, the partition's.
type Committer struct {
	cfg      CommitterConfig
	cl       *kgo.Client
	txnID    string
	group    string
	topic    string // the changelog
	topicIDs map[string][16]byte
	restores uint64 // restore points written, for their tokens
}

// NewCommitter starts the partition's committer, fencing its predecessors
// (see [Committer]). The input topics must exist.
func NewCommitter(ctx context.Context, cfg CommitterConfig) (*Committer, error) {
	c := &Committer{cfg: cfg, txnID: TransactionalID(cfg.Pipeline, cfg.Computation, cfg.Partition),
		group: Group(cfg.Pipeline, cfg.Computation), topic: ChangelogTopic(cfg.Pipeline, cfg.Computation)}
	var err error
	c.cl, err = kgo.NewClient(append(slices.Clone(cfg.Opts), kgo.TransactionalID(c.txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	// The consumed offsets are committed by topic id from
	// TxnOffsetCommit v6 on, by name before.
	topics, err := kadm.NewClient(c.cl).ListTopics(ctx, cfg.Inputs...)
	if err == nil {
		err = topics.Error()
	}
	if err != nil {
		c.cl.Close()
		return nil, fmt.Errorf("cluster: the input topics of %s/p%d: %w", cfg.Computation, cfg.Partition, err)
	}
	c.topicIDs = map[string][16]byte{}
	for _, name := range cfg.Inputs {
		c.topicIDs[name] = topics[name].ID
	}
	// InitProducerID: the broker aborts what a predecessor left open and
	// bumps the epoch, which fences the predecessor.
	if _, _, err := c.cl.ProducerID(ctx); err != nil {
		c.cl.Close()
		return nil, explainFenced(c.txnID, fmt.Errorf("cluster: initializing transactional id %s: %w", c.txnID, err))
	}
	return c, nil
}

// Close releases the committer's client; an open transaction is left to
// the broker, which aborts it when the next committer starts or its
// timeout passes.
func (c *Committer) Close() { c.cl.Close() }

// Epoch is what one epoch of a computation partition commits.
type Epoch struct {
	// Changes are its state, timer and metadata changes, in order (a
	// later change of the same record key wins).
	Changes []Change
	// Outputs are its output records, with their topics and partitions
	// set (flowhost's partition function of the reader's key).
	Outputs []*kgo.Record
	// Consumed is, per input topic, the offset of the partition's next
	// record to read: everything before it is consumed.
	Consumed map[string]int64
}

// Commit commits e in one transaction. On an error nothing of e is
// visible to read_committed readers: the transaction is aborted (or, if
// this committer was fenced, never commits); an error wrapping
// [ErrFenced] means the partition has a new owner.
func (c *Committer) Commit(ctx context.Context, e Epoch) error {
	recs := make([]*kgo.Record, 0, len(e.Changes)+len(e.Outputs))
	for _, ch := range e.Changes {
		r, err := ch.Record(c.topic, c.cfg.Partition)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	recs = append(recs, e.Outputs...)
	if err := c.cl.BeginTransaction(); err != nil {
		return explainFenced(c.txnID, fmt.Errorf("cluster: %s: beginning a transaction: %w", c.txnID, err))
	}
	err := c.cl.ProduceSync(ctx, recs...).FirstErr()
	if err == nil && len(e.Consumed) > 0 {
		err = c.commitOffsets(ctx, e.Consumed)
	}
	if err != nil {
		if aerr := c.cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return explainFenced(c.txnID, fmt.Errorf("cluster: %s: epoch aborted: %w", c.txnID, err))
	}
	if err := c.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return explainFenced(c.txnID, fmt.Errorf("cluster: %s: committing the epoch: %w", c.txnID, err))
	}
	return nil
}

// commitOffsets adds the consumed offsets to the open transaction, as
// kgo's GroupTransactSession does for a group member: AddOffsetsToTxn
// ties the group to the transaction, TxnOffsetCommit stages the offsets,
// which become the group's when the transaction commits.
func (c *Committer) commitOffsets(ctx context.Context, consumed map[string]int64) error {
	id, epoch, err := c.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = c.txnID, id, epoch, c.group
	addResp, err := add.RequestWith(ctx, c.cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("adding group %s to the transaction: %w", c.group, err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = c.txnID, c.group, id, epoch
	req.Generation = -1 // the partition's owner, not a group member
	for _, topic := range slices.Sorted(maps.Keys(consumed)) {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = topic, c.topicIDs[topic]
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = c.cfg.Partition, consumed[topic], -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("committing the consumed offsets for group %s: %w", c.group, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("committing the consumed offset of %s partition %d for group %s: %w", rt.Topic, rp.Partition, c.group, err)
			}
		}
	}
	return nil
}

// Consumed returns the committed consumed offsets of the partition, per
// input topic (a topic with none is absent), waiting out transactions
// still being completed.
func (c *Committer) Consumed(ctx context.Context) (map[string]int64, error) {
	offs, err := kadm.NewClient(c.cl).FetchOffsets(kadm.RequireStable(ctx), c.group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: the consumed offsets of group %s: %w", c.group, err)
	}
	out := map[string]int64{}
	for _, topic := range c.cfg.Inputs {
		if o, ok := offs.Lookup(topic, c.cfg.Partition); ok && o.Err == nil && o.At >= 0 {
			out[topic] = o.At
		}
	}
	return out, nil
}

// explainFenced marks the errors of transactional id txnID that mean a
// successor took over.
func explainFenced(txnID string, err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping) {
		return fmt.Errorf("%w (transactional id %s): %w", ErrFenced, txnID, err)
	}
	return err
}
