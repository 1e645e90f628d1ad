package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/ordering"
)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func msg(id ordering.MessageID, stream, key string, align int64, payload string) *ordering.Message {
	return &ordering.Message{
		ID: id, Stream: stream, Key: key, Payload: []byte(payload),
		Time: ordering.Timestamps{Event: align - 5, System: align + 1, Alignment: align},
	}
}

func TestEpochSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	require.NoError(t, s.Bind("v1 a->b"))

	b := s.NewBatch()
	src := msg(ordering.SourceID("orders", 1, 7), "orders", "", 100, `{"x":1}`)
	src.Time.Write = 100
	b.AppendSource("orders", 1, 7, src)
	b.SetIngest("orders", 1, IngestPosition{Next: 8, Clock: 100})
	b.SetConnector("orders-in", []byte("offset=42"))
	from := ordering.Sender{Computation: "enrich", Partition: 0}
	d := Dest{Name: "count", Partition: 1}
	for task := 3; task >= 1; task-- { // queued out of order: the store orders by task
		m := msg(ordering.TransformID("enrich", 0, uint64(task)), "enriched", "k", int64(task), "p")
		m.Task = ordering.TaskID(task)
		m.Parents = []ordering.MessageID{src.ID}
		b.Enqueue(d, from, m.Task, m)
	}
	b.SetState("count", 1, "k", []byte("state"))
	b.SetTimer("count", 1, ordering.Timer{Key: "k", Trigger: -5, Event: -6, ID: ordering.TransformID("count.timers", 1, 0), Payload: []byte("t")})
	b.SetTimer("count", 1, ordering.Timer{Key: "k", Trigger: 9, Event: 8, ID: ordering.TransformID("count.timers", 1, 1)})
	b.SetPartition("count", 1, PartitionMeta{Epoch: 4, OutSeq: 10, Bias: map[string]int64{"enriched": -3}, Tasks: map[string]uint64{"sink:out": 5}})
	b.SetSink("out", SinkPosition{Bytes: 123, Records: 2})
	b.AppendSinkLog("out", 0, []byte("line0"))
	b.AppendSinkLog("out", 1, []byte("line1"))
	require.NoError(t, b.Commit())
	require.NoError(t, s.Close())

	s = openT(t, dir)
	require.NoError(t, s.Bind("v1 a->b"))
	ip, ok, err := s.Ingest("orders", 1)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, IngestPosition{Next: 8, Clock: 100}, ip)
	tok, err := s.Connector("orders-in")
	require.NoError(t, err)
	assert.Equal(t, "offset=42", string(tok))

	var recs []*ordering.Message
	require.NoError(t, s.SourceRecords("orders", 1, 0, func(off uint64, m *ordering.Message) error {
		assert.Equal(t, uint64(7), off)
		recs = append(recs, m)
		return nil
	}))
	require.Len(t, recs, 1)
	assert.Equal(t, src.ID.String(), recs[0].ID.String())
	assert.Equal(t, src.Time, recs[0].Time)
	assert.Equal(t, src.Payload, recs[0].Payload)

	var tasks []ordering.TaskID
	require.NoError(t, s.Queue(d, func(f ordering.Sender, m *ordering.Message) error {
		assert.Equal(t, from, f)
		assert.Equal(t, "enriched", m.Stream)
		assert.Equal(t, []string{src.ID.String()}, []string{m.Parents[0].String()})
		tasks = append(tasks, m.Task)
		return nil
	}))
	assert.Equal(t, []ordering.TaskID{1, 2, 3}, tasks)

	st, ok, err := s.State("count", 1, "k")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "state", string(st))
	timers, err := s.Timers("count", 1)
	require.NoError(t, err)
	require.Len(t, timers, 2)
	assert.Equal(t, int64(-5), timers[0].Trigger, "negative triggers sort first")
	assert.Equal(t, []byte("t"), timers[0].Payload)
	meta, ok, err := s.Partition("count", 1)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, uint64(4), meta.Epoch)
	assert.Equal(t, int64(-3), meta.Bias["enriched"])

	var lines []string
	require.NoError(t, s.SinkLog("out", 1, func(seq uint64, line []byte) error {
		lines = append(lines, string(line))
		return nil
	}))
	assert.Equal(t, []string{"line1"}, lines)

	rep, err := s.Inspect()
	require.NoError(t, err)
	require.Len(t, rep.Queues, 1)
	assert.Equal(t, 3, rep.Queues[0].Messages)
	require.Len(t, rep.Partitions, 1)
	assert.Equal(t, 2, rep.Partitions[0].Timers)
	assert.Equal(t, []KeyState{{Key: "k", Bytes: 5}}, rep.Partitions[0].States)
	require.Len(t, rep.Sources, 1)
	assert.Equal(t, SourceReport{Stream: "orders", Partition: 1, First: 7, End: 8, Appended: 8}, rep.Sources[0])
}

