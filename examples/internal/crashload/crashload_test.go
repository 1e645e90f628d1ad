package crashload_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/examples/internal/crashload"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
)

// TestGenerateKeepsItsPromises checks, for any config, what the crash
// test relies on: event and write times never decrease within a stream
// (which is what keeps every record on time), seq numbers each stream's
// records from 1, every record is in range, and the expected output has
// one msg record per record and windows whose counts and sums add up to
// the records' and never straddle a window boundary.
func TestGenerateKeepsItsPromises(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := crashload.Config{
			Messages: rapid.IntRange(1, 500).Draw(t, "messages"),
			Keys:     rapid.IntRange(1, 50).Draw(t, "keys"),
			Window:   time.Duration(rapid.Int64Range(1, int64(time.Minute)).Draw(t, "window")),
			Span:     time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "span")),
			Seed:     rapid.Uint64().Draw(t, "seed"),
		}
		w := crashload.Generate(cfg)
		require.Equal(t, w, crashload.Generate(cfg), "deterministic")
		start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
		total, valueSum := 0, int64(0)
		for s, recs := range w.Records {
			for i, r := range recs {
				if i > 0 {
					require.LessOrEqual(t, recs[i-1].Event, r.Event)
					require.LessOrEqual(t, recs[i-1].Write, r.Write)
				}
				require.Equal(t, int64(crashload.WriteLag[s]), r.Write-r.Event)
				require.GreaterOrEqual(t, r.Event, start)
				require.Less(t, r.Event, start+int64(cfg.Span))
				require.Equal(t, int64(i+1), r.Payload.Seq)
				require.Equal(t, crashload.Streams[s], r.Payload.Stream)
				valueSum += r.Payload.Value
			}
			total += len(recs)
		}
		require.Equal(t, cfg.Messages, total)

		msgs, windowCount, windowSum := 0, int64(0), int64(0)
		for o, n := range w.Expected() {
			require.Equal(t, 1, n, "every expected output is unique: %v", o)
			switch o.Kind {
			case "msg":
				msgs++
			case "window":
				require.Zero(t, o.WindowStart%int64(cfg.Window), "%v", o)
				windowCount += o.Count
				windowSum += o.Sum
			default:
				t.Fatalf("unknown kind in %v", o)
			}
		}
		require.Equal(t, cfg.Messages, msgs)
		require.Equal(t, int64(cfg.Messages), windowCount)
		require.Equal(t, valueSum, windowSum)
	})
}

// TestExpectedByHand checks the model on records small enough to tally by
// hand, including a window boundary and a key in both streams.
func TestExpectedByHand(t *testing.T) {
	w := &crashload.Workload{Config: crashload.Config{Window: 10 * time.Second}}
	s := int64(time.Second)
	w.Records[0] = []crashload.Record{
		{Event: 1 * s, Payload: crashload.Payload{Key: "k1", Seq: 1, Value: 5, Stream: "a"}},
		{Event: 10 * s, Payload: crashload.Payload{Key: "k1", Seq: 2, Value: 7, Stream: "a"}},
	}
	w.Records[1] = []crashload.Record{
		{Event: 9 * s, Payload: crashload.Payload{Key: "k1", Seq: 1, Value: 100, Stream: "b"}},
		{Event: -1, Payload: crashload.Payload{Key: "k2", Seq: 2, Value: 1, Stream: "b"}},
	}
	require.Equal(t, map[crashload.Output]int{
		{Kind: "msg", Stream: "a", Seq: 1, Key: "k1"}:                       1,
		{Kind: "msg", Stream: "a", Seq: 2, Key: "k1"}:                       1,
		{Kind: "msg", Stream: "b", Seq: 1, Key: "k1"}:                       1,
		{Kind: "msg", Stream: "b", Seq: 2, Key: "k2"}:                       1,
		{Kind: "window", Key: "k1", WindowStart: 0, Count: 2, Sum: 105}:     1,
		{Kind: "window", Key: "k1", WindowStart: 10 * s, Count: 1, Sum: 7}:  1,
		{Kind: "window", Key: "k2", WindowStart: -10 * s, Count: 1, Sum: 1}: 1,
	}, w.Expected())
}

