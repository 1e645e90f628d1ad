package flowtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// captureSinkPrefix names the sinks the harness adds to read a stream that
// no sink of the spec reads.
const captureSinkPrefix = "flowtest."

// capture keeps what the run's sinks were given, per stream, in the order
// each stream's records reached a sink.
type capture struct {
	mu      sync.Mutex
	streams map[string][]connect.SinkRecord
	// seen dedupes by (stream, message id): a stream read by two sinks
	// reaches the capture twice.
	seen map[[2]string]bool
}

func newCapture() *capture {
	return &capture{streams: map[string][]connect.SinkRecord{}, seen: map[[2]string]bool{}}
}

func (c *capture) add(recs []connect.SinkRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		k := [2]string{r.Stream, r.MessageID}
		if c.seen[k] {
			continue
		}
		c.seen[k] = true
		c.streams[r.Stream] = append(c.streams[r.Stream], r)
	}
}

func (c *capture) get(stream string) []connect.SinkRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.streams[stream])
}

// captureSink is one sink of a run, writing into the capture.
type captureSink struct{ c *capture }

func (s captureSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	s.c.add(recs)
	return nil
}

func (captureSink) Close() error { return nil }

// captureAll points every sink of p at c and adds a sink for every stream
// a computation writes (outputs and dead-letter routes) that no sink reads,
// so that every derived stream can be read. It returns the runtime options
// that install the capture.
func captureAll(p *spec.Pipeline, c *capture) ([]runtime.Option, error) {
	read := map[string]bool{}
	names := map[string]bool{}
	for _, sk := range p.Sinks {
		names[sk.Name] = true
		for _, s := range sk.Streams {
			read[s] = true
		}
	}
	var written []string
	for _, comp := range p.Computations {
		written = append(written, comp.OutputStreams...)
		if comp.DeadLetter != nil && comp.DeadLetter.Stream != "" {
			written = append(written, comp.DeadLetter.Stream)
		}
	}
	for _, s := range written {
		if read[s] {
			continue
		}
		read[s] = true
		name := captureSinkPrefix + s
		if names[name] {
			return nil, fmt.Errorf("the spec has a sink named %q, which the test harness needs for stream %q", name, s)
		}
		names[name] = true
		p.Sinks = append(p.Sinks, spec.Sink{Name: name, Type: spec.SinkStdout, Streams: []string{s}, Format: spec.FormatJSON})
	}
	opts := make([]runtime.Option, 0, len(p.Sinks))
	for _, sk := range p.Sinks {
		opts = append(opts, runtime.WithSink(sk.Name, captureSink{c}))
	}
	return opts, nil
}
