package rust_test

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/window_golden.txt from the Go SDK")

// windowGoldenPath is read by the Rust test window_golden (tests/window_golden.rs),
// which replays its inputs through the Rust helper and requires the same lines.
const windowGoldenPath = "testdata/window_golden.txt"

// goldenCall is one Process call on key "k": the timers due in it and its
// messages (event time, payload).
type goldenCall struct {
	timers []int64
	msgs   []goldenMsg
}

type goldenMsg struct {
	ts      int64
	payload string
}

type goldenCase struct {
	name                         string
	kind                         string
	size, advance, gap, lateness int64
	calls                        []goldenCall
}

// Big, realistic event times, so that the varints take many bytes.
const goldenT0 = int64(1_714_557_600_000_000_000)

func msgs(pairs ...any) []goldenMsg {
	var out []goldenMsg
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, goldenMsg{pairs[i].(int64), pairs[i+1].(string)})
	}
	return out
}

// goldenCases go through every path of the helper: windows before 1970,
// overlapping hops, a late record, lateness, a session that grows (its
// earlier timer cancelled), one that merges with a timer set in the same
// call (kept, then firing stale), state deletion and a kept fired-through.
var goldenCases = []goldenCase{
	{name: "tumbling", kind: "tumbling", size: 10, calls: []goldenCall{
		{msgs: msgs(int64(-15), "a", int64(3), "b", int64(-11), "c", int64(9), "d")},
		{timers: []int64{-10}, msgs: msgs(int64(12), "e")},
		{timers: []int64{10}, msgs: msgs(int64(-1), "late", int64(5), "late2", int64(10), "f")},
		{timers: []int64{20}},
	}},
	{name: "tumbling-realistic-lateness", kind: "tumbling", size: int64(time.Minute), lateness: int64(10 * time.Second), calls: []goldenCall{
		{msgs: msgs(goldenT0+1, "x", goldenT0+int64(59*time.Second), "y", goldenT0+int64(61*time.Second), "z")},
		{timers: []int64{goldenT0 + int64(70*time.Second)}, msgs: msgs(goldenT0+int64(5*time.Second), "late")},
		{timers: []int64{goldenT0 + int64(130*time.Second)}},
	}},
	{name: "hopping-uneven", kind: "hopping", size: 10, advance: 3, lateness: 2, calls: []goldenCall{
		{msgs: msgs(int64(-4), "a", int64(7), "b", int64(0), "c")},
		{timers: []int64{4, 5, 8}, msgs: msgs(int64(1), "d", int64(-3), "late")},
		{timers: []int64{11, 14, 17, 20}},
	}},
	{name: "session", kind: "session", gap: 4, calls: []goldenCall{
		{msgs: msgs(int64(10), "a", int64(16), "b", int64(13), "c")}, // 13 merges [10,14) and [16,20), timers set here kept
		{timers: []int64{14, 16, 20}, msgs: msgs(int64(30), "e")},    // 14, 16 stale; 20 closes
		{msgs: msgs(int64(32), "f")},                                 // grows: timer 34 (earlier call) cancelled
		{timers: []int64{36}, msgs: msgs(int64(-100), "late")},
	}},
	{name: "session-lateness", kind: "session", gap: 4, lateness: 3, calls: []goldenCall{
		{msgs: msgs(goldenT0, "a", goldenT0, "b")},
		{msgs: msgs(goldenT0+3, "c", goldenT0-3, "d")},
		{timers: []int64{goldenT0 + 10}, msgs: msgs(goldenT0+1, "late", goldenT0+8, "g")},
		{timers: []int64{goldenT0 + 15}},
	}},
}

// appendAgg concatenates payloads, so that the accumulators' order and
// length prefixes are visible in the state.
var appendAgg = flowhost.Aggregator{
	Add:   func(acc []byte, m flowhost.Message) []byte { return append(acc, m.Payload...) },
	Merge: func(a, b []byte) []byte { return append(append([]byte{}, a...), b...) },
}

func (c goldenCase) windows() *flowhost.Windows {
	var spec flowhost.WindowSpec
	switch c.kind {
	case "tumbling":
		spec = flowhost.Tumbling(time.Duration(c.size))
	case "hopping":
		spec = flowhost.Hopping(time.Duration(c.size), time.Duration(c.advance))
	default:
		spec = flowhost.Session(time.Duration(c.gap))
	}
	return flowhost.NewWindows(spec, appendAgg, "out", "late", flowhost.WithAllowedLateness(time.Duration(c.lateness)))
}

