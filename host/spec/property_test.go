package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The property tests generate random pipelines whose computation graph is a
// DAG by construction (a computation reads only streams that exist before
// it), write them out in block style in a random order, and check that they
// parse to what was generated; then they inject one fault and check that
// exactly that fault is reported, at its place.

type genComputation struct {
	name       string
	kind       string
	partitions int
	inputs     []string
	outputs    []string
	delays     map[string]string
	maxRows    string
	// extra is an unknown field to write, if any.
	extra string
	// watermark asks for a watermark_strategy section.
	watermark bool
}

type genSink struct {
	name    string
	streams []string
}

type genPipeline struct {
	sourceStreams []string
	declared      []string
	computations  []*genComputation // in file order
	sinks         []*genSink
	// writer maps each stream to the name of its writer.
	writer map[string]string
}

// delayValues maps the duration texts the generator uses to their values.
var delayValues = map[string]time.Duration{
	"0": 0, "250ms": 250 * time.Millisecond, "5m": 5 * time.Minute, "1500": 1500 * time.Millisecond,
}

// genValidPipeline draws a valid pipeline with at least minComputations computations.
func genValidPipeline(t *rapid.T, minComputations int) *genPipeline {
	g := &genPipeline{writer: map[string]string{}}
	for i := range rapid.IntRange(1, 3).Draw(t, "sources") {
		s := fmt.Sprintf("s%d", i)
		g.sourceStreams = append(g.sourceStreams, s)
		g.writer[s] = fmt.Sprintf("src%d", i)
	}
	available := slices.Clone(g.sourceStreams)
	var created []*genComputation
	for j := range rapid.IntRange(minComputations, 6).Draw(t, "computations") {
		c := &genComputation{
			name:       fmt.Sprintf("c%d", j),
			kind:       rapid.SampledFrom([]string{"transform", "map"}).Draw(t, "kind"),
			partitions: rapid.IntRange(1, 8).Draw(t, "partitions"),
			inputs:     rapid.SliceOfNDistinct(rapid.SampledFrom(available), 1, 3, rapid.ID[string]).Draw(t, "inputs"),
			delays:     map[string]string{},
			maxRows:    "1000",
		}
		for _, in := range c.inputs {
			if rapid.Bool().Draw(t, "delayed") {
				c.delays[in] = rapid.SampledFrom(sortedKeys(delayValues)).Draw(t, "delay")
			}
		}
		for k := range rapid.IntRange(0, 2).Draw(t, "outputs") {
			out := fmt.Sprintf("%s-o%d", c.name, k)
			c.outputs = append(c.outputs, out)
			g.writer[out] = c.name
		}
		available = append(available, c.outputs...)
		created = append(created, c)
	}
	g.computations = rapid.Permutation(created).Draw(t, "file order")
	for i := range rapid.IntRange(0, 2).Draw(t, "sinks") {
		g.sinks = append(g.sinks, &genSink{
			name:    fmt.Sprintf("sink%d", i),
			streams: rapid.SliceOfNDistinct(rapid.SampledFrom(available), 1, 3, rapid.ID[string]).Draw(t, "sink streams"),
		})
	}
	g.declared = rapid.SliceOfDistinct(rapid.SampledFrom(available), rapid.ID[string]).Draw(t, "declared")
	return g
}

// specWriter writes YAML line by line and remembers where things went.
type specWriter struct {
	lines []string
	at    map[string]position
}

// key writes "key:" opening a block and returns the key's position.
func (w *specWriter) key(indent int, key string) position {
	w.lines = append(w.lines, strings.Repeat(" ", indent)+key+":")
	return position{len(w.lines), indent + 1}
}

// kv writes "key: value" and returns the value's position.
func (w *specWriter) kv(indent int, key, value string) position {
	w.lines = append(w.lines, strings.Repeat(" ", indent)+key+": "+value)
	return position{len(w.lines), indent + len(key) + 3}
}

// item writes "- value" and returns the value's position.
func (w *specWriter) item(indent int, value string) position {
	w.lines = append(w.lines, strings.Repeat(" ", indent)+"- "+value)
	return position{len(w.lines), indent + 3}
}

