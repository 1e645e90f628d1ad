package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/examples/internal/build"
	"github.com/flowhost/flowhost/examples/internal/tracestat"
	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
)

// env is what TestMain prepares once for every test: the example plugins,
// built from examples/plugins through examples/internal/build exactly as
// the demo builds them, the flowhost CLI, and a compilation cache that
// already holds every plugin.
var env struct {
	root     string // module root
	work     string // temporary directory of the whole test run
	plugins  string // folder of the built plugin directories
	cache    string // wazero compilation cache
	flowhost string // the built cmd/flowhost
}

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	ctx := context.Background()
	root, err := build.ModuleRoot(ctx)
	if err != nil {
		return 0, err
	}
	work, err := os.MkdirTemp("", "flowhost-examples-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	env.root, env.work = root, work
	env.plugins = filepath.Join(work, "plugins")
	env.cache = filepath.Join(work, "cache")
	srcs, err := build.ExamplePlugins(root)
	if err != nil {
		return 0, err
	}
	var progress io.Writer
	if testing.Verbose() {
		progress = os.Stderr
	}
	var wg sync.WaitGroup
	var pluginsErr, flowhostErr error
	wg.Go(func() { _, pluginsErr = build.Plugins(ctx, progress, env.plugins, srcs...) })
	wg.Go(func() { env.flowhost, flowhostErr = buildFlowhost(ctx) })
	wg.Wait()
	if err := errors.Join(pluginsErr, flowhostErr); err != nil {
		return 0, err
	}
	if err := warmCompilationCache(ctx); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// buildFlowhost builds cmd/flowhost into the work directory.
//
// It sets the version wazero names its compilation cache directory after
// to the one this test binary uses: wazero reads it from the binary's
// build information, which a test binary lacks (it then says "dev"), so a
// flowhost binary and host.Run in this process would otherwise keep their
// compiled modules apart, and every plugin would be compiled twice, once
// under the race detector, which makes that many times slower. If wazero
// renames its variable, the flag does nothing and the tests only get
// slower.
func buildFlowhost(ctx context.Context) (string, error) {
	bin := filepath.Join(env.work, "flowhost")
	cmd := exec.CommandContext(ctx, "go", "build",
		"-ldflags", "-X github.com/tetratelabs/wazero/internal/version.version="+wazeroVersion(),
		"-o", bin, "./cmd/flowhost")
	cmd.Dir = env.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/flowhost: %w\n%s", err, out)
	}
	return bin, nil
}

// wazeroVersion is the version wazero finds in this binary, by the rule
// of its internal/version.GetWazeroVersion.
func wazeroVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := ""
	for _, dep := range info.Deps {
		if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
			v = dep.Version
		}
	}
	if v == "" || v == "(devel)" {
		v = info.Main.Version
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

// warmCompilationCache compiles every plugin once before the tests, in
// parallel and outside the race detector, so that no test compiles a
// module (seconds for a 5 MB module, many more under the race detector):
// it runs each committed pipeline (a copy, so that the dead-letter files
// stay out of the repository) with the built flowhost.
func warmCompilationCache(ctx context.Context) error {
	dir := filepath.Join(env.work, "warm")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(env.root, "examples", "pipelines"))); err != nil {
		return err
	}
	specs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, specPath := range specs {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, env.flowhost, "run", "-f", specPath, "--plugins", env.plugins,
				"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", specPath+".data")
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("flowhost run -f %s: %w\n%s", specPath, err, out)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// captureSink keeps what a pipeline's sink is given.
type captureSink struct {
	mu      sync.Mutex
	records []connect.SinkRecord
}

func (c *captureSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, recs...)
	return nil
}

func (c *captureSink) Close() error { return nil }

// deadLetter is one line of a dead-letter file.
type deadLetter struct {
	Origin string          `json:"origin"`
	Stage  string          `json:"stage"`
	Error  string          `json:"error"`
	Record json.RawMessage `json:"record"`
}

// run is what one pipeline run left behind.
type run struct {
	dir   string
	out   []connect.SinkRecord
	dead  []deadLetter
	trace []runtime.TraceRecord
}

