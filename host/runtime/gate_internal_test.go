package runtime

import (
	"bytes"
	"testing"

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