func (g *genPipeline) write() (string, map[string]position) {
	w := &specWriter{at: map[string]position{}}
	w.kv(0, "name", "prop")
	if len(g.declared) > 0 {
		w.key(0, "streams")
		for _, s := range g.declared {
			w.item(2, "name: "+s)
		}
	}
	w.key(0, "sources")
	for i, s := range g.sourceStreams {
		w.item(2, fmt.Sprintf("name: src%d", i))
		w.kv(4, "type", "generator")
		w.kv(4, "stream", s)
	}
	if len(g.computations) > 0 {
		w.key(0, "computations")
	}
	for i, c := range g.computations {
		n := fmt.Sprintf("#%d", i)
		w.at[n+".name"] = w.item(2, "name: "+c.name)
		w.at[n+".name"] = position{w.at[n+".name"].line, 11}
		if c.extra != "" {
			w.at[n+".extra"] = position{w.kv(4, c.extra, "2").line, 5}
		}
		w.kv(4, "plugin", "plug")
		w.at[n+".kind"] = w.kv(4, "kind", c.kind)
		w.at[n+".partitions"] = w.kv(4, "partitions", fmt.Sprint(c.partitions))
		w.key(4, "input_streams")
		for k, in := range c.inputs {
			w.at[fmt.Sprintf("%s.in%d", n, k)] = w.item(6, in)
		}
		if len(c.outputs) > 0 {
			w.key(4, "output_streams")
			for k, out := range c.outputs {
				w.at[fmt.Sprintf("%s.out%d", n, k)] = w.item(6, out)
			}
		}
		if len(c.delays) > 0 {
			w.key(4, "input_ordering")
			w.key(6, "stream_delays")
			for _, s := range sortedKeys(c.delays) {
				w.at[n+".delay."+s] = w.kv(8, s, c.delays[s])
				w.at[n+".delaykey."+s] = position{w.at[n+".delay."+s].line, 9}
			}
		}
		if c.watermark {
			w.key(4, "watermark_strategy")
			w.at[n+".watermark"] = position{w.kv(6, "out_of_orderness_bound", "1s").line, 7}
		}
		w.key(4, "batch")
		w.at[n+".max_rows"] = w.kv(6, "max_rows", c.maxRows)
	}
	if len(g.sinks) > 0 {
		w.key(0, "sinks")
	}
	for _, s := range g.sinks {
		w.item(2, "name: "+s.name)
		w.kv(4, "type", "stdout")
		w.key(4, "streams")
		for k, st := range s.streams {
			w.at[fmt.Sprintf("%s.in%d", s.name, k)] = w.item(6, st)
		}
	}
	return strings.Join(w.lines, "\n") + "\n", w.at
}

func TestPropertyValidPipelinesParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genValidPipeline(t, 0)
		src, _ := g.write()
		p, err := Parse("prop.yaml", []byte(src))
		require.NoError(t, err, "spec:\n%s", src)

		require.Len(t, p.Computations, len(g.computations))
		for i, gc := range g.computations {
			c := p.Computations[i]
			require.Equal(t, gc.name, c.Name)
			require.Equal(t, ComputationKind(gc.kind), c.Kind)
			require.Equal(t, gc.partitions, c.Partitions)
			require.Equal(t, gc.inputs, c.InputStreams)
			require.Len(t, c.InputOrdering.StreamDelays, len(gc.delays))
			for s, text := range gc.delays {
				require.Equal(t, delayValues[text], c.InputOrdering.StreamDelays[s])
			}
		}

		for stream, name := range g.writer {
			w, ok := p.Writer(stream)
			require.True(t, ok, stream)
			require.Equal(t, name, w.Name, stream)
		}
		for stream := range g.writer {
			var want []Node
			for _, c := range g.computations {
				if slices.Contains(c.inputs, stream) {
					want = append(want, Node{ComputationNode, c.name})
				}
			}
			for _, s := range g.sinks {
				if slices.Contains(s.streams, stream) {
					want = append(want, Node{SinkNode, s.name})
				}
			}
			require.Equal(t, want, p.Readers(stream), stream)
		}
		require.ElementsMatch(t, sortedKeys(g.writer), p.StreamNames())

		order := p.TopologicalOrder()
		require.Len(t, order, len(p.Computations))
		position := map[string]int{}
		for i, c := range order {
			position[c.Name] = i
		}
		require.Len(t, position, len(p.Computations), "every computation once")
		for _, c := range order {
			for _, in := range c.InputStreams {
				if w, _ := p.Writer(in); w.Kind == ComputationNode {
					require.Less(t, position[w.Name], position[c.Name], "%s writes %s, read by %s", w.Name, in, c.Name)
				}
			}
		}
	})
}

// fault is one mistake injected into a valid generated pipeline.
type fault struct {
	// path and message are those of the one error the fault must cause;
	// message may be a part.
	path, message string
	// at labels the position of that error in the writer's map; empty when
	// the position is not determined by the fault alone (longer cycles).
	at string
}

