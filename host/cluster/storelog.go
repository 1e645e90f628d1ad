package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// StoreTopic is the topic that holds pipeline's store on Kafka (see
// [OpenStore]).
func StoreTopic(pipeline string) string { return fmt.Sprintf("flowhost.%s.store", pipeline) }

// StoreTransactionalID is the transactional id of pipeline's store on
// Kafka: one per pipeline, so that the broker fences a host that ran the
// pipeline before when another starts it.
func StoreTransactionalID(pipeline string) string { return fmt.Sprintf("flowhost.%s.store", pipeline) }

// StoreConfig configures [OpenStore].
type StoreConfig struct {
	// Pipeline is the pipeline; its name names the topic and the
	// transactional id.
	Pipeline *spec.Pipeline
	// Opts are the connection's options: seed brokers, TLS, SASL.
	Opts []kgo.Opt
	// Replication is the topic's replication factor when OpenStore
	// creates it; -1 is the brokers' default.
	Replication int16
	// AppendTimeout bounds one commit's transaction; 0 means 30 s. A
	// commit that takes longer fails, and the run stops.
	AppendTimeout time.Duration
	// OnFenced, if set, is called once, from another goroutine, when the
	// store learns that another host opened it: from a commit, or from
	// the lease the store commits every LeaseInterval when no commit did,
	// so that an idle host learns it too. The store takes no commit from
	// then on; the caller should stop the run.
	OnFenced func(error)
}

// clientOpts are the options of a client of the store or the hosts'
// group: a short MetadataMinAge unless the caller's options set one (the
// topic may just have been created, and the first commit or join must not
// wait kgo's default 5 s to see it), the caller's, then own.
func clientOpts(caller []kgo.Opt, own ...kgo.Opt) []kgo.Opt {
	return append(append([]kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond)}, caller...), own...)
}

// LeaseInterval is how often an open store on Kafka that committed
// nothing meanwhile commits a lease (a transaction with one record that
// compaction replaces) to learn whether another host has fenced it.
const LeaseInterval = time.Second

