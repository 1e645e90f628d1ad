package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/connect"
)

// hostileRecords is how many records the file source of the hostile suite
// holds.
const hostileRecords = 400

// buildHostileWAT compiles host/testdata/hostile/<name>.wat with wat2wasm
// once per test binary run.
var buildHostileWAT = func() func(tb testing.TB, name string) []byte {
	var mu sync.Mutex
	built := map[string][]byte{}
	return func(tb testing.TB, name string) []byte {
		tb.Helper()
		mu.Lock()
		defer mu.Unlock()
		if b, ok := built[name]; ok {
			return b
		}
		tool, err := exec.LookPath("wat2wasm")
		require.NoError(tb, err, "wat2wasm (Debian package wabt) is needed")
		out := filepath.Join(tb.TempDir(), name+".wasm")
		msg, err := exec.Command(tool, filepath.Join("testdata", "hostile", name+".wat"), "-o", out).CombinedOutput()
		require.NoError(tb, err, "wat2wasm %s: %s", name, msg)
		b, err := os.ReadFile(out)
		require.NoError(tb, err)
		built[name] = b
		return b
	}
}()

// writeHostilePlugin lays out a plugin directory holding wasm, with the
// manifest's engine and extra manifest lines (limits, ...).
func writeHostilePlugin(t *testing.T, dir, name string, wasm []byte, engine, extra string) {
	t.Helper()
	pdir := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(pdir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pdir, name+".wasm"), wasm, 0o644))
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf("name: %s\nversion: 1.0.0\nabi: 1\nwasm: %s.wasm\nsha256: %s\nkinds: [transform, map]\nengine: %s\n%s",
		name, name, hex.EncodeToString(sum[:]), engine, extra)
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "plugin.yaml"), []byte(manifest), 0o644))
}

const hostilePipeline = `
name: hostile
sources:
  - {name: in, type: file, stream: in, file: {path: in.jsonl}}
computations:
  - {name: good, plugin: identity, group_by: [k], input_streams: [in], output_streams: [out]}
%s
sinks:
  - {name: good-sink, type: file, streams: [out], file: {path: good.jsonl}}
%s
dead_letter: {type: file, file: {path: dead.jsonl}}
`

const hostileComputation = `
  - name: bad
    plugin: %s
    group_by: [k]
    input_streams: [in]
    output_streams: [bad-out]
    on_failure: {retries: 1, backoff: 1ms, max_backoff: 1ms}
`

const hostileSink = `
  - {name: bad-sink, type: file, streams: [bad-out], file: {path: bad.jsonl}}
`

type hostileRun struct {
	err      error
	wall     time.Duration // host.Run's wall time
	loaded   time.Duration // from the start to "pipeline running": loading and compiling; 0 when never logged
	sinkTime time.Duration // from the start to the good sink's last write
	dir      string
	logs     string // the run's log, text
}

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningMessage is what host.Run logs once its computations are loaded
// and compiled, just before it runs the pipeline.
const runningMessage = "pipeline running"

// loadClock is a slog.Handler that notes when runningMessage is logged.
type loadClock struct {
	slog.Handler
	at *atomic.Int64 // time.Now().UnixNano() of the message; 0 before
}

func (h loadClock) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == runningMessage {
		h.at.CompareAndSwap(0, time.Now().UnixNano())
	}
	return h.Handler.Handle(ctx, r)
}

func (h loadClock) WithAttrs(attrs []slog.Attr) slog.Handler {
	return loadClock{h.Handler.WithAttrs(attrs), h.at}
}

func (h loadClock) WithGroup(name string) slog.Handler {
	return loadClock{h.Handler.WithGroup(name), h.at}
}

// appendCustomSection returns a copy of the module wasm followed by a
// custom section (id 0) called name holding size zero bytes: every engine
// accepts and ignores it, so the module computes what wasm computes.
func appendCustomSection(wasm []byte, name string, size int) []byte {
	uleb := func(b []byte, v uint64) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	nameLen := uleb(nil, uint64(len(name)))
	content := uint64(len(nameLen) + len(name) + size)
	out := make([]byte, 0, len(wasm)+1+10+int(content))
	out = append(out, wasm...)
	out = append(out, 0)
	out = uleb(out, content)
	out = append(out, nameLen...)
	out = append(out, name...)
	return append(out, make([]byte, size)...)
}

