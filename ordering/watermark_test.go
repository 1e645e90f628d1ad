package ordering

import (
	"cmp"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const wmSec = int64(time.Second)

// wmStep is one scripted call on a SourceWatermark.
type wmStep struct {
	op    string // "append", "read" or "check"
	p     int
	event int64
	now   int64
	want  int64 // for "check": the expected Watermark(now)
}

func wmAppend(p int, event, now int64) wmStep {
	return wmStep{op: "append", p: p, event: event, now: now}
}

func wmRead(p int, event, now int64) wmStep {
	return wmStep{op: "read", p: p, event: event, now: now}
}

func wmCheck(now, want int64) wmStep {
	return wmStep{op: "check", now: now, want: want}
}

// wmSourceIdle checks SourceIdle(now).
func wmSourceIdle(now int64, idle bool) wmStep {
	want := int64(0)
	if idle {
		want = 1
	}
	return wmStep{op: "source idle", now: now, want: want}
}

func wmConfig(bound, idle time.Duration, ratio float64) WatermarkConfig {
	return WatermarkConfig{OutOfOrdernessBound: bound, IdleDuration: idle, IdleMaxRatio: ratio}
}

func TestSourceWatermarkRules(t *testing.T) {
	const b = 10 // out_of_orderness_bound in the small cases
	small := wmConfig(b, time.Minute, 0.4)
	idle := wmConfig(b, time.Minute, 0.4) // 60 s idle; timings below in wmSec
	cases := []struct {
		name  string
		parts int
		cfg   WatermarkConfig
		steps []wmStep
	}{
		{"nothing read or appended: no watermark", 1, small, []wmStep{
			wmCheck(0, NoWatermark),
		}},
		{"out_of_orderness_bound is subtracted from MaxTs", 1, small, []wmStep{
			wmRead(0, 100, 0), wmCheck(0, 100-b),
			wmRead(0, 130, 0), wmCheck(0, 130-b),
		}},
		{"MaxTs is the largest event read, not the last", 1, small, []wmStep{
			wmRead(0, 100, 0), wmRead(0, 40, 0), wmCheck(0, 100-b),
		}},
		{"ahead window lifts the watermark to min(MinAhead, MaxAhead-bound)", 1, small, []wmStep{
			wmRead(0, 100, 0), // MaxTs - b = 90
			wmAppend(0, 95, 0), wmAppend(0, 130, 0),
			wmCheck(0, 95), // min(95, 120) = 95 > 90
		}},
		{"ahead window is capped by MaxAhead-bound", 1, small, []wmStep{
			wmAppend(0, 100, 0), wmAppend(0, 105, 0),
			wmCheck(0, 95), // min(100, 105-10)
		}},
		{"ahead window never passes its oldest unread record", 1, small, []wmStep{
			wmAppend(0, 50, 0), wmAppend(0, 200, 0),
			wmCheck(0, 50),
		}},
		{"MaxTs wins when the ahead window is older", 1, small, []wmStep{
			wmRead(0, 300, 0), wmAppend(0, 20, 0),
			wmCheck(0, 290),
		}},
		{"a read takes the oldest record out of the ahead window", 1, small, []wmStep{
			wmAppend(0, 100, 0), wmAppend(0, 200, 0),
			wmCheck(0, 100),
			wmRead(0, 100, 0), // MaxTs-b = 90; ahead {200}: min(200, 190)
			wmCheck(0, 190),
			wmRead(0, 200, 0), // nothing ahead: 200-10
			wmCheck(0, 190),
		}},
		{"minimum over partitions", 3, small, []wmStep{
			wmRead(0, 100, 0), wmRead(1, 50, 0), wmRead(2, 70, 0),
			wmCheck(0, 40),
		}},
		{"a partition without a watermark holds the source", 2, small, []wmStep{
			wmRead(0, 100, 0),
			wmCheck(0, NoWatermark),
		}},
		{"an idle partition is left out", 3, idle, []wmStep{
			wmRead(0, 100*wmSec, 61*wmSec), wmRead(1, 200*wmSec, 61*wmSec),
			// partition 2 has had nothing since creation at 0
			wmCheck(59*wmSec, NoWatermark),
			wmCheck(61*wmSec, 100*wmSec-b),
		}},
		{"idle from exactly IdleDuration on", 2, wmConfig(b, time.Minute, 0.5), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 500, 10*wmSec),
			wmCheck(60*wmSec-1, 100-b),
			wmCheck(60*wmSec, 500-b),
		}},
		{"reading counts as activity", 2, wmConfig(b, time.Minute, 0.5), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 500, 0),
			wmRead(0, 110, 30*wmSec),
			wmCheck(70*wmSec, 110-b), // partition 1 idle since 0, partition 0 read at 30 s
		}},
		{"appending counts as activity", 2, wmConfig(b, time.Minute, 0.5), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 500, 0),
			wmAppend(0, 105, 30*wmSec), wmRead(0, 105, 0), // only the append is recent
			wmCheck(70*wmSec, 105-b),
		}},
		{"a partition with records waiting is never idle", 2, wmConfig(b, time.Minute, 0.5), []wmStep{
			wmRead(1, 500, 100*wmSec),
			wmAppend(0, 100, 0),       // waits, unread, for 100 s
			wmCheck(100*wmSec, 100-b), // min(MinAhead, MaxAhead-bound), not partition 1's 490
		}},
		{"at most floor(max_ratio*n) left out, idle the longest first", 5, idle, []wmStep{
			// floor(0.4*5) = 2 may be left out.
			wmRead(0, 900, 95*wmSec),
			wmRead(1, 100, 10*wmSec), // idle 90 s: left out
			wmRead(2, 200, 20*wmSec), // idle 80 s: left out
			wmRead(3, 300, 30*wmSec), // idle 70 s: counts
			wmRead(4, 800, 95*wmSec),
			wmCheck(100*wmSec, 300-b),
		}},
		{"equally idle partitions: the lower index is left out first", 4, wmConfig(b, time.Minute, 0.25), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 200, 0), wmRead(2, 900, 99*wmSec), wmRead(3, 800, 99*wmSec),
			wmCheck(100*wmSec, 200-b),
		}},
		{"max_ratio 0 never leaves a partition out", 2, wmConfig(b, time.Minute, 0), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 500, 100*wmSec),
			wmCheck(100*wmSec, 100-b),
		}},
		{"a single partition is never left out", 1, idle, []wmStep{
			wmRead(0, 100, 0),
			wmCheck(1000*wmSec, 100-b),
		}},
		{"never moves backwards when an idle partition comes back", 2, wmConfig(b, time.Minute, 0.5), []wmStep{
			wmRead(0, 1000, 0), wmRead(1, 50, 0),
			wmRead(0, 1000, 61*wmSec),
			wmCheck(61*wmSec, 1000-b), // partition 1 left out
			wmRead(1, 60, 62*wmSec),   // back, far behind
			wmCheck(62*wmSec, 1000-b), // held, not 50
			wmRead(1, 2000, 63*wmSec),
			wmCheck(63*wmSec, 1000-b),
			wmRead(0, 1500, 63*wmSec),
			wmCheck(63*wmSec, 1500-b),
		}},
		{"a single-partition source is idle as a whole, whatever max_ratio", 1, wmConfig(b, time.Minute, 0), []wmStep{
			wmSourceIdle(0, false), // created at 0: not yet
			wmRead(0, 100, 0),
			wmSourceIdle(60*wmSec-1, false),
			wmSourceIdle(60*wmSec, true),
			wmCheck(60*wmSec, 100-b), // its own watermark stays
			wmAppend(0, 50, 70*wmSec),
			wmSourceIdle(70*wmSec, false), // a record waits
			wmRead(0, 50, 71*wmSec),
			wmSourceIdle(130*wmSec, false),
			wmSourceIdle(131*wmSec, true),
		}},
		{"a source is idle only when every partition is", 3, wmConfig(b, time.Minute, 1), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 100, 0), wmRead(2, 100, 30*wmSec),
			wmSourceIdle(60*wmSec, false),
			wmCheck(60*wmSec, 100-b), // max_ratio 1: all but one left out
			wmSourceIdle(90*wmSec, true),
		}},
		{"idle_partitions.duration 0 turns idle detection off", 2, wmConfig(b, 0, 1), []wmStep{
			wmRead(0, 100, 0), wmRead(1, 500, 1000*wmSec),
			wmCheck(1000*wmSec, 100-b),
			wmSourceIdle(5000*wmSec, false),
		}},
		{"never moves backwards when an old record is appended", 1, small, []wmStep{
			wmAppend(0, 500, 0), wmCheck(0, 500-b),
			wmAppend(0, 100, 0), wmCheck(0, 500-b),
		}},
		{"bound saturates instead of wrapping", 1, wmConfig(time.Minute, time.Minute, 0), []wmStep{
			wmRead(0, math.MinInt64+5, 0), wmCheck(0, NoWatermark),
		}},
		{"Flow's default bound", 1, DefaultWatermarkConfig(), []wmStep{
			wmRead(0, 1_700_000_000*wmSec, 0), wmCheck(0, 1_700_000_000*wmSec-60*wmSec),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewSourceWatermark(tc.parts, tc.cfg, 0)
			require.NoError(t, err)
			for i, s := range tc.steps {
				switch s.op {
				case "append":
					w.Appended(s.p, s.event, s.now)
				case "read":
					w.Read(s.p, s.event, s.now)
				case "check":
					require.Equal(t, s.want, w.Watermark(s.now), "step %d", i)
					require.Equal(t, s.want, w.Value(), "step %d", i)
				case "source idle":
					require.Equal(t, s.want == 1, w.SourceIdle(s.now), "step %d", i)
				}
			}
		})
	}
}