// OpenStore opens pipeline's store on Kafka: every batch the store
// commits is one Kafka transaction on the compacted topic [StoreTopic],
// and the store itself is a cache, rebuilt from the topic,
// read_committed, when it opens (Kafka Streams' model of a local store
// and its changelog). Everything a run on the embedded store keeps on
// disk (source records, queues, keyed state, timers, partition metadata,
// sink positions) is then on the brokers, and a run started on another
// machine resumes where the last one committed. The cache is a pebble
// store without a WAL in a new temporary directory (os.MkdirTemp),
// removed by the store's Close (a killed process leaves it behind).
//
// The topic is created (one partition, cleanup.policy=compact) when
// missing; one with another layout is refused with [ErrLayout]. Opening
// fences the pipeline's previous host: from then on its commits fail
// with [ErrFenced], and nothing it writes is visible to a reader.
func OpenStore(ctx context.Context, cfg StoreConfig) (*store.Store, error) {
	l, err := openStoreLog(ctx, cfg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flowhost-store-cache-")
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.cacheDir = dir
	st, err := store.Open(dir, store.Options{Changelog: l})
	if err != nil {
		return nil, err
	}
	l.startLeases()
	return st, nil
}

// storeLog is a [store.Changelog] on Kafka: one transaction per Append.
type storeLog struct {
	cfg   StoreConfig
	cl    *kgo.Client
	txnID string
	topic string
	// cacheDir holds the store's cache, removed by Close.
	cacheDir string

	// mu serialises the transactions of commits and leases.
	mu         sync.Mutex
	restores   uint64
	lastCommit time.Time
	fenced     sync.Once
	stopLeases context.CancelFunc
	leasesDone chan struct{}
	// broken is set when the log can take no more transactions: it was
	// fenced, or a transaction's end failed (the broker may or may not
	// have committed it, so the cache may no longer be the log). Every
	// later Append returns it.
	broken error
}

func openStoreLog(ctx context.Context, cfg StoreConfig) (*storeLog, error) {
	if cfg.AppendTimeout <= 0 {
		cfg.AppendTimeout = 30 * time.Second
	}
	name := cfg.Pipeline.Name
	l := &storeLog{cfg: cfg, txnID: StoreTransactionalID(name), topic: StoreTopic(name)}
	var err error
	l.cl, err = kgo.NewClient(clientOpts(cfg.Opts, kgo.TransactionalID(l.txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	topic := Topic{Name: l.topic, Partitions: 1, Compacted: true,
		For: fmt.Sprintf("the store of pipeline %q", name), Path: "name"}
	if err := Ensure(ctx, kadm.NewClient(l.cl), cfg.Pipeline, []Topic{topic}, cfg.Replication); err != nil {
		l.cl.Close()
		return nil, err
	}
	// InitProducerID: the broker aborts what a predecessor left open and
	// bumps the epoch, which fences the predecessor.
	if _, _, err := l.cl.ProducerID(ctx); err != nil {
		l.cl.Close()
		return nil, explainFenced(l.txnID, fmt.Errorf("cluster: initializing transactional id %s: %w", l.txnID, err))
	}
	return l, nil
}

// Close stops the leases and releases the client; an open transaction is
// left to the broker, which aborts it when the next owner starts or its
// timeout passes.
func (l *storeLog) Close() error {
	if l.stopLeases != nil {
		l.stopLeases()
		<-l.leasesDone
	}
	l.cl.Close()
	if l.cacheDir != "" {
		return os.RemoveAll(l.cacheDir)
	}
	return nil
}

// Append commits ops in one transaction.
func (l *storeLog) Append(ops []store.Op) error {
	recs := make([]*kgo.Record, len(ops))
	for i, op := range ops {
		recs[i] = StoreRecord(l.topic, op)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commit(recs)
}

// commit runs one transaction of recs, under mu.
func (l *storeLog) commit(recs []*kgo.Record) error {
	if l.broken != nil {
		return l.broken
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.AppendTimeout)
	defer cancel()
	err := l.transact(ctx, recs)
	if err == nil {
		l.lastCommit = time.Now()
	} else if errors.Is(err, ErrFenced) && l.cfg.OnFenced != nil {
		l.fenced.Do(func() { go l.cfg.OnFenced(err) })
	}
	return err
}

// startLeases commits a lease every LeaseInterval in which nothing else
// committed (see StoreConfig.OnFenced), until Close.
func (l *storeLog) startLeases() {
	ctx, cancel := context.WithCancel(context.Background())
	l.stopLeases, l.leasesDone = cancel, make(chan struct{})
	go func() {
		defer close(l.leasesDone)
		tick := time.NewTicker(LeaseInterval)
		defer tick.Stop()
		for leases := uint64(0); ; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l.mu.Lock()
			if l.broken == nil && time.Since(l.lastCommit) >= LeaseInterval {
				leases++
				// A lease is a restore point no restore waits for.
				_ = l.commit([]*kgo.Record{l.pointRecord(append([]byte("lease"), binary.BigEndian.AppendUint64(nil, leases)...))})
			}
			broken := l.broken != nil
			l.mu.Unlock()
			if broken {
				return
			}
		}
	}()
}

func (l *storeLog) pointRecord(token []byte) *kgo.Record {
	return &kgo.Record{Topic: l.topic, Key: storePointKey, Value: append([]byte{recordFormat}, token...)}
}

func (l *storeLog) transact(ctx context.Context, recs []*kgo.Record) error {
	if err := l.cl.BeginTransaction(); err != nil {
		return l.breaks(fmt.Errorf("cluster: %s: beginning a transaction: %w", l.txnID, err))
	}
	if err := l.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		if aerr := l.cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			return l.breaks(fmt.Errorf("cluster: %s: commit failed (%w), and so did its abort: %w", l.txnID, err, aerr))
		}
		err = explainFenced(l.txnID, fmt.Errorf("cluster: %s: commit aborted: %w", l.txnID, err))
		if errors.Is(err, ErrFenced) {
			l.broken = err
		}
		return err
	}
	if err := l.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return l.breaks(fmt.Errorf("cluster: %s: ending the transaction: %w", l.txnID, err))
	}
	return nil
}

// breaks records that the log can take no more transactions (see
// storeLog.broken) and returns why.
func (l *storeLog) breaks(err error) error {
	err = explainFenced(l.txnID, err)
	if !errors.Is(err, ErrFenced) {
		err = fmt.Errorf("%w; the outcome of this commit is unknown, so the store takes no more: restart the run, which restores from the topic", err)
	}
	l.broken = err
	return err
}

// Restore reads the topic to its end, read_committed. Where it ends is
// known by writing to it: a restore point, as [Committer.Restore] does.
func (l *storeLog) Restore(apply func(store.Op) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*l.cfg.AppendTimeout)
	defer cancel()
	l.mu.Lock()
	l.restores++
	point, err := restorePoint(ctx, l.cl, l.txnID, l.restores)
	if err == nil {
		err = l.commit([]*kgo.Record{l.pointRecord(point)})
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: restoring %s: writing the restore point: %w", l.topic, err)
	}
	return readToRestorePoint(ctx, l.cfg.Opts, l.topic, 0, func(r *kgo.Record) (bool, error) {
		op, at, err := DecodeStoreRecord(r.Key, r.Value)
		if err != nil {
			return false, fmt.Errorf("cluster: topic %s offset %d: %w", l.topic, r.Offset, err)
		}
		if at != nil {
			return bytes.Equal(at, point), nil
		}
		return false, apply(op)
	})
}