// TestDefaults checks the workload the crash test runs: 200,000 messages
// over both streams, every one of the 1000 keys used, 30 windows of 10s.
func TestDefaults(t *testing.T) {
	w := crashload.Generate(crashload.Config{Seed: 1})
	require.Equal(t, 200_000, len(w.Records[0])+len(w.Records[1]))
	require.InDelta(t, 100_000, len(w.Records[0]), 2000, "the streams are about even")
	keys := map[string]bool{}
	starts := map[int64]bool{}
	for o := range w.Expected() {
		keys[o.Key] = true
		if o.Kind == "window" {
			starts[o.WindowStart] = true
		}
	}
	require.Len(t, keys, 1000)
	require.Len(t, starts, 30)
}

// TestFilesAreRecordLines reads the written files back with the host's
// own parser of the record line format.
func TestFilesAreRecordLines(t *testing.T) {
	w := crashload.Generate(crashload.Config{Messages: 300, Keys: 7, Seed: 3})
	dir := t.TempDir()
	paths := [2]string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")}
	require.NoError(t, w.WriteFiles(paths[0], paths[1]))
	for s, path := range paths {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		i := 0
		for ; sc.Scan(); i++ {
			lr, err := connect.ParseLine(sc.Bytes())
			require.NoError(t, err, "%s:%d", path, i+1)
			want := w.Records[s][i]
			require.True(t, lr.HasWrite && lr.HasEvent)
			require.Equal(t, want.Write, lr.Write)
			require.Equal(t, want.Event, lr.Event)
			var p crashload.Payload
			require.NoError(t, json.Unmarshal(lr.Payload, &p))
			require.Equal(t, want.Payload, p)
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
		require.Equal(t, len(w.Records[s]), i)
	}
}

// TestPipelineParses checks the spec the crash test runs against the spec
// parser: the partitions, the watermark that keeps records on time and
// the window the expected output is computed for.
func TestPipelineParses(t *testing.T) {
	w := crashload.Generate(crashload.Config{Messages: 1, Window: 7 * time.Second})
	dir := t.TempDir()
	p, err := spec.Parse(filepath.Join(dir, "crash.yaml"), w.Pipeline("in/a.jsonl", "/data/b.jsonl", "out.jsonl", "dead.jsonl"))
	require.NoError(t, err)
	require.Len(t, p.Sources, 2)
	for i, src := range p.Sources {
		require.Equal(t, crashload.Streams[i], src.Stream)
		require.Equal(t, 2, src.Partitions)
		require.Equal(t, []string{"key"}, src.PartitionBy)
		require.Equal(t, crashload.OutOfOrdernessBound, src.Watermark.OutOfOrdernessBound)
		require.Zero(t, src.Watermark.IdlePartitions.MaxRatio)
	}
	require.Equal(t, filepath.Join(dir, "in", "a.jsonl"), p.Sources[0].File.Path)
	require.Equal(t, "/data/b.jsonl", p.Sources[1].File.Path)
	c := p.Computation("tally")
	require.NotNil(t, c)
	require.Equal(t, "crash-tally", c.Plugin)
	require.Equal(t, 2, c.Partitions)
	require.Equal(t, []string{"key"}, c.GroupBy)
	require.Equal(t, "7s", c.Parameters["window"])
	require.Equal(t, filepath.Join(dir, "out.jsonl"), p.Sink("out").File.Path)
}

func TestParseOutput(t *testing.T) {
	for _, o := range []crashload.Output{
		{Kind: "msg", Stream: "b", Seq: 12, Key: "k001"},
		{Kind: "window", Key: "k001", WindowStart: 1714557600000000000, Count: 3, Sum: 0},
	} {
		got, err := crashload.ParseOutput([]byte(o.String()))
		require.NoError(t, err)
		require.Equal(t, o, got)
	}
	for _, bad := range []string{
		`{"kind":"msg","stream":"a","seq":1}`,
		`{"kind":"msg","stream":"a","seq":1,"key":"k","extra":1}`,
		`{"kind":"msg","stream":"a","seq":1,"key":"k","count":1}`,
		`{"kind":"window","key":"k","window_start":0,"count":1}`,
		`{"kind":"tally","key":"k"}`,
		`{"kind":"msg","stream":"a","seq":1,"key":"k"} {}`,
		`[]`,
	} {
		_, err := crashload.ParseOutput([]byte(bad))
		require.Error(t, err, bad)
	}
}
