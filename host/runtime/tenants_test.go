package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/runtime"
)

const tenantPipeline = `
name: tenants
tenants:
  - name: acme
    plugin_dirs: [unused]
    quotas: {max_state_bytes_per_key: 100, max_timers_per_key: 3%s}
sources:
  - {name: in, type: file, stream: events, file: {path: unused.jsonl}%s}
computations:
  - name: c
    plugin: p
    tenant: acme
    group_by: [user]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 1}
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

// grower appends 40 bytes to its key's state on every message (and sets
// two timers when the payload asks for them), and emits the message.
var grower = compute.Func(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	resp, err := identity(ctx, req)
	if err != nil {
		return nil, err
	}
	for i, k := range req.Keys {
		state := k.State
		for _, m := range k.Messages {
			state = append(state, bytes.Repeat([]byte("s"), 40)...)
			if bytes.Contains(m.Payload, []byte("timers")) {
				base := m.EventTimestamp + int64(time.Hour)
				resp.Keys[i].TimersSet = append(resp.Keys[i].TimersSet,
					abi.Timer{TriggerTimestamp: base + m.EventTimestamp}, abi.Timer{TriggerTimestamp: base + m.EventTimestamp + 1})
			}
		}
		resp.Keys[i].StateOp, resp.Keys[i].State = abi.StateReplace, state
	}
	return resp, nil
})

// TestKeyQuotasFailTheKeyNotTheRun runs a guest whose state grows by 40
// bytes a message (quota 100 bytes: two messages per key fit) and one that
// also sets two timers a message (quota 3: one message per key fits). A
// key over a quota fails: its input is dead-lettered with the quota named,
// nothing of it applies (its state stays, so the next message fails too),
// and the other keys and the run go on.
func TestKeyQuotasFailTheKeyNotTheRun(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		keep        int // messages per key that fit
		quota       string
	}{
		{"state", "", 2, "quotas.max_state_bytes_per_key (100 bytes)"},
		{"timers", `,"timers":1`, 1, "quotas.max_timers_per_key (3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var recs sliceSource
			for i := range 12 {
				recs = append(recs, record(0, int64(i+1), int64(i+1), fmt.Sprintf(`{"user":"u%d","n":%d%s}`, i%3, i, c.extra)))
			}
			sink := &captureSink{}
			var dead bytes.Buffer
			rt, err := runtime.New(mustSpec(t, fmt.Sprintf(tenantPipeline, "", "")),
				map[string]compute.Factory{"c": compute.Native(grower)},
				runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
			require.NoError(t, err)
			require.NoError(t, rt.Run(context.Background()))
			require.Len(t, sink.records, 3*c.keep, "the messages of each key that fit")
			for _, r := range sink.records {
				var n int
				_, err := fmt.Sscanf(string(r.Payload[strings.Index(string(r.Payload), `"n":`)+4:]), "%d", &n)
				require.NoError(t, err)
				require.Less(t, n, 3*c.keep, "only each key's first messages fit: %s", r.Payload)
			}
			lines := deadLetterLines(t, &dead)
			require.Len(t, lines, 12-3*c.keep, "every other input is dead-lettered once")
			for _, l := range lines {
				require.Equal(t, "guest", l.Stage)
				require.Contains(t, l.Error, `computation "c" (plugin "p", tenant "acme") failed key`)
				require.Contains(t, l.Error, "quota exceeded")
				require.Contains(t, l.Error, c.quota)
			}
			quota := strings.Fields(c.quota)[0][len("quotas."):]
			v, ok := seriesValue(t, rt, "flowhost_quota_exceeded_total", map[string]string{"tenant": "acme", "computation": "c", "quota": quota})
			require.True(t, ok)
			require.Equal(t, float64(12-3*c.keep), v)
		})
	}
}

// TestIngestRateQuotaPacesTheTenantsSources gives a tenant's source 300
// records at an ingest_rate of 200/s: a bucket of one second's worth lets
// 200 pass at once, and the other 100 need at least half a second. The
// lower bound is the quota's guarantee (a run can only take longer), so
// this is not a speed assertion; nothing is refused or lost.
func TestIngestRateQuotaPacesTheTenantsSources(t *testing.T) {
	var recs sliceSource
	for i := range 300 {
		recs = append(recs, record(0, int64(i+1), int64(i+1), fmt.Sprintf(`{"user":"u%d"}`, i%5)))
	}
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(tenantPipeline, ", ingest_rate: 200", ", tenant: acme")),
		map[string]compute.Factory{"c": compute.Native(identity)},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, rt.Run(context.Background()))
	require.GreaterOrEqual(t, time.Since(start), 450*time.Millisecond, "100 records past the burst at 200/s")
	require.Len(t, sink.records, 300)
	v, ok := seriesValue(t, rt, "flowhost_source_throttled_seconds_total", map[string]string{"source": "in"})
	require.True(t, ok)
	require.Greater(t, v, 0.4)
}

// TestRefusedComputationDeadLettersItsInputs runs a computation whose
// plugin was refused at load: the run goes on, every input goes to the
// dead-letter route with the refusal, and the status says quarantined.
func TestRefusedComputationDeadLettersItsInputs(t *testing.T) {
	var recs sliceSource
	for i := range 5 {
		recs = append(recs, record(0, int64(i+1), int64(i+1), fmt.Sprintf(`{"user":"u%d"}`, i)))
	}
	var dead bytes.Buffer
	refusal := errors.New(`computation "c" (tenant "acme"): plugin "p": forbidden import wasi_snapshot_preview1.sock_accept`)
	sink := &captureSink{}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(tenantPipeline, "", "")),
		map[string]compute.Factory{"c": &compute.Refused{Err: refusal}},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Empty(t, sink.records)
	lines := deadLetterLines(t, &dead)
	require.Len(t, lines, 5)
	for _, l := range lines {
		require.Contains(t, l.Error, refusal.Error())
	}
	v, _ := seriesValue(t, rt, "flowhost_computation_quarantined", map[string]string{"computation": "c"})
	require.Equal(t, 1.0, v)
}

// retiringFactory counts its retirements.
type retiringFactory struct {
	compute.Factory
	retired atomic.Int32
}

func (r *retiringFactory) Retire(context.Context) { r.retired.Add(1) }

// tagger emits each message with its version's tag, and at its third
// batch reloads the computation with next (as a watcher would, while a
// batch runs).
type tagger struct {
	tag     string
	batches atomic.Int32
	reload  func(ctx context.Context)
}

func (g *tagger) process(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	if g.batches.Add(1) == 3 && g.reload != nil {
		g.reload(ctx)
	}
	resp := &abi.Response{}
	for _, k := range req.Keys {
		rk := abi.ResponseKey{Key: k.Key}
		for j, m := range k.Messages {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "out", Payload: fmt.Appendf(nil, `[%q,%s]`, g.tag, m.Payload), Parents: []uint32{uint32(j)}})
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
}

// TestReloadSwitchesVersionsAtAnEpochBoundary reloads a computation during
// its third batch (one message a batch): the batch running finishes on
// the old version, every later one runs on the new, no message is lost
// or processed twice; a version whose instance cannot start is refused and
// the running one keeps running.
func TestReloadSwitchesVersionsAtAnEpochBoundary(t *testing.T) {
	var recs sliceSource
	for i := range 10 {
		recs = append(recs, record(0, int64(i+1), int64(i+1), fmt.Sprintf(`{"user":"u","n":%d}`, i)))
	}
	sink := &captureSink{}
	v1, v2 := &tagger{tag: "v1"}, &tagger{tag: "v2"}
	var rt *runtime.Runtime
	var refused, unknown error
	v1.reload = func(ctx context.Context) {
		bad := compute.FactoryFunc(func(context.Context, *abi.Init) (compute.Computation, error) {
			return nil, errors.New("init failed: missing parameter")
		})
		refused = rt.Reload(ctx, "c", bad, "v1.5")
		unknown = rt.Reload(ctx, "nope", compute.Native(v2.process), "v2")
		require.NoError(t, rt.Reload(ctx, "c", compute.Native(v2.process), "v2"))
	}
	first := &retiringFactory{Factory: compute.Native(v1.process)}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(tenantPipeline, "", "")),
		map[string]compute.Factory{"c": first},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{}))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	require.Equal(t, int32(1), first.retired.Load(), "the replaced version is retired once its partition moved off it")
	require.ErrorContains(t, refused, `reload of computation "c" refused, the running version keeps running: instantiating v1.5: init failed`)
	require.ErrorIs(t, unknown, runtime.ErrUnknownComputation)
	var got []string
	for _, r := range sink.records {
		got = append(got, string(r.Payload))
	}
	var want []string
	for i := range 10 {
		tag := "v2"
		if i < 3 {
			tag = "v1"
		}
		want = append(want, fmt.Sprintf(`[%q,{"user":"u","n":%d}]`, tag, i))
	}
	require.Equal(t, want, got)
	for result, n := range map[string]float64{"swapped": 1, "refused": 1} {
		v, _ := seriesValue(t, rt, "flowhost_computation_reloads_total", map[string]string{"computation": "c", "result": result})
		require.Equal(t, n, v, result)
	}
}

// reloadOnFirstWrite is a dead-letter writer that reloads computation c
// with f when the first dead letter is written.
type reloadOnFirstWrite struct {
	bytes.Buffer
	once   bool
	reload func()
}

func (w *reloadOnFirstWrite) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		w.reload()
	}
	return w.Buffer.Write(p)
}

// TestReloadLiftsTheQuarantineOfARefusedPlugin starts with a refused
// plugin: its first input is dead-lettered and Status shows the partition
// quarantined with the reason; a reload of a good version then lifts the
// quarantine, and every later input is processed.
func TestReloadLiftsTheQuarantineOfARefusedPlugin(t *testing.T) {
	var recs sliceSource
	for i := range 6 {
		recs = append(recs, record(0, int64(i+1), int64(i+1), fmt.Sprintf(`{"user":"u","n":%d}`, i)))
	}
	refusal := errors.New(`computation "c" (tenant "acme"): plugin "p": not a WebAssembly binary`)
	sink := &captureSink{}
	var rt *runtime.Runtime
	var during runtime.Status
	dead := &reloadOnFirstWrite{}
	dead.reload = func() {
		during = rt.Status()
		require.NoError(t, rt.Reload(context.Background(), "c", compute.Native(identity), "p 1.0.1"))
	}
	rt, err := runtime.New(mustSpec(t, fmt.Sprintf(tenantPipeline, "", "")),
		map[string]compute.Factory{"c": &compute.Refused{Err: refusal}},
		runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(dead))
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))

	require.Len(t, during.Computations, 1)
	cs := during.Computations[0]
	require.Equal(t, "acme", cs.Tenant)
	require.Equal(t, []runtime.QuarantinedPartition{{Partition: 0, Reason: refusal.Error()}}, cs.Quarantined)
	lines := deadLetterLines(t, &dead.Buffer)
	require.Len(t, lines, 1, "only the input before the reload")
	require.Len(t, sink.records, 5, "every input after it")
	after := rt.Status().Computations[0]
	require.Empty(t, after.Quarantined)
	require.Equal(t, "p 1.0.1", after.Version)
	require.Equal(t, uint64(1), after.Generation)
	v, _ := seriesValue(t, rt, "flowhost_computation_quarantined", map[string]string{"computation": "c"})
	require.Equal(t, 0.0, v)
}

const fairSharePipeline = `
name: fair
tenants:
  - {name: light, plugin_dirs: [unused], weight: 1}
  - {name: heavy, plugin_dirs: [unused], weight: 3}