// stream returns the outputs on stream.
func (r *run) stream(name string) []connect.SinkRecord {
	var out []connect.SinkRecord
	for _, rec := range r.out {
		if rec.Stream == name {
			out = append(out, rec)
		}
	}
	return out
}

// runPipeline runs examples/pipelines/<name>.yaml, unchanged, on the data
// files given (paths relative to the spec, as the spec names them) through
// host.Run, with a trace. Its "console" sink is captured; its dead-letter
// file is the spec's, beside it.
func runPipeline(t *testing.T, name string, files map[string][]byte) *run {
	t.Helper()
	return runPipelineWith(t, name, files, env.plugins)
}

// runPipelineWith is runPipeline with the plugin directories given.
func runPipelineWith(t *testing.T, name string, files map[string][]byte, pluginDirs ...string) *run {
	t.Helper()
	dir := t.TempDir()
	specText, err := os.ReadFile(filepath.Join(env.root, "examples", "pipelines", name+".yaml"))
	require.NoError(t, err)
	specPath := filepath.Join(dir, filepath.Base(name)+".yaml")
	require.NoError(t, os.WriteFile(specPath, specText, 0o644))
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
	sink := &captureSink{}
	r := &run{dir: dir}
	err = host.Run(context.Background(), host.RunConfig{
		SpecPath:   specPath,
		PluginDirs: pluginDirs,
		TracePath:  filepath.Join(dir, "trace.jsonl"),
		CacheDir:   env.cache,
		DataDir:    filepath.Join(dir, "data"),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Options: []runtime.Option{
			runtime.WithSink("console", sink),
			runtime.WithProgress(func(string, connect.FileProgress) {}), // no progress display in test output
		},
	})
	require.NoError(t, err)
	r.out = sink.records
	r.trace, err = tracestat.Read(filepath.Join(dir, "trace.jsonl"))
	require.NoError(t, err)
	r.dead = readDeadLetters(t, filepath.Join(dir, "dead-letter.jsonl"))
	return r
}

func readDeadLetters(t *testing.T, path string) []deadLetter {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []deadLetter
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var d deadLetter
		require.NoError(t, json.Unmarshal(line, &d), "%s", line)
		out = append(out, d)
	}
	return out
}

// recordLine is one line of the record line format of file sources.
type recordLine struct {
	Write   int64 `json:"write_ts"`
	Event   int64 `json:"event_ts"`
	Payload any   `json:"payload"`
}

func jsonLines[T any](t *testing.T, items []T) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, it := range items {
		require.NoError(t, enc.Encode(it))
	}
	return b.Bytes()
}

// traceByID indexes the message deliveries of a computation by message_id.
func traceByID(t *testing.T, trace []runtime.TraceRecord, computation string) map[string]runtime.TraceRecord {
	t.Helper()
	byID := map[string]runtime.TraceRecord{}
	for _, tr := range trace {
		if tr.Computation == computation && tr.Kind == runtime.TraceMessage {
			_, dup := byID[tr.MessageID]
			require.False(t, dup, "message %s delivered twice to %s", tr.MessageID, computation)
			byID[tr.MessageID] = tr
		}
	}
	return byID
}

// readTextLines parses what a stdout sink in the text format printed:
// "STREAM  [KEY]  EVENT-TIME  MESSAGE_ID  PAYLOAD" per line, the payload
// being a JSON object here.
func readTextLines(t *testing.T, data []byte) []connect.SinkRecord {
	t.Helper()
	var out []connect.SinkRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		head, payload, ok := strings.Cut(sc.Text(), "{")
		require.True(t, ok, "stdout line %q has no JSON payload", sc.Text())
		fields := strings.Fields(head)
		require.GreaterOrEqual(t, len(fields), 3, "stdout line %q", sc.Text())
		out = append(out, connect.SinkRecord{Stream: fields[0], MessageID: fields[len(fields)-1], Payload: json.RawMessage("{" + payload)})
	}
	require.NoError(t, sc.Err())
	return out
}

func payloadMap(t *testing.T, rec connect.SinkRecord) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec.Payload))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), "payload of %s", rec.MessageID)
	return m
}

func keyOf(values ...string) string {
	b, _ := json.Marshal(values)
	return string(b)
}

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
