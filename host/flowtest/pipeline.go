package flowtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/plugins"
)

// Config is what [Run] runs.
type Config struct {
	// Pipeline is the parsed spec. Run changes it (its inputs and sinks);
	// parse it again to run it again.
	Pipeline *spec.Pipeline
	// Inputs maps a source, by its name or the name of the stream it
	// writes, to a file the source reads instead of its own input: the
	// source becomes a file source of that path, keeping its format,
	// event_time, partitions, partition_by and watermark. A relative
	// path is relative to the working directory. A source without an
	// input must be a file source or a generator, which end by
	// themselves.
	Inputs map[string]string
	// Factories gives computations natively, by computation name; the
	// others are loaded from PluginDirs as flowhost run loads them.
	Factories map[string]compute.Factory
	// PluginDirs are plugin directories, or folders of them.
	PluginDirs []string
	// CacheDir holds compiled plugins; "" compiles without a cache.
	CacheDir string
	// Logger receives the host's and guests' logs; nil discards them.
	Logger *slog.Logger
	// Options are passed on to runtime.New after the harness's own.
	Options []runtime.Option
}

// Result is what a run produced.
type Result struct {
	// Outputs holds the records of every stream a computation writes (and
	// every stream a sink of the spec reads), in the order they were
	// handed to the sinks: within a stream, the host's delivery order.
	Outputs map[string][]connect.SinkRecord
	// DeadLetters are the dead-letter records, one JSON line each.
	DeadLetters []string
	// Summary is the run's summary.
	Summary runtime.Summary
}

// Run runs cfg.Pipeline in memory to the end of its inputs (every source
// ends, so the watermarks reach the end of time and every pending timer
// fires), with every sink replaced by a capture, and returns what each
// stream received. It is what `flowhost test` runs.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	p := cfg.Pipeline
	if err := replaceInputs(p, cfg.Inputs); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	factories, closeAll, err := loadFactories(ctx, p, cfg.Factories, cfg.PluginDirs, cfg.CacheDir, log)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	c := newCapture()
	opts, err := captureAll(p, c)
	if err != nil {
		return nil, err
	}
	var dead bytes.Buffer
	opts = append(opts, runtime.WithLogger(log), runtime.WithDeadLetter(&dead), runtime.WithStopGrace(-1))
	opts = append(opts, cfg.Options...)
	rt, err := runtime.New(p, factories, opts...)
	if err != nil {
		return nil, err
	}
	if err := rt.Run(ctx); err != nil {
		return nil, err
	}
	res := &Result{Outputs: map[string][]connect.SinkRecord{}, Summary: rt.Summary()}
	for _, sk := range p.Sinks {
		for _, s := range sk.Streams {
			res.Outputs[s] = c.get(s)
		}
	}
	for l := range strings.Lines(dead.String()) {
		res.DeadLetters = append(res.DeadLetters, strings.TrimRight(l, "\n"))
	}
	return res, nil
}

// replaceInputs turns the sources named in inputs into file sources of
// the files given, and checks that every other source ends by itself.
func replaceInputs(p *spec.Pipeline, inputs map[string]string) error {
	used := map[string]bool{}
	for i := range p.Sources {
		s := &p.Sources[i]
		name := s.Name
		path, ok := inputs[name]
		if !ok {
			name = s.Stream
			path, ok = inputs[name]
		}
		if !ok {
			if s.Type != spec.SourceFile && s.Type != spec.SourceGenerator {
				return fmt.Errorf("source %q is of type %s, which does not end by itself: give it a file with --input %s=FILE", s.Name, s.Type, s.Name)
			}
			continue
		}
		used[name] = true
		if et := s.EventTime; et != nil && et.Header != "" || s.Kafka != nil && s.Kafka.EventTime != nil && s.Kafka.EventTime.Header != "" {
			return fmt.Errorf("source %q takes its event time from a Kafka header, which a file has not: give the test a pipeline whose source reads event_time from a payload field", s.Name)
		}
		if s.Kafka != nil && s.Kafka.EventTime != nil && s.EventTime == nil {
			s.EventTime = s.Kafka.EventTime
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("--input %s=%s: %w", name, path, err)
		}
		s.Type, s.File, s.HTTP, s.Kafka, s.Generator = spec.SourceFile, &spec.FileSource{Path: abs}, nil, nil, nil
		if s.Format == "" {
			s.Format = spec.DefaultSourceFormat(spec.SourceFile)
		}
	}
	var unknown []string
	for name := range inputs {
		if !used[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		var have []string
		for _, s := range p.Sources {
			have = append(have, s.Name+" (stream "+s.Stream+")")
		}
		slices.Sort(unknown)
		return fmt.Errorf("--input %s: no source of pipeline %q has that name or stream; its sources are %s", strings.Join(unknown, ", "), p.Name, strings.Join(have, ", "))
	}
	return nil
}

// loadFactories returns a factory for every computation of p: those given
// natively, the others compiled from their plugins in dirs. close releases
// the compiled plugins.
func loadFactories(ctx context.Context, p *spec.Pipeline, native map[string]compute.Factory, dirs []string, cacheDir string, log *slog.Logger) (map[string]compute.Factory, func(), error) {
	factories := maps.Clone(native)
	if factories == nil {
		factories = map[string]compute.Factory{}
	}
	wasm := *p
	wasm.Computations = nil
	for _, c := range p.Computations {
		if _, ok := factories[c.Name]; !ok {
			wasm.Computations = append(wasm.Computations, c)
		}
	}
	if len(wasm.Computations) == 0 {
		return factories, func() {}, nil
	}
	if len(dirs) == 0 && len(p.Tenants) == 0 {
		var names []string
		for _, c := range wasm.Computations {
			names = append(names, c.Name)
		}
		return nil, nil, fmt.Errorf("computations %s need their plugins: give the plugin directories (--plugins)", strings.Join(names, ", "))
	}
	catalog, err := plugins.Discover(dirs)
	if err != nil {
		return nil, nil, err
	}
	loaded, err := host.LoadComputations(ctx, &wasm, catalog, cacheDir, 0, log)
	if err != nil {
		return nil, nil, err
	}
	for i := range p.Computations {
		c := &p.Computations[i]
		if f, ok := loaded.Factories[c.Name]; ok {
			factories[c.Name] = f
			// The manifest's parameter defaults, merged in by the load.
			j := slices.IndexFunc(wasm.Computations, func(w spec.Computation) bool { return w.Name == c.Name })
			c.Parameters = wasm.Computations[j].Parameters
		}
	}
	return factories, func() { loaded.Close(context.WithoutCancel(ctx)) }, nil
}
