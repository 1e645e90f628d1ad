package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// Isolating the inputs that fail on their own (isolate.go).

// The ways a guest fails an input, as poisonTally does them.
const (
	failTrap     = "trap"     // the call fails (cause call)
	failBatch    = "batch"    // the guest reports the batch failed
	failValidate = "validate" // the response breaks the ABI's rules
	failKey      = "key"      // the guest reports the input's key failed
	// failSkip is the reference: the guest passes over the message, as if
	// the host had left it out.
	failSkip = "skip"
)

// poisonTally is a keyed transform that counts its key's messages in its
// state and emits {"key","seq","n"} for each, n being the count so far:
// an output tells which state its message saw. After a call it sets the
// key's timer at the end of time, or cancels it when the key's last
// message in the call says "stop"; the timer emits {"key","count"}. A
// message saying "poison" fails the way mode says; a due timer of a key
// in trapTimers traps. It counts its calls and instances.
type poisonTally struct {
	mode       string
	noTimers   bool // sets and cancels no timer
	trapTimers map[string]bool
	mu         sync.Mutex
	calls      int
	instances  int
}

// endOfTime is the trigger of poisonTally's timers: they fire when the
// input ends.
const endOfTime = math.MaxInt64 - 1

func (g *poisonTally) factory() compute.Factory {
	return compute.FactoryFunc(func(context.Context, *abi.Init) (compute.Computation, error) {
		g.mu.Lock()
		g.instances++
		g.mu.Unlock()
		return compute.Func(g.process), nil
	})
}

func (g *poisonTally) process(_ context.Context, req *abi.Request) (*abi.Response, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	resp := &abi.Response{}
	for _, k := range req.Keys {
		var n int
		if k.State != nil {
			if err := json.Unmarshal(k.State, &n); err != nil {
				return nil, err
			}
		}
		rk := abi.ResponseKey{Key: k.Key}
		for range k.Timers {
			if g.trapTimers[k.Key] {
				return nil, errors.New("trap: unreachable (a timer)")
			}
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `{"key":%q,"count":%d}`, k.Key, n)})
		}
		stop := false
	messages:
		for j, m := range k.Messages {
			var p struct {
				Seq          int
				Poison, Stop bool
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return nil, err
			}
			if p.Poison {
				switch g.mode {
				case failTrap:
					return nil, fmt.Errorf("trap: unreachable (seq %d)", p.Seq)
				case failBatch:
					return &abi.Response{Error: fmt.Sprintf("cannot take seq %d", p.Seq)}, nil
				case failValidate:
					rk.Emits = append(rk.Emits, abi.Emit{Stream: "undeclared", Payload: []byte(`{}`)})
				case failKey:
					rk = abi.ResponseKey{Key: k.Key, Error: fmt.Sprintf("cannot take seq %d", p.Seq)}
				case failSkip:
					continue
				}
				break messages
			}
			n++
			stop = p.Stop
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `{"key":%q,"seq":%d,"n":%d}`, k.Key, p.Seq, n), Parents: []uint32{uint32(len(k.Timers) + j)}})
		}
		if rk.Error == "" {
			if len(k.Messages) > 0 && !g.noTimers {
				if stop {
					rk.TimersCancel = []int64{endOfTime}
				} else {
					rk.TimersSet = []abi.Timer{{TriggerTimestamp: endOfTime}}
				}
			}
			rk.StateOp, rk.State = abi.StateReplace, fmt.Appendf(nil, "%d", n)
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
}

