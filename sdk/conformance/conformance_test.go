package conformance_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/conformance"
	"github.com/flowhost/flowhost/sdk/wat"
)

// guests are the registered languages, the Go guest first: it is the
// reference every other response is compared with. languages_test.go adds
// the other SDKs.
var guests = []conformance.Guest{
	{Name: "go", Build: conformance.BuildGoGuest},
	{Name: "wat", Build: wat.BuildConformanceGuest},
	{Name: "wat-identity", Build: func(dir string) (string, error) { return wat.Build(dir, wat.Identity) }},
	{Name: "wat-echo", Build: func(dir string) (string, error) { return wat.Build(dir, wat.Echo) }},
}

// reference is the guest whose responses are the expected ones.
const reference = "go"

// role is what the suite may expect of a guest.
type role int

const (
	// interpreter runs SCRIPT.md: it takes part in every case.
	interpreter role = iota
	// noop is identity.wat: every batch gets {"keys": []}.
	noop
	// echoer is echo.wat: every message is echoed, timers do nothing.
	echoer
)

// roles lists the guests that are not script interpreters.
var roles = map[string]role{"wat-identity": noop, "wat-echo": echoer}

// outputs are the streams SCRIPT.md says the suite declares.
var outputs = []string{"out", "side"}

// cacheDir keeps wazero's native code between runs: compiling the 4 MB Go
// guest takes seconds, and ten times that under the race detector.
var cacheDir = filepath.Join(os.TempDir(), "flowhost-conformance-wazero-cache")

// prepared is every guest, built and compiled once per test binary.
var prepared struct {
	engine  engine.Engine
	modules map[string]engine.Module
	errs    map[string]error // why a guest has no module
	logs    syncBuffer       // what the guests logged
	timing  []string         // how long each build took, for the summary
}