func TestSourceWatermarkAccessors(t *testing.T) {
	w, err := NewSourceWatermark(2, wmConfig(10, time.Second, 0.5), 0)
	require.NoError(t, err)
	require.Equal(t, 2, w.Partitions())
	require.Equal(t, wmConfig(10, time.Second, 0.5), w.Config())
	w.Appended(0, 100, 0)
	w.Appended(0, 200, 0)
	require.Equal(t, 2, w.Ahead(0))
	require.Equal(t, int64(100), w.PartitionWatermark(0))
	require.Equal(t, NoWatermark, w.PartitionWatermark(1))
	require.False(t, w.Idle(0, 10*wmSec), "records waiting")
	require.True(t, w.Idle(1, wmSec))
	require.False(t, w.Idle(1, wmSec-1))
	w.Resume(150)
	require.Equal(t, int64(150), w.Value())
	require.Equal(t, int64(150), w.Watermark(wmSec), "resumed value holds")
	w.Resume(120)
	require.Equal(t, int64(150), w.Value(), "Resume never lowers")
}

// TestSourceWatermarkResumePartition: a partition resumed with its MaxTs
// counts with it, bound applied, as if its records had been read; the
// value only rises.
func TestSourceWatermarkResumePartition(t *testing.T) {
	w, err := NewSourceWatermark(2, wmConfig(10, 0, 0), 0)
	require.NoError(t, err)
	require.Equal(t, NoWatermark, w.MaxRead(0))
	w.ResumePartition(0, 500)
	require.Equal(t, int64(500), w.MaxRead(0))
	require.Equal(t, NoWatermark, w.Watermark(0), "partition 1 has none yet")
	w.Appended(1, 300, 0)
	w.Read(1, 300, 0)
	require.Equal(t, int64(290), w.Watermark(0), "the minimum is partition 1's")
	w.Appended(1, 800, 0)
	w.Read(1, 800, 0)
	require.Equal(t, int64(490), w.Watermark(0), "the minimum is the resumed partition's")
	w.ResumePartition(0, 100)
	require.Equal(t, int64(500), w.MaxRead(0), "ResumePartition never lowers")
}

func TestWatermarkConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  WatermarkConfig
		err  string // "" for valid
	}{
		{"defaults", DefaultWatermarkConfig(), ""},
		{"zero bound", wmConfig(0, time.Second, 0), ""},
		{"negative bound", wmConfig(-time.Second, time.Second, 0), "out_of_orderness_bound -1s is negative"},
		{"zero idle duration: detection off", wmConfig(0, 0, 0.4), ""},
		{"negative idle duration", wmConfig(0, -time.Second, 0), "idle_partitions.duration -1s is negative"},
		{"ratio 1", wmConfig(0, time.Second, 1), ""},
		{"ratio above 1", wmConfig(0, time.Second, math.Nextafter(1, 2)), "idle_partitions.max_ratio 1.0000000000000002 is outside [0, 1]"},
		{"negative ratio", wmConfig(0, time.Second, -0.1), "idle_partitions.max_ratio -0.1 is outside [0, 1]"},
		{"NaN ratio", wmConfig(0, time.Second, math.NaN()), "idle_partitions.max_ratio NaN is outside [0, 1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, nerr := NewSourceWatermark(1, tc.cfg, 0)
			if tc.err == "" {
				require.NoError(t, err)
				require.NoError(t, nerr)
				return
			}
			require.ErrorIs(t, err, ErrWatermarkConfig)
			require.ErrorContains(t, err, tc.err)
			require.ErrorContains(t, nerr, tc.err)
		})
	}
	_, err := NewSourceWatermark(0, DefaultWatermarkConfig(), 0)
	require.ErrorIs(t, err, ErrWatermarkConfig)
	require.ErrorContains(t, err, "at least one partition, got 0")
}