const isolatePipeline = `
name: isolate
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}}
computations:
  - name: tally
    plugin: tally
    partitions: %d
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: %d, max_duration: 1h}
    on_failure: {retries: %d, backoff: 0s, quarantine_after: %d}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// isolateInput is one record of an isolation test.
type isolateInput struct {
	key          int
	poison, stop bool
}

func isolateRecords(in []isolateInput) sliceSource {
	var recs sliceSource
	for i, r := range in {
		recs = append(recs, record(0, int64(i+1), int64(i+1),
			fmt.Sprintf(`{"key":"k%d","seq":%d,"poison":%t,"stop":%t}`, r.key, i, r.poison, r.stop)))
	}
	return recs
}

// isolateOutcome is what a run of poisonTally gave.
type isolateOutcome struct {
	perKey     map[string][][2]int // per key its outputs' (seq, n), in the sink's order
	counts     map[string]int      // per key its timer's count
	dead       []int               // the seqs of the dead-lettered messages, in order
	deadTimers int                 // dead-lettered timers
	deadErrs   []string            // the dead letters' errors, in order
	ids        map[string]int
	records    []connect.SinkRecord // what the sink got, in order
}

func runIsolation(t require.TestingT, p string, g *poisonTally, in []isolateInput, st *store.Store) (*runtime.Runtime, isolateOutcome) {
	sink := &captureSink{}
	var dead bytes.Buffer
	opts := []runtime.Option{runtime.WithSource("in", isolateRecords(in)), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead)}
	if st != nil {
		opts = append(opts, runtime.WithStore(st))
	}
	sp, err := spec.Parse("test.yaml", []byte(p))
	require.NoError(t, err)
	rt, err := runtime.New(sp, map[string]compute.Factory{"tally": g.factory()}, opts...)
	require.NoError(t, err)
	runtime.SetRetryWait(rt, (&fakeWaits{}).wait)
	require.NoError(t, rt.Run(context.Background()))

	out := isolateOutcome{perKey: map[string][][2]int{}, counts: map[string]int{}, ids: map[string]int{}, records: sink.records}
	for _, r := range sink.records {
		out.ids[r.MessageID]++
		var p struct {
			Key           string
			Seq, N, Count *int
		}
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		if p.Count != nil {
			_, dup := out.counts[p.Key]
			require.False(t, dup, "the timer of %s fired twice", p.Key)
			out.counts[p.Key] = *p.Count
			continue
		}
		out.perKey[p.Key] = append(out.perKey[p.Key], [2]int{*p.Seq, *p.N})
	}
	for _, line := range strings.Split(strings.TrimSpace(dead.String()), "\n") {
		if line == "" {
			continue
		}
		var d struct {
			Stage, Error string
			Record       json.RawMessage
		}
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		require.Equal(t, "guest", d.Stage)
		out.deadErrs = append(out.deadErrs, d.Error)
		if string(d.Record) == `""` { // a timer's empty payload
			out.deadTimers++
			continue
		}
		var rec struct{ Seq int }
		require.NoError(t, json.Unmarshal(d.Record, &rec), line)
		out.dead = append(out.dead, rec.Seq)
	}
	return rt, out
}

// expectedIsolation is what poisonTally must give for in when exactly
// the poison messages fail: per key its good messages in order, counted
// 1, 2, ...; the timer of a key whose last good message did not say stop
// fires once with the count; the poison messages are dead-lettered.
func expectedIsolation(in []isolateInput) isolateOutcome {
	want := isolateOutcome{perKey: map[string][][2]int{}, counts: map[string]int{}}
	armed := map[string]bool{}
	for i, r := range in {
		key := fmt.Sprintf(`["k%d"]`, r.key)
		if r.poison {
			want.dead = append(want.dead, i)
			continue
		}
		want.perKey[key] = append(want.perKey[key], [2]int{i, len(want.perKey[key]) + 1})
		armed[key] = !r.stop
	}
	for key, on := range armed {
		if on {
			want.counts[key] = len(want.perKey[key])
		}
	}
	return want
}

// TestOnlyTheInputsThatFailAloneAreDeadLettered is the property: for
// random batches with poison messages at random places, failed in any of
// the ways a guest fails, with or without a store, every good message is
// processed once, in its key's order, seeing the state its predecessors
// left (n counts 1, 2, ...); each key's timer, set and cancelled by
// parts of narrowed batches, fires once or not at all as the good
// messages say, and nothing stays pending; exactly the poison messages
// are dead-lettered, each once; the metrics count each isolated failure,
// and the calls spent stay within 2·k·⌈log₂ n⌉.
func TestOnlyTheInputsThatFailAloneAreDeadLettered(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mode := rapid.SampledFrom([]string{failTrap, failBatch, failValidate, failKey}).Draw(rt, "mode")
		n := rapid.IntRange(1, 80).Draw(rt, "messages")
		keys := rapid.IntRange(1, 6).Draw(rt, "keys")
		bad := rapid.IntRange(0, min(n, isolateAtMost)).Draw(rt, "poison messages")
		in := make([]isolateInput, n)
		for i := range in {
			in[i] = isolateInput{key: rapid.IntRange(0, keys-1).Draw(rt, "key"), stop: rapid.IntRange(0, 5).Draw(rt, "stop") == 0}
		}
		for _, i := range rapid.Permutation(rapidRange(n)).Draw(rt, "order")[:bad] {
			in[i].poison = true
		}
		partitions := rapid.IntRange(1, 2).Draw(rt, "partitions")
		maxRows := rapid.IntRange(1, 64).Draw(rt, "max_rows")
		retries := rapid.IntRange(0, 1).Draw(rt, "retries")
		var st *store.Store
		if rapid.Bool().Draw(rt, "store") {
			dir, err := os.MkdirTemp("", "isolate")
			require.NoError(rt, err)
			defer os.RemoveAll(dir)
			st, err = store.Open(dir, store.Options{})
			require.NoError(rt, err)
			defer st.Close()
		}
		g := &poisonTally{mode: mode}
		r, got := runIsolation(rt, fmt.Sprintf(isolatePipeline, partitions, maxRows, retries, 0), g, in, st)

		want := expectedIsolation(in)
		require.Equal(rt, want.perKey, got.perKey, "each key's good messages, in order, each seeing its predecessors' state")
		require.Equal(rt, want.counts, got.counts, "the timers that fire, each once, with the state at the end")
		require.ElementsMatch(rt, want.dead, got.dead, "exactly the poison messages are dead-lettered")
		require.Zero(rt, got.deadTimers)
		for id, times := range got.ids {
			require.Equal(rt, 1, times, "message id %s", id)
		}
		cause := map[string]string{failTrap: "call", failBatch: "batch", failValidate: "validate", failKey: "key"}[mode]
		require.Equal(rt, float64(bad), counter(t, r, "flowhost_isolated_failures_total", "tally", cause))
		v, _ := seriesValue(t, r, "flowhost_isolation_unresolved_total", map[string]string{"computation": "tally"})
		require.Zero(rt, v)
		calls, _ := seriesValue(t, r, "flowhost_isolation_calls_total", map[string]string{"computation": "tally", "cause": cause})
		require.LessOrEqual(rt, calls, float64(2*bad*bits.Len(uint(max(maxRows-1, 1)))),
			"isolating k failures in batches of at most n takes at most 2·k·⌈log₂ n⌉ calls")
		if st != nil {
			for p := range partitions {
				timers, err := st.Timers("tally", p)
				require.NoError(rt, err)
				require.Empty(rt, timers, "a timer stayed pending in the store")
			}
		}
	})
}

// isolateAtMost keeps the property's poison messages within what a
// narrowing always isolates.
const isolateAtMost = 8

func rapidRange(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestIsolationCases: a due timer that traps is isolated like a message;
// quarantine counts batches in which every input failed, never one bad
// input among good ones; and a narrowing that reaches its limit of calls
// dead-letters what it has not resolved, saying so.
func TestIsolationCases(t *testing.T) {
	good := func(keys ...int) []isolateInput {
		var in []isolateInput
		for _, k := range keys {
			in = append(in, isolateInput{key: k})
		}
		return in
	}
	poisoned := func(in []isolateInput, at ...int) []isolateInput {
		for _, i := range at {
			in[i].poison = true
		}
		return in
	}
	tests := []struct {
		name                              string
		in                                []isolateInput
		trapTimers                        map[string]bool
		maxRows, quarantineAfter          int
		quarantined                       float64
		isolated, unresolved, narrowCalls float64
		deadMessages, deadTimers          int
		deadErr                           []string
		unresolvedErr                     string // the first unresolved dead letter's
	}{
		{
			name:       "a trapping timer among others",
			in:         good(0, 1, 2, 0, 1, 2),
			trapTimers: map[string]bool{`["k1"]`: true},
			maxRows:    100, quarantineAfter: 1,
			// The batch that fires the 3 timers: k0's succeeds, so k1
			// and k2 are split without a call; k1's fails alone, k2's
			// succeeds.
			isolated: 1, narrowCalls: 3,
			deadTimers: 1,
			deadErr:    []string{`trap: unreachable (a timer) (it fails on its own: isolated from a batch of 3 inputs)`},
		},
		{
			name:    "one bad record among good ones, quarantine_after 1",
			in:      poisoned(good(0, 1, 0, 1, 0, 1, 0, 1, 0, 1), 4),
			maxRows: 100, quarantineAfter: 1,
			// In the batch's order k0's 5 messages come first, seq 4 the
			// third: k0's 5 fail; seqs 0, 2 succeed, so 4, 6, 8 are split
			// without a call; 4 fails alone; 6, 8 succeed; then k1's 5.
			isolated: 1, narrowCalls: 5,
			deadMessages: 1,
			deadErr:      []string{`trap: unreachable (seq 4) (it fails on its own: isolated from a batch of 10 inputs)`},
		},
		{
			name:    "batches of only failures quarantine",
			in:      poisoned(good(0, 0, 0, 0), 0, 1),
			maxRows: 1, quarantineAfter: 2,
			quarantined: 1, isolated: 2,
			deadMessages: 4,
			deadErr: []string{`trap: unreachable (seq 0)`, `trap: unreachable (seq 1)`,
				`partition 0 is quarantined: 2 batches in a row failed on every input (on_failure.quarantine_after: 2)`,
				`partition 0 is quarantined: 2 batches in a row failed on every input (on_failure.quarantine_after: 2)`},
		},
		{
			name:    "a success in between starts the count again",
			in:      poisoned(good(0, 0, 0, 0, 0), 0, 2, 4),
			maxRows: 1, quarantineAfter: 2,
			isolated: 3, deadMessages: 3,
		},
		{
			name: "the limit of calls",
			// Every other input fails: 96 calls (2·8·⌈log₂ 64⌉) isolate
			// the 24 of inputs 0 to 47; 48 to 63, 8 of them good, are
			// dead-lettered unresolved.
			in:          poisoned(good(make([]int, 64)...), evens(64)...),
			maxRows:     64,
			narrowCalls: 96, isolated: 24, deadMessages: 40,
			unresolvedErr: `not isolated: narrowing the failed batch of 64 inputs reached its limit of 96 calls, so this part of`,
		},
		{
			name: "a guest that fails everything",
			// Depth first: 5 calls down to the first input, then 16 more
			// to isolate 8 more; the 9th without a success stops it.
			in:          poisoned(good(make([]int, 64)...), rapidRange(64)...),
			maxRows:     64,
			narrowCalls: 21, isolated: 9, deadMessages: 64,
			unresolvedErr: `not isolated: narrowing the failed batch of 64 inputs found 9 inputs that fail on their own and none that succeeds, so this part of 1 inputs`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &poisonTally{mode: failTrap, trapTimers: tt.trapTimers}
			rt, got := runIsolation(t, fmt.Sprintf(isolatePipeline, 1, tt.maxRows, 0, tt.quarantineAfter), g, tt.in, nil)
			require.Len(t, got.dead, tt.deadMessages)
			require.Equal(t, tt.deadTimers, got.deadTimers)
			for i, want := range tt.deadErr {
				require.Contains(t, got.deadErrs[i], want, "dead letter %d", i)
			}
			q, _ := seriesValue(t, rt, "flowhost_computation_quarantined", map[string]string{"computation": "tally"})
			require.Equal(t, tt.quarantined, q)
			calls, _ := seriesValue(t, rt, "flowhost_isolation_calls_total", map[string]string{"computation": "tally", "cause": "call"})
			require.Equal(t, tt.narrowCalls, calls, "calls spent narrowing")
			isolated := counter(t, rt, "flowhost_isolated_failures_total", "tally", "call")
			unresolved, _ := seriesValue(t, rt, "flowhost_isolation_unresolved_total", map[string]string{"computation": "tally"})
			if tt.unresolvedErr == "" {
				require.Equal(t, tt.isolated, isolated)
				require.Zero(t, unresolved)
				return
			}
			require.Equal(t, float64(tt.deadMessages), isolated+unresolved, "every failed input is isolated or unresolved")
			if tt.isolated > 0 {
				require.Equal(t, tt.isolated, isolated)
			}
			require.NotZero(t, unresolved)
			i := slices.IndexFunc(got.deadErrs, func(e string) bool { return strings.Contains(e, "not isolated") })
			require.GreaterOrEqual(t, i, 0, "an unresolved dead letter")
			require.Contains(t, got.deadErrs[i], tt.unresolvedErr)
			require.Contains(t, got.deadErrs[i], `trap: unreachable`, "the failure narrowed")
		})
	}
}

func evens(n int) []int {
	var out []int
	for i := 0; i < n; i += 2 {
		out = append(out, i)
	}
	return out
}

// TestNarrowedBatchesGiveWhatTheGoodMessagesAloneGive compares, on random
// inputs cut into the same batches (max_duration is long, so batches are
// cut by max_rows and the end of input only), a run whose guest fails the
// poison messages with a run whose guest passes over them: the sink gets
// the same records in the same order, with the same message ids and event
// timestamps. So the parts of a narrowed batch apply in the batch's order,
// and a failed call spends no id.
func TestNarrowedBatchesGiveWhatTheGoodMessagesAloneGive(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mode := rapid.SampledFrom([]string{failTrap, failBatch, failValidate, failKey}).Draw(rt, "mode")
		n := rapid.IntRange(1, 60).Draw(rt, "messages")
		keys := rapid.IntRange(1, 5).Draw(rt, "keys")
		in := make([]isolateInput, n)
		for i := range in {
			in[i] = isolateInput{key: rapid.IntRange(0, keys-1).Draw(rt, "key")}
		}
		bad := rapid.IntRange(0, min(n, isolateAtMost)).Draw(rt, "poison messages")
		for _, i := range rapid.Permutation(rapidRange(n)).Draw(rt, "order")[:bad] {
			in[i].poison = true
		}
		p := fmt.Sprintf(isolatePipeline, 1, rapid.IntRange(1, 32).Draw(rt, "max_rows"), 0, 0)
		_, narrowed := runIsolation(rt, p, &poisonTally{mode: mode, noTimers: true}, in, nil)
		_, reference := runIsolation(rt, p, &poisonTally{mode: failSkip, noTimers: true}, in, nil)
		require.Len(rt, narrowed.dead, bad)
		require.Empty(rt, reference.dead)
		require.Equal(rt, len(reference.records), len(narrowed.records))
		for i, want := range reference.records {
			got := narrowed.records[i]
			require.Equal(rt, string(want.Payload), string(got.Payload), "record %d", i)
			require.Equal(rt, want.MessageID, got.MessageID, "record %d", i)
			require.Equal(rt, want.EventTS, got.EventTS, "record %d", i)
		}
	})
}

// TestACrashDuringANarrowingRedoesTheWholeBatch stops a durable run in the
// middle of a narrowing (a fresh instance cannot be made, which is fatal):
// nothing of the batch has committed or reached the sink, and the next
// run on the same store narrows the whole batch again, to exactly the
// outcome of a run that never stopped.
func TestACrashDuringANarrowingRedoesTheWholeBatch(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	in := make([]isolateInput, 20)
	for i := range in {
		in[i] = isolateInput{key: i % 3, stop: i == 7}
	}
	in[5].poison, in[13].poison = true, true
	p := fmt.Sprintf(isolatePipeline, 1, 64, 0, 0)

	// The first instance fails the batch; the second, the narrowing's
	// first, cannot be made.
	g := &poisonTally{mode: failTrap}
	var made int
	broken := compute.FactoryFunc(func(ctx context.Context, init *abi.Init) (compute.Computation, error) {
		if made++; made == 2 {
			return nil, errors.New("out of memory")
		}
		return g.factory().Instantiate(ctx, init)
	})
	sink := &captureSink{}
	var dead bytes.Buffer
	rt, err := runtime.New(mustSpec(t, p), map[string]compute.Factory{"tally": broken},
		runtime.WithSource("in", isolateRecords(in)), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead), runtime.WithStore(st))
	require.NoError(t, err)
	err = rt.Run(context.Background())
	require.ErrorContains(t, err, "replacing a failed instance: out of memory")
	require.Empty(t, sink.records, "nothing of the batch reached the sink")
	require.Empty(t, dead.String(), "nothing of the batch was dead-lettered")
	_, ok, err := st.Partition("tally", 0)
	require.NoError(t, err)
	require.False(t, ok, "no epoch committed")

	r, got := runIsolation(t, p, &poisonTally{mode: failTrap}, nil, st)
	want := expectedIsolation(in)
	require.Equal(t, want.perKey, got.perKey)
	require.Equal(t, want.counts, got.counts)
	require.ElementsMatch(t, want.dead, got.dead)
	require.Equal(t, 2.0, counter(t, r, "flowhost_isolated_failures_total", "tally", "call"))
}

const isolateMapPipeline = `
name: isolate-map
sources:
  - {name: in, type: generator, stream: events, generator: {count: 1}}
