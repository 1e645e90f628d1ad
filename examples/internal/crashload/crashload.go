// Package crashload makes the workload of flowhost's crash test
// (examples/crash_test.go): two source files, the pipeline that runs the
// crash-tally plugin on them, and the exact output that pipeline must
// produce, computed from the input alone. The crash test checks a run
// killed many times against this model, not only against a second run, so
// that a fault both runs share cannot pass unnoticed.
//
// # Why the expected output does not depend on the run
//
// crash-tally emits one msg record per input message and one window record
// per key and tumbling window of event time (count and sum of value). The
// msg records depend on nothing but the input. The window records depend
// on the order of delivery only through late data: a message delivered
// after its window's timer fired would reopen the window. The workload
// rules that out:
//
//   - event times never decrease within a file, so they never decrease
//     within a source partition either (a partition is a subsequence of
//     its file), and a partition's watermark (newest event time minus
//     out_of_orderness_bound) never passes a record it has not yet read;
//   - the pipeline turns idle-partition detection off (max_ratio 0), the
//     one way a source watermark could pass a partition's unread records;
//   - the host lowers a computation's timer watermark to what is still
//     queued in it, and takes the minimum over its input streams, so the
//     interleaving of the two streams cannot make a record late either.
//
// So every window is emitted once, complete, whatever the interleaving of
// the streams, the batching, or where a crashed run resumed. The bound is
// then free; [OutOfOrdernessBound] keeps it small so that windows are
// emitted during the run rather than all at its end.
//
// # Files
//
// Files are in flowhost's record line format (host/connect), one record
// per line in event order, write_ts given, so a replay is deterministic:
//
//	{"write_ts":1714557600020000000,"event_ts":1714557600000000000,"payload":{"key":"k123","seq":1,"value":42,"stream":"a"}}
package crashload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"
)

// Streams are the two source streams, in the order of [Workload.Records].
var Streams = [2]string{"a", "b"}

// WriteLag is how long after it happened a record of each stream is
// written to its queue. It is constant per stream, so that write_ts, like
// event_ts, never decreases within a file; stream b lags, so that the
// host's cross-stream merge has a bias to correct.
var WriteLag = [2]time.Duration{20 * time.Millisecond, 1500 * time.Millisecond}

// OutOfOrdernessBound is the source watermark bound of [Workload.Pipeline].
// Any bound keeps this workload on time (see the package documentation).
const OutOfOrdernessBound = time.Second

// Config describes a workload. The zero value of a field takes the default
// named in its comment.
type Config struct {
	// Messages is the number of input messages over both streams (default
	// 200,000); each goes to stream a or b at random.
	Messages int
	// Keys is the number of distinct keys, "k000" on (default 1000).
	Keys int
	// Window is crash-tally's window length, which the pipeline passes as
	// its parameter and the expected output is computed for (default 10s).
	Window time.Duration
	// Start is the earliest event time (default 2024-05-01T10:00:00Z); Span
	// the range of event times (default 5m, 30 windows of 10s).
	Start time.Time
	Span  time.Duration
	// Seed seeds the random numbers: equal configs give equal workloads.
	Seed uint64
}

func (c Config) withDefaults() Config {
	if c.Messages == 0 {
		c.Messages = 200_000
	}
	if c.Keys == 0 {
		c.Keys = 1000
	}
	if c.Window == 0 {
		c.Window = 10 * time.Second
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	}
	if c.Span == 0 {
		c.Span = 5 * time.Minute
	}
	return c
}

// Payload is an input record's payload.
type Payload struct {
	Key    string `json:"key"`
	Seq    int64  `json:"seq"`
	Value  int64  `json:"value"`
	Stream string `json:"stream"`
}

// Record is one input record: its timestamps (nanoseconds since the Unix
// epoch) and its payload.
type Record struct {
	Write   int64   `json:"write_ts"`
	Event   int64   `json:"event_ts"`
	Payload Payload `json:"payload"`
}

// Workload is a generated workload.
type Workload struct {
	// Config is the config it was made from, defaults filled in.
	Config Config
	// Records holds each stream's records in file order: event time
	// non-decreasing, seq counting from 1.
	Records [2][]Record
}

// Generate makes the workload cfg describes. It panics on a negative
// field, as the defaults would not mean anything then.
func Generate(cfg Config) *Workload {
	cfg = cfg.withDefaults()
	if cfg.Messages < 0 || cfg.Keys < 0 || cfg.Window < 0 || cfg.Span < 0 {
		panic(fmt.Sprintf("crashload: negative config field in %+v", cfg))
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a5_410a))
	events := make([]int64, cfg.Messages)
	for i := range events {
		events[i] = cfg.Start.UnixNano() + rng.Int64N(int64(cfg.Span))
	}
	slices.Sort(events)
	w := &Workload{Config: cfg}
	for _, ev := range events {
		s := rng.IntN(len(Streams))
		w.Records[s] = append(w.Records[s], Record{
			Write: ev + int64(WriteLag[s]),
			Event: ev,
			Payload: Payload{
				Key:    keyName(rng.IntN(cfg.Keys)),
				Seq:    int64(len(w.Records[s]) + 1),
				Value:  rng.Int64N(1000),
				Stream: Streams[s],
			},
		})
	}
	return w
}

func keyName(i int) string { return fmt.Sprintf("k%03d", i) }

