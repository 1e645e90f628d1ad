package examples_test

// Binary-level tests of the small things that cost a new user time
// (issue 11, item 9): inspect on a directory that holds no store, a busy
// metrics port, plugin validate on a folder, a finished file pipeline run
// again, and a finished file source beside a live one.

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/flowhost/flowhost/host"
	"github.com/stretchr/testify/require"
)

// requireExitFailure requires err to be a non-zero exit of the binary.
func requireExitFailure(t *testing.T, err error, stderr string) {
	t.Helper()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr:\n%s", stderr)
	require.NotZero(t, exit.ExitCode())
}

// TestCLIInspectRefusesADirectoryWithoutAStore inspects a data directory
// that does not exist, an empty one, and the default data directory of a
// pipeline that never ran: each is refused with an error naming it, and
// none is created or written. A directory a run committed to is inspected.
func TestCLIInspectRefusesADirectoryWithoutAStore(t *testing.T) {
	t.Parallel()
	base := t.TempDir()

	missing := filepath.Join(base, "never-ran")
	_, stderr, err := flowhostRun(t, "inspect", "--data-dir", missing)
	requireExitFailure(t, err, stderr)
	require.Contains(t, stderr, missing+" does not exist")
	require.NoDirExists(t, missing, "inspect created the data directory")

	empty := filepath.Join(base, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	_, stderr, err = flowhostRun(t, "inspect", "--data-dir", empty)
	requireExitFailure(t, err, stderr)
	require.Contains(t, stderr, "no flowhost store")
	require.Contains(t, stderr, empty)
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "inspect wrote into the empty directory")

	// -f: the default data directory, under XDG_STATE_HOME.
	pipelines := copyPipelines(t)
	state := filepath.Join(base, "state")
	cmd := exec.Command(env.flowhost, "inspect", "-f", filepath.Join(pipelines, "enrich.yaml"))
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	err = cmd.Run()
	requireExitFailure(t, err, errOut.String())
	require.Contains(t, errOut.String(), filepath.Join(state, "flowhost", "enrich")+" does not exist")
	require.NoDirExists(t, state, "inspect -f created the default data directory")

	dataDir := filepath.Join(base, "ran")
	_, stderr, err = flowhostRun(t, "run", "-f", filepath.Join(pipelines, "enrich.yaml"), "--plugins", env.plugins,
		"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", dataDir)
	require.NoError(t, err, "stderr:\n%s", stderr)
	stdout, stderr, err := flowhostRun(t, "inspect", "--data-dir", dataDir)
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Contains(t, stdout, "data directory "+dataDir)
	require.Regexp(t, `(?m)^  orders\s+p0\s+\[\d+, \d+\)\s+8\s`, stdout, "the run's 8 records were appended")
}