// runHostilePipeline writes the input and the spec into a fresh directory
// holding the plugins in pluginDir and runs it; hostilePlugin "" runs the
// good computation alone.
func runHostilePipeline(t *testing.T, pluginDir, input, hostilePlugin string) hostileRun {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input), 0o644))
	comp, sink := "", ""
	if hostilePlugin != "" {
		comp, sink = fmt.Sprintf(hostileComputation, hostilePlugin), hostileSink
	}
	specPath := filepath.Join(dir, "pipeline.yaml")
	require.NoError(t, os.WriteFile(specPath, fmt.Appendf(nil, hostilePipeline, comp, sink), 0o644))
	logs := &lockedBuffer{}
	var running atomic.Int64
	start := time.Now()
	err := host.Run(context.Background(), host.RunConfig{
		SpecPath:   specPath,
		PluginDirs: []string{pluginDir},
		CacheDir:   filepath.Join(os.TempDir(), "flowhost-test-cache"),
		Logger:     slog.New(loadClock{slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}), &running}),
		DataDir:    t.TempDir(),
		Progress:   io.Discard,
	})
	r := hostileRun{err: err, wall: time.Since(start), dir: dir}
	if at := running.Load(); at != 0 {
		r.loaded = time.Unix(0, at).Sub(start)
	}
	r.logs = logs.String()
	if fi, statErr := os.Stat(filepath.Join(dir, "good.jsonl")); statErr == nil {
		r.sinkTime = fi.ModTime().Sub(start)
	}
	return r
}

// goodPayloads reads the good sink's payloads, sorted.
func goodPayloads(t *testing.T, dir string) []string {
	t.Helper()
	return sinkPayloads(t, dir, "good.jsonl")
}

// sinkPayloads reads the payloads of the file sink writing file, sorted.
func sinkPayloads(t *testing.T, dir, file string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		got = append(got, compactJSON(t, rec.Payload))
	}
	slices.Sort(got)
	return got
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

// requireExactlyOnce fails, briefly, unless got holds every payload of
// want exactly once and nothing else (both sorted).
func requireExactlyOnce(t *testing.T, want, got []string, what string) {
	t.Helper()
	if slices.Equal(want, got) {
		return
	}
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	var missing, twice []string
	for _, w := range want {
		switch n := count[w]; {
		case n == 0:
			missing = append(missing, w)
		case n > 1:
			twice = append(twice, w)
		}
		delete(count, w)
	}
	first := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return s[0]
	}
	t.Fatalf("%s: %d records for %d inputs; %d missing (first %s), %d more than once (first %s), %d unexpected",
		what, len(got), len(want), len(missing), first(missing), len(twice), first(twice), len(count))
}

type deadRecord struct {
	Origin         string          `json:"origin"`
	Stage          string          `json:"stage"`
	Error          string          `json:"error"`
	Record         json.RawMessage `json:"record"`
	RecordEncoding string          `json:"record_encoding"`
}

// deadRecords parses the dead-letter file; a missing file is no records.
func deadRecords(t *testing.T, dir string) []deadRecord {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "dead.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var recs []deadRecord
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var r deadRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), "%s", line)
		recs = append(recs, r)
	}
	return recs
}