// storePointKey is the record key of the store topic's restore point. A
// store key starts with a table letter, never 0xff.
var storePointKey = []byte{recordFormat, 0xff}

// StoreRecord is op as a record of the store topic: the key is the
// format byte and the store's key; a deletion is a tombstone, and every
// other value starts with the format byte, so an empty value is not one.
// The key and value share one allocation, and keep nothing of op.
func StoreRecord(topic string, op store.Op) *kgo.Record {
	n := 1 + len(op.Key)
	if !op.Delete {
		n += 1 + len(op.Value)
	}
	buf := append(append(make([]byte, 0, n), recordFormat), op.Key...)
	r := &kgo.Record{Topic: topic, Key: buf[:len(buf):len(buf)]}
	if !op.Delete {
		r.Value = append(append(buf[len(buf):], recordFormat), op.Value...)
	}
	return r
}

// DecodeStoreRecord reads a record of the store topic (a nil value is a
// tombstone) back into the store write it holds or, for a restore point,
// its token, refusing what the store never writes with an error naming
// the part at fault. The op and the token are slices of key and value.
func DecodeStoreRecord(key, value []byte) (op store.Op, point []byte, err error) {
	if len(key) < 2 {
		return op, nil, fmt.Errorf("record key of %d bytes: a store record's key has a format byte and a store key", len(key))
	}
	if key[0] != recordFormat {
		return op, nil, fmt.Errorf("record key: format %d, and this flowhost reads format %d", key[0], recordFormat)
	}
	if value != nil && (len(value) == 0 || value[0] != recordFormat) {
		return op, nil, fmt.Errorf("value of record key %q: it does not start with format byte %d", key, recordFormat)
	}
	if bytes.Equal(key, storePointKey) {
		if value == nil {
			return op, nil, errors.New("a tombstone of the restore point, which is never deleted")
		}
		return op, value[1:], nil
	}
	op = store.Op{Key: key[1:], Delete: value == nil}
	if value != nil {
		op.Value = value[1:]
	}
	return op, nil, nil
}

// restorePoint is a token no restore of the transactional id ever wrote
// before: its producer id and epoch (bumped by every new owner), and the
// owner's count of restores.
func restorePoint(ctx context.Context, cl *kgo.Client, txnID string, n uint64) ([]byte, error) {
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return nil, explainFenced(txnID, fmt.Errorf("cluster: %s: producer id: %w", txnID, err))
	}
	point := binary.BigEndian.AppendUint64(nil, uint64(id))
	point = binary.BigEndian.AppendUint16(point, uint16(epoch))
	return binary.BigEndian.AppendUint64(point, n), nil
}

// readToRestorePoint reads a topic partition from its start,
// read_committed, handing each record to each until it reports that the
// record is the restore point this reader wrote.
func readToRestorePoint(ctx context.Context, opts []kgo.Opt, topic string, partition int32, each func(*kgo.Record) (found bool, err error)) error {
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	records := 0
	for found := false; !found; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cluster: restoring %s partition %d, after %d records: %w", topic, partition, records, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("cluster: restoring %s partition %d: %w", t, p, err))
		})
		if ferr != nil {
			return ferr
		}
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			if derr != nil || found {
				return
			}
			records++
			found, derr = each(r)
		})
		if derr != nil {
			return derr
		}
	}
	return nil
}