// TestCLIBusyMetricsAddr runs a pipeline whose metrics address is taken:
// an address the user chose fails the run with an error naming the flag;
// the default one, taken by another process, is replaced by a free port,
// which is logged.
func TestCLIBusyMetricsAddr(t *testing.T) {
	t.Parallel()
	pipelines := copyPipelines(t)
	run := func(extra ...string) (string, error) {
		args := append([]string{"run", "-f", filepath.Join(pipelines, "enrich.yaml"), "--plugins", env.plugins,
			"--cache-dir", env.cache, "--data-dir", t.TempDir()}, extra...)
		_, stderr, err := flowhostRun(t, args...)
		return stderr, err
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	addr := busy.Addr().String()
	stderr, err := run("--metrics-addr", addr)
	requireExitFailure(t, err, stderr)
	require.Contains(t, stderr, "--metrics-addr "+addr+": address already in use")
	require.Contains(t, stderr, "--metrics-addr ''", "the error says how to turn metrics off")

	const defaultAddr = "127.0.0.1:9464"
	held, err := net.Listen("tcp", defaultAddr)
	if err != nil {
		t.Skipf("cannot hold the default metrics address %s to make it busy: %v", defaultAddr, err)
	}
	defer held.Close()
	stderr, err = run()
	require.NoError(t, err, "stderr:\n%s", stderr)
	require.Contains(t, stderr, "metrics address in use")
	require.Contains(t, stderr, "busy="+defaultAddr)
	served := regexp.MustCompile(`msg="serving metrics" addr=http://(127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(stderr)
	require.NotNil(t, served, "stderr:\n%s", stderr)
	require.NotEqual(t, defaultAddr, served[1])
}

// TestCLIPluginValidateFolder validates a folder of plugins, as run
// --plugins accepts: every plugin in it is checked and reported; one bad
// plugin among good ones fails the command, naming it.
func TestCLIPluginValidateFolder(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(env.plugins)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	require.NotEmpty(t, names)
	stdout, stderr, err := flowhostRun(t, "plugin", "validate", env.plugins)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	for _, n := range names {
		require.Contains(t, stdout, "ok  "+filepath.Join(env.plugins, n)+" (")
	}

	folder := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(folder, "enrich"), os.DirFS(filepath.Join(env.plugins, "enrich"))))
	require.NoError(t, os.MkdirAll(filepath.Join(folder, "not-a-plugin"), 0o755))
	stdout, stderr, err = flowhostRun(t, "plugin", "validate", folder)
	requireExitFailure(t, err, stderr)
	require.Contains(t, stdout, "ok  "+filepath.Join(folder, "enrich")+" (enrich ")
	require.Contains(t, stdout, "bad "+filepath.Join(folder, "not-a-plugin")+": ")
	require.Contains(t, stdout, "no manifest")
	require.Contains(t, stderr, "1 of 2 plugin directories are invalid")

	// Two plugins of one name, which run --plugins refuses.
	twice := t.TempDir()
	for _, dir := range []string{"a", "b"} {
		require.NoError(t, os.CopyFS(filepath.Join(twice, dir), os.DirFS(filepath.Join(env.plugins, "enrich"))))
	}
	stdout, stderr, err = flowhostRun(t, "plugin", "validate", twice)
	requireExitFailure(t, err, stderr)
	require.Contains(t, stdout, "ok  "+filepath.Join(twice, "a")+" (enrich ")
	require.Contains(t, stdout, "bad "+filepath.Join(twice, "b")+`: duplicate plugin name "enrich": `+filepath.Join(twice, "a", "plugin.yaml"))
}

// TestCLIFinishedFilePipelineRunAgain runs a file pipeline to its end,
// then again on the same data directory: the second run says there is
// nothing new to read and how to read it again, and its progress shows no
// rate for bytes an earlier run read.
func TestCLIFinishedFilePipelineRunAgain(t *testing.T) {
	t.Parallel()
	pipelines := copyPipelines(t)
	dataDir := t.TempDir()
	run := func() string {
		_, stderr, err := flowhostRun(t, "run", "-f", filepath.Join(pipelines, "enrich.yaml"), "--plugins", env.plugins,
			"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", dataDir)
		require.NoError(t, err, "stderr:\n%s", stderr)
		return stderr
	}
	first := run()
	require.NotContains(t, first, "nothing new to read")
	second := run()
	require.Contains(t, second, "nothing new to read")
	require.Contains(t, second, "source=orders-in")
	require.Contains(t, second, `to_read_it_again="--from orders-in=0"`)
	done := regexp.MustCompile(`msg="progress done" name="orders-in \(bytes\)" .*rate_per_s=(\S+)`).FindStringSubmatch(second)
	require.NotNil(t, done, "stderr:\n%s", second)
	require.Equal(t, "0", done[1], "no rate for what an earlier run read")
}

// TestCLIFinishedFileSourceBesideALiveOne runs a file source beside an
// HTTP source, which never ends: the file source's progress must end when
// its file is read ("progress done" while the run goes on), not be
// repeated until the run stops.
func TestCLIFinishedFileSourceBesideALiveOne(t *testing.T) {
	t.Parallel()
	pipelines := copyPipelines(t)
	spec := filepath.Join(pipelines, "file-and-http.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`name: file-and-http
sources:
  - {name: orders-in, type: file, stream: orders, file: {path: data/orders.jsonl}}
  - {name: live-in, type: http, stream: live, http: {listen: "127.0.0.1:0", path: /ingest}}
sinks:
  - {name: console, type: stdout, streams: [orders, live]}
`), 0o644))
	run := startFlowhost(t, "run", "-f", spec, "--plugins", env.plugins,
		"--metrics-addr", "", "--cache-dir", env.cache, "--data-dir", t.TempDir())
	doneLine := `msg="progress done" name="orders-in (bytes)"`
	run.waitFor(t, "the file source's progress ends while the run goes on", func() bool {
		return strings.Contains(run.log(), doneLine)
	})
	require.NoError(t, run.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, host.ExitOK, run.waitExit(t), "stderr:\n%s", run.log())
	out := run.log()
	require.Equal(t, 1, strings.Count(out, doneLine), "the file source's progress ends once; stderr:\n%s", out)
}

// TestCLISpecErrorsShowTheirSource runs a spec with a YAML syntax error
// and one with a misspelled stream: each error keeps file:line:column and
// is followed by the offending line of the spec with a caret under it;
// the misspelled stream gets a "did you mean".
func TestCLISpecErrorsShowTheirSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, spec string
		// want are the lines stderr must hold, in order.
		want []string
	}{
		{"syntax.yaml", "name: p\nsources: [{name: in, type: generator, stream: s}\nsinks: [{name: o, type: stdout, streams: [s]}]\n", []string{
			"flowhost: " + filepath.Join(dir, "syntax.yaml") + ":3:1: ",
			">  3 | sinks: [{name: o, type: stdout, streams: [s]}]",
			"       ^",
		}},
		{"misspelled.yaml", "name: p\nsources: [{name: in, type: generator, stream: orders}]\nsinks: [{name: o, type: stdout, streams: [ordrs]}]\n", []string{
			"flowhost: " + filepath.Join(dir, "misspelled.yaml") + `:3:43: sinks[0].streams[0]: stream "ordrs" is not declared: no source or computation writes it and streams does not list it; did you mean "orders"?`,
			">  3 | sinks: [{name: o, type: stdout, streams: [ordrs]}]",
			strings.Repeat(" ", len(">  3 | ")+42) + "^",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(spec, []byte(tc.spec), 0o644))
			_, stderr, err := flowhostRun(t, "run", "-f", spec, "--plugins", env.plugins, "--metrics-addr", "", "--in-memory")
			requireExitFailure(t, err, stderr)
			at := 0
			got := lines(stderr)
			for _, want := range tc.want {
				for at < len(got) && !strings.HasPrefix(got[at], want) {
					at++
				}
				require.Less(t, at, len(got), "no line %q (after the previous ones) in stderr:\n%s", want, stderr)
			}
		})
	}
}
