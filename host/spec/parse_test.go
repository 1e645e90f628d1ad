package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

func parseFull(t testing.TB) *Pipeline {
	t.Helper()
	p, err := ParseFile(filepath.Join("testdata", "full.yaml"))
	require.NoError(t, err)
	return p
}

func TestParseFullExample(t *testing.T) {
	p := parseFull(t)
	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)

	require.Equal(t, "orders-payments", p.Name)
	require.Equal(t, filepath.Join("testdata", "full.yaml"), p.File)
	require.Equal(t, []Stream{{Name: "orders"}, {Name: "payments"}}, p.Streams)

	require.Len(t, p.Sources, 3)
	orders := p.Sources[0]
	require.Equal(t, SourceFile, orders.Type)
	require.Equal(t, 4, orders.Partitions)
	require.Equal(t, []string{"order_id"}, orders.PartitionBy)
	require.Equal(t, filepath.Join(dir, "data", "orders.jsonl"), orders.File.Path, "relative to the spec's directory")
	require.Equal(t, SourceWatermark{OutOfOrdernessBound: time.Minute, IdlePartitions: IdlePartitions{Duration: time.Minute, MaxRatio: 0.4}}, orders.Watermark)
	require.Equal(t, &HTTPEndpoint{Listen: "127.0.0.1:8081", Path: "/ingest/payments"}, p.Sources[1].HTTP)
	require.Equal(t, &GeneratorSource{Count: 100000, Rate: 0, Keys: 1000, PayloadBytes: 1024, Seed: 7, EventLag: 250 * time.Millisecond}, p.Sources[2].Generator)

	join := p.Computation("join")
	require.NotNil(t, join)
	require.Equal(t, "order-join", join.Plugin)
	require.Equal(t, KindTransform, join.Kind)
	require.Equal(t, []string{"orders", "payments"}, join.InputStreams)
	require.Equal(t, map[string]time.Duration{"payments": 5 * time.Minute}, join.InputOrdering.StreamDelays)
	require.Equal(t, &WatermarkStrategy{OutOfOrdernessBound: 30 * time.Second}, join.WatermarkStrategy, "30000 is milliseconds")
	require.Equal(t, Batch{MaxRows: 500, MaxBytes: 10_000_000, MaxDuration: time.Second}, join.Batch)
	require.Equal(t, int64(64<<20), join.BufferBytes)
	require.Equal(t, map[string]any{
		"window":   "1m",
		"anything": []any{uint64(1), uint64(2)},
		"nested":   map[string]any{"deep": true},
	}, join.Parameters)
	require.Equal(t, &DeadLetterRoute{Stream: "join-rejects"}, join.DeadLetter)

	enrich := p.Computation("enrich")
	require.Equal(t, KindMap, enrich.Kind)
	require.Equal(t, TimeAlignment, enrich.InputOrdering.TimeType)
	require.Equal(t, OrderingRelaxed, enrich.DistributionOrdering)

	require.Equal(t, filepath.Join(dir, "out.jsonl"), p.Sink("out").File.Path)
	require.Equal(t, SinkStdout, p.Sink("console").Type)
	require.Equal(t, DeadLetter{Type: DeadLetterFile, File: &FileSink{Path: "/var/tmp/dead-letter.jsonl"}}, p.DeadLetter, "absolute paths stay")
}

func TestParseFillsDefaults(t *testing.T) {
	src := `
name: minimal
sources:
  - {name: in, type: generator, stream: s}
  - {name: web, type: http, stream: w, http: {listen: "127.0.0.1:0"}}
computations:
  - {name: c, plugin: p, input_streams: [s, w], watermark_strategy: {}}
`
	p, err := Parse(filepath.Join("some", "dir", "pipeline.yaml"), []byte(src))
	require.NoError(t, err)

	// Flow's defaults, as the brief and flow-reference.md state them.
	in := p.Sources[0]
	require.Equal(t, 1, in.Partitions)
	require.Equal(t, time.Minute, in.Watermark.OutOfOrdernessBound)
	require.Equal(t, time.Minute, in.Watermark.IdlePartitions.Duration)
	require.Equal(t, 0.4, in.Watermark.IdlePartitions.MaxRatio)
	require.Equal(t, &GeneratorSource{Keys: 1000, PayloadBytes: 100, Seed: 1}, in.Generator, "a generator without settings gets the defaults")
	require.Equal(t, "/", p.Sources[1].HTTP.Path)

	c := p.Computations[0]
	require.Equal(t, KindTransform, c.Kind)
	require.Equal(t, 1, c.Partitions)
	require.Equal(t, TimeEvent, c.InputOrdering.TimeType)
	require.Equal(t, OrderingStrict, c.DistributionOrdering)
	require.Equal(t, Batch{MaxRows: 1000, MaxBytes: 10 << 20, MaxDuration: 10 * time.Millisecond}, c.Batch)
	require.Equal(t, int64(64<<20), c.BufferBytes)
	require.Equal(t, &WatermarkStrategy{OutOfOrdernessBound: time.Minute}, c.WatermarkStrategy)
	require.Nil(t, c.DeadLetter)
	require.Nil(t, c.Parameters)

	abs, err := filepath.Abs(filepath.Join("some", "dir", "dead-letter.jsonl"))
	require.NoError(t, err)
	require.Equal(t, DeadLetter{Type: DeadLetterFile, File: &FileSink{Path: abs}}, p.DeadLetter, "dead letters go beside the spec")
}

