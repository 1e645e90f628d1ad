package examples_test

import (
	"bytes"
	"io"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exitDeadline bounds every wait on a running flowhost (for a line on its
// stderr, for its exit): a generous deadline on a condition, not a speed
// assertion; CI's machine may be loaded and run the race detector.
const exitDeadline = 2 * time.Minute

// liveRun is a flowhost process the test talks to while it runs.
type liveRun struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
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

// startFlowhost starts the built CLI; the process is killed at the end of
// the test if it is still running.
func startFlowhost(t *testing.T, args ...string) *liveRun {
	t.Helper()
	r := &liveRun{cmd: exec.Command(env.flowhost, args...), exited: make(chan struct{})}
	r.cmd.Stdout = io.Discard
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

// waitStderr waits until stderr matches re and returns the first
// submatch (or the match).
func (r *liveRun) waitStderr(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var found []string
	require.Eventually(t, func() bool {
		found = re.FindStringSubmatch(r.stderr.String())
		return found != nil
	}, exitDeadline, 10*time.Millisecond, "stderr never matched %s:\n%s", re, &r.stderr)
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
		t.Fatalf("flowhost had not exited %v after the signal; stderr:\n%s", exitDeadline, r.stderr.String())
	}
	return exitCode(t, r.err)
}

// log is what the process wrote to stderr so far.
func (r *liveRun) log() string { return r.stderr.String() }

var metricsAddrLine = regexp.MustCompile(`"serving metrics" addr=http://([0-9.:]+)/metrics`)

// metricsAddr waits for the run to log where it serves its metrics.
func (r *liveRun) metricsAddr(t *testing.T) string {
	t.Helper()
	return r.waitStderr(t, metricsAddrLine)
}
