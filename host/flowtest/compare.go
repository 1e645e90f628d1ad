package flowtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/flowhost/flowhost/host/connect"
)

// Mode says how [Compare] matches a stream's outputs with its
// expectation.
type Mode string

const (
	// Exact: the outputs are the expectation, line for line, in order.
	Exact Mode = "exact"
	// PerKey: each key's outputs are the expectation's lines of that key,
	// in order; how the keys interleave is not compared. It is what a
	// keyed computation guarantees: the order within a key, not across
	// keys, which depends on how the host cut its batches.
	PerKey Mode = "per-key"
)

// ParseMode reads a --compare value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Exact, PerKey:
		return m, nil
	}
	return "", fmt.Errorf("compare mode %q is unknown: use exact or per-key", s)
}

// Expected is one line of an expectation file: the fields of a sink's
// json record ([connect.SinkRecord]) that do not depend on the run. The
// message ids, task ids and the system, alignment and write timestamps of
// derived messages come from the wall clock or from how the host cut its
// batches, so they are not compared (a file sink's line is a valid
// expectation line: those fields are ignored).
type Expected struct {
	Key     string          `json:"key"`
	EventTS int64           `json:"event_ts"`
	Payload json.RawMessage `json:"payload"`
	// Line is the line of the expectation file (1-based); 0 for an output.
	Line int `json:"-"`
}

// String is the line [WriteExpectations] writes for e.
func (e Expected) String() string {
	b, err := json.Marshal(struct {
		Key     string          `json:"key"`
		EventTS int64           `json:"event_ts"`
		Payload json.RawMessage `json:"payload"`
	}{e.Key, e.EventTS, e.Payload})
	if err != nil { // the payload is checked JSON: cannot happen
		return fmt.Sprintf("%+v", err)
	}
	return string(b)
}

// ExpectedOf turns outputs into the lines they are compared as. A payload
// that is JSON is compacted; one that is not is kept as the sink keeps it
// (a JSON string of its base64).
func ExpectedOf(recs []connect.SinkRecord) []Expected {
	out := make([]Expected, len(recs))
	for i, r := range recs {
		out[i] = Expected{Key: r.Key, EventTS: r.EventTS, Payload: compact(r.Payload)}
	}
	return out
}

func compact(p json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return p
	}
	return b.Bytes()
}

// ReadExpectations reads an expectation file: one JSON object a line with
// key, event_ts and payload (other fields of a sink record are allowed and
// ignored; blank lines are skipped). A bad line is an error naming
// path:line and what is wrong.
func ReadExpectations(path string) ([]Expected, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseExpectations(path, data)
}

