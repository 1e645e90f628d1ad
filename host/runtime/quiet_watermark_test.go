package runtime_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
)

// quietSource emits its records, then stays open without emitting more,
// as a Kafka source does once it has read its topic. Record i goes to
// partition parts[i], or i%2 without parts.
type quietSource struct {
	parts  []int
	events []int64
}

func (s quietSource) Run(ctx context.Context, emit func(connect.Record) error) error {
	for i, ev := range s.events {
		part := i % 2
		if s.parts != nil {
			part = s.parts[i]
		}
		if err := emit(record(part, ev, ev, fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// quietPipeline reads a 2-partition source with a 1s bound and no idle
// detection, so that only records move its watermark.
const quietPipeline = `
name: quiet
sources:
  - name: in
    type: generator
    stream: events
    partitions: 2
    generator: {count: 1}
    watermark: {out_of_orderness_bound: 1s, idle_partitions: {duration: 0s}}
computations:
  - {name: ident, plugin: identity, kind: map, input_streams: [events], output_streams: [out]}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// runQuiet runs quietPipeline with src on st until every record of src is
// out and the stored event watermark is want, then stops the run; it
// fails the test after 30s or if the run ends by itself.
func runQuiet(t *testing.T, st *store.Store, src quietSource, want int64) {
	t.Helper()
	sink := &failingSink{}
	rt, err := runtime.New(mustSpec(t, quietPipeline), map[string]compute.Factory{"ident": compute.Native(identity)},
		runtime.WithSource("in", src), runtime.WithSink("sink", sink), runtime.WithStore(st))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sink.mu.Lock()
		out := len(sink.kept)
		sink.mu.Unlock()
		got, ok, err := st.SourceWatermarks("events")
		require.NoError(t, err)
		if out == len(src.events) && ok && got.Event == want {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-ran
			t.Fatalf("after 30s: %d of %d records out, stored event watermark %d (found %v), want %d",
				out, len(src.events), got.Event, ok, want)
		}
		select {
		case err := <-ran:
			t.Fatalf("the run ended: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-ran
}

// TestQuietSourceStoresItsLastWatermark: once a source that does not end
// has had its records routed and goes quiet, the store holds the
// watermark those records moved the stream to, not the one before the
// last group of them. A restart otherwise begins with the watermark short
// of what was routed, and with no record coming to raise it, the timers
// between the two wait (the Kafka crash test through the binary found
// this: a restart after the whole topic was read stalled at every window).
func TestQuietSourceStoresItsLastWatermark(t *testing.T) {
	for _, n := range []int{2, 10, 1000} {
		t.Run(fmt.Sprintf("records=%d", n), func(t *testing.T) {
			base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
			events := make([]int64, n)
			for i := range events {
				events[i] = base + int64(i)*int64(time.Millisecond)
			}
			st, err := store.Open(t.TempDir(), store.Options{})
			require.NoError(t, err)
			defer st.Close()
			// The older of the two partitions' newest records, less the
			// bound.
			runQuiet(t, st, quietSource{events: events}, events[n-2]-int64(time.Second))
		})
	}
}

// TestRestartedSourcePartitionWithNothingLeftKeepsItsWatermark: a
// partition whose records were all routed before a restart, and which
// gets none after it, still counts with the largest EventTimestamp it
// had, so the other partitions' new records move the watermark at once.
// Before, such a partition had no watermark after the restart and held
// the minimum back until it turned idle (never, with idleness off; a
// minute in the Kafka crash test through the binary, which found this:
// a restart with two of four Kafka partitions read to their end stalled
// every window for the idle timeout).
func TestRestartedSourcePartitionWithNothingLeftKeepsItsWatermark(t *testing.T) {
	sec := int64(time.Second)
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	dir := t.TempDir()
	life := func(src quietSource, want int64) {
		t.Helper()
		st, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		defer st.Close()
		runQuiet(t, st, src, want)
	}
	// The first life reads partition 0 to its end (10s), partition 1 only
	// to 1s.
	life(quietSource{parts: []int{0, 1, 0, 1}, events: []int64{base, base + sec, base + 10*sec, base + sec}}, base+sec-sec)
	// The second brings only partition 1's records, up to 4s: the minimum
	// is theirs, since partition 0 stands at 10s.
	life(quietSource{parts: []int{1, 1}, events: []int64{base + 2*sec, base + 4*sec}}, base+4*sec-sec)
}
