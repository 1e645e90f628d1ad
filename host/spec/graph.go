package spec

import (
	"fmt"
	"slices"
)

// NodeKind says which section of the spec a Node is in.
type NodeKind uint8

// The node kinds.
const (
	// SourceNode is an entry of sources.
	SourceNode NodeKind = iota + 1
	// ComputationNode is an entry of computations.
	ComputationNode
	// SinkNode is an entry of sinks.
	SinkNode
)

// String returns "source", "computation" or "sink".
func (k NodeKind) String() string {
	switch k {
	case SourceNode:
		return "source"
	case ComputationNode:
		return "computation"
	case SinkNode:
		return "sink"
	}
	return fmt.Sprintf("NodeKind(%d)", uint8(k))
}

// Node names a source, computation or sink: the writers and readers of streams.
type Node struct {
	// Kind is the section the node is in.
	Kind NodeKind
	// Name is the node's name, unique within its kind.
	Name string
}

// String returns, for example, `computation "join"`.
func (n Node) String() string { return fmt.Sprintf("%s %q", n.Kind, n.Name) }

// Computation returns the computation named name, or nil.
func (p *Pipeline) Computation(name string) *Computation {
	for i := range p.Computations {
		if p.Computations[i].Name == name {
			return &p.Computations[i]
		}
	}
	return nil
}

// Source returns the source named name, or nil.
func (p *Pipeline) Source(name string) *Source {
	for i := range p.Sources {
		if p.Sources[i].Name == name {
			return &p.Sources[i]
		}
	}
	return nil
}

// Sink returns the sink named name, or nil.
func (p *Pipeline) Sink(name string) *Sink {
	for i := range p.Sinks {
		if p.Sinks[i].Name == name {
			return &p.Sinks[i]
		}
	}
	return nil
}

// StreamNames returns every stream of the pipeline once, declared ones first,
// then the others in the order their writers appear in the spec.
func (p *Pipeline) StreamNames() []string {
	var names []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	for _, s := range p.Streams {
		add(s.Name)
	}
	for _, w := range p.writerRefs() {
		add(w.stream)
	}
	return names
}

// Writer returns the node that writes stream: its source, or the computation
// that has it as an output or dead-letter stream. Parse guarantees exactly one
// writer for every stream of the pipeline; ok is false for an unknown stream.
func (p *Pipeline) Writer(stream string) (n Node, ok bool) {
	for _, w := range p.writerRefs() {
		if w.stream == stream {
			return w.node, true
		}
	}
	return Node{}, false
}

// Readers returns the nodes that read stream: computations that have it as an
// input, then sinks, each in spec order.
func (p *Pipeline) Readers(stream string) []Node {
	var nodes []Node
	for _, r := range p.readerRefs() {
		if r.stream == stream {
			nodes = append(nodes, r.node)
		}
	}
	return nodes
}

// TopologicalOrder returns the computations so that every computation comes
// after the computations that write its input streams; among computations
// free to go next, spec order decides, so the order is deterministic. Parse
// guarantees an acyclic graph; for a Pipeline built by hand with a cycle, the
// computations that cannot be ordered come last, in spec order.
func (p *Pipeline) TopologicalOrder() []*Computation {
	edges := p.computationEdges()
	indegree := make([]int, len(p.Computations))
	for _, out := range edges {
		for _, e := range out {
			indegree[e.to]++
		}
	}
	var ready []int // kept sorted, so that the smallest index goes first
	for i, d := range indegree {
		if d == 0 {
			ready = append(ready, i)
		}
	}
	order := make([]*Computation, 0, len(p.Computations))
	placed := make([]bool, len(p.Computations))
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		placed[i] = true
		order = append(order, &p.Computations[i])
		for _, e := range edges[i] {
			if indegree[e.to]--; indegree[e.to] == 0 {
				at, _ := slices.BinarySearch(ready, e.to)
				ready = slices.Insert(ready, at, e.to)
			}
		}
	}
	for i := range p.Computations {
		if !placed[i] {
			order = append(order, &p.Computations[i])
		}
	}
	return order
}

// ErrorAt makes an error located at the node of the spec that path names, as
// in "computations[1].plugin", or at its nearest ancestor present in the
// file, so that the runtime can report problems it finds later (a plugin that
// does not exist) the way Parse does.
func (p *Pipeline) ErrorAt(path, format string, args ...any) *Error {
	src := p.src
	if src == nil {
		src = &source{file: p.File}
	}
	return src.errorAt(path, format, args...)
}

// streamRef is a reference from a node to a stream, with the path of the
// reference in the spec.
type streamRef struct {
	node   Node
	stream string
	path   string
	// owner is the path of the entry that makes the reference, as in
	// "computations[2]": unlike node, it tells apart two entries that
	// (wrongly) share a name.
	owner string
	// index is the position of a computation in Computations, or -1.
	index int
}

// writerRefs lists every claim to write a stream, in spec order: sources,
// then each computation's outputs and dead-letter stream.
func (p *Pipeline) writerRefs() []streamRef {
	var refs []streamRef
	for i, s := range p.Sources {
		owner := indexPath("sources", i)
		refs = append(refs, streamRef{Node{SourceNode, s.Name}, s.Stream, fieldPath(owner, "stream"), owner, -1})
	}
	for i, c := range p.Computations {
		node, path := Node{ComputationNode, c.Name}, indexPath("computations", i)
		for j, s := range c.OutputStreams {
			refs = append(refs, streamRef{node, s, indexPath(fieldPath(path, "output_streams"), j), path, i})
		}
		if c.DeadLetter != nil {
			refs = append(refs, streamRef{node, c.DeadLetter.Stream, fieldPath(path, "dead_letter.stream"), path, i})
		}
	}
	return refs
}

// readerRefs lists every read of a stream, in spec order: computations' input
// streams, then sinks' streams.
func (p *Pipeline) readerRefs() []streamRef {
	var refs []streamRef
	for i, c := range p.Computations {
		node, owner := Node{ComputationNode, c.Name}, indexPath("computations", i)
		for j, s := range c.InputStreams {
			refs = append(refs, streamRef{node, s, indexPath(fieldPath(owner, "input_streams"), j), owner, i})
		}
	}
	for i, s := range p.Sinks {
		node, owner := Node{SinkNode, s.Name}, indexPath("sinks", i)
		for j, st := range s.Streams {
			refs = append(refs, streamRef{node, st, indexPath(fieldPath(owner, "streams"), j), owner, -1})
		}
	}
	return refs
}

// edge says that computation to reads, at path, a stream another computation writes.
type edge struct {
	to     int
	stream string
	path   string
}

// computationEdges returns, per computation index, the edges to the
// computations that read what it writes, in spec order of the readers.
func (p *Pipeline) computationEdges() [][]edge {
	writer := map[string]int{}
	for _, w := range p.writerRefs() {
		if _, ok := writer[w.stream]; !ok {
			writer[w.stream] = w.index
		}
	}
	edges := make([][]edge, len(p.Computations))
	for _, r := range p.readerRefs() {
		if w, ok := writer[r.stream]; ok && w >= 0 && r.index >= 0 {
			edges[w] = append(edges[w], edge{to: r.index, stream: r.stream, path: r.path})
		}
	}
	return edges
}