sources:
  - {name: a, type: file, stream: a, tenant: light, file: {path: unused}}
  - {name: b, type: file, stream: b, tenant: heavy, file: {path: unused}}
computations:
  - {name: ca, plugin: p, tenant: light, input_streams: [a], batch: {max_rows: 1}}
  - {name: cb, plugin: p, tenant: heavy, input_streams: [b], batch: {max_rows: 1}}
`

// TestWorkersAreSharedByTenantWeight runs two tenants on one worker, each
// with more work than the worker can do while the other contends, and
// counts the worker time each gets while both have work: in proportion to
// their weights, whatever their batches cost. A tenant whose batches take
// ten times as long (one hogging the CPU) gets no more time for it: it
// gets its turn a tenth as often.
func TestWorkersAreSharedByTenantWeight(t *testing.T) {
	cases := []struct {
		name                 string
		lightW, heavyW       int
		lightCost, heavyCost time.Duration
		heavyShare           float64 // of the worker time
	}{
		{"weights 1:3", 1, 3, time.Millisecond, time.Millisecond, 0.75},
		{"hog with 10x batches", 1, 1, time.Millisecond, 10 * time.Millisecond, 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each call's own measured time, not its nominal cost: the
			// scheduler charges the time a batch held the worker, and on a
			// loaded machine a sleep overshoots by a varying amount.
			type call struct {
				name string
				held time.Duration
			}
			var mu sync.Mutex
			var order []call
			busy := func(name string, cost time.Duration) compute.Factory {
				return compute.Native(func(ctx context.Context, req *abi.Request) (*abi.Response, error) {
					start := time.Now()
					time.Sleep(cost) // the guest at work, holding its worker
					held := time.Since(start)
					mu.Lock()
					order = append(order, call{name, held})
					mu.Unlock()
					return &abi.Response{}, nil
				})
			}
			src := func(n int) sliceSource {
				var s sliceSource
				for i := range n {
					s = append(s, record(0, int64(i+1), int64(i+1), `{}`))
				}
				return s
			}
			spec := strings.NewReplacer("weight: 1}", fmt.Sprintf("weight: %d}", c.lightW), "weight: 3}", fmt.Sprintf("weight: %d}", c.heavyW)).Replace(fairSharePipeline)
			rt, err := runtime.New(mustSpec(t, spec),
				map[string]compute.Factory{"ca": busy("light", c.lightCost), "cb": busy("heavy", c.heavyCost)},
				runtime.WithSource("a", src(800)), runtime.WithSource("b", src(200)), runtime.WithWorkers(1),
				runtime.WithDeadLetter(&bytes.Buffer{}))
			require.NoError(t, err)
			require.NoError(t, rt.Run(context.Background()))
			require.Len(t, order, 1000)
			// While both contend: skip the first batches, while the
			// sources warm up, and stop when either tenant is done with
			// three quarters of its input.
			var light, heavy int
			var lightTime, heavyTime time.Duration
			for _, c := range order[50:] {
				if c.name == "light" {
					light++
					lightTime += c.held
				} else {
					heavy++
					heavyTime += c.held
				}
				if light == 600 || heavy == 150 {
					break
				}
			}
			share := heavyTime.Seconds() / (heavyTime + lightTime).Seconds()
			require.InDelta(t, c.heavyShare, share, 0.1, "heavy got %d batches, light %d", heavy, light)
			v, ok := seriesValue(t, rt, "flowhost_tenant_worker_seconds_total", map[string]string{"tenant": "heavy"})
			require.True(t, ok)
			require.Greater(t, v, 200*c.heavyCost.Seconds(), "heavy: 200 batches")
		})
	}
}
