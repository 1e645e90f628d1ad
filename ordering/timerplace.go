package ordering

import (
	"sort"
	"time"
)

// Where a timer fires in a computation partition's input.
//
// A partition consumes its input in merge order m_1, m_2, ...; position l
// is the point just before m_l. The timer watermark at position l is
//
//	W_l = min(input event watermark, Q_l)
//
// where Q_l is the smallest EventTimestamp of the messages the partition
// holds at positions >= l (not yet consumed). A timer with TriggerTimestamp
// T fires at the first position l with T <= W_l: after every message before
// l, before m_l and everything after it. Positions, not batches, decide:
// a batch is cut wherever a timer falls, so the timers that fire and where
// they fall are the same whatever the batch limits.
//
// W_l is a lower bound: a message that is not here yet has an EventTimestamp
// of at least the input watermark (or it is late), so the watermark the
// whole merge order would give at l is somewhere in [W_l, Q_l]. A timer with
// W_l < T <= Q_l is undetermined at l: whether it falls before m_l depends on
// input not seen yet. [StepBefore] tells the partition to wait for the
// input watermark before consuming m_l then, which is what makes the
// position independent of timing as well as of batch limits.

// TimerStep is what a partition does with the next message of its merge
// order, given its earliest pending timer: see [StepBefore].
type TimerStep int

const (
	// TakeMessage: no pending timer can fall before the message; it may
	// join the batch being cut.
	TakeMessage TimerStep = iota
	// FireFirst: a pending timer is due before the message. The batch
	// ends before it; the timer fires at the start of the next batch.
	FireFirst
	// AwaitWatermark: a pending timer may fall before the message,
	// depending on input not seen yet (W_l < T <= Q_l). The batch ends
	// before it, and the message waits until the input watermark or the
	// held input settles the question.
	AwaitWatermark
)

// String names the step.
func (s TimerStep) String() string {
	switch s {
	case TakeMessage:
		return "take"
	case FireFirst:
		return "fire-first"
	case AwaitWatermark:
		return "await-watermark"
	}
	return "TimerStep(?)"
}

// StepBefore decides the step for the next message at some position of the
// merge order. trigger is the earliest pending TriggerTimestamp (hasTimer
// false: none is pending), inputWatermark the partition's input event
// watermark, heldMin Q_l: the smallest EventTimestamp held at this position
// or after (the next message's included). settle false disables waiting:
// the partition uses it when waiting could not end (its inputs have
// finished, or a sender is blocked on its full buffer, so the input
// watermark cannot move before it consumes), and an undetermined timer
// then fires where W_l first reaches it.
func StepBefore(trigger int64, hasTimer bool, inputWatermark, heldMin int64, settle bool) TimerStep {
	switch {
	case !hasTimer:
		return TakeMessage
	case trigger <= min(inputWatermark, heldMin):
		return FireFirst
	case settle && trigger <= heldMin:
		return AwaitWatermark
	}
	return TakeMessage
}

// TimerCut is where a timer set while a batch was processed makes the batch
// too long. bounds[i] is Q at the batch's message i (non-decreasing along
// the batch, as the held input only shrinks while a batch is cut); after is
// the index of the first message that could have set the timer (its key's
// first message), or -1 for a key with due timers in the batch: they fire
// before message 0, and a timer they set is due there as well once the
// watermark has passed it (at a position, timers fire to a fixpoint before
// the message there). TimerCut returns the first index i > after with
// trigger <= bounds[i]: the timer may fall before message i, so the batch
// must end there and be processed again without messages i and later. ok
// is false when the timer cannot fall inside the batch.
func TimerCut(bounds []int64, after int, trigger int64) (i int, ok bool) {
	from := max(after+1, 0)
	if from >= len(bounds) {
		return 0, false
	}
	i = from + sort.Search(len(bounds)-from, func(j int) bool { return trigger <= bounds[from+j] })
	return i, i < len(bounds)
}

// OutputWatermark is a transform's watermark_strategy: the event watermark
// estimated from what the computation emits, the largest EventTimestamp
// emitted minus the out-of-orderness bound (Flink's bounded
// out-of-orderness), NoWatermark until something was emitted. It only ever
// rises. The runtime uses it as one more input of the output stream's
// [StreamWatermark], so it can hold the output watermark back below the
// inputs' (for a transform that stamps its outputs earlier than its
// inputs) but never lift it above them or above what is still in flight.
//
// The zero value is not ready; use [NewOutputWatermark]. Not safe for
// concurrent use.
type OutputWatermark struct {
	bound   int64
	maxSeen int64
}

// NewOutputWatermark returns the strategy with the given bound (>= 0;
// a negative bound is treated as 0).
func NewOutputWatermark(bound time.Duration) *OutputWatermark {
	return &OutputWatermark{bound: max(int64(bound), 0), maxSeen: NoWatermark}
}

// Emitted records an emitted message's EventTimestamp.
func (w *OutputWatermark) Emitted(event int64) { w.maxSeen = max(w.maxSeen, event) }

// Value returns the estimate: the largest EventTimestamp emitted minus the
// bound, NoWatermark before the first.
func (w *OutputWatermark) Value() int64 { return wmSatSub(w.maxSeen, w.bound) }
