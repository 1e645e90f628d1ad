// The crash test: exactly-once processing through the real binary.
//
// TestCrashRecoveryIsExactlyOnce kills `flowhost run --data-dir` with
// SIGKILL at random moments, restarts it on the same data directory each
// time, and requires the file sink to hold every output exactly once in
// the end, equal to an uncrashed reference run and to the output computed
// from the input alone (examples/internal/crashload).
//
// By default it kills 20 times. Longer mode: FLOWHOST_CRASH_KILLS=N kills
// N times instead, for example
//
//	FLOWHOST_CRASH_KILLS=200 go test -run TestCrashRecoveryIsExactlyOnce -v ./examples/
//
// The kill moments come from a random seed the test logs;
// FLOWHOST_CRASH_SEED=S uses seed S, which repeats the workload and the
// moments the kills aim at (where they land still depends on timing).

package examples_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/examples/internal/crashload"
	"github.com/flowhost/flowhost/host/connect"
)

// defaultCrashKills is how many times the crash run is killed unless
// FLOWHOST_CRASH_KILLS says otherwise.
const defaultCrashKills = 20

// TestCrashRecoveryIsExactlyOnce runs crash-tally on 200,000 messages of
// two file sources (2 partitions each, by key) in a transform of 2
// partitions: once without a crash, as the reference, and once killed
// with SIGKILL at random moments and restarted on the same data directory
// until it completes. Kills land while the plugins load and state
// recovers, and at sink sizes spread over the whole run, each a random
// delay after the sink reached its size. Then it requires:
//
//   - every life of the binary not killed exits 0, no stderr mentions a
//     panic, and nothing reaches the dead letter;
//   - the crash run's sink holds exactly the outputs of the reference run
//     and of the model: no msg record missing or doubled (lost or
//     replayed input), and the same window records (state and timers
//     neither lost nor applied twice);
//   - every record in a sink has a message_id of its own;
//   - starting the completed run once more exits 0 and leaves the sink
//     byte for byte as it was.
//
// The test does not run in parallel with the others: its kill moments are
// calibrated on the reference run's duration, which must not depend on
// what else runs.
func TestCrashRecoveryIsExactlyOnce(t *testing.T) {
	requireDurableCLI(t)
	kills := envInt(t, "FLOWHOST_CRASH_KILLS", defaultCrashKills)
	seed := uint64(envInt(t, "FLOWHOST_CRASH_SEED", 1+rand.IntN(1e9)))
	t.Logf("seed %d (FLOWHOST_CRASH_SEED=%d repeats it), %d kills (FLOWHOST_CRASH_KILLS)", seed, seed, kills)
	work := t.TempDir()

	// A small run first: it compiles crash-tally into the shared cache,
	// so that the reference run's timing, which the kill moments are drawn
	// from, is that of a restart; and it fails fast, and clearly, if the
	// plugin or the CLI does not work at all.
	small := crashload.Generate(crashload.Config{Messages: 500, Keys: 20, Seed: seed})
	smoke := newCrashRun(t, work, "smoke", small)
	smoke.complete(t)
	smokeOut := parseSink(t, readSink(t, smoke.sink))
	if !checkOutputs(t, "small run against the model", small.Expected(), smokeOut) || !checkOwnIDs(t, "small run", smokeOut) {
		t.FailNow()
	}

	w := crashload.Generate(crashload.Config{Seed: seed})
	expected := w.Expected()
	ref := newCrashRun(t, work, "reference", w)
	refLife := ref.complete(t)
	refSink := readSink(t, ref.sink)
	refOut := parseSink(t, refSink)
	if !checkOutputs(t, "reference run against the model", expected, refOut) || !checkOwnIDs(t, "reference run", refOut) {
		t.FailNow()
	}
	calib := calibration{duration: refLife.duration, firstOutput: refLife.firstOutput, sinkBytes: int64(len(refSink))}
	t.Logf("reference run: %v, first output after %v, sink %s, %d outputs",
		calib.duration.Round(time.Millisecond), calib.firstOutput.Round(time.Millisecond), megabytes(calib.sinkBytes), len(expected))

	crash := newCrashRun(t, work, "crash", w)
	crashStart := time.Now()
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	for kill := 1; kill <= kills; kill++ {
		crash.killOnce(t, calib.draw(rng, kill, kills), kill, kills)
	}
	crash.complete(t)
	crashSink := readSink(t, crash.sink)
	t.Logf("crash run: %d kills, %d lives, %v, sink %s",
		kills, crash.lives, time.Since(crashStart).Round(time.Millisecond), megabytes(int64(len(crashSink))))
	crash.complete(t)
	again := readSink(t, crash.sink)

	crashOut := parseSink(t, crashSink)
	checkOutputs(t, "crash run against the model", expected, crashOut)
	checkOutputs(t, "crash run against the reference run", refOut.outputs, crashOut)
	checkOwnIDs(t, "crash run", crashOut)
	if !bytes.Equal(crashSink, again) {
		t.Errorf("a restart after completion changed the sink: %d bytes before, %d after", len(crashSink), len(again))
	}
}

