package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/flowhost/flowhost/examples/internal/orders"
	"github.com/flowhost/flowhost/examples/internal/tracestat"
	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// joinComputation is the computation of examples/pipelines/join.yaml the
// demo measures.
const joinComputation = "join"

// mode is one way of merging the join's input streams.
type mode struct {
	name, label string
	// apply sets the join's input_ordering; the spec's other settings stay.
	apply func(*spec.InputOrdering)
}

var (
	// eventMode runs join.yaml as written: time_type event (bias on) and
	// its stream_delays.
	eventMode = mode{name: "event", label: "(a)", apply: func(o *spec.InputOrdering) { o.TimeType = spec.TimeEvent }}
	// alignmentMode merges on raw AlignmentTimestamps: no bias, no delays.
	alignmentMode = mode{name: "alignment", label: "(b)", apply: func(o *spec.InputOrdering) {
		*o = spec.InputOrdering{TimeType: spec.TimeAlignment}
	}}
)

// runner runs the join pipeline on the generated data.
type runner struct {
	root, work, plugins      string
	ordersPath, paymentsPath string
	log                      *slog.Logger
	maxRows                  int           // the join's batch.max_rows; 0 keeps the spec's
	delay                    time.Duration // stream_delays of payments in event mode; <0 keeps the spec's
	quiet                    bool          // no progress display
}

// result is what one run left behind.
type result struct {
	mode                mode
	join                spec.Computation // as run
	specPath, tracePath string
	joined              []joinedRecord
	unmatched           []string // order ids
	deadLetters         int
	inv                 tracestat.Inversions
	bias                map[string]time.Duration // mean bias per input stream
}

// describe says how the join merged its inputs.
func (r *result) describe() string {
	o := r.join.InputOrdering
	s := "time_type " + string(o.TimeType)
	if o.TimeType == spec.TimeEvent {
		s += " (bias on)"
	} else {
		s += " (bias off)"
	}
	for _, name := range slices.Sorted(maps.Keys(o.StreamDelays)) {
		s += fmt.Sprintf(", stream_delays %s: %s", name, o.StreamDelays[name])
	}
	return s + fmt.Sprintf(", batch.max_rows %d", r.join.Batch.MaxRows)
}

// joinedRecord is the part of a joined output the demo shows.
type joinedRecord struct {
	MessageID string
	OrderID   string `json:"order_id"`
	Customer  string `json:"customer"`
	OrderedAt string `json:"ordered_at"`
	PaidAt    string `json:"paid_at"`
}