// TestHostilePluginsBesideAGoodOne runs, on each engine, a pipeline whose
// well-behaved identity computation reads the same stream as a hostile
// one. The host stays up (or refuses the hostile plugin at load time,
// naming it and the cause, and then runs the good one fine), every input
// of the hostile computation is dead-lettered exactly once with its plugin
// and the cause named, and every input reaches the good sink exactly once.
// A plugin that is only unusual (a 100 MiB module) is no failure: its sink
// gets every input exactly once too.
// It logs the good computation's throughput beside the hostile one
// relative to alone; it does not assert it.
func TestHostilePluginsBesideAGoodOne(t *testing.T) {
	var input strings.Builder
	var want []string
	for i := range hostileRecords {
		p := fmt.Sprintf(`{"k":"k%d","seq":%d,"fill":"hostile-suite-%04d"}`, i%7, i, i)
		fmt.Fprintf(&input, `{"write_ts":%d,"payload":%s}`+"\n", i+1, p)
		want = append(want, compactJSON(t, []byte(p)))
	}
	slices.Sort(want)

	identity := buildGuest(t, "./host/internal/testguests/identity")
	truncated := slices.Clone(identity[:len(identity)/2])
	// A shell script where the module should be.
	script := []byte("#!/bin/sh\n# not a module\nexec cat\n")
	// A 100 MiB module, built once for both engines: passthrough (which,
	// unlike identity, emits on the stream it is declared with) padded
	// with a custom section.
	const padding = 100 << 20
	var padded []byte
	paddedModule := func(t *testing.T) []byte {
		if padded == nil {
			start := time.Now()
			padded = appendCustomSection(buildGuest(t, "./host/internal/testguests/passthrough"), "flowhost-test-padding", padding)
			t.Logf("100 MiB module: %d bytes, built in %v", len(padded), time.Since(start).Round(time.Millisecond))
		}
		return padded
	}

	type hostileCase struct {
		name   string
		wasm   func(t *testing.T) []byte
		limits string
		// loadErr, when set, is the cause the refusal at load time names.
		loadErr string
		// cause is what every dead-letter record's error says.
		cause []string
		// logCause, when set, is what a log line of the guest, attributed
		// to its plugin, says: an SDK guest reports its own failures there
		// and answers only a failure status.
		logCause string
		// pathOnly: the load-time error names the plugin only through its
		// module's path, not as plugin "name".
		pathOnly bool
		// works: the plugin is unusual but correct: nothing is
		// dead-lettered and its sink (bad.jsonl) gets every input exactly
		// once.
		works bool
	}
	goGuest := func(pkg string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return buildGuest(t, pkg) }
	}
	wat := func(name string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return buildHostileWAT(t, name) }
	}
	cases := []hostileCase{
		{name: "infinite-loop", wasm: goGuest("./host/engine/testdata/guests/loop"),
			limits: "limits: {batch_timeout: 100ms}\n", cause: []string{"deadline exceeded"}},
		// Both engines word it as wazero does (wasmtime's trap code is
		// translated).
		{name: "stack-overflow", wasm: wat("stackoverflow"), cause: []string{"guest trapped: stack overflow"}},
		{name: "memory-bomb", wasm: wat("membomb"),
			limits: "limits: {memory_pages: 64}\n", cause: []string{"guest trapped", "memory"}},
		{name: "trap", wasm: goGuest("./host/engine/testdata/guests/trap"), cause: []string{"guest trapped", "unreachable"}},
		{name: "go-panic", wasm: goGuest("./host/internal/testguests/panicky"),
			cause: []string{"guest returned a failure status"}, logCause: "Process panicked: hostile guest panics on purpose"},
		{name: "oversized-response", wasm: wat("bigresp"),
			limits: "limits: {max_response_bytes: 64KiB}\n", cause: []string{"response exceeds limit"}},
		{name: "malformed-envelope", wasm: goGuest("./host/internal/testguests/garbage"), cause: []string{"undecodable response"}},
		// The SDK refuses an emit to an undeclared stream inside the guest
		// (identity emits on "out" but is declared with bad-out only) ...
		{name: "foreign-stream-sdk", wasm: goGuest("./host/internal/testguests/identity"),
			cause:    []string{"guest returned a failure status"},
			logCause: `Emit to \"out\", which is not a declared output stream (declared: bad-out)`},
		// ... and the host refuses it from a guest that bypasses the SDK.
		{name: "foreign-stream-raw", wasm: goGuest("./host/internal/testguests/foreignemit"),
			cause: []string{`"out" is not a declared output stream`}},
		{name: "wrong-abi", wasm: wat("abiv2"), loadErr: "flowhost_abi_v2"},
		{name: "missing-export", wasm: goGuest("./host/engine/testdata/guests/noexports"), loadErr: "flowhost_process"},
		{name: "forbidden-import", wasm: goGuest("./host/engine/testdata/guests/sock"), loadErr: "sock_accept"},
		{name: "truncated-module", wasm: func(*testing.T) []byte { return truncated }, loadErr: "truncated", pathOnly: true},
		{name: "not-wasm", wasm: func(*testing.T) []byte { return script }, loadErr: "not a WebAssembly binary", pathOnly: true},
		{name: "100MB-module", wasm: paddedModule, works: true},
	}

	for _, eng := range []string{"wazero", "wasmtime"} {
		// The good computation alone, for the throughput comparison.
		aloneDir := filepath.Join(t.TempDir(), "plugins")
		writeHostilePlugin(t, aloneDir, "identity", identity, eng, "")
		// The fastest of three runs, the first of which also warms the
		// compilation cache.
		var alone hostileRun
		for i := range 3 {
			r := runHostilePipeline(t, aloneDir, input.String(), "")
			require.NoError(t, r.err, eng)
			requireExactlyOnce(t, want, goodPayloads(t, r.dir), "good sink alone on "+eng)
			require.Empty(t, deadRecords(t, r.dir), eng)
			if i == 0 || r.sinkTime < alone.sinkTime {
				alone.sinkTime = r.sinkTime
			}
			if i == 0 || r.wall < alone.wall {
				alone.wall = r.wall
			}
			if i == 0 || r.loaded < alone.loaded {
				alone.loaded = r.loaded
			}
		}

		for _, c := range cases {
			t.Run(c.name+"/"+eng, func(t *testing.T) {
				plugin := "hostile-" + c.name
				pluginDir := filepath.Join(t.TempDir(), "plugins")
				writeHostilePlugin(t, pluginDir, "identity", identity, eng, "")
				writeHostilePlugin(t, pluginDir, plugin, c.wasm(t), eng, c.limits)

				r := runHostilePipeline(t, pluginDir, input.String(), plugin)
				switch {
				case r.loaded > 0:
					t.Logf("loaded and compiled in %v (%v alone)", r.loaded.Round(time.Millisecond), alone.loaded.Round(time.Millisecond))
				case r.err == nil:
					t.Logf("load time unknown: host.Run logged no %q", runningMessage)
				}
				switch {
				case c.works:
					require.NoError(t, r.err, "the host runs the plugin")
					requireExactlyOnce(t, want, goodPayloads(t, r.dir), "good sink")
					requireExactlyOnce(t, want, sinkPayloads(t, r.dir, "bad.jsonl"), "the plugin's sink")
					require.Empty(t, deadRecords(t, r.dir), "nothing is dead-lettered")
				case c.loadErr != "":
					require.Error(t, r.err, "the hostile plugin is refused at load time")
					if c.pathOnly {
						require.Contains(t, r.err.Error(), filepath.Join(plugin, plugin+".wasm"), "the error names the plugin's module")
					} else {
						require.Contains(t, r.err.Error(), fmt.Sprintf("plugin %q", plugin), "the error names the plugin")
					}
					require.Contains(t, r.err.Error(), c.loadErr, "the error names the cause")
					t.Logf("refused: %v", r.err)
					// The host itself is fine: the good computation runs alone.
					r = runHostilePipeline(t, pluginDir, input.String(), "")
					require.NoError(t, r.err)
					requireExactlyOnce(t, want, goodPayloads(t, r.dir), "good sink")
					require.Empty(t, deadRecords(t, r.dir))
				default:
					require.NoError(t, r.err, "the host stays up")
					requireExactlyOnce(t, want, goodPayloads(t, r.dir), "good sink")
					out, err := os.ReadFile(filepath.Join(r.dir, "bad.jsonl"))
					require.NoError(t, err)
					require.Empty(t, out, "a failed attempt emits nothing")
					dead := deadRecords(t, r.dir)
					var got []string
					for _, d := range dead {
						require.Equal(t, connect.StageGuest, d.Stage, d.Error)
						require.Contains(t, d.Error, fmt.Sprintf("plugin %q", plugin), "the error names the plugin")
						for _, cause := range c.cause {
							require.Contains(t, d.Error, cause, "the error names the cause")
						}
						require.Empty(t, d.RecordEncoding, "the record is the JSON payload")
						got = append(got, compactJSON(t, d.Record))
					}
					slices.Sort(got)
					requireExactlyOnce(t, want, got, "dead letters")
					t.Logf("dead letter: %s", dead[0].Error)
					if c.logCause != "" {
						found := false
						for _, line := range strings.Split(r.logs, "\n") {
							if strings.Contains(line, c.logCause) && strings.Contains(line, "plugin="+plugin) {
								found = true
								break
							}
						}
						require.True(t, found, "a log line of plugin %s says %s", plugin, c.logCause)
					}
				}
				t.Logf("good throughput beside %s on %s: %.0f rec/s vs %.0f rec/s alone through the sink (ratio %.2f); host.Run %v vs %v alone (ratio %.2f)",
					c.name, eng,
					float64(hostileRecords)/r.sinkTime.Seconds(), float64(hostileRecords)/alone.sinkTime.Seconds(),
					alone.sinkTime.Seconds()/r.sinkTime.Seconds(),
					r.wall.Round(time.Millisecond), alone.wall.Round(time.Millisecond), alone.wall.Seconds()/r.wall.Seconds())
			})
		}
	}
}