func TestMain(m *testing.M) {
	start := time.Now()
	dir, err := os.MkdirTemp("", "flowhost-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	if err := prepare(dir); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	prepared.timing = append(prepared.timing, fmt.Sprintf("prepared all guests in %s", time.Since(start).Round(time.Millisecond)))
	code := m.Run()
	_ = prepared.engine.Close(context.Background())
	_ = os.RemoveAll(dir)
	results.print(os.Stdout)
	os.Exit(code)
}

// prepare builds every guest concurrently, then compiles them. A guest
// that fails to build or compile fails its tests, not the others'.
func prepare(dir string) error {
	paths := make([]string, len(guests))
	errs := make([]error, len(guests))
	took := make([]time.Duration, len(guests))
	var wg sync.WaitGroup
	for i, g := range guests {
		wg.Go(func() {
			start := time.Now()
			out := filepath.Join(dir, g.Name)
			if errs[i] = os.Mkdir(out, 0o755); errs[i] == nil {
				paths[i], errs[i] = g.Build(out)
			}
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	prepared.errs = map[string]error{}
	var built []string
	for i, g := range guests {
		prepared.timing = append(prepared.timing, fmt.Sprintf("built %s in %s", g.Name, took[i].Round(time.Millisecond)))
		if errs[i] != nil {
			prepared.errs[g.Name] = fmt.Errorf("building the %s guest: %w", g.Name, errs[i])
			continue
		}
		built = append(built, paths[i])
	}
	if raceEnabled {
		precompile(cacheDir, built)
	}

	ctx := context.Background()
	cfg := engine.NewConfig().WithCompilationCacheDir(cacheDir).
		WithLogger(slog.New(slog.NewTextHandler(&prepared.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e, err := engine.NewWazero(ctx, cfg)
	if err != nil {
		return err
	}
	prepared.engine = e
	prepared.modules = map[string]engine.Module{}
	var mu sync.Mutex
	for i, g := range guests {
		if errs[i] != nil {
			continue
		}
		wg.Go(func() {
			mod, err := compile(ctx, e, g.Name, paths[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				prepared.errs[g.Name] = fmt.Errorf("compiling the %s guest: %w", g.Name, err)
				return
			}
			prepared.modules[g.Name] = mod
		})
	}
	wg.Wait()
	return nil
}

func compile(ctx context.Context, e engine.Engine, name, path string) (engine.Module, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return e.Compile(ctx, name, wasm)
}

// precompile fills the compilation cache dir in a process without the race
// detector, through the engine's own precompiler (see
// host/engine/testdata/precompile): under -race, wazero compiles a Go
// guest in 40 seconds instead of 4. It uses the engine's default
// configuration, as prepare does, so that the cache keys agree. If it
// fails, prepare compiles everything itself, slowly.
func precompile(cache string, paths []string) {
	if len(paths) == 0 {
		return
	}
	args := append([]string{"test", "-count=1", "-run=^TestPrecompile$", "github.com/flowhost/flowhost/host/engine/testdata/precompile",
		"-args", "-cache", cache}, paths...)
	cmd := exec.Command("go", args...)
	cmd.Env = conformance.WithoutRace(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: precompiling without the race detector failed, compiling in the test (slow): %v\n%s\n", err, out)
	}
}

// module returns the compiled guest called name, failing the test with the
// reason when it has none.
func module(t *testing.T, name string) engine.Module {
	t.Helper()
	require.NoError(t, prepared.errs[name])
	mod, ok := prepared.modules[name]
	require.True(t, ok, "no module for guest %q", name)
	return mod
}

// syncBuffer collects the guests' log lines from every instance.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// linesOf returns the log lines of the plugin called name.
func (b *syncBuffer) linesOf(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out strings.Builder
	for line := range strings.Lines(b.buf.String()) {
		if strings.Contains(line, "plugin="+name+" ") {
			out.WriteString(line)
		}
	}
	return out.String()
}

// run is what one guest did in one case.
type run struct {
	guest string
	// initRaw is the guest's raw InitResult, nil when it returned 0;
	// initResult is its decoding.
	initRaw    []byte
	initResult *abi.InitResult
	steps      []stepRun
	// host is the host's view after the last step: states and pending
	// timers.
	host *hostModel
}

// refused reports whether the guest refused to start.
func (r *run) refused() bool { return r.initResult != nil && r.initResult.Error != "" }

// stepRun is one request and the guest's answer to it.
type stepRun struct {
	req   *abi.Request
	raw   []byte // the guest's bytes
	resp  *abi.Response
	canon []byte // the host's canonical encoding of resp
}

// execute runs case c on a fresh instance of the guest: Init, then every
// step, each request built by the host model from the state and timers the
// earlier responses left. Every response must decode strictly and validate
// against its request.
func execute(t *testing.T, name string, c *testCase) *run {
	t.Helper()
	ctx := context.Background()
	inst, err := module(t, name).Instantiate(ctx, engine.NewInstanceConfig())
	require.NoError(t, err)
	defer func() { _ = inst.Close(ctx) }()
	logs := func() string {
		if l := prepared.logs.linesOf(name); l != "" {
			return "guest log:\n" + l
		}
		return "the guest logged nothing"
	}

	r := &run{guest: name, host: newHostModel()}
	in := c.initEnvelope()
	payload, err := abi.EncodeInit(&in)
	require.NoError(t, err)
	res, err := inst.Init(ctx, payload)
	require.NoError(t, err, "init: %s", logs())
	if res != nil {
		r.initRaw = bytes.Clone(res)
		r.initResult, err = abi.DecodeInitResult(r.initRaw)
		require.NoError(t, err, "init result %x", r.initRaw)
		if r.refused() {
			return r
		}
	}
	for i := range c.steps {
		req := r.host.request(t, c, i)
		payload, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		out, err := inst.Process(ctx, payload)
		require.NoError(t, err, "step %d: %s", i, logs())
		s := stepRun{req: req, raw: bytes.Clone(out)}
		s.resp, err = abi.DecodeResponse(s.raw, abi.ResponseLimits{})
		require.NoError(t, err, "step %d: response %s", i, excerpt(s.raw))
		require.NoError(t, abi.ValidateResponse(s.resp, req, c.outputs()), "step %d: response\n%s", i, render(s.resp))
		s.canon, err = abi.EncodeResponse(s.resp)
		require.NoError(t, err)
		r.host.apply(req, s.resp)
		r.steps = append(r.steps, s)
	}
	return r
}

// refs holds the reference guest's run of each case, for the others to be
// compared with.
var refs = map[string]*run{}

// TestConformance runs every case on every guest: the matrix the README
// describes, printed at the end of the run (go test -v shows it).
func TestConformance(t *testing.T) {
	for i := range cases {
		c := &cases[i]
		t.Run(c.name, func(t *testing.T) {
			for _, g := range guests {
				var notes []string
				ran := false
				ok := t.Run(g.Name, func(t *testing.T) {
					ran = true
					notes = conform(t, c, g.Name)
				})
				if ran { // not filtered out by -run
					results.record(c.name, g.Name, ok, notes)
				}
			}
		})
	}
}

// conform runs case c on one guest and checks it by the guest's role. It
// returns notes for the report: parts taken or not, non-canonical bytes.
func conform(t *testing.T, c *testCase, name string) (notes []string) {
	role := roles[name]
	if role != interpreter && c.initOnly() {
		return []string{"n/a"}
	}
	r := execute(t, name, c)
	switch role {
	case noop:
		want, err := abi.EncodeResponse(&abi.Response{Keys: []abi.ResponseKey{}})
		require.NoError(t, err)
		for i, s := range r.steps {
			require.Equal(t, want, s.raw, "step %d: identity.wat answers every batch with {\"keys\": []}", i)
		}
		if !c.noopTakesPart {
			return []string{"no-op"}
		}
	case echoer:
		for i, s := range r.steps {
			want, err := abi.EncodeResponse(wat.EchoResponse(s.req))
			require.NoError(t, err)
			require.Equal(t, want, s.canon, "step %d: echo.wat echoes every message", i)
		}
		if !c.echoOnly {
			return []string{"echo"}
		}
	case interpreter:
		if name == reference {
			// Kept before the checks, so that when the reference itself
			// fails one the others are still compared with what it did.
			refs[c.name] = r
		}
		if c.check != nil {
			c.check(t, r)
		}
	}
	if name != reference {
		ref, ok := refs[c.name]
		require.True(t, ok, "no response of the %s guest to compare with", reference)
		requireSame(t, ref, r)
	}
	return rawNotes(t, r)
}

// requireSame requires r's canonical responses to be ref's, byte for byte.
func requireSame(t *testing.T, ref, r *run) {
	t.Helper()
	require.Equal(t, initText(ref), initText(r), "init result differs from the %s guest's", reference)
	require.Len(t, r.steps, len(ref.steps))
	for i := range ref.steps {
		want, got := &ref.steps[i], &r.steps[i]
		if bytes.Equal(want.canon, got.canon) {
			continue
		}
		require.Equal(t, render(want.resp), render(got.resp), "step %d: response differs from the %s guest's", i, reference)
		at := firstDiff(want.canon, got.canon)
		require.Failf(t, "same rendering, different canonical bytes", "step %d, offset %d: %s guest %s, this guest %s",
			i, at, reference, excerptAt(want.canon, at), excerptAt(got.canon, at))
	}
}

// initText is the canonical meaning of an init outcome: started, or the
// refusal's canonical encoding.
func initText(r *run) string {
	if !r.refused() {
		return "started"
	}
	b, err := abi.EncodeInitResult(r.initResult)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("refused %q: %x", r.initResult.Error, b)
}

// rawNotes reports where a guest's own bytes are not the canonical
// encoding the host would produce: allowed (the host accepts any key
// order), but worth knowing.
func rawNotes(t *testing.T, r *run) []string {
	var notes []string
	if r.initRaw != nil {
		if canon, err := abi.EncodeInitResult(r.initResult); err == nil && !bytes.Equal(canon, r.initRaw) {
			notes = append(notes, fmt.Sprintf("init result %x, canonical %x", r.initRaw, canon))
		}
		if !r.refused() {
			notes = append(notes, fmt.Sprintf("started with the InitResult %x instead of 0", r.initRaw))
		}
	}
	for i, s := range r.steps {
		if !bytes.Equal(s.raw, s.canon) {
			at := firstDiff(s.canon, s.raw)
			notes = append(notes, fmt.Sprintf("step %d: raw response of %d bytes is not canonical (%d bytes); first difference at offset %d: raw %s, canonical %s",
				i, len(s.raw), len(s.canon), at, excerptAt(s.raw, at), excerptAt(s.canon, at)))
		}
	}
	for _, n := range notes {
		t.Log("non-canonical:", n)
	}
	return notes
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// excerptAt shows up to 16 bytes of b from 8 before offset at, in hex.
func excerptAt(b []byte, at int) string {
	from := max(0, at-8)
	to := min(len(b), at+8)
	return fmt.Sprintf("[%d:%d] %x|%x", from, to, b[from:min(at, len(b))], b[min(at, len(b)):to])
}

func excerpt(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%x… (%d bytes)", b[:64], len(b))
	}
	return fmt.Sprintf("%x", b)
}

// render writes a response one line per fact, so that a failed comparison
// shows a readable diff; long payloads are cut, with their length and
// checksum kept.
func render(resp *abi.Response) string {
	var b strings.Builder
	if resp.Error != "" {
		fmt.Fprintf(&b, "error %q\n", resp.Error)
	}
	for i, k := range resp.Keys {
		at := "keys[" + strconv.Itoa(i) + "]"
		fmt.Fprintf(&b, "%s key %q\n", at, k.Key)
		if k.Error != "" {
			fmt.Fprintf(&b, "%s error %q\n", at, k.Error)
		}
		for j, e := range k.Emits {
			fmt.Fprintf(&b, "%s.emits[%d] stream %q payload %s", at, j, e.Stream, show(e.Payload))
			if e.Key != "" {
				fmt.Fprintf(&b, " key %q", e.Key)
			}
			if e.EventTimestamp != nil {
				fmt.Fprintf(&b, " event_ts %d", *e.EventTimestamp)
			}
			if e.Parents != nil {
				fmt.Fprintf(&b, " parents %v", e.Parents)
			}
			b.WriteByte('\n')
		}
		if k.StateOp != abi.StateKeep || k.State != nil {
			fmt.Fprintf(&b, "%s state_op %s state %s\n", at, k.StateOp, show(k.State))
		}
		for j, tm := range k.TimersSet {
			fmt.Fprintf(&b, "%s.timers_set[%d] trigger %d", at, j, tm.TriggerTimestamp)
			if tm.EventTimestamp != nil {
				fmt.Fprintf(&b, " event_ts %d", *tm.EventTimestamp)
			}
			if tm.Payload != nil {
				fmt.Fprintf(&b, " payload %s", show(tm.Payload))
			}
			b.WriteByte('\n')
		}
		if k.TimersCancel != nil {
			fmt.Fprintf(&b, "%s timers_cancel %v\n", at, k.TimersCancel)
		}
	}
	return b.String()
}

func show(p []byte) string {
	if p == nil {
		return "absent"
	}
	if len(p) <= 64 {
		return strconv.Quote(string(p))
	}
	return fmt.Sprintf("%q… (%d bytes, crc32 %08x)", p[:64], len(p), crc32.ChecksumIEEE(p))
}

// results is the case × language matrix of the run.
var results = &matrix{cells: map[[2]string]string{}}

type matrix struct {
	mu    sync.Mutex
	cases []string
	cells map[[2]string]string
	notes []string
}

func (m *matrix) record(c, guest string, ok bool, notes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cases) == 0 || m.cases[len(m.cases)-1] != c {
		m.cases = append(m.cases, c)
	}
	cell := "ok"
	switch {
	case !ok:
		cell = "FAIL"
	case len(notes) > 0 && (notes[0] == "n/a" || notes[0] == "no-op" || notes[0] == "echo"):
		cell = notes[0]
		notes = notes[1:]
	}
	for _, n := range notes {
		m.notes = append(m.notes, fmt.Sprintf("[%d] %s/%s: %s", len(m.notes)+1, c, guest, n))
		cell += fmt.Sprintf(" [%d]", len(m.notes))
	}
	m.cells[[2]string{c, guest}] = cell
}

// print writes the matrix: "ok" compared equal with the reference, "no-op"
// and "echo" passed their own role's check only, "n/a" did not take part.
func (m *matrix) print(w *os.File) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cases) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\nconformance matrix (ok: same canonical response as the go guest; no-op, echo: the WAT guest's own check; [n]: note)\n")
	width := len("case")
	for _, c := range m.cases {
		width = max(width, len(c))
	}
	fmt.Fprintf(&b, "%-*s", width+2, "case")
	for _, g := range guests {
		fmt.Fprintf(&b, "%-14s", g.Name)
	}
	b.WriteByte('\n')
	for _, c := range m.cases {
		fmt.Fprintf(&b, "%-*s", width+2, c)
		for _, g := range guests {
			cell, ok := m.cells[[2]string{c, g.Name}]
			if !ok {
				cell = "-"
			}
			fmt.Fprintf(&b, "%-14s", cell)
		}
		b.WriteByte('\n')
	}
	for _, n := range m.notes {
		b.WriteString(n + "\n")
	}
	for _, l := range prepared.timing {
		b.WriteString(l + "\n")
	}
	_, _ = w.WriteString(b.String())
}
