package progress

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLogMode(t *testing.T) {
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := start
	var out bytes.Buffer
	ticks := make(chan time.Time)
	reported := make(chan struct{})
	r := New(&out, false, WithTicks(ticks), WithClock(func() time.Time { return clock }))
	r.reported = func() { reported <- struct{}{} }

	records := r.Counter("records", 1000)
	bytesRead := r.Counter("bytes", 0)
	tick := func(at time.Time) {
		ticks <- at
		<-reported
	}

	records.Add(150)
	bytesRead.Add(4096)
	tick(start.Add(10 * time.Second))
	records.Add(50)
	tick(start.Add(15 * time.Second))
	records.Add(800)
	clock = start.Add(20 * time.Second)
	r.Close()
	r.Close() // idempotent

	want := []string{
		`time=2024-05-01T12:00:10.000Z level=INFO msg=progress name=records count=150 total=1000 percent=15 rate_per_s=15 eta=57s`,
		`time=2024-05-01T12:00:10.000Z level=INFO msg=progress name=bytes count=4096 rate_per_s=409.6`,
		`time=2024-05-01T12:00:15.000Z level=INFO msg=progress name=records count=200 total=1000 percent=20 rate_per_s=10 eta=1m0s`,
		`time=2024-05-01T12:00:15.000Z level=INFO msg=progress name=bytes count=4096 rate_per_s=0`,
		`time=2024-05-01T12:00:20.000Z level=INFO msg="progress done" name=records count=1000 total=1000 percent=100 rate_per_s=160 average_per_s=50`,
		`time=2024-05-01T12:00:20.000Z level=INFO msg="progress done" name=bytes count=4096 rate_per_s=0 average_per_s=204.8`,
	}
	require.Equal(t, want, strings.Split(strings.TrimSpace(out.String()), "\n"))

	// Counting goes on after Close, without output.
	records.Add(1)
	require.Equal(t, int64(1001), records.Count())
	late := r.Counter("late", 5)
	late.Add(2)
	require.Equal(t, int64(2), late.Count())
	require.Len(t, strings.Split(strings.TrimSpace(out.String()), "\n"), len(want))
}

func TestLogModeSetTotal(t *testing.T) {
	clock := time.Unix(0, 0).UTC()
	var out bytes.Buffer
	r := New(&out, false, WithTicks(make(chan time.Time)), WithClock(func() time.Time { return clock }))
	c := r.Counter("files", 0)
	c.Add(5)
	c.Set(3)
	c.SetTotal(12)
	clock = clock.Add(4 * time.Second)
	r.Close()
	require.Equal(t, `time=1970-01-01T00:00:04.000Z level=INFO msg="progress done" name=files count=3 total=12 percent=25 rate_per_s=0.8 average_per_s=0.8`+"\n", out.String())
}

// TestLogModeDoneAndResumed checks that a counter marked done writes its
// final line at once and is not reported again while others go on, and
// that a resumed counter's rates leave out what was done before it.
func TestLogModeDoneAndResumed(t *testing.T) {
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := start
	var out bytes.Buffer
	ticks := make(chan time.Time)
	reported := make(chan struct{})
	r := New(&out, false, WithTicks(ticks), WithClock(func() time.Time { return clock }))
	r.reported = func() { reported <- struct{}{} }
	tick := func(at time.Time) {
		ticks <- at
		<-reported
	}

	finished := r.ResumedCounter("finished", 1000, 1000) // resumed at its end
	live := r.Counter("live", 0)
	clock = start.Add(2 * time.Second)
	finished.Done()
	finished.Done() // idempotent
	live.Add(30)
	tick(start.Add(10 * time.Second))
	live.Add(20)
	tick(start.Add(20 * time.Second))
	clock = start.Add(25 * time.Second)
	r.Close()
	finished.Done() // after Close: nothing

	want := []string{
		`time=2024-05-01T12:00:02.000Z level=INFO msg="progress done" name=finished count=1000 total=1000 percent=100 rate_per_s=0 average_per_s=0`,
		`time=2024-05-01T12:00:10.000Z level=INFO msg=progress name=live count=30 rate_per_s=3`,
		`time=2024-05-01T12:00:20.000Z level=INFO msg=progress name=live count=50 rate_per_s=2`,
		`time=2024-05-01T12:00:25.000Z level=INFO msg="progress done" name=live count=50 rate_per_s=0 average_per_s=2`,
	}
	require.Equal(t, want, strings.Split(strings.TrimSpace(out.String()), "\n"))
}

func TestTerminalMode(t *testing.T) {
	var out syncBuffer
	r := New(&out, true)
	known := r.Counter("replay", 10)
	unknown := r.Counter("generated", 0)
	short := r.Counter("aborted", 100)
	resumed := r.ResumedCounter("resumed", 40, 50)
	known.Add(10)
	unknown.Add(7)
	short.Add(3)
	resumed.Add(5)
	resumed.Done() // its work ended: the bar completes at its count, before Close
	r.Close()      // must not hang on bars of unknown or unreached totals, or done ones
	text := out.String()
	for _, want := range []string{"replay", "10 / 10", "generated", "aborted", "3 / 100", "resumed", "45 / 45"} {
		require.Contains(t, text, want)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func Example() {
	ticks := make(chan time.Time)
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	r := New(exampleOut{}, false, WithTicks(ticks), WithClock(func() time.Time { return at }))
	c := r.Counter("records", 200)
	c.Add(50)
	at = at.Add(5 * time.Second)
	r.Close()
	// Output:
	// time=2024-01-01T00:00:05.000Z level=INFO msg="progress done" name=records count=50 total=200 percent=25 rate_per_s=10 average_per_s=10
}

type exampleOut struct{}

func (exampleOut) Write(p []byte) (int, error) { fmt.Print(string(p)); return len(p), nil }
