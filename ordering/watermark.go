package ordering

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// NoWatermark is the watermark of a stream that has none yet: it is below
// every timestamp, so nothing is due and nothing is late.
const NoWatermark int64 = math.MinInt64

// Flow's defaults for a source stream's event watermark.
const (
	// DefaultOutOfOrdernessBound is how far behind the largest EventTimestamp
	// read the watermark of a source partition stays (Flow's
	// out_of_orderness_bound).
	DefaultOutOfOrdernessBound = time.Minute
	// DefaultIdleDuration is how long a source partition must go without a
	// record before it may be left out of the minimum (Flow's
	// idle_partitions.duration).
	DefaultIdleDuration = time.Minute
	// DefaultIdleMaxRatio is the largest share of a source's partitions that
	// may be left out as idle (Flow's idle_partitions.max_ratio).
	DefaultIdleMaxRatio = 0.4
)

// WatermarkConfig configures the event watermark of one source stream. Its
// fields are taken literally, zero included; start from
// [DefaultWatermarkConfig] to get Flow's defaults.
type WatermarkConfig struct {
	// OutOfOrdernessBound is how late, in event time, a record may be
	// relative to the records read before it without being late. >= 0.
	OutOfOrdernessBound time.Duration
	// IdleDuration is how long, in system time, a partition must have had no
	// record appended or read, and none waiting, to count as idle. >= 0:
	// 0 turns idle detection off (no partition, and no source, is ever
	// idle).
	IdleDuration time.Duration
	// IdleMaxRatio bounds the idle partitions left out of the minimum, while
	// some partition is not idle, to floor(IdleMaxRatio * partitions), and
	// never all of them. In [0, 1]: 0 never leaves any out, 1 all but one.
	// It does not bound [SourceWatermark.SourceIdle]: a source whose every
	// partition is idle is idle as a whole, whatever the ratio.
	IdleMaxRatio float64
}

// DefaultWatermarkConfig returns Flow's defaults: a one-minute
// out-of-orderness bound, partitions idle after one minute, at most 40% of
// them left out.
func DefaultWatermarkConfig() WatermarkConfig {
	return WatermarkConfig{
		OutOfOrdernessBound: DefaultOutOfOrdernessBound,
		IdleDuration:        DefaultIdleDuration,
		IdleMaxRatio:        DefaultIdleMaxRatio,
	}
}

// ErrWatermarkConfig is wrapped by every error of [WatermarkConfig.Validate].
var ErrWatermarkConfig = errors.New("invalid watermark config")

// Validate reports the first field out of range, named as in a pipeline
// spec.
func (c WatermarkConfig) Validate() error {
	switch {
	case c.OutOfOrdernessBound < 0:
		return fmt.Errorf("%w: out_of_orderness_bound %v is negative", ErrWatermarkConfig, c.OutOfOrdernessBound)
	case c.IdleDuration < 0:
		return fmt.Errorf("%w: idle_partitions.duration %v is negative", ErrWatermarkConfig, c.IdleDuration)
	case !(c.IdleMaxRatio >= 0 && c.IdleMaxRatio <= 1): // also rejects NaN
		return fmt.Errorf("%w: idle_partitions.max_ratio %v is outside [0, 1]", ErrWatermarkConfig, c.IdleMaxRatio)
	}
	return nil
}

// maxIdle is how many of n partitions may be left out as idle. The epsilon
// keeps ratios such as 0.29 from losing a partition to float rounding
// (0.29*100 is 28.999999999999996); at least one partition always counts.
func (c WatermarkConfig) maxIdle(n int) int {
	return min(int(math.Floor(c.IdleMaxRatio*float64(n)+1e-9)), n-1)
}

