package ordering

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
)

// PartitionOf returns the partition in [0, partitions) that owns key among
// a computation's partitions. It panics if partitions < 1.
//
// The key is hashed with 64-bit FNV-1a, whose bits are then mixed with the
// finalizer of MurmurHash3 (fmix64) so that short keys differing in one
// byte still spread over the high bits. Partition p owns the hash range
// [p*2^64/partitions, (p+1)*2^64/partitions): Flow's model of partitions
// owning key ranges, applied to the hash. Doubling the partitions therefore
// splits every range in two; partition p's keys go to 2p and 2p+1.
//
// Keyed state and timers are stored by the partition this function picks,
// so the hash and the range rule are part of flowhost's stored format:
// they will not change between versions, and the test pins them.
func PartitionOf(key string, partitions int) int {
	if partitions < 1 {
		panic(fmt.Sprintf("ordering: PartitionOf(%q, %d): partitions must be >= 1", key, partitions))
	}
	hi, _ := bits.Mul64(keyHash(key), uint64(partitions))
	return int(hi)
}

// keyHash is FNV-1a 64 followed by fmix64. It is written out rather than
// taken from hash/fnv so that hashing a key allocates nothing.
func keyHash(key string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Sender names a sending partition: a computation's partition, or a source
// stream's partition (sources send too). Every Sender has its own TaskID
// counter and its own FIFO lanes.
type Sender struct {
	// Computation is the computation or source stream name.
	Computation string
	// Partition is the sender's partition index.
	Partition int
}

func (s Sender) compare(o Sender) int {
	if c := strings.Compare(s.Computation, o.Computation); c != 0 {
		return c
	}
	return cmp.Compare(s.Partition, o.Partition)
}

// String returns "name/pN", the form message ids use for partitions.
func (s Sender) String() string { return fmt.Sprintf("%s/p%d", s.Computation, s.Partition) }

// RouterConfig is the immutable shape of a [Router].
type RouterConfig struct {
	// Partitions maps every destination computation to its number of
	// partitions (>= 1).
	Partitions map[string]int
	// Cap bounds the bytes ([Message.Size]) queued per destination
	// partition; 0 means [DefaultRouterCap].
	Cap int64
}

// DefaultRouterCap is the byte bound of a destination partition when
// [RouterConfig] gives none: room for more than one full batch at
// [DefaultBatchLimits] (10 MiB), so a receiver that drains one batch's worth
// at a time never finds its sender blocked with less than a batch queued.
const DefaultRouterCap = 16 << 20

var (
	// ErrFull is returned by [Router.Send] when the destination partition
	// holds its byte bound: nothing was queued, and the sender should
	// retry once the destination has drained (backpressure, never loss).
	ErrFull = errors.New("ordering: destination partition is full")
	// ErrRouterConfig is wrapped by every error of [NewRouter].
	ErrRouterConfig = errors.New("invalid router configuration")
	// ErrUnknownDestination is wrapped by the error of [Router.Send] for a
	// destination computation the router was not configured with.
	ErrUnknownDestination = errors.New("ordering: unknown destination computation")
)

// Router carries messages from sending partitions to the partitions of
// their destination computations, FIFO per (sending partition,
// destination computation, destination key): Flow's
// distribution_ordering = strict, the route on which the seed's
// derived-message guarantee rests. If a sender sends A before B to one
// destination with one key, the destination partition is handed A before
// B.
//
// # Order across lanes
//
// A destination partition receives from several lanes (one per sender and
// key). It is handed, among the lanes' first messages, the one with the
// smallest AlignmentTimestamp, then the smallest TaskID, then the lowest
// (sender computation, sender partition, key). This is the sending-side
// priority of Flow (earliest alignment first, TaskID on ties) restricted to
// what FIFO lanes allow, and it depends only on what is queued, not on the
// order senders called Send in. The receiving [Merge] reorders by stream
// anyway; the lane order matters when a receiver takes only part of what
// is queued.
//
// # Bounds
//
// Each destination partition holds at most [RouterConfig.Cap] bytes: Send
// returns [ErrFull] rather than exceed it, except that an empty partition
// always accepts one message, however large, so that nothing can be stuck
// forever. Messages are never dropped.
//
// # Cost
//
// Send is one map lookup for the sender, one for the lane and O(1) queueing
// (O(log L) when a lane of L non-empty lanes starts anew); handing out a
// message is O(log L). Emptied lanes are recycled, so a steady state
// allocates nothing.
//
// A queued message must not be modified until handed out. A Router is not
// safe for concurrent use: the host serialises access.
type Router struct {
	cap     int64
	dests   map[string]*routerDest
	senders map[Sender]*TaskID
	free    []*routerLane
}

type routerDest struct {
	parts []routerPart
}

// routerPart is the queue of one destination partition.
type routerPart struct {
	// lanes holds the non-empty lanes by (sender, key).
	lanes map[laneID]*routerLane
	// heads orders the non-empty lanes by their first message.
	heads binHeap[*routerLane]
	len   int
	bytes int64
}

type laneID struct {
	from Sender
	key  string
}

// routerLane is one FIFO: q[head:] are the queued messages, oldest first.
type routerLane struct {
	id   laneID
	q    []*Message
	head int
}

// laneTie orders lanes whose first messages have equal (Alignment, TaskID).
func laneTie(a, b *routerLane) bool {
	if c := a.id.from.compare(b.id.from); c != 0 {
		return c < 0
	}
	return a.id.key < b.id.key
}

// routerFreeMax bounds the recycled lanes kept, and routerLaneKeep the
// queue capacity a recycled lane may keep, so a burst does not pin memory.
const (
	routerFreeMax  = 4096
	routerLaneKeep = 256
)

// NewRouter returns an empty Router for the destination computations of
// cfg. Destination names must be valid ([CheckName]) with at least one
// partition, and Cap must not be negative; errors wrap [ErrRouterConfig].
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Cap < 0 {
		return nil, fmt.Errorf("%w: cap %d is negative", ErrRouterConfig, cfg.Cap)
	}
	r := &Router{
		cap:     cfg.Cap,
		dests:   make(map[string]*routerDest, len(cfg.Partitions)),
		senders: make(map[Sender]*TaskID),
	}
	if r.cap == 0 {
		r.cap = DefaultRouterCap
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Partitions)) {
		n := cfg.Partitions[name]
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("%w: destination: %v", ErrRouterConfig, err)
		}
		if n < 1 {
			return nil, fmt.Errorf("%w: destination %q: %d partitions, want at least 1", ErrRouterConfig, name, n)
		}
		d := &routerDest{parts: make([]routerPart, n)}
		for i := range d.parts {
			d.parts[i].lanes = make(map[laneID]*routerLane)
			d.parts[i].heads.tie = laneTie
		}
		r.dests[name] = d
	}
	return r, nil
}