func TestDequeueAndRetention(t *testing.T) {
	s := openT(t, t.TempDir())
	d := Dest{Sink: true, Name: "out"}
	from := ordering.Sender{Computation: "c", Partition: 2}
	b := s.NewBatch()
	for i := uint64(0); i < 10; i++ {
		m := msg(ordering.SourceID("in", 0, i), "in", "", int64(i), "x")
		m.Task = ordering.TaskID(i + 1)
		b.Enqueue(d, from, m.Task, m)
		b.AppendSource("in", 0, i, m)
	}
	require.NoError(t, b.Commit())

	b = s.NewBatch()
	b.TakeThrough(d, from, 4)
	b.DeleteSourceBefore("in", 0, 6)
	require.NoError(t, b.Commit())

	n := 0
	require.NoError(t, s.Queue(d, func(_ ordering.Sender, m *ordering.Message) error {
		assert.Greater(t, m.Task, ordering.TaskID(4))
		n++
		return nil
	}))
	assert.Equal(t, 6, n)
	first, end, err := s.SourceRange("in", 0)
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{6, 10}, [2]uint64{first, end})
}

func TestOneProcessHoldsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir)
	_, err := Open(dir, Options{})
	assert.ErrorIs(t, err, ErrLocked)
}

func TestMissingStoreIsRefusedNotRecreated(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "db")))
	_, err = Open(dir, Options{})
	assert.ErrorIs(t, err, ErrMissing)
	assert.Contains(t, err.Error(), dir)
}

// TestReadOnlyOpenCreatesNothing opens a missing directory, an empty one
// and a store read-only: the first two are refused with ErrNoStore and
// stay as they were; the store opens, reads, and refuses writes.
func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	base := t.TempDir()
	missing := filepath.Join(base, "never-ran")
	_, err := Open(missing, Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrNoStore)
	require.Contains(t, err.Error(), missing)
	_, statErr := os.Stat(missing)
	require.ErrorIs(t, statErr, os.ErrNotExist, "a read-only open created the directory")

	empty := filepath.Join(base, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	_, err = Open(empty, Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrNoStore)
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "a read-only open wrote into an empty directory")

	dir := filepath.Join(base, "store")
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Bind("shape"))
	require.NoError(t, s.Close())
	ro, err := Open(dir, Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	require.NoError(t, ro.Bind("shape"), "a read-only store reads what was committed")
	require.Error(t, ro.Bind("other shape"))
	_, err = Open(dir, Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrLocked, "a read-only open still holds the directory")
}

func TestPipelineMismatch(t *testing.T) {
	s := openT(t, t.TempDir())
	require.NoError(t, s.Bind("one"))
	err := s.Bind("two")
	assert.ErrorIs(t, err, ErrPipelineMismatch)
}

// TestCorruptedFilesAreReported flips bytes in every store file in turn:
// opening and verifying must fail with ErrCorrupted (or refuse to open),
// never succeed with an empty or silently shortened store.
func TestCorruptedFilesAreReported(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	b := s.NewBatch()
	for i := uint64(0); i < 2000; i++ {
		b.AppendSource("in", 0, i, msg(ordering.SourceID("in", 0, i), "in", "", int64(i), strings.Repeat("p", 100)))
	}
	require.NoError(t, b.Commit())
	require.NoError(t, s.Compact()) // move the records into an sstable
	before, err := s.Verify()
	require.NoError(t, err)
	require.NoError(t, s.Close())

	files, err := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		orig, err := os.ReadFile(f)
		require.NoError(t, err)
		damaged := bytes.Clone(orig)
		for i := len(damaged) / 4; i < len(damaged)/2; i += 97 {
			damaged[i] ^= 0x5a
		}
		require.NoError(t, os.WriteFile(f, damaged, 0o644))
		s, err := Open(dir, Options{})
		if err == nil {
			_, err = s.Verify()
			_ = s.Close()
		}
		require.Error(t, err, "damage in %s went unnoticed (had %d records)", filepath.Base(f), before)
		assert.ErrorIs(t, err, ErrCorrupted, "%v", err)
		require.NoError(t, os.WriteFile(f, orig, 0o644))
	}
}