// run writes the mode's variant of join.yaml (the generated data as
// sources, a file sink, its input_ordering) and runs it through host.Run
// with a trace, exactly as `flowhost run -f SPEC --plugins DIR --trace
// FILE` would.
func (r *runner) run(ctx context.Context, m mode) (*result, error) {
	dir := filepath.Join(r.work, m.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	res := &result{
		mode:      m,
		specPath:  filepath.Join(dir, "join.yaml"),
		tracePath: filepath.Join(dir, "trace.jsonl"),
	}
	outPath := filepath.Join(dir, "out.jsonl")
	deadPath := filepath.Join(dir, "dead-letter.jsonl")
	for _, p := range []string{outPath, deadPath} { // file sinks append
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	// Each run starts from a fresh data directory: on the same one, a run
	// would resume after the files were read and find nothing to do.
	dataDir := filepath.Join(dir, "data")
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, err
	}
	p, err := spec.ParseFile(filepath.Join(r.root, "examples", "pipelines", "join.yaml"))
	if err != nil {
		return nil, err
	}
	for i := range p.Sources {
		switch p.Sources[i].Stream {
		case "orders":
			p.Sources[i].File.Path = r.ordersPath
		case "payments":
			p.Sources[i].File.Path = r.paymentsPath
		}
	}
	for i := range p.Sinks {
		p.Sinks[i].Type, p.Sinks[i].File, p.Sinks[i].Format = spec.SinkFile, &spec.FileSink{Path: outPath}, spec.FormatJSON
	}
	p.DeadLetter = spec.DeadLetter{Type: spec.DeadLetterFile, File: &spec.FileSink{Path: deadPath}}
	join := p.Computation(joinComputation)
	if join == nil {
		return nil, fmt.Errorf("%s has no computation %q", p.File, joinComputation)
	}
	if r.maxRows > 0 {
		join.Batch.MaxRows = r.maxRows
	}
	if r.delay >= 0 && m.name == eventMode.name {
		join.InputOrdering.StreamDelays = map[string]time.Duration{"payments": r.delay}
	}
	m.apply(&join.InputOrdering)
	res.join = *join
	text, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# examples/pipelines/join.yaml as the demo ran it in mode %q, every default spelled out.\n", m.name)
	if err := os.WriteFile(res.specPath, append([]byte(header), text...), 0o644); err != nil {
		return nil, err
	}
	var opts []runtime.Option
	if r.quiet {
		// Replaces the host's progress display of file sources.
		opts = append(opts, runtime.WithProgress(func(string, connect.FileProgress) {}))
	}
	err = host.Run(ctx, host.RunConfig{
		SpecPath:   res.specPath,
		PluginDirs: []string{r.plugins},
		TracePath:  res.tracePath,
		CacheDir:   filepath.Join(r.work, "cache"),
		DataDir:    dataDir,
		Logger:     r.log,
		Options:    opts,
	})
	if err != nil {
		return nil, err
	}
	if err := res.readOutput(outPath); err != nil {
		return nil, err
	}
	if res.deadLetters, err = countLines(deadPath); err != nil {
		return nil, err
	}
	trace, err := tracestat.Read(res.tracePath)
	if err != nil {
		return nil, err
	}
	res.inv = tracestat.EventInversions(trace, joinComputation)
	res.bias = tracestat.MeanBias(trace, joinComputation)
	return res, nil
}

func (res *result) readOutput(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var rec connect.SinkRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		var j joinedRecord
		if err := json.Unmarshal(rec.Payload, &j); err != nil {
			return fmt.Errorf("%s:%d: payload: %w", path, n, err)
		}
		switch rec.Stream {
		case "joined":
			j.MessageID = rec.MessageID
			res.joined = append(res.joined, j)
		case "unmatched":
			res.unmatched = append(res.unmatched, j.OrderID)
		default:
			return fmt.Errorf("%s:%d: unexpected stream %q", path, n, rec.Stream)
		}
	}
	return sc.Err()
}

func countLines(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return strings.Count(string(data), "\n"), err
}

// checkJoins makes sure each run joined every paid order exactly once and
// reported every unpaid one as unmatched: the figure compares two correct
// runs, not a correct one and a broken one.
func checkJoins(d orders.Dataset, results []*result) error {
	paid := map[string]bool{}
	for _, p := range d.Payments {
		paid[p.OrderID] = true
	}
	for _, res := range results {
		if res.deadLetters > 0 {
			return fmt.Errorf("run %s: %d records went to the dead-letter file", res.mode.name, res.deadLetters)
		}
		seen := map[string]int{}
		for _, j := range res.joined {
			seen[j.OrderID]++
		}
		for _, o := range d.Orders {
			want := 0
			if paid[o.ID] {
				want = 1
			}
			if seen[o.ID] != want {
				return fmt.Errorf("run %s: order %s was joined %d times, want %d", res.mode.name, o.ID, seen[o.ID], want)
			}
		}
		if want := len(d.Orders) - len(d.Payments); len(res.unmatched) != want {
			return fmt.Errorf("run %s: %d unmatched records, want %d (the unpaid orders)", res.mode.name, len(res.unmatched), want)
		}
		for _, id := range res.unmatched {
			if paid[id] {
				return fmt.Errorf("run %s: paid order %s reported unmatched", res.mode.name, id)
			}
		}
	}
	return nil
}
