package scaffold_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/scaffold"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	csdk "github.com/flowhost/flowhost/sdk/c"
	rustsdk "github.com/flowhost/flowhost/sdk/rust"
)

// moduleRoot is the flowhost checkout the tests run in.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	gomod := strings.TrimSpace(string(out))
	require.NotEmpty(t, gomod)
	return filepath.Dir(gomod)
}

var (
	flowhostOnce sync.Once
	flowhostBin  string
	flowhostErr  error
)

// TestMain removes the flowhost binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if flowhostBin != "" {
		_ = os.RemoveAll(filepath.Dir(flowhostBin))
	}
	os.Exit(code)
}

// flowhostBinary builds cmd/flowhost once per test binary.
func flowhostBinary(t *testing.T) string {
	t.Helper()
	root := moduleRoot(t)
	flowhostOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flowhost-scaffold-bin-")
		if err != nil {
			flowhostErr = err
			return
		}
		flowhostBin = filepath.Join(dir, "flowhost")
		cmd := exec.Command("go", "build", "-o", flowhostBin, "./cmd/flowhost")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			flowhostErr = fmt.Errorf("go build ./cmd/flowhost: %w\n%s", err, out)
		}
	})
	require.NoError(t, flowhostErr)
	return flowhostBin
}

// toolchains are the programs each language's build.sh runs, with what
// installs them.
var toolchains = map[string][]struct{ tool, install string }{
	"go":             {{"go", "Go (https://go.dev/dl)"}},
	"rust":           {{"/usr/bin/cargo", "apt-get install " + rustsdk.Packages}, {"/usr/bin/rustc", "apt-get install " + rustsdk.Packages}},
	"c":              {{"clang", "apt-get install " + csdk.Toolchain}},
	"assemblyscript": {{"node", "apt-get install nodejs npm (Node.js >= 20)"}},
}

// requireToolchain fails the test, naming what to install, when a
// language's toolchain is missing.
func requireToolchain(t *testing.T, lang string) {
	t.Helper()
	need, ok := toolchains[lang]
	require.True(t, ok, "no toolchain listed for %s", lang)
	for _, n := range need {
		if _, err := exec.LookPath(n.tool); err != nil {
			t.Fatalf("the %s toolchain is missing (%s not found): %s", lang, n.tool, n.install)
		}
	}
}

// TestGeneratedProjectsPass creates a project in every language, runs its
// test.sh against a freshly built flowhost and checks out.jsonl against
// counts computed here from sample.jsonl.
func TestGeneratedProjectsPass(t *testing.T) {
	root := moduleRoot(t)
	bin := flowhostBinary(t)
	for _, lang := range scaffold.Languages() {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			requireToolchain(t, lang)
			if lang == "assemblyscript" {
				installAssemblyScript(t, root)
			}
			dir := filepath.Join(t.TempDir(), "counter")
			// This machine has no crates.io: Rust builds with Debian's
			// crate sources, offline.
			require.NoError(t, scaffold.Generate(scaffold.Config{Lang: lang, Name: "key-counter", Dir: dir, FlowhostRoot: root, RustOffline: true}))

			start := time.Now()
			cmd := exec.Command(filepath.Join(dir, "test.sh"))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(),
				"FLOWHOST="+bin,
				// Dependencies compile once for every run of this test.
				"CARGO_TARGET_DIR="+filepath.Join(os.TempDir(), "flowhost-scaffold-cargo"))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "test.sh of the %s project failed:\n%s", lang, out)
			t.Logf("%s: test.sh took %s", lang, time.Since(start).Round(time.Millisecond))

			require.Contains(t, string(out), "ok   stream counts: 6 outputs as expected.jsonl expects (per-key)")
			// test.sh compared the outputs with expected.jsonl: that must
			// be what the model computed from sample.jsonl gives.
			require.Equal(t, countsOf(t, filepath.Join(dir, "sample.jsonl")), outputsOf(t, filepath.Join(dir, "expected.jsonl")))
		})
	}
}