// TestDiskFullFailsTheCommitAndKeepsTheStore runs a child process whose
// store gets ENOSPC on every write once it is open: the child's commit
// fails with a message that names the data directory and the cause (pebble
// ends the process on a failed WAL write rather than go on with a broken
// commit pipeline), and the store then holds exactly what committed before.
func TestDiskFullFailsTheCommitAndKeepsTheStore(t *testing.T) {
	if dir := os.Getenv("FLOWHOST_STORE_DISK_FULL_CHILD"); dir != "" {
		diskFullChild(dir)
		return
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	b := s.NewBatch()
	b.SetState("c", 0, "k", []byte("before"))
	require.NoError(t, b.Commit())
	require.NoError(t, s.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullFailsTheCommitAndKeepsTheStore$", "-test.v")
	cmd.Env = append(os.Environ(), "FLOWHOST_STORE_DISK_FULL_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must fail: %s", out)
	assert.Contains(t, []int{70, 71}, exit.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "no space left on device")
	assert.Contains(t, string(out), dir)
	assert.NotContains(t, string(out), "child committed")

	s = openT(t, dir)
	v, ok, err := s.State("c", 0, "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "before", string(v))
	_, err = s.Verify()
	assert.NoError(t, err)
}

func diskFullChild(dir string) {
	var full atomic.Bool
	fsys := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	s, err := Open(dir, Options{FS: fsys})
	if err != nil {
		fmt.Println("child open:", err)
		os.Exit(72)
	}
	full.Store(true)
	b := s.NewBatch()
	b.SetState("c", 0, "k", []byte("after"))
	if err := b.Commit(); err != nil {
		fmt.Println("child commit:", err)
		os.Exit(71)
	}
	fmt.Println("child committed")
	os.Exit(0)
}

func TestReadOnlyDataDirIsAClearError(t *testing.T) {
	fsys := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return &os.PathError{Op: "open", Path: op.Path, Err: syscall.EROFS}
		}
		return nil
	}))
	_, err := Open(filepath.Join(t.TempDir(), "data"), Options{FS: fsys})
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.EROFS), "%v", err)
	assert.Contains(t, err.Error(), "read-only file system")
}

