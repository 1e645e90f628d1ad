package ordering

// SourceClock assigns AlignmentTimestamps to the records of one source
// partition: each record gets its WriteTimestamp, raised to the last one
// given so that the partition's alignment never decreases even when the
// queue's clock steps back. The zero SourceClock is ready to use.
type SourceClock struct {
	last int64
}

// NewSourceClock returns a SourceClock that resumes after last, the
// AlignmentTimestamp of the partition's last record (after a restart).
func NewSourceClock(last int64) SourceClock { return SourceClock{last: last} }

// Align returns max(last, write) and remembers it.
func (c *SourceClock) Align(write int64) int64 {
	c.last = max(c.last, write)
	return c.last
}

// Last returns the last AlignmentTimestamp given.
func (c *SourceClock) Last() int64 { return c.last }

// SourceRecord returns the timestamps of a source record written at write
// with event time event, advancing the partition's clock. System time of a
// source record is its write time unless the caller knows better.
func (c *SourceClock) SourceRecord(event, write int64) Timestamps {
	return Timestamps{Event: event, System: write, Write: write, Alignment: c.Align(write)}
}

// TransformOutput returns the timestamps of a message a transform creates at
// now: System and Alignment are now. Event is the computation's own value
// when eventSet, and otherwise the minimum Event over parents (messages and
// timers alike); with neither, it is now.
func TransformOutput(now int64, parents []Timestamps, event int64, eventSet bool) Timestamps {
	t := Timestamps{System: now, Alignment: now, Event: now}
	switch {
	case eventSet:
		t.Event = event
	case len(parents) > 0:
		t.Event = parents[0].Event
		for _, p := range parents[1:] {
			t.Event = min(t.Event, p.Event)
		}
	}
	return t
}

// MapOutput returns the timestamps of a message derived deterministically
// from a single parent: everything is inherited except Write, which only
// source records have.
func MapOutput(parent Timestamps) Timestamps {
	parent.Write = 0
	return parent
}

// MultiParentOutput returns the timestamps of a message derived
// deterministically from several parents: the minimum Alignment, the
// minimum Event and the maximum System. With one parent it equals
// [MapOutput]; it panics with none, which is a caller's bug.
func MultiParentOutput(parents []Timestamps) Timestamps {
	t := MapOutput(parents[0])
	for _, p := range parents[1:] {
		t.Alignment = min(t.Alignment, p.Alignment)
		t.Event = min(t.Event, p.Event)
		t.System = max(t.System, p.System)
	}
	return t
}

// SystemClock hands a transform partition its creation times. It never goes
// backwards, so the outputs of one partition have non-decreasing
// AlignmentTimestamps even if the wall clock steps back; that keeps a
// partition's production order and the in-stream order the same.
type SystemClock struct {
	now  func() int64
	last int64
}

// NewSystemClock returns a SystemClock reading now, which returns
// nanoseconds since the Unix epoch (time.Now().UnixNano in production, a
// scripted clock in tests), resuming after last.
func NewSystemClock(now func() int64, last int64) *SystemClock {
	return &SystemClock{now: now, last: last}
}

// Last returns the last time Now gave (or the one the clock resumed
// after); a host stores it so that a restarted partition resumes after it.
func (c *SystemClock) Last() int64 { return c.last }

// Now returns max(last, now()) and remembers it.
func (c *SystemClock) Now() int64 {
	c.last = max(c.last, c.now())
	return c.last
}
