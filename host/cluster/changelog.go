package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

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
	// ChangeRestorePoint is written by a restore (see
	// [Committer.Restore]) to know where the changelog ends; it holds no
	// data of the partition.
	ChangeRestorePoint ChangeKind = 'r'
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeState:
		return "state"
	case ChangeTimer:
		return "timer"
	case ChangeMeta:
		return "metadata"
	case ChangeRestorePoint:
		return "restore point"
	}
	return fmt.Sprintf("kind %q", byte(k))
}

// recordFormat is the first byte of every changelog key and value and of
// every stream record's value, so that a later format can be told apart.
const recordFormat = 1

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
	// Point is a restore point's token.
	Point []byte
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
	k := []byte{recordFormat, byte(c.Kind)}
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
		if c.Kind == ChangeMeta || c.Kind == ChangeRestorePoint {
			return nil, fmt.Errorf("cluster: a %s is replaced, never deleted", c.Kind)
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
	case ChangeRestorePoint:
		body = c.Point
	default:
		return nil, fmt.Errorf("cluster: a change of %s", c.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: encoding a %s change: %w", c.Kind, err)
	}
	r.Value = append([]byte{recordFormat}, body...)
	return r, nil
}

// DecodeChange reads a changelog record's key and value (nil for a
// tombstone) back into a change, refusing anything [Change.Record] does
// not write with an error that names the part at fault.
func DecodeChange(key, value []byte) (Change, error) {
	if len(key) < 2 {
		return Change{}, fmt.Errorf("record key of %d bytes: a changelog key has a format byte and a kind", len(key))
	}
	if key[0] != recordFormat {
		return Change{}, fmt.Errorf("record key: format %d, and this flowhost reads format %d", key[0], recordFormat)
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
	case ChangeMeta, ChangeRestorePoint:
		if len(rest) != 0 {
			return Change{}, fmt.Errorf("record key of the %s: %d bytes after the kind, and it has none", c.Kind, len(rest))
		}
		if c.Delete {
			return Change{}, fmt.Errorf("a tombstone of the %s, which is never deleted", c.Kind)
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
	if len(value) == 0 || value[0] != recordFormat {
		return Change{}, fmt.Errorf("value of a %s of key %q: it does not start with format byte %d", c.Kind, c.Key, recordFormat)
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
	case ChangeRestorePoint:
		c.Point = bytes.Clone(body)
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
	// records compaction had not removed yet included, restore points
	// not): its cost.
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

// Restore reads the partition's changelog to its end, with
// read_committed, and returns what it holds: the state, timers and
// metadata of the committed epochs, as the partition's new owner takes it
// over. Call it after [NewCommitter], which fenced every earlier owner,
// and before the first [Committer.Commit].
//
// Where the changelog ends is known by writing to it: Restore first
// commits a restore point (a record of its own record key, replaced by
// the next restore, so compaction keeps one) and reads until it. The
// topic's last stable offset would not do: compaction may remove the
// records just before it (an aborted transaction and its marker, once a
// segment rolled), and a read would wait for offsets that are gone.
func (c *Committer) Restore(ctx context.Context) (*Image, error) {
	c.restores++
	point, err := restorePoint(ctx, c.cl, c.txnID, c.restores)
	if err != nil {
		return nil, err
	}
	if err := c.Commit(ctx, Epoch{Changes: []Change{{Kind: ChangeRestorePoint, Point: point}}}); err != nil {
		return nil, fmt.Errorf("cluster: restoring %s partition %d: writing the restore point: %w", c.topic, c.cfg.Partition, err)
	}
	im := newImage()
	err = readToRestorePoint(ctx, c.cfg.Opts, c.topic, c.cfg.Partition, func(r *kgo.Record) (bool, error) {
		ch, err := DecodeChange(r.Key, r.Value)
		if err != nil {
			return false, fmt.Errorf("cluster: changelog %s partition %d offset %d: %w", c.topic, c.cfg.Partition, r.Offset, err)
		}
		if ch.Kind == ChangeRestorePoint {
			return bytes.Equal(ch.Point, point), nil
		}
		im.apply(ch)
		im.Records++
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return im, nil
}