// wmSatSub returns a - b for b >= 0, saturating at math.MinInt64 so that
// NoWatermark minus a bound stays NoWatermark.
func wmSatSub(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// aheadWindow holds the minimum and maximum of the values appended to a
// FIFO and not yet taken from its front, without keeping the values: each
// deque keeps only the entries that can still become the extreme (the
// classic sliding-window minimum), so push and take are amortised O(1) and
// memory is what the extremes need, not the backlog.
type aheadWindow struct {
	pushed, taken uint64     // sequence numbers: pushed - taken values wait
	mins, maxs    aheadDeque // increasing resp. decreasing value, by seq
}

type aheadElement struct {
	seq   uint64
	value int64
}

// aheadDeque is a slice used as a deque: items[head:] are live.
type aheadDeque struct {
	items []aheadElement
	head  int
}

// pushBack appends e after dropping the tail entries that e dominates
// (drop reports whether a tail value can no longer be the extreme).
func (d *aheadDeque) pushBack(e aheadElement, drop func(tail, v int64) bool) {
	n := len(d.items)
	for n > d.head && drop(d.items[n-1].value, e.value) {
		n--
	}
	d.items = append(d.items[:n], e)
}

// dropBefore removes the front entries older than seq. The dead prefix is
// reclaimed once it is half the slice, which keeps take amortised O(1)
// without letting the backing array creep forward.
func (d *aheadDeque) dropBefore(seq uint64) {
	for d.head < len(d.items) && d.items[d.head].seq < seq {
		d.head++
	}
	if d.head == len(d.items) {
		d.items, d.head = d.items[:0], 0
	} else if d.head > len(d.items)/2 {
		n := copy(d.items, d.items[d.head:])
		d.items, d.head = d.items[:n], 0
	}
}

func (d *aheadDeque) front() int64 { return d.items[d.head].value }

func aheadDominatesMin(tail, v int64) bool { return tail >= v }
func aheadDominatesMax(tail, v int64) bool { return tail <= v }

func (w *aheadWindow) len() uint64 { return w.pushed - w.taken }

func (w *aheadWindow) push(v int64) {
	e := aheadElement{seq: w.pushed, value: v}
	w.pushed++
	w.mins.pushBack(e, aheadDominatesMin)
	w.maxs.pushBack(e, aheadDominatesMax)
}

// take drops the oldest value; it reports false when nothing waits.
func (w *aheadWindow) take() bool {
	if w.pushed == w.taken {
		return false
	}
	w.taken++
	w.mins.dropBefore(w.taken)
	w.maxs.dropBefore(w.taken)
	return true
}

// min and max are valid only while len() > 0.
func (w *aheadWindow) min() int64 { return w.mins.front() }
func (w *aheadWindow) max() int64 { return w.maxs.front() }

// sourcePartition is the event-time view of one source partition.
type sourcePartition struct {
	maxRead  int64 // MaxTs; NoWatermark before the first read
	ahead    aheadWindow
	lastSeen int64 // system time of the last append or read
}

// SourceWatermark computes the event watermark of one source stream from
// what the host tells it about each partition: records appended to the
// partition's queue and records read from it, with their EventTimestamps.
//
// Per partition the watermark is Flow's
//
//	max(MaxTs - bound, min(MinAheadTs, MaxAheadTs - bound))
//
// where bound is OutOfOrdernessBound, MaxTs is the largest EventTimestamp
// read so far, and MinAheadTs and MaxAheadTs are the smallest and largest
// EventTimestamps of the records appended but not yet read (the ahead
// window). With nothing ahead the second term is absent and the watermark
// is MaxTs - bound; with nothing read either it is NoWatermark. The ahead
// term lets a partition whose backlog is known to be recent get ahead of
// its reads, but never past its oldest unread record unless MaxTs already
// did. The host decides what "ahead" covers (the whole queue for the
// embedded store, the fetched records for a remote log); a host that
// reports no appends gets plain MaxTs - bound.
//
// Over partitions the watermark is the minimum, leaving out idle partitions.
// A partition is idle when nothing waits in its ahead window and no record
// was appended to it or read from it for IdleDuration of system time (since
// the SourceWatermark was created, for a partition never used); with
// IdleDuration 0 no partition is ever idle. At most
// floor(IdleMaxRatio * partitions) are left out, and never all of them;
// when more are idle, those idle the longest (earliest last record) are
// left out first, ties to the lower partition index, so the choice depends
// only on the inputs.
//
// When every partition is idle, the source is idle as a whole
// ([SourceWatermark.SourceIdle]), whatever IdleMaxRatio: its watermark
// stays where it is, and the streams it feeds are expected to leave it out
// of their minimum ([StreamWatermark.SetInputIdle]) until a record is
// appended again. This covers a single-partition source, which
// IdleMaxRatio alone could never leave out.
//
// The published watermark never moves backwards: [SourceWatermark.Watermark]
// returns the maximum of every value computed so far, so a partition
// leaving idleness, or a new ahead record older than the watermark, holds
// the watermark rather than lowering it (the records concerned are late).
//
// All system times are passed in; the type reads no clock. A
// SourceWatermark is not safe for concurrent use.
type SourceWatermark struct {
	cfg       WatermarkConfig
	bound     int64
	idleNanos int64
	maxIdle   int
	parts     []sourcePartition
	published int64
	idle      []int // scratch for Watermark
}

// NewSourceWatermark returns the watermark of a source stream with the
// given number of partitions (>= 1), created at system time now. It fails
// on an invalid config or partition count.
func NewSourceWatermark(partitions int, cfg WatermarkConfig, now int64) (*SourceWatermark, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("%w: source watermark needs at least one partition, got %d", ErrWatermarkConfig, partitions)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &SourceWatermark{
		cfg:       cfg,
		bound:     int64(cfg.OutOfOrdernessBound),
		idleNanos: int64(cfg.IdleDuration),
		maxIdle:   cfg.maxIdle(partitions),
		parts:     make([]sourcePartition, partitions),
		published: NoWatermark,
	}
	for i := range w.parts {
		w.parts[i] = sourcePartition{maxRead: NoWatermark, lastSeen: now}
	}
	return w, nil
}

// Config returns the config the watermark was created with.
func (w *SourceWatermark) Config() WatermarkConfig { return w.cfg }

// Partitions returns the number of partitions.
func (w *SourceWatermark) Partitions() int { return len(w.parts) }

// Appended records that a record with EventTimestamp event was appended to
// partition at system time now and is not read yet. Records must be read in
// the order they were appended, as from a queue. An out-of-range partition
// panics.
func (w *SourceWatermark) Appended(partition int, event, now int64) {
	p := &w.parts[partition]
	p.ahead.push(event)
	p.lastSeen = max(p.lastSeen, now)
}

// Read records that the record with EventTimestamp event was read from
// partition at system time now. It takes the oldest appended record out of
// the ahead window, trusting that it is this one (the window keeps only
// its extremes, not the records); a read with nothing ahead, of a record
// the host never reported appended, only raises MaxTs. An out-of-range
// partition panics.
func (w *SourceWatermark) Read(partition int, event, now int64) {
	p := &w.parts[partition]
	p.ahead.take()
	p.maxRead = max(p.maxRead, event)
	p.lastSeen = max(p.lastSeen, now)
}

// Ahead returns how many records of partition were appended and not read.
func (w *SourceWatermark) Ahead(partition int) int {
	return int(w.parts[partition].ahead.len())
}

// PartitionWatermark returns the watermark of one partition by Flow's
// formula, before the minimum and without monotonicity; NoWatermark when it
// has none.
func (w *SourceWatermark) PartitionWatermark(partition int) int64 {
	p := &w.parts[partition]
	wm := wmSatSub(p.maxRead, w.bound)
	if p.ahead.len() > 0 {
		wm = max(wm, min(p.ahead.min(), wmSatSub(p.ahead.max(), w.bound)))
	}
	return wm
}

// Idle reports whether partition is idle at system time now: idle
// detection on (IdleDuration > 0), nothing ahead and no record appended or
// read for IdleDuration. Whether it is left out of the minimum also depends
// on IdleMaxRatio.
func (w *SourceWatermark) Idle(partition int, now int64) bool {
	p := &w.parts[partition]
	return w.idleNanos > 0 && p.ahead.len() == 0 && now-p.lastSeen >= w.idleNanos
}

// IdlePartitions returns how many partitions are idle at system time now,
// left out of the minimum or not.
func (w *SourceWatermark) IdlePartitions(now int64) int {
	n := 0
	for i := range w.parts {
		if w.Idle(i, now) {
			n++
		}
	}
	return n
}

// SourceIdle reports whether every partition is idle at system time now:
// the source as a whole has had no record for IdleDuration and has none
// waiting. It is false while idle detection is off.
func (w *SourceWatermark) SourceIdle(now int64) bool {
	return w.IdlePartitions(now) == len(w.parts)
}

// NextIdle returns the earliest system time after now at which a
// partition that is not idle at now becomes idle if nothing more is
// appended or read: the time to look again. It reports false when no such
// time is known: idle detection is off, every partition is idle, or those
// that are not have records waiting (reading them is activity, after
// which the host asks again).
func (w *SourceWatermark) NextIdle(now int64) (int64, bool) {
	if w.idleNanos == 0 {
		return 0, false
	}
	next, ok := int64(math.MaxInt64), false
	for i := range w.parts {
		p := &w.parts[i]
		if p.ahead.len() > 0 || w.Idle(i, now) {
			continue
		}
		at := p.lastSeen + w.idleNanos
		if p.lastSeen > math.MaxInt64-w.idleNanos {
			at = math.MaxInt64
		}
		next, ok = min(next, at), true
	}
	if !ok {
		return 0, false
	}
	return next, true
}

// Watermark returns the stream's event watermark at system time now and
// publishes it: the minimum over the partitions not left out as idle,
// raised to the largest value returned before. It is NoWatermark until
// every counted partition has one.
func (w *SourceWatermark) Watermark(now int64) int64 {
	w.idle = w.idle[:0]
	if w.maxIdle > 0 {
		for i := range w.parts {
			if w.Idle(i, now) {
				w.idle = append(w.idle, i)
			}
		}
		if len(w.idle) > w.maxIdle {
			slices.SortFunc(w.idle, func(a, b int) int {
				if c := cmp.Compare(w.parts[a].lastSeen, w.parts[b].lastSeen); c != 0 {
					return c
				}
				return cmp.Compare(a, b)
			})
			w.idle = w.idle[:w.maxIdle]
			slices.Sort(w.idle)
		}
	}
	// maxIdle < partitions, so at least one partition counts and wm is a
	// real partition watermark, never the MaxInt64 start.
	wm := int64(math.MaxInt64)
	next := 0 // w.idle is sorted by partition: walk it alongside
	for i := range w.parts {
		if next < len(w.idle) && w.idle[next] == i {
			next++
			continue
		}
		wm = min(wm, w.PartitionWatermark(i))
	}
	w.published = max(w.published, wm)
	return w.published
}

// Value returns the last published watermark without computing a new one.
func (w *SourceWatermark) Value() int64 { return w.published }

// Resume raises the published watermark to published, the value persisted
// before a restart, so the watermark stays monotone across restarts.
func (w *SourceWatermark) Resume(published int64) {
	w.published = max(w.published, published)
}

// MaxRead returns the largest EventTimestamp read from partition
// (Flow's MaxTs), NoWatermark before the first read.
func (w *SourceWatermark) MaxRead(partition int) int64 { return w.parts[partition].maxRead }

// ResumePartition raises partition's MaxTs to maxRead, the value persisted
// before a restart. Without it a partition that has nothing left to read
// after a restart would have no watermark, and hold the source's minimum
// back until it turned idle, although everything it held was read before.
func (w *SourceWatermark) ResumePartition(partition int, maxRead int64) {
	p := &w.parts[partition]
	p.maxRead = max(p.maxRead, maxRead)
}

// StreamWatermark is the watermark of a stream fed by other streams or by
// source partitions (its inputs): the minimum over the inputs' watermarks,
// lowered to the smallest timestamp still in flight on the stream
// (buffered messages, pending timers), and kept monotone.
//
// Lowering and monotonicity meet in [StreamWatermark.Advance]: the
// candidate min(inputs, in flight) is compared with the value already
// published and the larger one wins. Lowering therefore holds the
// watermark where it is until the in-flight timestamps catch up; it never
// takes back a value already published. A message that enters the flight
// below the published watermark is late with respect to it, exactly as a
// late source record is.
//
// The type does not care which clock it is fed. Given the inputs' event
// watermarks and in-flight EventTimestamps it is the stream's
// EventWatermark; given the inputs' system watermarks and in-flight
// SystemTimestamps it is the stream's SystemWatermark, which for an
// internal stream is exact as long as its inputs' are (see
// [SourceSystemWatermark] for source streams).
//
// An input may be marked idle ([StreamWatermark.SetInputIdle]): a source
// that has had no record for its idle timeout, or a stream whose writer's
// inputs are all idle. An idle input is left out of the minimum, so it
// does not hold back the others. When it is active again it counts again
// at once, with whatever watermark it has: the published value does not
// move back, it holds until the rejoined input has caught up, and the
// input's messages older than it are late. When every input is idle the
// watermark holds where it is (in-flight timestamps cannot raise it
// either): nothing is known about what the inputs will send next, so
// nothing more becomes due until one of them has data again or ends.
//
// A StreamWatermark is not safe for concurrent use.
type StreamWatermark struct {
	inputs    []int64
	idle      []bool
	published int64
}

// NewStreamWatermark returns the watermark of a stream with the given
// number of inputs, all at NoWatermark. A stream has at least one input;
// fewer is a programming error and panics.
func NewStreamWatermark(inputs int) *StreamWatermark {
	if inputs < 1 {
		panic(fmt.Sprintf("ordering: NewStreamWatermark(%d): a stream needs at least one input", inputs))
	}
	in := make([]int64, inputs)
	for i := range in {
		in[i] = NoWatermark
	}
	return &StreamWatermark{inputs: in, idle: make([]bool, inputs), published: NoWatermark}
}

// Inputs returns the number of inputs.
func (w *StreamWatermark) Inputs() int { return len(w.inputs) }

// SetInput sets the watermark of input i, taken as given: an input that
// moves back lowers the candidate but not the published value. An
// out-of-range i panics.
func (w *StreamWatermark) SetInput(i int, wm int64) { w.inputs[i] = wm }

// Input returns the watermark last set for input i.
func (w *StreamWatermark) Input(i int) int64 { return w.inputs[i] }

// SetInputIdle marks input i idle (left out of the minimum) or active. An
// out-of-range i panics.
func (w *StreamWatermark) SetInputIdle(i int, idle bool) { w.idle[i] = idle }

// InputIdle reports whether input i is marked idle.
func (w *StreamWatermark) InputIdle(i int) bool { return w.idle[i] }

// Advance computes and publishes the stream's watermark:
// max(published, min(active inputs..., minInFlight)), where minInFlight
// counts only when ok (something is in flight); with every input idle it
// is published, unchanged. Its arguments match [InFlight.Min] and
// [TimerStore.MinTrigger], so w.Advance(f.Min()) works.
func (w *StreamWatermark) Advance(minInFlight int64, ok bool) int64 {
	c, active := int64(math.MaxInt64), false
	for i, v := range w.inputs {
		if !w.idle[i] {
			c, active = min(c, v), true
		}
	}
	if !active {
		return w.published
	}
	if ok {
		c = min(c, minInFlight)
	}
	w.published = max(w.published, c)
	return w.published
}

// Value returns the last published watermark.
func (w *StreamWatermark) Value() int64 { return w.published }

// Resume raises the published watermark to published, the value persisted
// before a restart.
func (w *StreamWatermark) Resume(published int64) {
	w.published = max(w.published, published)
}

// sourceSystemPartition is the system-time view of one source partition.
type sourceSystemPartition struct {
	ahead aheadWindow
	floor int64 // no future append carries a smaller system time
}

// SourceSystemWatermark computes the SystemWatermark of one source stream.
// Unlike the event watermark it is exact, not a heuristic: it relies on the
// one fact a queue gives, that a partition's write times do not decrease
// (the SystemTimestamp of a source record is its write time unless the
// connector knows better), so the next record can be no older than the
// last one appended.
//
// Per partition the system watermark is the SystemTimestamp of the oldest
// record appended and not yet read (the minimum of the ahead window, which
// also covers a queue whose clock stepped back); with nothing waiting it
// is the partition's floor: the largest of the system times appended, read
// or promised by [SourceSystemWatermark.Heartbeat]. A partition with
// neither has NoWatermark. Over partitions it is the minimum; no partition
// is left out for idleness, since a guess would make it inexact. A quiet
// partition advances through heartbeats instead. The published value never
// moves backwards.
//
// A SourceSystemWatermark is not safe for concurrent use.
type SourceSystemWatermark struct {
	parts     []sourceSystemPartition
	published int64
}

// NewSourceSystemWatermark returns the system watermark of a source stream
// with the given number of partitions. Fewer than one panics.
func NewSourceSystemWatermark(partitions int) *SourceSystemWatermark {
	if partitions < 1 {
		panic(fmt.Sprintf("ordering: NewSourceSystemWatermark(%d): a source needs at least one partition", partitions))
	}
	w := &SourceSystemWatermark{parts: make([]sourceSystemPartition, partitions), published: NoWatermark}
	for i := range w.parts {
		w.parts[i].floor = NoWatermark
	}
	return w
}

// Partitions returns the number of partitions.
func (w *SourceSystemWatermark) Partitions() int { return len(w.parts) }

// Appended records that a record with SystemTimestamp system was appended
// to partition and is not read yet.
func (w *SourceSystemWatermark) Appended(partition int, system int64) {
	p := &w.parts[partition]
	p.ahead.push(system)
	p.floor = max(p.floor, system)
}

// Read records that the oldest appended record of partition, with
// SystemTimestamp system, was read.
func (w *SourceSystemWatermark) Read(partition int, system int64) {
	p := &w.parts[partition]
	p.ahead.take()
	p.floor = max(p.floor, system)
}

// Heartbeat records the queue's promise that no record with a
// SystemTimestamp below system will be appended to partition any more
// (for the embedded store: its append clock). It is how a partition with
// no traffic lets the system watermark advance.
func (w *SourceSystemWatermark) Heartbeat(partition int, system int64) {
	p := &w.parts[partition]
	p.floor = max(p.floor, system)
}

// PartitionWatermark returns one partition's system watermark before the
// minimum and without monotonicity.
func (w *SourceSystemWatermark) PartitionWatermark(partition int) int64 {
	p := &w.parts[partition]
	if p.ahead.len() > 0 {
		return min(p.ahead.min(), p.floor)
	}
	return p.floor
}

// Watermark computes and publishes the stream's system watermark: the
// minimum over partitions, raised to the largest value returned before.
func (w *SourceSystemWatermark) Watermark() int64 {
	wm := w.PartitionWatermark(0)
	for i := 1; i < len(w.parts); i++ {
		wm = min(wm, w.PartitionWatermark(i))
	}
	w.published = max(w.published, wm)
	return w.published
}

// Value returns the last published system watermark.
func (w *SourceSystemWatermark) Value() int64 { return w.published }

// Resume raises the published system watermark to published, the value
// persisted before a restart.
func (w *SourceSystemWatermark) Resume(published int64) {
	w.published = max(w.published, published)
}