// Partitions returns the number of partitions of destination to, or 0 if
// the router does not know it.
func (r *Router) Partitions(to string) int {
	if d := r.dests[to]; d != nil {
		return len(d.parts)
	}
	return 0
}

// Send queues m from sender from for destination computation to, in the
// partition PartitionOf(m.Key, partitions) and at the end of the lane
// (from, to, m.Key). It gives m the sender's next TaskID (the first is 1)
// and sets m.From.
//
// If the destination partition cannot take m within its byte bound, Send
// returns [ErrFull] and changes nothing: m gets no TaskID and the counter
// does not move, so TaskIDs count exactly the messages queued.
func (r *Router) Send(from Sender, to string, m *Message) error {
	return r.send(from, to, m, true, false)
}

// SendAssigned is Send for a sender that numbers its messages itself (a
// host that stores each message under its TaskID before handing it over):
// m keeps its TaskID, which must be greater than the last one from has
// queued here, and becomes from's last.
func (r *Router) SendAssigned(from Sender, to string, m *Message) error {
	if last := r.LastTask(from); m.Task <= last {
		return fmt.Errorf("ordering: message %v from %v has TaskID %d, not above the last queued %d", m.ID, from, m.Task, last)
	}
	return r.send(from, to, m, false, false)
}

// Restore queues m with the TaskID it carries, ignoring the byte bound: it
// rebuilds a destination partition from a commit, where everything queued
// before a restart must be queued again. Later Sends wait (ErrFull) until
// the partition has drained below its bound. Restore messages of a sender
// in TaskID order, as Send queued them.
func (r *Router) Restore(from Sender, to string, m *Message) error {
	if last := r.LastTask(from); m.Task <= last {
		return fmt.Errorf("ordering: restoring message %v from %v with TaskID %d, not above the last queued %d", m.ID, from, m.Task, last)
	}
	return r.send(from, to, m, false, true)
}

func (r *Router) send(from Sender, to string, m *Message, assign, force bool) error {
	d := r.dests[to]
	if d == nil {
		return fmt.Errorf("%w %q (message %v from %v)", ErrUnknownDestination, to, m.ID, from)
	}
	p := &d.parts[PartitionOf(m.Key, len(d.parts))]
	size := m.Footprint()
	if !force && p.len > 0 && p.bytes+size > r.cap {
		return ErrFull
	}
	task := r.senders[from]
	if task == nil {
		task = new(TaskID)
		r.senders[from] = task
	}
	if assign {
		*task++
		m.Task = *task
	} else {
		*task = m.Task
	}
	m.From = from

	id := laneID{from: from, key: m.Key}
	l := p.lanes[id]
	if l == nil {
		l = r.newLane(id)
		p.lanes[id] = l
		l.q = append(l.q, m)
		p.heads.push(laneItem(l))
	} else {
		l.q = append(l.q, m)
	}
	p.len++
	p.bytes += size
	return nil
}

