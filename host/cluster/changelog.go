package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// ChangeKind is what a changelog record is about.
type ChangeKind byte

// The kinds of changelog records. Their bytes are part of the record
// format: they never change.
const (
	// ChangeState is a key's state: set, or deleted by a tombstone.
	ChangeState ChangeKind = 's'
	// ChangeTimer is a pending timer of a key and trigger: set, or
	// deleted (fired or cancelled) by a tombstone.
	ChangeTimer ChangeKind = 't'
	// ChangeMeta is the partition's metadata (epoch, clocks, bias,
	// TaskIds, watermarks); it is replaced, never deleted.
	ChangeMeta ChangeKind = 'm'
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeState:
		return "state"
	case ChangeTimer:
		return "timer"
	case ChangeMeta:
		return "metadata"
	}
	return fmt.Sprintf("kind %q", byte(k))
}

// changeFormat is the first byte of every changelog key and value, so
// that a later format can be told apart.
const changeFormat = 1

// Change is one record of a computation partition's changelog. The
// changelog topic is compacted: Kafka keeps the latest record of each
// record key, and drops a key whose latest record is a tombstone (a
// delete). So a key's record key is its kind and identity alone, and what
// survives compaction is exactly the partition's committed state, timers
// and metadata.
type Change struct {
	Kind ChangeKind
	// Key is the state's or timer's key text (see package keys).
	Key string
	// Trigger is a timer's TriggerTimestamp.
	Trigger int64
	// Delete makes the record a tombstone: the state or timer is gone.
	Delete bool
	// State is a set state's value (it may be empty, which is not a
	// delete).
	State []byte
	// Timer is a set timer; its Key and Trigger are the change's.
	Timer ordering.Timer
	// Meta is the partition's metadata.
	Meta store.PartitionMeta
}

// StateChange sets key's state to value, or deletes it when del.
func StateChange(key string, value []byte, del bool) Change {
	return Change{Kind: ChangeState, Key: key, State: value, Delete: del}
}

// TimerChange sets t, or deletes the timer of t.Key and t.Trigger when del.
func TimerChange(t ordering.Timer, del bool) Change {
	return Change{Kind: ChangeTimer, Key: t.Key, Trigger: t.Trigger, Timer: t, Delete: del}
}

// MetaChange records the partition's metadata.
func MetaChange(m store.PartitionMeta) Change { return Change{Kind: ChangeMeta, Meta: m} }

// wireTimer is a timer's value: what its record key does not hold.
type wireTimer struct {
	Event   int64  `cbor:"1,keyasint"`
	ID      string `cbor:"2,keyasint"`
	Payload []byte `cbor:"3,keyasint,omitempty"`
}

// recordKey is the change's record key: format, kind, then the identity
// (a state's key text; a timer's trigger, big-endian, then its key text;
// nothing for the metadata).
func (c Change) recordKey() []byte {
	k := []byte{changeFormat, byte(c.Kind)}
	switch c.Kind {
	case ChangeTimer:
		k = binary.BigEndian.AppendUint64(k, uint64(c.Trigger))
		k = append(k, c.Key...)
	case ChangeState:
		k = append(k, c.Key...)
	}
	return k
}