func TestParseKeepsExplicitZeros(t *testing.T) {
	// Zero is a meaningful setting for these, so it must not be replaced by the default.
	src := `
name: zeros
sources:
  - name: in
    type: generator
    stream: s
    generator: {seed: 0, keys: 1, payload_bytes: 0}
    watermark: {out_of_orderness_bound: 0, idle_partitions: {duration: 0s, max_ratio: 0}}
`
	p, err := Parse("zeros.yaml", []byte(src))
	require.NoError(t, err)
	require.Equal(t, &GeneratorSource{Keys: 1}, p.Sources[0].Generator)
	require.Equal(t, SourceWatermark{}, p.Sources[0].Watermark)
}

func TestParseDurationsAndSizes(t *testing.T) {
	tests := []struct {
		duration string
		want     time.Duration
	}{
		{"250ms", 250 * time.Millisecond},
		{"250", 250 * time.Millisecond},
		{"0", 0},
		{"1h30m", 90 * time.Minute},
		{`"5m"`, 5 * time.Minute},
		{"0x10", 16 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run("duration "+tt.duration, func(t *testing.T) {
			src := "name: p\nsources: [{name: in, type: generator, stream: s, generator: {event_lag: " + tt.duration + "}}]\n"
			p, err := Parse("p.yaml", []byte(src))
			require.NoError(t, err)
			require.Equal(t, tt.want, p.Sources[0].Generator.EventLag)
		})
	}
	sizes := []struct {
		size string
		want int64
	}{
		{"65536", 65536},
		{"10MB", 10_000_000},
		{"64MiB", 64 << 20},
		{"1 KiB", 1024},
		{"2kb", 2000},
		{"7B", 7},
		{`"512"`, 512},
	}
	for _, tt := range sizes {
		t.Run("size "+tt.size, func(t *testing.T) {
			src := "name: p\nsources: [{name: in, type: generator, stream: s}]\ncomputations: [{name: c, plugin: p, input_streams: [s], buffer_bytes: " + tt.size + "}]\n"
			p, err := Parse("p.yaml", []byte(src))
			require.NoError(t, err)
			require.Equal(t, tt.want, p.Computations[0].BufferBytes)
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: " 3 GB ", want: 3e9},
		{in: "1TiB", want: 1 << 40},
		{in: "8388607TiB", want: 8388607 << 40},
		{in: "8388608TiB", err: "size too large: the limit is 8EiB"},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", err: "size too large: the limit is 8EiB"},
		{in: "", err: errSize.Error()},
		{in: "MB", err: errSize.Error()},
		{in: "-1", err: errSize.Error()},
		{in: "1.5MB", err: errSize.Error()},
		{in: "10M", want: 10_000_000}, // the manifest's units too (plugins.ParseSize)
		{in: "10 MB extra", err: errSize.Error()},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.err != "" {
			require.EqualError(t, err, tt.err, "ParseSize(%q)", tt.in)
			continue
		}
		require.NoError(t, err, "ParseSize(%q)", tt.in)
		require.Equal(t, tt.want, got, "ParseSize(%q)", tt.in)
	}
}

func TestParseAnchorsAndMergeKeys(t *testing.T) {
	src := `
name: shared
sources: [{name: in, type: generator, stream: s}]
computations:
  - name: a
    plugin: p
    input_streams: [s]
    output_streams: [t]
    batch: &small {max_rows: 10, max_duration: 50ms}
    parameters: &params {mode: fast, limit: 3}
  - name: b
    plugin: p
    input_streams: [t]
    batch: *small
    parameters:
      <<: *params
      limit: 4
  - name: c
    plugin: p
    input_streams: [t]
    parameters: {<<: [{x: 1}, {x: 2, y: 2}]}
`
	p, err := Parse("anchors.yaml", []byte(src))
	require.NoError(t, err)
	small := Batch{MaxRows: 10, MaxBytes: 10 << 20, MaxDuration: 50 * time.Millisecond}
	require.Equal(t, small, p.Computation("a").Batch)
	require.Equal(t, small, p.Computation("b").Batch)
	require.Equal(t, map[string]any{"mode": "fast", "limit": uint64(4)}, p.Computation("b").Parameters, "explicit keys override merged ones")
	require.Equal(t, map[string]any{"x": uint64(1), "y": uint64(2)}, p.Computation("c").Parameters, "of merged mappings the first wins")
}

func TestParseStrTag(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: !!str 2024\nsources: [{name: in, type: generator, stream: !!str 7}]\n"))
	require.NoError(t, err)
	require.Equal(t, "2024", p.Name)
	require.Equal(t, "7", p.Sources[0].Stream)
}

func TestParseJSON(t *testing.T) {
	src := `{
  "name": "json",
  "sources": [{"name": "in", "type": "generator", "stream": "s"}],
  "computations": [{"name": "c", "plugin": "p", "input_streams": ["s"], "batch": {"max_duration": 1500}}],
  "sinks": [{"name": "out", "type": "stdout", "streams": ["s"]}]
}`
	p, err := Parse("pipeline.json", []byte(src))
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, p.Computations[0].Batch.MaxDuration)

	_, err = Parse("pipeline.json", []byte(`{"name": "json", "sources": [{"name": "in", "type": "generator", "stream": "s", "partitions": "2"}]}`))
	list := errorList(t, err)
	require.Equal(t, "pipeline.json:1:95: sources[0].partitions: expected an integer; got \"2\"", list.Error())
}

func TestRoundTrip(t *testing.T) {
	p := parseFull(t)
	out, err := yaml.Marshal(p)
	require.NoError(t, err)
	again, err := Parse(p.File, out)
	require.NoError(t, err, "marshaled spec:\n%s", out)
	requireSamePipeline(t, p, again)
}

// requireSamePipeline compares what a spec says, not where it said it.
func requireSamePipeline(t *testing.T, want, got *Pipeline) {
	t.Helper()
	w, g := *want, *got
	w.src, g.src = nil, nil
	require.Equal(t, w, g)
}

func TestErrorFormats(t *testing.T) {
	src := "name: p\nsources:\n  - name: in\n    type: generator\n    stream: s\ncomputations:\n  - name: a\n    plugin: p\n    input_streams: [s]\n  - name: b\n    plugin: p\n    input_streams: [s]\n    kind: transfrom\n"
	_, err := Parse("pipeline.yaml", []byte(src))
	require.EqualError(t, err, `pipeline.yaml:13:11: computations[1].kind: expected one of transform, map; got "transfrom"`)

	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, &Error{File: "pipeline.yaml", Line: 13, Column: 11, Path: "computations[1].kind", Message: `expected one of transform, map; got "transfrom"`, token: e.token}, e)

	formatted := FormatError(err, false)
	require.True(t, strings.HasPrefix(formatted, e.Error()+"\n"), formatted)
	require.Contains(t, formatted, "> 13 |     kind: transfrom\n")
	require.Contains(t, formatted, "\n"+strings.Repeat(" ", len("  13 | ")+10)+"^\n", "a caret under column 11")

	require.Equal(t, "plain", FormatError(errors.New("plain"), false))
	_, err = Parse("two.yaml", []byte("name: p\nsources: [{name: in, type: generator, stream: s, partitions: 0}]\nsinks: [{name: o, type: stdout}]\n"))
	require.Len(t, errorList(t, err), 2)
	require.Equal(t, 2, strings.Count(FormatError(err, false), "two.yaml:"), "every error is formatted")

	wrapped := FormatError(fmt.Errorf("tenant t: %w", err), false)
	require.True(t, strings.HasPrefix(wrapped, "tenant t:\ntwo.yaml:"), "what the wrapping error says comes first:\n%s", wrapped)
}