// installAssemblyScript installs the SDK's compiler, when it is not yet,
// the way the SDK's own tests do: under the SDK's lock, so that build.sh
// (which runs npm ci itself when it has to) never races the SDK's tests
// installing it in the same directory.
func installAssemblyScript(t *testing.T, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "sdk", "assemblyscript", "node_modules", "assemblyscript", "bin", "asc.js")); err == nil {
		return
	}
	_, err := assemblyscript.BuildConformanceGuest(t.TempDir())
	require.NoError(t, err, "installing the AssemblyScript compiler")
}

// countsOf returns, for every key of a file source's records, the counts
// the computation should emit for it, in order.
func countsOf(t *testing.T, path string) map[string][]int64 {
	t.Helper()
	want := map[string][]int64{}
	for i, line := range lines(t, path) {
		rec, err := connect.ParseLine(line)
		require.NoError(t, err, "%s:%d", path, i+1)
		var p struct{ Key string }
		require.NoError(t, json.Unmarshal(rec.Payload, &p), "%s:%d", path, i+1)
		want[p.Key] = append(want[p.Key], int64(len(want[p.Key])+1))
	}
	require.NotEmpty(t, want, "%s has no records", path)
	return want
}

// outputsOf returns the counts a file of sink records (or expectation
// lines) holds per key, in order.
func outputsOf(t *testing.T, path string) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	for i, line := range lines(t, path) {
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal(line, &rec), "%s:%d", path, i+1)
		payload, err := rec.PayloadBytes()
		require.NoError(t, err, "%s:%d", path, i+1)
		var p struct {
			Key   *string
			Count *int64
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&p), "%s:%d: payload %s", path, i+1, payload)
		require.True(t, p.Key != nil && p.Count != nil, "%s:%d: payload %s lacks key or count", path, i+1, payload)
		got[*p.Key] = append(got[*p.Key], *p.Count)
	}
	return got
}

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, bytes.Clone(sc.Bytes()))
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestGeneratedTestFailsOnMismatch checks that a project's test.sh
// catches a wrong output: with one expected count changed, it fails and
// shows the difference.
func TestGeneratedTestFailsOnMismatch(t *testing.T) {
	requireToolchain(t, "c")
	bin := flowhostBinary(t)
	dir := t.TempDir()
	require.NoError(t, scaffold.Generate(scaffold.Config{Lang: "c", Name: "counter", Dir: dir}))
	expected := filepath.Join(dir, "expected.jsonl")
	b, err := os.ReadFile(expected)
	require.NoError(t, err)
	require.Contains(t, string(b), `{"key":"b","count":2}`)
	require.NoError(t, os.WriteFile(expected, bytes.Replace(b, []byte(`{"key":"b","count":2}`), []byte(`{"key":"b","count":7}`), 1), 0o644))

	cmd := exec.Command(filepath.Join(dir, "test.sh"))
	cmd.Env = append(os.Environ(), "FLOWHOST="+bin)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "test.sh passed with a wrong expected.jsonl:\n%s", out)
	require.Contains(t, string(out), `stream counts, key "b", output 2 of the key (line 6):
    - expected {"key":"","event_ts":1767225606000000000,"payload":{"key":"b","count":7}}
    + got      {"key":"","event_ts":1767225606000000000,"payload":{"key":"b","count":2}}
`)
	require.Contains(t, string(out), "test.sh: FAIL: the outputs differ from expected.jsonl (see above)")

	// --update takes the outputs as the expectation: the next run passes.
	cmd = exec.Command(filepath.Join(dir, "test.sh"), "--update")
	cmd.Env = append(os.Environ(), "FLOWHOST="+bin)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "test.sh --update:\n%s", out)
	cmd = exec.Command(filepath.Join(dir, "test.sh"))
	cmd.Env = append(os.Environ(), "FLOWHOST="+bin)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "test.sh after --update:\n%s", out)
	require.Equal(t, countsOf(t, filepath.Join(dir, "sample.jsonl")), outputsOf(t, expected))
}