// requireDurableCLI stops the test at once, saying why, when the built
// flowhost has no --data-dir: without the durable store there is nothing
// to recover, and every restart would start over.
func requireDurableCLI(t *testing.T) {
	t.Helper()
	stdout, stderr, err := flowhostRun(t, "run", "--help")
	require.NoError(t, err, "flowhost run --help:\n%s", stderr)
	if !strings.Contains(stdout, "--data-dir") {
		t.Fatal("flowhost run has no --data-dir flag: the crash test needs the durable store of exactly-once processing")
	}
}

// envInt is the positive integer in the environment variable name, or def
// when it is not set.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// crashRun is one pipeline run of crash-tally, made of lives: starts of
// the binary on the same spec and data directory.
type crashRun struct {
	name       string
	dir        string
	spec       string
	sink       string
	deadLetter string
	dataDir    string
	lives      int
}

// lifeLimit is how long one life may go without being killed or exiting
// before the test calls it stuck.
const lifeLimit = 2 * time.Minute

// newCrashRun writes w's input files and pipeline into a directory of its
// own under work.
func newCrashRun(t *testing.T, work, name string, w *crashload.Workload) *crashRun {
	t.Helper()
	dir := filepath.Join(work, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	r := &crashRun{
		name:       name,
		dir:        dir,
		spec:       filepath.Join(dir, "pipeline.yaml"),
		sink:       filepath.Join(dir, "out.jsonl"),
		deadLetter: filepath.Join(dir, "dead-letter.jsonl"),
		dataDir:    filepath.Join(dir, "data"),
	}
	require.NoError(t, w.WriteFiles(filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")))
	require.NoError(t, os.WriteFile(r.spec, w.Pipeline("a.jsonl", "b.jsonl", "out.jsonl", "dead-letter.jsonl"), 0o644))
	return r
}

// life is one start of the binary.
type life struct {
	n       int
	cmd     *exec.Cmd
	stderr  string // path of the file its stderr goes to
	started time.Time
	exited  chan struct{}
	err     error // what Wait returned; set when exited is closed
}

func (r *crashRun) start(t *testing.T) *life {
	t.Helper()
	r.lives++
	l := &life{n: r.lives, stderr: filepath.Join(r.dir, fmt.Sprintf("stderr-%02d.log", r.lives)), exited: make(chan struct{})}
	errFile, err := os.Create(l.stderr)
	require.NoError(t, err)
	l.cmd = exec.Command(env.flowhost, "run", "-f", r.spec, "--plugins", env.plugins,
		"--data-dir", r.dataDir, "--metrics-addr", "", "--cache-dir", env.cache)
	l.cmd.Stderr = errFile
	require.NoError(t, l.cmd.Start())
	l.started = time.Now()
	go func() {
		l.err = l.cmd.Wait()
		errFile.Close()
		close(l.exited)
	}()
	// A test that fails half-way must not leave a flowhost running.
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill()
		<-l.exited
	})
	return l
}

// lifeReport is how a life that ran to completion went.
type lifeReport struct {
	duration    time.Duration
	firstOutput time.Duration // until the sink first grew
}

// complete starts a life and requires it to run to completion: exit 0, no
// panic on stderr, nothing in the dead letter.
func (r *crashRun) complete(t *testing.T) lifeReport {
	t.Helper()
	startSize := fileSize(r.sink)
	l := r.start(t)
	var firstOutput time.Duration
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-l.exited:
			waiting = false
		case <-tick.C:
			if firstOutput == 0 && fileSize(r.sink) != startSize {
				firstOutput = time.Since(l.started)
			}
			if time.Since(l.started) > lifeLimit {
				t.Fatalf("%s: life %d has not finished after %v\n%s", r.name, l.n, lifeLimit, r.tail(l))
			}
		}
	}
	duration := time.Since(l.started)
	if l.err != nil {
		t.Fatalf("%s: life %d did not complete: %v\n%s", r.name, l.n, l.err, r.tail(l))
	}
	r.requireNoPanic(t, l)
	dead, err := os.ReadFile(r.deadLetter)
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
		require.Empty(t, string(dead), "%s: records reached the dead letter", r.name)
	}
	return lifeReport{duration: duration, firstOutput: firstOutput}
}