// injectFault makes one mistake in g, drawn from those g has room for.
func injectFault(t *rapid.T, g *genPipeline) fault {
	i := rapid.IntRange(0, len(g.computations)-1).Draw(t, "faulty computation")
	c := g.computations[i]
	label := fmt.Sprintf("#%d", i)
	path := fmt.Sprintf("computations[%d]", i)
	kinds := []string{"unknown field", "kind typo", "partitions", "max_rows", "negative delay",
		"delay of no input", "dangling input", "map with watermark", "self loop", "two writers"}
	if len(g.computations) > 1 {
		kinds = append(kinds, "duplicate name")
	}
	pairs := reachablePairs(g)
	if len(pairs) > 0 {
		kinds = append(kinds, "cycle")
	}
	if len(g.sinks) > 0 {
		kinds = append(kinds, "dangling sink stream")
	}
	switch kind := rapid.SampledFrom(kinds).Draw(t, "fault"); kind {
	case "unknown field":
		c.extra = "partitons"
		return fault{path + ".partitons", `unknown field; did you mean "partitions"?`, label + ".extra"}
	case "kind typo":
		c.kind = "transfrom"
		return fault{path + ".kind", `expected one of transform, map; got "transfrom"`, label + ".kind"}
	case "partitions":
		c.partitions = 0
		return fault{path + ".partitions", "expected at least 1; got 0", label + ".partitions"}
	case "max_rows":
		c.maxRows = "0"
		return fault{path + ".batch.max_rows", "expected at least 1; got 0", label + ".max_rows"}
	case "negative delay":
		in := c.inputs[0]
		c.delays[in] = "-1s"
		return fault{path + ".input_ordering.stream_delays." + in, "expected a non-negative duration", label + ".delay." + in}
	case "delay of no input":
		c.delays["ghost"] = "1s"
		return fault{path + ".input_ordering.stream_delays.ghost", `stream "ghost" is not an input of this computation`, label + ".delaykey.ghost"}
	case "dangling input":
		k := rapid.IntRange(0, len(c.inputs)-1).Draw(t, "input")
		delete(c.delays, c.inputs[k])
		c.inputs[k] = "ghost"
		return fault{fmt.Sprintf("%s.input_streams[%d]", path, k), `stream "ghost" is not declared`, fmt.Sprintf("%s.in%d", label, k)}
	case "map with watermark":
		c.kind, c.watermark = "map", true
		return fault{path + ".watermark_strategy", "not allowed for kind map", label + ".watermark"}
	case "self loop":
		if len(c.outputs) == 0 {
			c.outputs = []string{c.name + "-loop"}
		}
		c.inputs = append(c.inputs, c.outputs[0])
		k := len(c.inputs) - 1
		return fault{fmt.Sprintf("%s.input_streams[%d]", path, k),
			fmt.Sprintf("cycle in the computation graph: %s -> %s (through streams %q)", c.name, c.name, c.outputs[0]),
			fmt.Sprintf("%s.in%d", label, k)}
	case "two writers":
		s := rapid.SampledFrom(g.sourceStreams).Draw(t, "stolen stream")
		c.outputs = append(c.outputs, s)
		k := len(c.outputs) - 1
		return fault{fmt.Sprintf("%s.output_streams[%d]", path, k),
			fmt.Sprintf("stream %q already has a writer, source %q", s, g.writer[s]),
			fmt.Sprintf("%s.out%d", label, k)}
	case "duplicate name":
		j := rapid.IntRange(0, len(g.computations)-1).Filter(func(j int) bool { return j != i }).Draw(t, "twin")
		first, second := min(i, j), max(i, j)
		g.computations[second].name = g.computations[first].name
		return fault{fmt.Sprintf("computations[%d].name", second),
			fmt.Sprintf("duplicate computation name %q", g.computations[first].name),
			fmt.Sprintf("#%d.name", second)}
	case "cycle":
		pair := rapid.SampledFrom(pairs).Draw(t, "cycle pair")
		a, b := pair[0], pair[1]
		a.inputs = append(a.inputs, b.outputs[0])
		return fault{"", "cycle in the computation graph: ", ""}
	case "dangling sink stream":
		k := rapid.IntRange(0, len(g.sinks)-1).Draw(t, "sink")
		g.sinks[k].streams[0] = "ghost"
		return fault{fmt.Sprintf("sinks[%d].streams[0]", k), `stream "ghost" is not declared`, g.sinks[k].name + ".in0"}
	default:
		panic(kind)
	}
}

// reachablePairs lists the computations (a, b), a != b, such that b reads,
// directly or not, what a writes, and b writes a stream: b's output fed back
// into a closes a cycle longer than one.
func reachablePairs(g *genPipeline) [][2]*genComputation {
	var pairs [][2]*genComputation
	for _, from := range g.computations {
		seen := map[*genComputation]bool{}
		var walk func(c *genComputation)
		walk = func(c *genComputation) {
			for _, to := range g.computations {
				if seen[to] || !slices.ContainsFunc(to.inputs, func(s string) bool { return slices.Contains(c.outputs, s) }) {
					continue
				}
				seen[to] = true
				if len(to.outputs) > 0 {
					pairs = append(pairs, [2]*genComputation{from, to})
				}
				walk(to)
			}
		}
		walk(from)
	}
	return pairs
}

func TestPropertyInjectedFaultIsReported(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genValidPipeline(t, 1)
		f := injectFault(t, g)
		src, at := g.write()
		_, err := Parse("prop.yaml", []byte(src))
		list := errorList(t, err)
		require.Len(t, list, 1, "one fault, one error, no consequences:\n%v\nspec:\n%s", err, src)
		e := list[0]
		require.Contains(t, e.Message, f.message, "spec:\n%s", src)
		if f.path != "" {
			require.Equal(t, f.path, e.Path)
		}
		if f.at != "" {
			require.Contains(t, at, f.at)
			require.Equal(t, at[f.at], position{e.Line, e.Column}, "position of %v", e)
		}
	})
}