func TestWatermarkConfigMaxIdle(t *testing.T) {
	cases := []struct {
		ratio float64
		n     int
		want  int
	}{
		{0.4, 1, 0}, {0.4, 2, 0}, {0.4, 3, 1}, {0.4, 5, 2}, {0.4, 10, 4},
		{0.29, 100, 29}, // 0.29*100 is 28.999999999999996 in float64
		{0, 10, 0},
		{math.Nextafter(1, 0), 100_000_000, 99_999_999}, // at least one counts
		{1, 1, 0}, {1, 5, 4}, // never all of them
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, WatermarkConfig{IdleMaxRatio: tc.ratio}.maxIdle(tc.n), "ratio %v n %d", tc.ratio, tc.n)
	}
}

// wmRefPartition is the slow reference model of a source partition: it
// keeps every unread event.
type wmRefPartition struct {
	ahead    []int64
	maxRead  int64
	lastSeen int64
}

func wmRefPartitionWatermark(p *wmRefPartition, bound int64) int64 {
	wm := wmSatSub(p.maxRead, bound)
	if len(p.ahead) > 0 {
		lo, hi := slices.Min(p.ahead), slices.Max(p.ahead)
		wm = max(wm, min(lo, wmSatSub(hi, bound)))
	}
	return wm
}

// wmRefIdle lists the idle partitions by the spec's sentence: detection
// on, nothing waiting, nothing appended or read for IdleDuration.
func wmRefIdle(parts []wmRefPartition, cfg WatermarkConfig, now int64) []int {
	var idle []int
	for i := range parts {
		if cfg.IdleDuration > 0 && len(parts[i].ahead) == 0 && now-parts[i].lastSeen >= int64(cfg.IdleDuration) {
			idle = append(idle, i)
		}
	}
	return idle
}

// wmRefNextIdle is the earliest time a partition that is not idle and has
// nothing waiting becomes idle.
func wmRefNextIdle(parts []wmRefPartition, cfg WatermarkConfig, now int64) (int64, bool) {
	var times []int64
	for i := range parts {
		if cfg.IdleDuration > 0 && len(parts[i].ahead) == 0 && now-parts[i].lastSeen < int64(cfg.IdleDuration) {
			times = append(times, parts[i].lastSeen+int64(cfg.IdleDuration))
		}
	}
	if len(times) == 0 {
		return 0, false
	}
	return slices.Min(times), true
}

// wmRefSourceWatermark computes the unclamped source watermark from the
// spec's sentences: idle partitions sorted by how long they were idle.
func wmRefSourceWatermark(parts []wmRefPartition, cfg WatermarkConfig, now int64) int64 {
	idle := wmRefIdle(parts, cfg, now)
	// Stable: idle is in partition order, so ties leave out the lower index.
	slices.SortStableFunc(idle, func(a, b int) int { return cmp.Compare(parts[a].lastSeen, parts[b].lastSeen) })
	leaveOut := min(int(math.Floor(cfg.IdleMaxRatio*float64(len(parts))+1e-9)), len(parts)-1)
	left := map[int]bool{}
	for _, i := range idle[:min(leaveOut, len(idle))] {
		left[i] = true
	}
	wm := int64(math.MaxInt64)
	for i := range parts {
		if !left[i] {
			wm = min(wm, wmRefPartitionWatermark(&parts[i], int64(cfg.OutOfOrdernessBound)))
		}
	}
	return wm
}

func TestSourceWatermarkMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "partitions")
		cfg := WatermarkConfig{
			OutOfOrdernessBound: time.Duration(rapid.Int64Range(0, 50).Draw(t, "bound")),
			IdleDuration:        time.Duration(rapid.Int64Range(0, 40).Draw(t, "idle")),
			IdleMaxRatio:        rapid.SampledFrom([]float64{0, 0.25, 0.4, 0.5, 0.99, 1}).Draw(t, "ratio"),
		}
		start := rapid.Int64Range(-100, 100).Draw(t, "start")
		w, err := NewSourceWatermark(n, cfg, start)
		require.NoError(t, err)
		ref := make([]wmRefPartition, n)
		for i := range ref {
			ref[i] = wmRefPartition{maxRead: NoWatermark, lastSeen: start}
		}
		now, published := start, NoWatermark
		for step := range rapid.IntRange(1, 80).Draw(t, "steps") {
			now += rapid.Int64Range(0, 15).Draw(t, "tick")
			p := rapid.IntRange(0, n-1).Draw(t, "p")
			r := &ref[p]
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				e := rapid.Int64Range(-200, 200).Draw(t, "event")
				w.Appended(p, e, now)
				r.ahead = append(r.ahead, e)
				r.lastSeen = max(r.lastSeen, now)
			case 1:
				// A read takes the oldest appended record, or an unannounced one.
				var e int64
				if len(r.ahead) > 0 {
					e, r.ahead = r.ahead[0], r.ahead[1:]
				} else {
					e = rapid.Int64Range(-200, 200).Draw(t, "event")
				}
				w.Read(p, e, now)
				r.maxRead = max(r.maxRead, e)
				r.lastSeen = max(r.lastSeen, now)
			case 2:
				want := max(published, wmRefSourceWatermark(ref, cfg, now))
				got := w.Watermark(now)
				require.GreaterOrEqual(t, got, published, "step %d: moved backwards", step)
				require.Equal(t, want, got, "step %d", step)
				published = got
			}
			for i := range ref {
				require.Equal(t, wmRefPartitionWatermark(&ref[i], int64(cfg.OutOfOrdernessBound)), w.PartitionWatermark(i))
				require.Equal(t, len(ref[i].ahead), w.Ahead(i))
			}
			idle := wmRefIdle(ref, cfg, now)
			require.Equal(t, len(idle), w.IdlePartitions(now), "step %d", step)
			require.Equal(t, len(idle) == n, w.SourceIdle(now), "step %d: the source is idle exactly when every partition is", step)
			wantNext, wantOK := wmRefNextIdle(ref, cfg, now)
			gotNext, gotOK := w.NextIdle(now)
			require.Equal(t, wantOK, gotOK, "step %d", step)
			require.Equal(t, wantNext, gotNext, "step %d", step)
			if gotOK {
				require.Greater(t, gotNext, now)
				require.Less(t, w.IdlePartitions(gotNext-1), w.IdlePartitions(gotNext), "step %d: NextIdle is when one more partition turns idle", step)
			}
		}
	})
}

func TestAheadWindowMatchesBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w aheadWindow
		var ref []int64
		for range rapid.IntRange(0, 300).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "push") {
				// Runs of increasing and decreasing values grow the deques.
				v := rapid.Int64Range(-20, 20).Draw(t, "v")
				w.push(v)
				ref = append(ref, v)
			} else {
				require.Equal(t, len(ref) > 0, w.take())
				if len(ref) > 0 {
					ref = ref[1:]
				}
			}
			require.Equal(t, uint64(len(ref)), w.len())
			if len(ref) > 0 {
				require.Equal(t, slices.Min(ref), w.min())
				require.Equal(t, slices.Max(ref), w.max())
			}
		}
	})
}

