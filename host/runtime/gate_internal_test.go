package runtime

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/spec"
)

// TestSourcesMeetingNowhereHaveGatesOfTheirOwn: sources whose streams meet
// at a computation, directly or downstream, share a gate; the others do
// not, so one cannot hold another back.
func TestSourcesMeetingNowhereHaveGatesOfTheirOwn(t *testing.T) {
	p, err := spec.Parse("gates.yaml", []byte(`
name: gates
sources:
  - {name: a, type: generator, stream: a}
  - {name: b, type: generator, stream: b}
  - {name: d, type: generator, stream: d}
  - {name: e, type: generator, stream: e}
  - {name: f, type: generator, stream: f}
computations:
  - {name: join, plugin: p, input_streams: [a, b]}
  - {name: alone, plugin: p, input_streams: [d]}
  - {name: first, plugin: p, input_streams: [e], output_streams: [e2]}
  - {name: later, plugin: p, input_streams: [e2, f]}
`))
	require.NoError(t, err)
	f := compute.Native(nil)
	r, err := New(p, map[string]compute.Factory{"join": f, "alone": f, "first": f, "later": f}, WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	gate := map[string]*sourceGate{}
	for _, src := range r.sources {
		gate[src.spec.Name] = src.gate
	}
	require.Len(t, r.gates, 3)
	require.Same(t, gate["a"], gate["b"], "a and b meet at join")
	require.Same(t, gate["e"], gate["f"], "e and f meet at later, e through first")
	require.NotSame(t, gate["a"], gate["d"])
	require.NotSame(t, gate["a"], gate["e"])
	require.NotSame(t, gate["d"], gate["e"])
}

// TestSourceGateGraceCountsFromTheSourcesStart: a stream that has not yet
// produced a record holds the others back for the grace counted from
// startGrace (Run calls it as the sources start), not from the gate's
// creation, however long the computations took to start in between.
func TestSourceGateGraceCountsFromTheSourcesStart(t *testing.T) {
	clock := time.Unix(0, 0)
	g := newSourceGate(2)
	g.now = func() time.Time { return clock }
	g.startGrace()

	clock = clock.Add(10 * sourceGateGrace) // the computations start slowly
	require.True(t, g.open(0, 100), "counted from the gate's creation, the grace has run out")
	g.startGrace()
	require.False(t, g.open(0, 100), "stream 1 has just started: it holds stream 0 back")
	clock = clock.Add(sourceGateGrace - time.Nanosecond)
	require.False(t, g.open(0, 100), "still inside stream 1's grace")
	clock = clock.Add(time.Nanosecond)
	require.True(t, g.open(0, 100), "stream 1's grace has run out")
}

// TestSourceGateStartGraceKeepsHeadsAndEnds: startGrace leaves a stream
// with a record waiting, or one that ended, as it was.
func TestSourceGateStartGraceKeepsHeadsAndEnds(t *testing.T) {
	clock := time.Unix(0, 0)
	g := newSourceGate(3)
	g.now = func() time.Time { return clock }
	g.end(2)
	g.mu.Lock()
	g.streams[1].hasHead, g.streams[1].prio = true, 50
	g.mu.Unlock()
	g.startGrace()
	require.False(t, g.open(0, 100), "stream 1 has an earlier record waiting")
	require.True(t, g.open(0, 10), "stream 1's record is later; stream 2 ended")
}