// ParseExpectations reads the lines of an expectation file named name
// (for errors) from data; see [ReadExpectations].
func ParseExpectations(name string, data []byte) ([]Expected, error) {
	var out []Expected
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r connect.SinkRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		if len(r.Payload) == 0 || !json.Valid(r.Payload) {
			return nil, fmt.Errorf("%s:%d: payload: missing (each line is a JSON object with key, event_ts and payload)", name, n)
		}
		e := ExpectedOf([]connect.SinkRecord{r})[0]
		e.Line = n
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// WriteExpectations writes outputs as an expectation file (what --update
// does): one line per output, in output order.
func WriteExpectations(path string, recs []connect.SinkRecord) error {
	var b strings.Builder
	for _, e := range ExpectedOf(recs) {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Difference is one place where outputs and expectation disagree. Want is
// nil for an output the expectation does not have, Got for an expected
// line that is missing.
type Difference struct {
	Stream string
	// Key is set in per-key mode; Index is the position within the key
	// (per-key) or the stream (exact), from 1.
	Key    string
	PerKey bool
	// KeyField is the payload field Key comes from ("": the record key);
	// Key is then the field's JSON text.
	KeyField string
	Index    int
	Want     *Expected
	Got      *Expected
}

// String says where the difference is, with both lines.
func (d Difference) String() string {
	var where string
	if d.Want != nil {
		where = fmt.Sprintf("line %d", d.Want.Line)
	} else {
		where = "after the last line"
	}
	var b strings.Builder
	switch {
	case d.PerKey && d.KeyField != "":
		fmt.Fprintf(&b, "stream %s, %s %s, output %d of the key (%s):", d.Stream, d.KeyField, d.Key, d.Index, where)
	case d.PerKey:
		fmt.Fprintf(&b, "stream %s, key %q, output %d of the key (%s):", d.Stream, d.Key, d.Index, where)
	default:
		fmt.Fprintf(&b, "stream %s, output %d (%s):", d.Stream, d.Index, where)
	}
	switch {
	case d.Got == nil:
		fmt.Fprintf(&b, " missing\n  - expected %s", d.Want)
	case d.Want == nil:
		fmt.Fprintf(&b, " not expected\n  + got      %s", d.Got)
	default:
		fmt.Fprintf(&b, "\n  - expected %s\n  + got      %s", d.Want, d.Got)
	}
	return b.String()
}

// Compare compares the outputs of stream with its expectation in mode and
// returns every difference, in the expectation's order. In per-key mode a
// line's key is its record key, or with keyField the JSON text of that
// top-level field of its payload (for computations whose outputs carry
// their key in the payload and no record key).
func Compare(stream string, want []Expected, got []connect.SinkRecord, mode Mode, keyField string) []Difference {
	g := ExpectedOf(got)
	if mode != PerKey {
		return compareSeq(Difference{Stream: stream}, want, g)
	}
	var keys []string
	wantBy, gotBy := map[string][]Expected{}, map[string][]Expected{}
	for _, e := range want {
		k := groupKey(e, keyField)
		if _, ok := wantBy[k]; !ok {
			keys = append(keys, k)
		}
		wantBy[k] = append(wantBy[k], e)
	}
	for _, e := range g {
		k := groupKey(e, keyField)
		if _, ok := wantBy[k]; !ok {
			if _, ok := gotBy[k]; !ok {
				keys = append(keys, k)
			}
		}
		gotBy[k] = append(gotBy[k], e)
	}
	var out []Difference
	for _, k := range keys {
		out = append(out, compareSeq(Difference{Stream: stream, Key: k, PerKey: true, KeyField: keyField}, wantBy[k], gotBy[k])...)
	}
	return out
}

// groupKey is the key e is compared under in per-key mode.
func groupKey(e Expected, field string) string {
	if field == "" {
		return e.Key
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(e.Payload, &obj) != nil {
		return "(payload not an object)"
	}
	v, ok := obj[field]
	if !ok {
		return "(no field " + field + ")"
	}
	return string(compact(v))
}

// compareSeq compares two sequences of lines; at says which stream and key.
func compareSeq(at Difference, want, got []Expected) []Difference {
	var out []Difference
	for i := range max(len(want), len(got)) {
		d := at
		d.Index = i + 1
		if i < len(want) {
			d.Want = &want[i]
		}
		if i < len(got) {
			d.Got = &got[i]
		}
		if d.Want != nil && d.Got != nil && sameLine(*d.Want, *d.Got) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// sameLine compares the payloads as JSON values (so that the order of an
// object's fields or the spelling of a number does not matter).
func sameLine(a, b Expected) bool {
	if a.Key != b.Key || a.EventTS != b.EventTS {
		return false
	}
	if bytes.Equal(a.Payload, b.Payload) {
		return true
	}
	x, errA := decodeJSON(a.Payload)
	y, errB := decodeJSON(b.Payload)
	if errA != nil || errB != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// ErrDifferent is what a run whose outputs differ from their expectation
// fails with (wrapped with the count).
var ErrDifferent = errors.New("outputs differ from the expectation")

// decodeJSON decodes numbers as their text, so that large integers
// compare exactly.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// maxShown bounds the differences [Check] prints per stream.
const maxShown = 20

// Check compares each stream named in expect (stream -> expectation file)
// with its outputs in mode and writes a report to w: "ok" per stream that
// matches, otherwise every difference (at most 20 per stream, then how
// many more); keyField is as for [Compare]. With update it writes the outputs into the files instead.
// It fails with an error wrapping [ErrDifferent] when a stream differs,
// and names the streams there are when expect names another.
func Check(w io.Writer, outputs map[string][]connect.SinkRecord, expect map[string]string, mode Mode, keyField string, update bool) error {
	streams := slices.Sorted(maps.Keys(expect))
	var unknown []string
	for _, s := range streams {
		if _, ok := outputs[s]; !ok {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("--expect %s: the pipeline writes no such stream; its output streams are %s",
			strings.Join(unknown, ", "), strings.Join(slices.Sorted(maps.Keys(outputs)), ", "))
	}
	differ := 0
	for _, s := range streams {
		path, got := expect[s], outputs[s]
		if update {
			if err := WriteExpectations(path, got); err != nil {
				return err
			}
			fmt.Fprintf(w, "updated %s: %d outputs of stream %s\n", path, len(got), s)
			continue
		}
		want, err := ReadExpectations(path)
		if err != nil {
			return err
		}
		diffs := Compare(s, want, got, mode, keyField)
		if len(diffs) == 0 {
			fmt.Fprintf(w, "ok   stream %s: %d outputs as %s expects (%s)\n", s, len(got), path, mode)
			continue
		}
		differ++
		fmt.Fprintf(w, "FAIL stream %s: %d differences from %s (%s; %d expected, %d got):\n", s, len(diffs), path, mode, len(want), len(got))
		for i, d := range diffs {
			if i == maxShown {
				fmt.Fprintf(w, "  ... and %d more\n", len(diffs)-maxShown)
				break
			}
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(d.String(), "\n", "\n  "))
		}
	}
	if differ > 0 {
		return fmt.Errorf("%w: %d of %d streams (run with --update to take the outputs as the expectation)", ErrDifferent, differ, len(streams))
	}
	return nil
}