func TestStreamWatermarkRules(t *testing.T) {
	type step struct {
		set      map[int]int64 // inputs to set before advancing
		idle     map[int]bool  // idleness to set before advancing
		inFlight int64
		ok       bool
		want     int64
	}
	cases := []struct {
		name   string
		inputs int
		steps  []step
	}{
		{"no watermark until every input has one", 2, []step{
			{set: map[int]int64{0: 100}, want: NoWatermark},
			{set: map[int]int64{1: 50}, want: 50},
		}},
		{"minimum over inputs", 3, []step{
			{set: map[int]int64{0: 100, 1: 70, 2: 90}, want: 70},
			{set: map[int]int64{1: 95}, want: 90},
		}},
		{"lowered to the smallest timestamp in flight", 1, []step{
			{set: map[int]int64{0: 100}, inFlight: 60, ok: true, want: 60},
		}},
		{"in flight above the inputs does not raise it", 1, []step{
			{set: map[int]int64{0: 100}, inFlight: 160, ok: true, want: 100},
		}},
		{"nothing in flight: inputs alone", 1, []step{
			{set: map[int]int64{0: 100}, inFlight: 5, ok: false, want: 100},
		}},
		{"lowering holds the watermark, never takes it back", 1, []step{
			{set: map[int]int64{0: 100}, want: 100},
			{set: map[int]int64{0: 200}, inFlight: 40, ok: true, want: 100},
			{inFlight: 150, ok: true, want: 150},
			{want: 200},
		}},
		{"an idle input is left out of the minimum", 2, []step{
			{set: map[int]int64{0: 100}, idle: map[int]bool{1: true}, want: 100},
			{set: map[int]int64{0: 150}, want: 150},
		}},
		{"an input rejoining behind holds the watermark until it catches up", 2, []step{
			{set: map[int]int64{0: 100}, idle: map[int]bool{1: true}, want: 100},
			{set: map[int]int64{0: 200}, idle: map[int]bool{1: false}, want: 100}, // input 1 is still at NoWatermark
			{set: map[int]int64{1: 180}, want: 180},
			{set: map[int]int64{1: 300}, want: 200},
		}},
		{"every input idle: the watermark holds, in flight or not", 2, []step{
			{set: map[int]int64{0: 100, 1: 120}, want: 100},
			{set: map[int]int64{0: 500}, idle: map[int]bool{0: true, 1: true}, inFlight: 400, ok: true, want: 100},
			{idle: map[int]bool{0: false}, inFlight: 400, ok: true, want: 400},
		}},
		{"an input moving back does not lower it", 2, []step{
			{set: map[int]int64{0: 100, 1: 100}, want: 100},
			{set: map[int]int64{0: 10}, want: 100},
			{set: map[int]int64{0: 120}, want: 100},
			{set: map[int]int64{1: 130}, want: 120},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := NewStreamWatermark(tc.inputs)
			require.Equal(t, tc.inputs, w.Inputs())
			require.Equal(t, NoWatermark, w.Value())
			for i, s := range tc.steps {
				for in, v := range s.set {
					w.SetInput(in, v)
					require.Equal(t, v, w.Input(in))
				}
				for in, idle := range s.idle {
					w.SetInputIdle(in, idle)
					require.Equal(t, idle, w.InputIdle(in))
				}
				require.Equal(t, s.want, w.Advance(s.inFlight, s.ok), "step %d", i)
				require.Equal(t, s.want, w.Value(), "step %d", i)
			}
		})
	}
}

func TestStreamWatermarkAdvancesWithInFlight(t *testing.T) {
	var f InFlight
	w := NewStreamWatermark(1)
	w.SetInput(0, 100)
	f.Add(30)
	f.Add(70)
	require.Equal(t, int64(30), w.Advance(f.Min()))
	f.Remove(30)
	require.Equal(t, int64(70), w.Advance(f.Min()))
	f.Remove(70)
	require.Equal(t, int64(100), w.Advance(f.Min()))
}

func TestStreamWatermarkResume(t *testing.T) {
	w := NewStreamWatermark(1)
	w.Resume(500)
	w.SetInput(0, 100)
	require.Equal(t, int64(500), w.Advance(0, false))
	w.Resume(400)
	require.Equal(t, int64(500), w.Value())
}

func TestStreamWatermarkNeedsAnInput(t *testing.T) {
	require.PanicsWithValue(t, "ordering: NewStreamWatermark(0): a stream needs at least one input", func() { NewStreamWatermark(0) })
	require.Panics(t, func() { NewSourceSystemWatermark(0) })
}

func TestStreamWatermarkProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "inputs")
		w := NewStreamWatermark(n)
		inputs := slices.Repeat([]int64{NoWatermark}, n)
		idle := make([]bool, n)
		prev := NoWatermark
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			i := rapid.IntRange(0, n-1).Draw(t, "input")
			inputs[i] = rapid.Int64Range(-100, 100).Draw(t, "wm")
			w.SetInput(i, inputs[i])
			j := rapid.IntRange(0, n-1).Draw(t, "idle input")
			idle[j] = rapid.Bool().Draw(t, "idle")
			w.SetInputIdle(j, idle[j])
			inFlight := rapid.Int64Range(-100, 100).Draw(t, "inFlight")
			ok := rapid.Bool().Draw(t, "ok")
			got := w.Advance(inFlight, ok)
			require.GreaterOrEqual(t, got, prev, "never decreases")
			var active []int64
			for k, v := range inputs {
				if !idle[k] {
					active = append(active, v)
				}
			}
			if len(active) == 0 {
				require.Equal(t, prev, got, "every input idle: it holds")
				continue
			}
			bound := slices.Min(active)
			if ok {
				bound = min(bound, inFlight)
			}
			if got > bound {
				require.Equal(t, prev, got, "above min(inputs, in flight) only by holding the previous value")
			} else {
				require.Equal(t, bound, got, "otherwise exactly min(inputs, in flight)")
			}
			prev = got
		}
	})
}