// WriteFiles writes stream a's records to pathA and b's to pathB,
// replacing existing files.
func (w *Workload) WriteFiles(pathA, pathB string) error {
	for s, path := range [2]string{pathA, pathB} {
		if err := writeLines(path, w.Records[s]); err != nil {
			return err
		}
	}
	return nil
}

func writeLines(path string, recs []Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(bw)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// Pipeline is the pipeline spec that runs crash-tally on the files at
// inputA and inputB (streams a and b) into a file sink at sink, with its
// dead letters at deadLetter. Relative paths are relative to the spec's
// directory. Each source has 2 partitions chosen by key and the
// computation 2 partitions, so that records cross partitions both ways.
func (w *Workload) Pipeline(inputA, inputB, sink, deadLetter string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The crash test's pipeline (examples/internal/crashload).\nname: crash-tally\nsources:\n")
	for s, path := range [2]string{inputA, inputB} {
		fmt.Fprintf(&b, `  - name: %[1]s-in
    type: file
    stream: %[1]s
    partitions: 2
    partition_by: [key]
    file: {path: %[2]s}
    # max_ratio 0: no partition is ever left out of the watermark as idle,
    # which could make records late (package crashload's documentation).
    watermark: {out_of_orderness_bound: %[3]s, idle_partitions: {max_ratio: 0}}
`, Streams[s], strconv.Quote(path), OutOfOrdernessBound)
	}
	fmt.Fprintf(&b, `computations:
  - name: tally
    plugin: crash-tally
    kind: transform
    partitions: 2
    group_by: [key]
    input_streams: [%s, %s]
    output_streams: [tally]
    parameters: {window: %s}
sinks:
  - name: out
    type: file
    format: json
    streams: [tally]
    file: {path: %s}
dead_letter: {type: file, file: {path: %s}}
`, Streams[0], Streams[1], w.Config.Window, strconv.Quote(sink), strconv.Quote(deadLetter))
	return b.Bytes()
}

// Output is one record crash-tally emits, decoded. A msg record has Kind
// "msg", Stream, Seq and Key; a window record has Kind "window", Key,
// WindowStart, Count and Sum. It is comparable, so that a multiset of
// outputs is a map[Output]int.
type Output struct {
	Kind        string
	Stream      string
	Seq         int64
	Key         string
	WindowStart int64
	Count       int64
	Sum         int64
}

// String shows an output as crash-tally writes it, for failure messages.
func (o Output) String() string {
	if o.Kind == "msg" {
		return fmt.Sprintf(`{"kind":"msg","stream":%q,"seq":%d,"key":%q}`, o.Stream, o.Seq, o.Key)
	}
	return fmt.Sprintf(`{"kind":"window","key":%q,"window_start":%d,"count":%d,"sum":%d}`, o.Key, o.WindowStart, o.Count, o.Sum)
}

// Expected is the multiset of outputs the workload must produce, each
// exactly once: one msg record per record, and one window record per key
// and window that holds any of the key's records.
func (w *Workload) Expected() map[Output]int {
	type window struct {
		key   string
		start int64
	}
	size := int64(w.Config.Window)
	tallies := map[window]*Output{}
	out := map[Output]int{}
	for _, recs := range w.Records {
		for _, r := range recs {
			p := r.Payload
			out[Output{Kind: "msg", Stream: p.Stream, Seq: p.Seq, Key: p.Key}]++
			win := window{p.Key, r.Event - ((r.Event%size)+size)%size} // floor, before 1970 too
			t, ok := tallies[win]
			if !ok {
				t = &Output{Kind: "window", Key: p.Key, WindowStart: win.start}
				tallies[win] = t
			}
			t.Count++
			t.Sum += p.Value
		}
	}
	for _, t := range tallies {
		out[*t]++
	}
	return out
}

// ParseOutput decodes a payload crash-tally emitted, strictly: an unknown
// field, a missing one, or a field of the other kind of record is an
// error, so that a change in the plugin's output cannot go unnoticed.
func ParseOutput(payload []byte) (Output, error) {
	var raw struct {
		Kind        *string `json:"kind"`
		Stream      *string `json:"stream"`
		Seq         *int64  `json:"seq"`
		Key         *string `json:"key"`
		WindowStart *int64  `json:"window_start"`
		Count       *int64  `json:"count"`
		Sum         *int64  `json:"sum"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Output{}, fmt.Errorf("output %s: %w", payload, err)
	}
	if dec.More() {
		return Output{}, fmt.Errorf("output %s: more than one JSON value", payload)
	}
	msgFields := raw.Stream != nil && raw.Seq != nil
	windowFields := raw.WindowStart != nil && raw.Count != nil && raw.Sum != nil
	noMsgFields := raw.Stream == nil && raw.Seq == nil
	noWindowFields := raw.WindowStart == nil && raw.Count == nil && raw.Sum == nil
	switch {
	case raw.Kind == nil || raw.Key == nil:
		return Output{}, fmt.Errorf("output %s: kind and key are required", payload)
	case *raw.Kind == "msg" && msgFields && noWindowFields:
		return Output{Kind: "msg", Stream: *raw.Stream, Seq: *raw.Seq, Key: *raw.Key}, nil
	case *raw.Kind == "window" && windowFields && noMsgFields:
		return Output{Kind: "window", Key: *raw.Key, WindowStart: *raw.WindowStart, Count: *raw.Count, Sum: *raw.Sum}, nil
	}
	return Output{}, errors.New("output " + string(payload) + ": want a msg record (stream, seq) or a window record (window_start, count, sum)")
}