// Record returns the change as a record of partition of the changelog
// topic. A delete's value is nil, Kafka's tombstone; every other value
// starts with the format byte, so an empty state is not a tombstone.
func (c Change) Record(topic string, partition int32) (*kgo.Record, error) {
	r := &kgo.Record{Topic: topic, Partition: partition, Key: c.recordKey()}
	if c.Delete {
		if c.Kind == ChangeMeta {
			return nil, errors.New("cluster: a partition's metadata is replaced, never deleted")
		}
		return r, nil
	}
	var body []byte
	var err error
	switch c.Kind {
	case ChangeState:
		body = c.State
	case ChangeTimer:
		body, err = store.MarshalCBOR(&wireTimer{Event: c.Timer.Event, ID: c.Timer.ID.String(), Payload: c.Timer.Payload})
	case ChangeMeta:
		body, err = store.MarshalCBOR(&c.Meta)
	default:
		return nil, fmt.Errorf("cluster: a change of %s", c.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: encoding a %s change: %w", c.Kind, err)
	}
	r.Value = append([]byte{changeFormat}, body...)
	return r, nil
}

// DecodeChange reads a changelog record's key and value (nil for a
// tombstone) back into a change, refusing anything [Change.Record] does
// not write with an error that names the part at fault.
func DecodeChange(key, value []byte) (Change, error) {
	if len(key) < 2 {
		return Change{}, fmt.Errorf("record key of %d bytes: a changelog key has a format byte and a kind", len(key))
	}
	if key[0] != changeFormat {
		return Change{}, fmt.Errorf("record key: format %d, and this flowhost reads format %d", key[0], changeFormat)
	}
	c := Change{Kind: ChangeKind(key[1]), Delete: value == nil}
	rest := key[2:]
	switch c.Kind {
	case ChangeState:
		c.Key = string(rest)
	case ChangeTimer:
		if len(rest) < 8 {
			return Change{}, fmt.Errorf("record key of a timer: %d bytes after the kind, and the trigger alone takes 8", len(rest))
		}
		c.Trigger = int64(binary.BigEndian.Uint64(rest))
		c.Key = string(rest[8:])
	case ChangeMeta:
		if len(rest) != 0 {
			return Change{}, fmt.Errorf("record key of the metadata: %d bytes after the kind, and it has none", len(rest))
		}
		if c.Delete {
			return Change{}, errors.New("a tombstone of the metadata, which is never deleted")
		}
	default:
		return Change{}, fmt.Errorf("record key: unknown kind %q", key[1])
	}
	if !utf8.ValidString(c.Key) {
		return Change{}, fmt.Errorf("record key of a %s: key %q is not UTF-8", c.Kind, c.Key)
	}
	if c.Delete {
		return c, nil
	}
	if len(value) == 0 || value[0] != changeFormat {
		return Change{}, fmt.Errorf("value of a %s of key %q: it does not start with format byte %d", c.Kind, c.Key, changeFormat)
	}
	body := value[1:]
	switch c.Kind {
	case ChangeState:
		c.State = bytes.Clone(body)
	case ChangeTimer:
		var w wireTimer
		if err := store.UnmarshalCBOR(body, &w); err != nil {
			return Change{}, fmt.Errorf("value of the timer of key %q at %d: %w", c.Key, c.Trigger, err)
		}
		id, err := ordering.ParseMessageID(w.ID)
		if err != nil {
			return Change{}, fmt.Errorf("value of the timer of key %q at %d: id: %w", c.Key, c.Trigger, err)
		}
		c.Timer = ordering.Timer{Key: c.Key, Trigger: c.Trigger, Event: w.Event, ID: id, Payload: w.Payload}
	case ChangeMeta:
		if err := store.UnmarshalCBOR(body, &c.Meta); err != nil {
			return Change{}, fmt.Errorf("value of the metadata: %w", err)
		}
	}
	return c, nil
}

// TimerRef names a pending timer: one per key and trigger.
type TimerRef struct {
	Key     string
	Trigger int64
}

// Image is what a computation partition's changelog holds once read to
// its end: the partition's committed keyed state, pending timers and
// metadata, as a new owner of the partition restores them.
type Image struct {
	State  map[string][]byte
	Timers map[TimerRef]ordering.Timer
	// Meta is the metadata of the last committed epoch; HasMeta is false
	// before the first.
	Meta    store.PartitionMeta
	HasMeta bool
	// Records is how many records the restore read (tombstones and
	// records compaction had not removed yet included): its cost.
	Records int
}

func newImage() *Image {
	return &Image{State: map[string][]byte{}, Timers: map[TimerRef]ordering.Timer{}}
}

// apply folds one change into the image, as compaction would.
func (im *Image) apply(c Change) {
	switch c.Kind {
	case ChangeState:
		if c.Delete {
			delete(im.State, c.Key)
		} else {
			im.State[c.Key] = c.State
		}
	case ChangeTimer:
		ref := TimerRef{c.Key, c.Trigger}
		if c.Delete {
			delete(im.Timers, ref)
		} else {
			im.Timers[ref] = c.Timer
		}
	case ChangeMeta:
		im.Meta, im.HasMeta = c.Meta, true
	}
}

// SortedTimers returns the image's timers by trigger, then key.
func (im *Image) SortedTimers() []ordering.Timer {
	refs := slices.SortedFunc(maps.Keys(im.Timers), func(a, b TimerRef) int {
		if a.Trigger != b.Trigger {
			if a.Trigger < b.Trigger {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	out := make([]ordering.Timer, len(refs))
	for i, r := range refs {
		out[i] = im.Timers[r]
	}
	return out
}

// Restore reads partition of a changelog topic from its start to its last
// stable offset, with read_committed, and returns what it holds: only
// committed transactions count, and a transaction still open on the
// partition (a host that died mid-epoch) is waited for until the broker
// aborts it or its producer's successor fences it, since the last stable
// offset stays before it until then.
//
// opts are the connection's options (seed brokers, TLS, SASL); Restore
// makes a client of its own, which reads that one partition and joins no
// group.
func Restore(ctx context.Context, topic string, partition int32, opts ...kgo.Opt) (*Image, error) {
	admCl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cluster: the end of changelog %s: %w", topic, err)
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok {
		return nil, fmt.Errorf("cluster: changelog %s has no partition %d", topic, partition)
	}
	if end.Err != nil {
		return nil, fmt.Errorf("cluster: the end of changelog %s partition %d: %w", topic, partition, end.Err)
	}
	im := newImage()
	if end.Offset <= 0 {
		return im, nil
	}
	// Control records (the commit and abort markers) are kept so that the
	// read sees every offset up to the end: the last offset before the
	// last stable offset is a marker whenever the last write was a
	// transaction, and aborted records are left out by read_committed.
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	next := int64(0)
	for next < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cluster: restoring changelog %s partition %d, at offset %d of %d: %w", topic, partition, next, end.Offset, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("cluster: restoring changelog %s partition %d: %w", t, p, err))
		})
		if ferr != nil {
			return nil, ferr
		}
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			if derr != nil || r.Offset >= end.Offset {
				return
			}
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			c, err := DecodeChange(r.Key, r.Value)
			if err != nil {
				derr = fmt.Errorf("cluster: changelog %s partition %d offset %d: %w", topic, partition, r.Offset, err)
				return
			}
			im.apply(c)
			im.Records++
		})
		if derr != nil {
			return nil, derr
		}
	}
	return im, nil
}