// killMoment is when to kill a life: after delay from its start when
// early, otherwise once the sink holds sinkBytes (written by this life)
// and then after delay.
type killMoment struct {
	early     bool
	sinkBytes int64
	delay     time.Duration
}

func (m killMoment) String() string {
	if m.early {
		return fmt.Sprintf("early, %v after start", m.delay.Round(time.Millisecond))
	}
	return fmt.Sprintf("%v after a sink of %s", m.delay.Round(time.Millisecond), megabytes(m.sinkBytes))
}

// calibration is what the kill moments are drawn from: the reference
// run's duration, how long it took to its first output and the size of
// its sink.
type calibration struct {
	duration, firstOutput time.Duration
	sinkBytes             int64
}

// draw returns the moment of kill number kill (from 1) of kills. One kill
// in five is early: it lands while the plugin loads and the host
// recovers, before anything is output. The others aim at sink sizes
// stratified over the first 90% of the reference's sink, one stratum per
// kill in order, so that kills cover the whole run, and the last tenth
// keeps the run from completing before the last kill; the random delay
// after the size is reached, at most half a stratum's share of the run's
// duration, keeps kills from always landing just after a sink write.
func (c calibration) draw(rng *rand.Rand, kill, kills int) killMoment {
	if rng.IntN(5) == 0 {
		return killMoment{early: true, delay: randomDuration(rng, c.firstOutput)}
	}
	share := (float64(kill-1) + rng.Float64()) / float64(kills)
	return killMoment{
		sinkBytes: int64(0.9 * share * float64(c.sinkBytes)),
		delay:     randomDuration(rng, c.duration/time.Duration(2*kills)),
	}
}

func randomDuration(rng *rand.Rand, below time.Duration) time.Duration {
	if below <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(below)))
}

// killOnce starts a life and kills it with SIGKILL at moment m. A life
// that exits before, successfully or not, fails the test: the run would
// then have been killed fewer times than asked, or broken.
func (r *crashRun) killOnce(t *testing.T, m killMoment, kill, kills int) {
	t.Helper()
	startSize := fileSize(r.sink)
	l := r.start(t)
	if !r.waitFor(t, l, m, startSize) {
		r.failEarlyExit(t, l, m, kill, kills)
	}
	if err := l.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("%s: life %d: kill: %v", r.name, l.n, err)
	}
	<-l.exited
	var exit *exec.ExitError
	if !errors.As(l.err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
		// It exited on its own between the moment and the signal.
		r.failEarlyExit(t, l, m, kill, kills)
	}
	r.requireNoPanic(t, l)
	t.Logf("kill %d/%d (%v): %v after start, sink %s",
		kill, kills, m, time.Since(l.started).Round(time.Millisecond), megabytes(fileSize(r.sink)))
}