// laneItem is the heap entry of a non-empty lane, keyed by its first
// message.
func laneItem(l *routerLane) heapItem[*routerLane] {
	m := l.q[l.head]
	return heapItem[*routerLane]{key: heapKey{primary: m.Time.Alignment, secondary: uint64(m.Task)}, val: l}
}

func (r *Router) newLane(id laneID) *routerLane {
	if n := len(r.free); n > 0 {
		l := r.free[n-1]
		r.free[n-1] = nil
		r.free = r.free[:n-1]
		l.id = id
		return l
	}
	return &routerLane{id: id}
}

// part returns the queue of one destination partition; an unknown
// destination or a partition out of range is the caller's bug.
func (r *Router) part(to string, partition int) *routerPart {
	d := r.dests[to]
	if d == nil {
		panic(fmt.Sprintf("ordering: Router: unknown destination computation %q", to))
	}
	if partition < 0 || partition >= len(d.parts) {
		panic(fmt.Sprintf("ordering: Router: destination %q has %d partitions, not %d", to, len(d.parts), partition))
	}
	return &d.parts[partition]
}

// Peek returns the message Next would hand out, without removing it; nil
// when the partition has nothing queued. It panics if to is unknown or
// partition out of range.
func (r *Router) Peek(to string, partition int) *Message {
	p := r.part(to, partition)
	if p.heads.len() == 0 {
		return nil
	}
	l := p.heads.top().val
	return l.q[l.head]
}

// Next removes and returns the next message for partition partition of
// destination to, in the order described on [Router]; nil when it has
// nothing queued. It panics if to is unknown or partition out of range.
func (r *Router) Next(to string, partition int) *Message {
	p := r.part(to, partition)
	if p.heads.len() == 0 {
		return nil
	}
	return r.take(p)
}

// Drain hands partition partition of destination to its queued messages in
// order, one call of accept each, for as long as accept takes them. accept
// reports whether it took the message; the first message it refuses stays
// queued at the head of its lane and ends the drain. Drain returns the
// number taken. accept must not use the router. It panics if to is unknown
// or partition out of range.
func (r *Router) Drain(to string, partition int, accept func(*Message) bool) int {
	p := r.part(to, partition)
	n := 0
	for p.heads.len() > 0 {
		l := p.heads.top().val
		if !accept(l.q[l.head]) {
			break
		}
		r.take(p)
		n++
	}
	return n
}

// take removes the first message of the first lane of p.
func (r *Router) take(p *routerPart) *Message {
	l := p.heads.top().val
	m := l.q[l.head]
	l.q[l.head] = nil
	l.head++
	p.len--
	p.bytes -= m.Footprint()
	if l.head < len(l.q) {
		// Keep the dead prefix from growing without bound in a lane that
		// never empties.
		if l.head >= 64 && l.head >= len(l.q)/2 {
			k := copy(l.q, l.q[l.head:])
			clear(l.q[k:])
			l.q = l.q[:k]
			l.head = 0
		}
		p.heads.fix(0, laneItem(l))
		return m
	}
	p.heads.removeAt(0)
	delete(p.lanes, l.id)
	r.recycle(l)
	return m
}

func (r *Router) recycle(l *routerLane) {
	if len(r.free) >= routerFreeMax {
		return
	}
	l.id = laneID{}
	l.head = 0
	if cap(l.q) > routerLaneKeep {
		l.q = nil
	} else {
		l.q = l.q[:0]
	}
	r.free = append(r.free, l)
}

// Len returns the number of messages queued for partition partition of
// destination to. It panics if to is unknown or partition out of range.
func (r *Router) Len(to string, partition int) int { return r.part(to, partition).len }

// Bytes returns the sum of [Message.Size] over the messages queued for
// partition partition of destination to. It panics if to is unknown or
// partition out of range.
func (r *Router) Bytes(to string, partition int) int64 { return r.part(to, partition).bytes }

// LastTask returns the last TaskID given to a message of from; 0 if none.
// The host stores it with a sender's committed outputs.
func (r *Router) LastTask(from Sender) TaskID {
	if t := r.senders[from]; t != nil {
		return *t
	}
	return 0
}

// ResumeTasks makes from's next TaskID last+1, so that a sender restarted
// from a commit continues its counter instead of reusing TaskIDs.
func (r *Router) ResumeTasks(from Sender, last TaskID) {
	t := r.senders[from]
	if t == nil {
		t = new(TaskID)
		r.senders[from] = t
	}
	*t = last
}