func joinInts[T int64 | uint32](xs []T) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(int64(x), 10)
	}
	return strings.Join(s, ",")
}

// goldenText runs the cases through the Go SDK's Windows and writes each
// call's input and the response's every effect, one line each.
func goldenText(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# Written by TestWindowGolden (go test ./sdk/rust -run TestWindowGolden -update) from the Go SDK's\n")
	b.WriteString("# Windows; tests/window_golden.rs replays the inputs through the Rust SDK and requires these lines.\n")
	b.WriteString("# case NAME KIND SIZE ADVANCE GAP LATENESS | in TIMERS MSGS(ts:hex) | out STATE EMITS(stream/ts/parents/hex) SET CANCEL\n")
	for _, c := range goldenCases {
		fmt.Fprintf(&b, "case %s %s %d %d %d %d\n", c.name, c.kind, c.size, c.advance, c.gap, c.lateness)
		var state []byte
		w := c.windows()
		comp := flowhost.Computation{Process: func(bt *flowhost.Batch) error {
			for k := range bt.Keys() {
				_ = w.Process(k)
			}
			return nil
		}}
		for i, call := range c.calls {
			rk := abi.RequestKey{Key: "k", State: state}
			var ms []string
			for j, tr := range call.timers {
				rk.Timers = append(rk.Timers, abi.DueTimer{ID: fmt.Sprintf("t%d", j), TriggerTimestamp: tr, EventTimestamp: tr})
			}
			for j, m := range call.msgs {
				rk.Messages = append(rk.Messages, abi.Message{ID: fmt.Sprintf("m%d", j), Stream: "in",
					EventTimestamp: m.ts, SystemTimestamp: m.ts, AlignmentTimestamp: m.ts, Payload: []byte(m.payload)})
				ms = append(ms, fmt.Sprintf("%d:%s", m.ts, hex.EncodeToString([]byte(m.payload))))
			}
			if len(ms) == 0 {
				ms = []string{"-"}
			}
			fmt.Fprintf(&b, "in %s %s\n", joinInts(call.timers), strings.Join(ms, ","))
			resp, err := flowhost.Run(comp, nil, &abi.Request{ABI: abi.Version, Computation: "win", Kind: abi.KindTransform, Keys: []abi.RequestKey{rk}})
			require.NoError(t, err)
			require.Empty(t, resp.Error)
			require.Len(t, resp.Keys, 1, "case %s call %d", c.name, i)
			k := resp.Keys[0]
			require.Empty(t, k.Error)
			st := "keep"
			switch k.StateOp {
			case abi.StateReplace:
				st, state = hex.EncodeToString(k.State), k.State
			case abi.StateDelete:
				st, state = "delete", nil
			}
			var emits []string
			for _, e := range k.Emits {
				ts := "-"
				if e.EventTimestamp != nil {
					ts = strconv.FormatInt(*e.EventTimestamp, 10)
				}
				emits = append(emits, fmt.Sprintf("%s/%s/%s/%s", e.Stream, ts, joinInts(e.Parents), hex.EncodeToString(e.Payload)))
			}
			if len(emits) == 0 {
				emits = []string{"-"}
			}
			var set []int64
			for _, s := range k.TimersSet {
				set = append(set, s.TriggerTimestamp)
			}
			fmt.Fprintf(&b, "out %s %s %s %s\n", st, strings.Join(emits, ";"), joinInts(set), joinInts(k.TimersCancel))
		}
	}
	return b.String()
}

// TestWindowGolden keeps testdata/window_golden.txt equal to what the Go
// SDK's Windows does with its inputs (run with -update after changing the
// cases), so that the Rust test comparing against it cannot drift from Go.
func TestWindowGolden(t *testing.T) {
	got := goldenText(t)
	path := filepath.FromSlash(windowGoldenPath)
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./sdk/rust -run TestWindowGolden -update")
	require.Equal(t, string(want), got, "the Go SDK's windows changed: rerun with -update, then cargo test must still pass")
}