func TestSourceSystemWatermarkRules(t *testing.T) {
	type op struct {
		kind string // "append", "read", "beat", "check"
		p    int
		ts   int64
	}
	cases := []struct {
		name  string
		parts int
		ops   []op
	}{
		{"nothing known: no watermark", 1, []op{{"check", 0, NoWatermark}}},
		{"the next unread record's system time", 1, []op{
			{"append", 0, 100}, {"append", 0, 110}, {"check", 0, 100},
			{"read", 0, 100}, {"check", 0, 110},
		}},
		{"nothing waiting: the last record's system time", 1, []op{
			{"append", 0, 100}, {"read", 0, 100}, {"check", 0, 100},
		}},
		{"reads without appends count", 1, []op{
			{"read", 0, 70}, {"check", 0, 70},
		}},
		{"a heartbeat advances a quiet partition", 2, []op{
			{"append", 0, 100}, {"read", 0, 100}, {"check", 0, NoWatermark},
			{"beat", 1, 90}, {"check", 0, 90},
			{"beat", 1, 150}, {"beat", 0, 160}, {"check", 0, 150},
		}},
		{"a heartbeat cannot pass a record still waiting", 1, []op{
			{"append", 0, 100}, {"beat", 0, 500}, {"check", 0, 100},
			{"read", 0, 100}, {"check", 0, 500},
		}},
		{"minimum over partitions, idle ones included", 2, []op{
			{"read", 0, 100}, {"read", 1, 30}, {"check", 0, 30},
		}},
		{"a queue clock stepping back lowers the candidate, not the watermark", 1, []op{
			{"append", 0, 100}, {"read", 0, 100}, {"check", 0, 100},
			{"append", 0, 80}, {"check", 0, 100}, // candidate 80
			{"read", 0, 80}, {"check", 0, 100},
			{"append", 0, 120}, {"check", 0, 120},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := NewSourceSystemWatermark(tc.parts)
			require.Equal(t, tc.parts, w.Partitions())
			for i, o := range tc.ops {
				switch o.kind {
				case "append":
					w.Appended(o.p, o.ts)
				case "read":
					w.Read(o.p, o.ts)
				case "beat":
					w.Heartbeat(o.p, o.ts)
				case "check":
					require.Equal(t, o.ts, w.Watermark(), "op %d", i)
					require.Equal(t, o.ts, w.Value(), "op %d", i)
				}
			}
		})
	}
}

func TestSourceSystemWatermarkResume(t *testing.T) {
	w := NewSourceSystemWatermark(1)
	w.Resume(300)
	w.Read(0, 100)
	require.Equal(t, int64(300), w.Watermark())
}

// TestSourceSystemWatermarkExact checks the exactness claim: with write
// times that do not decrease per partition, no record read after a
// watermark was published is older than it.
func TestSourceSystemWatermarkExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "partitions")
		w := NewSourceSystemWatermark(n)
		last := make([]int64, n)    // last write time per partition
		queue := make([][]int64, n) // appended, unread
		published := NoWatermark
		for range rapid.IntRange(1, 100).Draw(t, "steps") {
			p := rapid.IntRange(0, n-1).Draw(t, "p")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				last[p] += rapid.Int64Range(0, 10).Draw(t, "gap")
				w.Appended(p, last[p])
				queue[p] = append(queue[p], last[p])
			case 1:
				if len(queue[p]) > 0 {
					ts := queue[p][0]
					queue[p] = queue[p][1:]
					require.GreaterOrEqual(t, ts, published, "a record older than the system watermark")
					w.Read(p, ts)
				}
			case 2:
				// The queue promises its clock: the next append is no older.
				last[p] += rapid.Int64Range(0, 10).Draw(t, "gap")
				w.Heartbeat(p, last[p])
			case 3:
				got := w.Watermark()
				require.GreaterOrEqual(t, got, published)
				published = got
			}
		}
	})
}
