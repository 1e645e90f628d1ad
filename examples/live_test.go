package examples_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exitDeadline bounds every wait on a running flowhost (for a line on its
// stderr, for its exit): a generous deadline on a condition, not a speed
// assertion; CI's machine may be loaded and run the race detector.
const exitDeadline = 2 * time.Minute

// pollInterval is how often a test looks again at what a running flowhost
// wrote.
const pollInterval = 10 * time.Millisecond

// liveRun is a flowhost process the test talks to while it runs.
type liveRun struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	exited         chan struct{}
	err            error // of Wait, once exited is closed
}

// syncBuffer is a bytes.Buffer the process writes to while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines are the complete lines written so far (a line still being written
// is left out).
func (b *syncBuffer) lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}

// startFlowhost starts the built CLI; the process is killed at the end of
// the test if it is still running.
func startFlowhost(t *testing.T, args ...string) *liveRun {
	t.Helper()
	return startFlowhostEnv(t, nil, args...)
}

// startFlowhostEnv is startFlowhost with environ added to the test's
// environment.
func startFlowhostEnv(t *testing.T, environ []string, args ...string) *liveRun {
	t.Helper()
	r := &liveRun{cmd: exec.Command(env.flowhost, args...), exited: make(chan struct{})}
	if environ != nil {
		r.cmd.Env = append(os.Environ(), environ...)
	}
	r.cmd.Stdout = &r.stdout
	r.cmd.Stderr = &r.stderr
	require.NoError(t, r.cmd.Start())
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

// log is what the process wrote to stderr so far.
func (r *liveRun) log() string { return r.stderr.String() }

// waitFor waits until cond holds, failing with what as the reason if the
// process exits first or exitDeadline passes.
func (r *liveRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(exitDeadline)
	for !cond() {
		select {
		case <-r.exited:
			if cond() {
				return
			}
			t.Fatalf("flowhost exited (%v) before %s; stderr:\n%s", r.err, what, r.log())
		case <-deadline:
			t.Fatalf("not within %v: %s; stderr:\n%s", exitDeadline, what, r.log())
		case <-time.After(pollInterval):
		}
	}
}

// waitStderr waits until stderr matches re and returns the first
// submatch (or the match).
func (r *liveRun) waitStderr(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var found []string
	r.waitFor(t, "stderr matched "+re.String(), func() bool {
		found = re.FindStringSubmatch(r.log())
		return found != nil
	})
	return found[len(found)-1]
}

// waitExit waits for the process to exit, at most exitDeadline, and
// returns its exit status.
func (r *liveRun) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(exitDeadline):
		_ = r.cmd.Process.Kill()
		<-r.exited
		t.Fatalf("flowhost had not exited %v after the signal; stderr:\n%s", exitDeadline, r.log())
	}
	return exitCode(t, r.err)
}

var metricsAddrLine = regexp.MustCompile(`"serving metrics" addr=http://([0-9.:]+)/metrics`)

// metricsAddr waits for the run to log where it serves its metrics.
func (r *liveRun) metricsAddr(t *testing.T) string {
	t.Helper()
	return r.waitStderr(t, metricsAddrLine)
}