// TestTornWriteLosesOnlyTheTornCommit copies a store's files while it is
// open (what a kill leaves on disk: pebble replays its log at the next
// open) and cuts the log at many points, as a write torn by a crash would.
// Each commit in a copy that opens is whole or absent, and the present
// ones are the first ones: nothing half-written ever appears. A cut inside
// the store's very first commit, its format record, is reported as
// corruption: the directory says it held a store, so the host refuses to
// start empty rather than process everything again.
func TestTornWriteLosesOnlyTheTornCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	const commits, keys = 40, 10
	for c := 0; c < commits; c++ {
		b := s.NewBatch()
		for k := 0; k < keys; k++ {
			b.SetState("c", 0, fmt.Sprintf("%02d-%d", c, k), bytes.Repeat([]byte{byte(c)}, 200))
		}
		require.NoError(t, b.Commit())
	}
	logs, err := filepath.Glob(filepath.Join(dir, "db", "*.log"))
	require.NoError(t, err)
	require.Len(t, logs, 1, "one write-ahead log holds every commit")
	full, err := os.ReadFile(logs[0])
	require.NoError(t, err)
	snapshot := t.TempDir()
	require.NoError(t, os.CopyFS(snapshot, os.DirFS(dir)))
	require.NoError(t, s.Close())

	for _, cut := range []int{0, 1, 7, len(full) / 3, len(full) / 2, len(full) - 100, len(full) - 1, len(full)} {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			copyDir := t.TempDir()
			require.NoError(t, os.CopyFS(copyDir, os.DirFS(snapshot)))
			require.NoError(t, os.Remove(filepath.Join(copyDir, "db", "LOCK")))
			require.NoError(t, os.WriteFile(filepath.Join(copyDir, "db", filepath.Base(logs[0])), full[:cut], 0o644))
			s, err := Open(copyDir, Options{})
			if cut < 64 {
				require.ErrorIs(t, err, ErrCorrupted)
				return
			}
			require.NoError(t, err)
			defer s.Close()
			present := 0
			for c := 0; c < commits; c++ {
				n := 0
				for k := 0; k < keys; k++ {
					_, ok, err := s.State("c", 0, fmt.Sprintf("%02d-%d", c, k))
					require.NoError(t, err)
					if ok {
						n++
					}
				}
				require.Contains(t, []int{0, keys}, n, "commit %d is half there", c)
				if n == keys {
					require.Equal(t, c, present, "commit %d is there but an earlier one is not", c)
					present++
				}
			}
			if cut == len(full) {
				require.Equal(t, commits, present)
			}
			t.Logf("cut at %d of %d bytes: the first %d commits survive", cut, len(full), present)
		})
	}
}

// TestKillDuringCommits kills (SIGKILL) a child process that commits as
// fast as it can and reports each commit once Commit has returned. The
// store must open afterwards with every reported commit whole, any later
// one whole or absent, and no gap: a kill in the middle of a commit tears
// only that commit.
func TestKillDuringCommits(t *testing.T) {
	if dir := os.Getenv("FLOWHOST_STORE_KILL_CHILD"); dir != "" {
		killChild(dir)
		return
	}
	for round := range 3 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringCommits$")
		cmd.Env = append(os.Environ(), "FLOWHOST_STORE_KILL_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		acked := -1
		for lines.Scan() && acked < 50+round*40 {
			n, err := strconv.Atoi(lines.Text())
			require.NoError(t, err, "child said %q", lines.Text())
			acked = n
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		s, err := Open(dir, Options{})
		require.NoError(t, err)
		present := 0
		for c := 0; ; c++ {
			n := 0
			for k := 0; k < 10; k++ {
				_, ok, err := s.State("c", 0, fmt.Sprintf("%06d-%d", c, k))
				require.NoError(t, err)
				if ok {
					n++
				}
			}
			require.Contains(t, []int{0, 10}, n, "commit %d is half there", c)
			if n == 0 {
				break
			}
			present++
		}
		require.NoError(t, s.Close())
		require.GreaterOrEqual(t, present, acked+1, "a commit reported durable was lost")
		t.Logf("round %d: killed after commit %d was reported; %d commits survive", round, acked, present)
	}
}

func killChild(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	for c := 0; ; c++ {
		b := s.NewBatch()
		for k := 0; k < 10; k++ {
			b.SetState("c", 0, fmt.Sprintf("%06d-%d", c, k), bytes.Repeat([]byte{byte(c)}, 300))
		}
		if err := b.Commit(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		fmt.Println(c)
	}
}

func TestSinkPendingBatchRoundTrips(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	pending := SinkPosition{Records: 7, Batch: 3, Pending: &SinkBatch{N: 4, Last: []SinkBatchSender{
		{Computation: "tally", Partition: 0, Task: 12}, {Computation: "tally", Partition: 2, Task: 9},
	}}}
	b := s.NewBatch()
	b.SetSink("k", pending)
	require.NoError(t, b.Commit())
	require.NoError(t, s.Close())

	s = openT(t, dir)
	got, ok, err := s.Sink("k")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, pending, got)

	// Step 3 of a transaction clears the pending batch.
	b = s.NewBatch()
	b.SetSink("k", SinkPosition{Records: 9, Batch: 4})
	require.NoError(t, b.Commit())
	got, _, err = s.Sink("k")
	require.NoError(t, err)
	require.Equal(t, SinkPosition{Records: 9, Batch: 4}, got)
	require.NoError(t, s.Close())
}