// TestSyntaxErrorFormat checks that a YAML syntax error keeps its
// file:line:column and is shown with the offending line and a caret.
func TestSyntaxErrorFormat(t *testing.T) {
	_, err := Parse("broken.yaml", []byte("name: p\nsources: [{name: in, type: generator\nsinks: []\n"))
	list := errorList(t, err)
	require.Len(t, list, 1)
	formatted := FormatError(err, false)
	require.True(t, strings.HasPrefix(formatted, list[0].Error()+"\n"), formatted)
	require.Regexp(t, `^broken\.yaml:\d+:\d+: `, list[0].Error())
	require.Contains(t, formatted, "|")
	require.Contains(t, formatted, "^")
}

func TestParseFileErrors(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: p\n"), 0o644))
	_, err = ParseFile(path)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, path, e.File)
}

func TestGraphQueries(t *testing.T) {
	p := parseFull(t)

	require.Equal(t, []string{"orders", "payments", "synthetic", "joined", "join-rejects", "enriched"}, p.StreamNames())

	writers := map[string]Node{
		"orders":       {SourceNode, "orders-in"},
		"payments":     {SourceNode, "payments-in"},
		"synthetic":    {SourceNode, "load"},
		"joined":       {ComputationNode, "join"},
		"join-rejects": {ComputationNode, "join"},
		"enriched":     {ComputationNode, "enrich"},
	}
	for stream, want := range writers {
		got, ok := p.Writer(stream)
		require.True(t, ok, stream)
		require.Equal(t, want, got, stream)
	}
	_, ok := p.Writer("nope")
	require.False(t, ok)

	require.Equal(t, []Node{{ComputationNode, "join"}}, p.Readers("orders"))
	require.Equal(t, []Node{{ComputationNode, "enrich"}, {SinkNode, "console"}}, p.Readers("joined"))
	require.Equal(t, []Node{{SinkNode, "out"}, {SinkNode, "live"}}, p.Readers("enriched"))
	require.Empty(t, p.Readers("nope"))

	require.Equal(t, `computation "join"`, p.Readers("orders")[0].String())
	require.Equal(t, "orders-in", p.Source("orders-in").Name)
	require.Nil(t, p.Source("join"))
	require.Nil(t, p.Computation("orders-in"))
	require.Nil(t, p.Sink("join"))
}

func TestTopologicalOrder(t *testing.T) {
	src := `
name: diamond
sources: [{name: in, type: generator, stream: s}]
computations:
  - {name: last, plugin: p, input_streams: [l, r]}
  - {name: right, plugin: p, input_streams: [top], output_streams: [r]}
  - {name: left, plugin: p, input_streams: [top], output_streams: [l]}
  - {name: top, plugin: p, input_streams: [s], output_streams: [top]}
  - {name: lone, plugin: p, input_streams: [s]}
`
	p, err := Parse("diamond.yaml", []byte(src))
	require.NoError(t, err)
	var names []string
	for _, c := range p.TopologicalOrder() {
		names = append(names, c.Name)
	}
	// Among computations free to go, spec order decides.
	require.Equal(t, []string{"top", "right", "left", "last", "lone"}, names)
	require.Same(t, &p.Computations[3], p.TopologicalOrder()[0], "pointers into the pipeline")

	// A hand-built pipeline may have a cycle; its computations come last.
	cyclic := &Pipeline{Computations: []Computation{
		{Name: "a", InputStreams: []string{"b"}, OutputStreams: []string{"a"}},
		{Name: "b", InputStreams: []string{"a"}, OutputStreams: []string{"b"}},
		{Name: "free", InputStreams: []string{"a"}},
	}}
	names = names[:0]
	for _, c := range cyclic.TopologicalOrder() {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"a", "b", "free"}, names)
}

func TestErrorAt(t *testing.T) {
	p := parseFull(t)
	e := p.ErrorAt("computations[1].plugin", "no plugin named %q", "enrich")
	require.Equal(t, filepath.Join("testdata", "full.yaml")+`:42:13: computations[1].plugin: no plugin named "enrich"`, e.Error())

	// A defaulted field is absent from the file: the error points at its section.
	e = p.ErrorAt("computations[1].batch.max_rows", "too many")
	require.Equal(t, position{41, 5}, position{e.Line, e.Column})
	e = p.ErrorAt(`computations[0].parameters.nested.deep`, "no")
	require.Equal(t, position{39, 57}, position{e.Line, e.Column})

	hand := &Pipeline{File: "built.yaml"}
	e = hand.ErrorAt("name", "missing")
	require.Equal(t, "built.yaml:1:1: name: missing", e.Error())
}

func BenchmarkParse(b *testing.B) {
	path := filepath.Join("testdata", "full.yaml")
	data, err := os.ReadFile(path)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(path, data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSinkFormat(t *testing.T) {
	base := "name: p\nsources:\n  - {name: s, type: generator, stream: a}\nsinks:\n  - {name: out, type: stdout, streams: [a]%s}\n"
	p, err := Parse("p.yaml", []byte(fmt.Sprintf(base, "")))
	require.NoError(t, err)
	require.Equal(t, FormatJSON, p.Sinks[0].Format, "json is the default")
	p, err = Parse("p.yaml", []byte(fmt.Sprintf(base, ", format: text")))
	require.NoError(t, err)
	require.Equal(t, FormatText, p.Sinks[0].Format)
	_, err = Parse("p.yaml", []byte(fmt.Sprintf(base, ", format: xml")))
	require.ErrorContains(t, err, `p.yaml:5:53: sinks[0].format: expected one of json, text, payload; got "xml"`)
}