// waitFor waits for moment m of life l, whose sink held startSize bytes
// before it started, and reports whether it came before l exited. A sink
// size counts only once l has changed the sink (truncated or written it),
// so that the tail an earlier life left uncommitted does not trigger it.
func (r *crashRun) waitFor(t *testing.T, l *life, m killMoment, startSize int64) bool {
	t.Helper()
	if !m.early {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for reached := false; !reached; {
			select {
			case <-l.exited:
				return false
			case <-tick.C:
			}
			size := fileSize(r.sink)
			reached = size != startSize && size >= m.sinkBytes
			if time.Since(l.started) > lifeLimit {
				t.Fatalf("%s: life %d has not reached a sink of %s in %v (sink %s)\n%s",
					r.name, l.n, megabytes(m.sinkBytes), lifeLimit, megabytes(size), r.tail(l))
			}
		}
	}
	select {
	case <-l.exited:
		return false
	case <-time.After(m.delay):
		return true
	}
}

func (r *crashRun) failEarlyExit(t *testing.T, l *life, m killMoment, kill, kills int) {
	t.Helper()
	<-l.exited
	if l.err != nil {
		t.Fatalf("%s: life %d failed before kill %d/%d: %v\n%s", r.name, l.n, kill, kills, l.err, r.tail(l))
	}
	t.Fatalf("%s: life %d completed before kill %d/%d (%v; sink %s): the run was killed %d times, not %d. "+
		"The kills aim at sizes within the first 90%% of the reference run's sink, so the sink must grow during the run as it did there",
		r.name, l.n, kill, kills, m, megabytes(fileSize(r.sink)), kill-1, kills)
}

func (r *crashRun) requireNoPanic(t *testing.T, l *life) {
	t.Helper()
	data, err := os.ReadFile(l.stderr)
	require.NoError(t, err)
	if bytes.Contains(data, []byte("panic")) {
		t.Fatalf("%s: life %d: stderr mentions a panic\n%s", r.name, l.n, r.tail(l))
	}
}

// tail is the end of a life's stderr, for failure messages.
func (r *crashRun) tail(l *life) string {
	data, err := os.ReadFile(l.stderr)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return fmt.Sprintf("stderr of life %d (%s), last lines:\n%s", l.n, l.stderr, strings.Join(lines[max(0, len(lines)-30):], "\n"))
}

