package ordering

import (
	"math"
	"math/bits"
)

// Bias is one stream's running average of EventTimestamp -
// AlignmentTimestamp over the messages it currently counts: the seed's
// bias, which turns an AlignmentTimestamp into a StabilizedEventTimestamp
// ([Bias.Stabilized]).
//
// A message is counted by Add when it is queued and uncounted by Remove
// when it leaves; both are O(1), whatever the number counted. The sum is
// kept exactly in 128 bits, so no mix of int64 timestamps can overflow it
// or round it: the difference of two int64s needs 65 bits, and 2^63 of them
// fit in 128.
//
// [Bias.Value] truncates the average toward zero (as Go's integer division
// and Flow's C++ do), so a bias of -2.5ns reads -2 and one of 2.5ns reads 2.
// Before any traffic the bias is 0; once it has counted messages, an
// emptied Bias keeps the value it had with its last message rather than
// falling back to 0, so an idle stream keeps its place among the others.
//
// The zero Bias is ready to use. A Bias is not safe for concurrent use.
type Bias struct {
	// sumHi:sumLo is the two's-complement 128-bit sum of Event-Alignment.
	sumHi, sumLo uint64
	count        int64
	// last is the value while the Bias last counted something.
	last int64
}

// Add counts a message with timestamps t.
func (b *Bias) Add(t Timestamps) {
	hi, lo := diff128(t)
	var carry uint64
	b.sumLo, carry = bits.Add64(b.sumLo, lo, 0)
	b.sumHi, _ = bits.Add64(b.sumHi, hi, carry)
	b.count++
}

// Remove uncounts a message counted by Add with the same timestamps t. It
// panics if nothing is counted; removing timestamps that were never added
// corrupts the average, which is the caller's bug.
func (b *Bias) Remove(t Timestamps) {
	if b.count == 0 {
		panic("ordering: Bias.Remove without a matching Add")
	}
	if b.count == 1 {
		b.last = b.Value()
	}
	hi, lo := diff128(t)
	var borrow uint64
	b.sumLo, borrow = bits.Sub64(b.sumLo, lo, 0)
	b.sumHi, _ = bits.Sub64(b.sumHi, hi, borrow)
	b.count--
}

// Resume sets the value an empty Bias reports, as if its last message had
// had that bias: a stream restarted from a commit keeps its place among
// the others before its first message arrives. It panics if the Bias
// counts messages.
func (b *Bias) Resume(last int64) {
	if b.count != 0 {
		panic("ordering: Bias.Resume while messages are counted")
	}
	b.last = last
}

// Count returns the number of messages counted.
func (b *Bias) Count() int64 { return b.count }

// Value returns the average of EventTimestamp - AlignmentTimestamp over the
// counted messages, truncated toward zero; with nothing counted, the last
// value it had, or 0 if it never counted anything. An average beyond the
// int64 range (possible only when a message's Event and Alignment lie more
// than 2^63ns, about 292 years, apart) is clamped to it.
func (b *Bias) Value() int64 {
	if b.count == 0 {
		return b.last
	}
	// Fast path: the sum fits in an int64, where Go's division already
	// truncates toward zero.
	if b.sumHi == uint64(int64(b.sumLo)>>63) {
		return int64(b.sumLo) / b.count
	}
	hi, lo := b.sumHi, b.sumLo
	negative := int64(hi) < 0
	if negative {
		var borrow uint64
		lo, borrow = bits.Sub64(0, lo, 0)
		hi, _ = bits.Sub64(0, hi, borrow)
	}
	// |sum| <= count * (2^64-1) < count * 2^64, so hi < count and Div64
	// cannot overflow.
	q, _ := bits.Div64(hi, lo, uint64(b.count))
	if negative {
		if q >= 1<<63 {
			return math.MinInt64
		}
		return -int64(q)
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// Stabilized returns the StabilizedEventTimestamp of a message of this
// stream with the given AlignmentTimestamp: alignment + Value(), clamped to
// the int64 range.
func (b *Bias) Stabilized(alignment int64) int64 {
	return clampSum3(alignment, b.Value(), 0)
}

// diff128 returns t.Event - t.Alignment as a two's-complement 128-bit
// number hi:lo.
func diff128(t Timestamps) (hi, lo uint64) {
	var borrow uint64
	lo, borrow = bits.Sub64(uint64(t.Event), uint64(t.Alignment), 0)
	hi, _ = bits.Sub64(uint64(t.Event>>63), uint64(t.Alignment>>63), borrow)
	return hi, lo
}

// clampSum3 returns a+b+c computed exactly and clamped to the int64 range,
// so a priority near the ends of time saturates instead of wrapping around
// to the other end.
func clampSum3(a, b, c int64) int64 {
	// Fast path: neither addition overflows (the usual case by far). A sum
	// overflowed iff it differs in sign from both operands.
	if s := a + b; (s^a)&(s^b) >= 0 {
		if t := s + c; (t^s)&(t^c) >= 0 {
			return t
		}
	}
	var carry uint64
	lo, carry := bits.Add64(uint64(a), uint64(b), 0)
	hi, _ := bits.Add64(uint64(a>>63), uint64(b>>63), carry)
	lo, carry = bits.Add64(lo, uint64(c), 0)
	hi, _ = bits.Add64(hi, uint64(c>>63), carry)
	switch {
	case int64(hi) < 0 && (hi != math.MaxUint64 || int64(lo) >= 0):
		return math.MinInt64
	case int64(hi) >= 0 && (hi != 0 || int64(lo) < 0):
		return math.MaxInt64
	}
	return int64(lo)
}