computations:
  - name: ident
    plugin: identity
    kind: map
    group_by: [key]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: %d, max_duration: 1h}
    on_failure: {retries: 0, quarantine_after: 0}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// TestNarrowedMapBatchesKeepEveryTimestamp: for a map, whose outputs
// inherit their timestamps and derive their ids from their parents, a
// narrowed batch gives each good message's output exactly as a run
// without the bad messages does: same order, id, and event, system and
// alignment timestamps.
func TestNarrowedMapBatchesKeepEveryTimestamp(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 60).Draw(rt, "messages")
		keys := rapid.IntRange(1, 5).Draw(rt, "keys")
		poison := map[int]bool{}
		for _, i := range rapid.Permutation(rapidRange(n)).Draw(rt, "order")[:rapid.IntRange(0, min(n, isolateAtMost)).Draw(rt, "poison messages")] {
			poison[i] = true
		}
		var withPoison sliceSource
		for i := range n {
			withPoison = append(withPoison, record(0, int64(i+1), int64(1000+i),
				fmt.Sprintf(`{"key":"k%d","seq":%d,"poison":%t}`, rapid.IntRange(0, keys-1).Draw(rt, "key"), i, poison[i])))
		}
		// The reference reads the same records (so that they keep their
		// ids and timestamps) and its guest passes over the poison ones.
		trapping := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
			for _, k := range req.Keys {
				for _, m := range k.Messages {
					if bytes.Contains(m.Payload, []byte(`"poison":true`)) {
						return nil, errors.New("trap: unreachable")
					}
				}
			}
			return identity(ctx, req)
		})
		skipping := compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
			resp, err := identity(ctx, req)
			if err != nil {
				return nil, err
			}
			for i, k := range req.Keys {
				kept := resp.Keys[i].Emits[:0]
				for _, e := range resp.Keys[i].Emits {
					if m := k.Messages[int(e.Parents[0])-len(k.Timers)]; !bytes.Contains(m.Payload, []byte(`"poison":true`)) {
						kept = append(kept, e)
					}
				}
				resp.Keys[i].Emits = kept
			}
			return resp, nil
		})
		p := fmt.Sprintf(isolateMapPipeline, rapid.IntRange(1, 32).Draw(rt, "max_rows"))
		run := func(g compute.Func) ([]connect.SinkRecord, int) {
			sink := &captureSink{}
			var dead bytes.Buffer
			sp, err := spec.Parse("test.yaml", []byte(p))
			require.NoError(rt, err)
			r, err := runtime.New(sp, map[string]compute.Factory{"ident": compute.Native(g)},
				runtime.WithSource("in", withPoison), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
			require.NoError(rt, err)
			require.NoError(rt, r.Run(context.Background()))
			return sink.records, strings.Count(dead.String(), "\n")
		}
		got, dead := run(trapping)
		want, none := run(skipping)
		require.Equal(rt, len(poison), dead)
		require.Zero(rt, none)
		require.Equal(rt, len(want), len(got))
		for i := range want {
			w, g := want[i], got[i]
			require.Equal(rt, string(w.Payload), string(g.Payload), "record %d", i)
			require.Equal(rt, w.MessageID, g.MessageID, "record %d", i)
			require.Equal(rt, [3]int64{w.EventTS, w.SystemTS, w.AlignmentTS}, [3]int64{g.EventTS, g.SystemTS, g.AlignmentTS}, "record %d", i)
			require.Equal(rt, w.Parents, g.Parents, "record %d", i)
		}
	})
}