func readSink(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// sinkOutputs is what a file sink holds.
type sinkOutputs struct {
	// outputs is the multiset of the records' payloads, decoded.
	outputs map[crashload.Output]int
	// sharedIDs are the message_ids several records carry, with the
	// lines that carry them.
	sharedIDs map[string][]int
}

// noteID records that line carries message id, lineOf holding the line
// each id was first seen on: an id on a second line is a shared one.
func (s *sinkOutputs) noteID(lineOf map[string]int, id string, line int) {
	if first, shared := lineOf[id]; shared {
		if len(s.sharedIDs[id]) == 0 {
			s.sharedIDs[id] = []int{first}
		}
		s.sharedIDs[id] = append(s.sharedIDs[id], line)
		return
	}
	lineOf[id] = line
}

// parseSink decodes a file sink's contents; every line must be a whole
// record on the tally stream. It decodes as many pieces at once as there
// are cores: under the race detector, encoding/json takes a quarter of a
// minute of one core for the 60 MB of a run.
func parseSink(t *testing.T, data []byte) sinkOutputs {
	t.Helper()
	pieces := splitLines(data, runtime.GOMAXPROCS(0))
	decoded := make([]decodedPiece, len(pieces))
	var wg sync.WaitGroup
	for i, p := range pieces {
		wg.Go(func() { decoded[i] = decodePiece(p) })
	}
	wg.Wait()
	s := sinkOutputs{outputs: map[crashload.Output]int{}, sharedIDs: map[string][]int{}}
	lineOf := map[string]int{}
	line := 0
	for _, d := range decoded {
		require.NoError(t, d.err)
		for o, n := range d.outputs {
			s.outputs[o] += n
		}
		for _, id := range d.ids {
			line++
			s.noteID(lineOf, id, line)
		}
	}
	return s
}

// linePiece is whole lines of a sink, from line number first.
type linePiece struct {
	data  []byte
	first int
}

// splitLines cuts data into at most n pieces of about the same size.
func splitLines(data []byte, n int) []linePiece {
	var pieces []linePiece
	line := 1
	for len(data) > 0 {
		cut := len(data)
		if left := n - len(pieces); left > 1 {
			at := len(data) / left
			if i := bytes.IndexByte(data[at:], '\n'); i >= 0 {
				cut = at + i + 1
			}
		}
		pieces = append(pieces, linePiece{data: data[:cut], first: line})
		line += bytes.Count(data[:cut], []byte("\n"))
		data = data[cut:]
	}
	return pieces
}

// decodedPiece is what a piece of a sink holds: its outputs, the
// message_ids of its lines in order, or the first error.
type decodedPiece struct {
	outputs map[crashload.Output]int
	ids     []string
	err     error
}

func decodePiece(p linePiece) decodedPiece {
	d := decodedPiece{outputs: map[crashload.Output]int{}}
	line := p.first
	for text := range bytes.Lines(p.data) {
		var rec connect.SinkRecord
		if err := json.Unmarshal(text, &rec); err != nil {
			return decodedPiece{err: fmt.Errorf("sink line %d: %w", line, err)}
		}
		if rec.Stream != "tally" {
			return decodedPiece{err: fmt.Errorf("sink line %d: stream %q, not tally", line, rec.Stream)}
		}
		payload, err := rec.PayloadBytes()
		if err != nil {
			return decodedPiece{err: fmt.Errorf("sink line %d: %w", line, err)}
		}
		o, err := crashload.ParseOutput(payload)
		if err != nil {
			return decodedPiece{err: fmt.Errorf("sink line %d: %w", line, err)}
		}
		d.outputs[o]++
		d.ids = append(d.ids, rec.MessageID)
		line++
	}
	return d
}

// checkOutputs reports an error unless a sink holds the multiset want,
// and says whether it does. The error says how many outputs of each kind
// are missing and extra, with a few of each.
func checkOutputs(t *testing.T, what string, want map[crashload.Output]int, got sinkOutputs) bool {
	t.Helper()
	missing, missingOutputs := difference(want, got.outputs)
	extra, extraOutputs := difference(got.outputs, want)
	if len(missingOutputs) > 0 || len(extraOutputs) > 0 {
		examples := func(outputs []crashload.Output) string {
			if len(outputs) == 0 {
				return "  none\n"
			}
			var b strings.Builder
			for _, o := range outputs[:min(len(outputs), 5)] {
				fmt.Fprintf(&b, "  %v  (%d in the sink, %d wanted)\n", o, got.outputs[o], want[o])
			}
			return b.String()
		}
		total := 0
		for _, n := range want {
			total += n
		}
		t.Errorf("%s: of %d outputs, missing %d msg and %d window records, extra (doubled or wrong) %d msg and %d window records\nmissing, for example:\n%sextra, for example:\n%s",
			what, total, missing["msg"], missing["window"], extra["msg"], extra["window"], examples(missingOutputs), examples(extraOutputs))
		return false
	}
	return true
}

// checkOwnIDs reports an error unless every record of a sink has a
// message_id of its own, and says whether they do.
func checkOwnIDs(t *testing.T, what string, got sinkOutputs) bool {
	t.Helper()
	if len(got.sharedIDs) > 0 {
		var examples []string
		for id, lines := range got.sharedIDs {
			examples = append(examples, fmt.Sprintf("  %s on lines %v", id, lines))
		}
		slices.Sort(examples)
		t.Errorf("%s: %d message_ids are carried by more than one record, for example:\n%s",
			what, len(got.sharedIDs), strings.Join(examples[:min(len(examples), 5)], "\n"))
		return false
	}
	return true
}

// difference counts, per kind, the outputs a holds more often than b,
// and returns them, sorted.
func difference(a, b map[crashload.Output]int) (byKind map[string]int, outputs []crashload.Output) {
	byKind = map[string]int{}
	for o, n := range a {
		if d := n - b[o]; d > 0 {
			byKind[o.Kind] += d
			outputs = append(outputs, o)
		}
	}
	slices.SortFunc(outputs, func(x, y crashload.Output) int {
		return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.Key, y.Key), strings.Compare(x.Stream, y.Stream),
			cmp.Compare(x.Seq, y.Seq), cmp.Compare(x.WindowStart, y.WindowStart), cmp.Compare(x.Count, y.Count), cmp.Compare(x.Sum, y.Sum))
	})
	return byKind, outputs
}

// fileSize is the size of the file at path; 0 when there is none yet.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func megabytes(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }
