package watch

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/plugins"
)

// testDebounce is short so the real-clock tests are quick; those tests only
// wait for a notification to arrive, so its length never decides a result.
const testDebounce = 20 * time.Millisecond

// waitLimit bounds every wait; reaching it means the notification is not
// coming, not that the machine is slow.
const waitLimit = 10 * time.Second

func moduleBytes(version int) []byte {
	// A WebAssembly header followed by a marker, so each version differs.
	return fmt.Appendf([]byte("\x00asm\x01\x00\x00\x00"), "v%d", version)
}

func manifestFor(name string, module []byte) []byte {
	return fmt.Appendf(nil, "name: %s\nversion: 1.0.0\nabi: 1\nkinds: [transform]\nwasm: %s.wasm\nsha256: %x\n",
		name, name, sha256.Sum256(module))
}

// newPluginDir creates parent/name holding name.wasm and its plugin.yaml.
func newPluginDir(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	module := moduleBytes(0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".wasm"), module, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, plugins.ManifestFile), manifestFor(name, module), 0o644))
	return dir
}

// replaceFile writes data to a new file beside path and renames it over
// path, as editors and install tools do to replace a file atomically.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, data, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// receive returns the next notification, failing on an error or timeout.
func receive(t *testing.T, w *Watcher) string {
	t.Helper()
	select {
	case dir, ok := <-w.Changes():
		require.True(t, ok, "Changes closed")
		return dir
	case err := <-w.Errors():
		require.NoError(t, err)
	case <-time.After(waitLimit):
		require.FailNow(t, "no notification", "within %v", waitLimit)
	}
	return ""
}

func newRealWatcher(t *testing.T, dirs ...string) *Watcher {
	t.Helper()
	w, err := New(dirs, WithDebounce(testDebounce))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	return w
}

// newFakeWatcher returns a Watcher on a fake clock, the clock, and the
// events the watcher has applied, in order.
//
// This is what makes the timing tests deterministic rather than merely
// unlikely to fail. inotify delivers one instance's events in the order the
// operations happened, and the watcher applies them one at a time, reporting
// each on the returned channel after applying it. So once a test has seen
// the event of its last file operation, every earlier event has been applied
// too and none is still to come; only then does it move the clock. Nothing
// depends on how long anything takes, and "no second notification" is read
// from the watcher's state instead of waiting for something not to happen.
// (The argument needs the event of the last operation to be the last event
// that operation produces: the tests end each step with a rename into place,
// whose final event is the Create of the target name.)
func newFakeWatcher(t *testing.T, dirs ...string) (*Watcher, *fakeClock, <-chan fsnotify.Event) {
	t.Helper()
	clock := newFakeClock(t)
	// Large enough that the watcher never blocks on it in these tests.
	applied := make(chan fsnotify.Event, 1024)
	w, err := New(dirs, WithDebounce(testDebounce), withClock(clock),
		withEventHook(func(ev fsnotify.Event) { applied <- ev }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	return w, clock, applied
}

// waitApplied waits until the watcher has applied an event op on path.
func waitApplied(t *testing.T, applied <-chan fsnotify.Event, path string, op fsnotify.Op) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev := <-applied:
			if ev.Name == path && ev.Has(op) {
				return
			}
		case <-timeout:
			require.FailNow(t, "event not seen", "%v on %s within %v", op, path, waitLimit)
		}
	}
}

// replaceAndWait replaces path and waits until the watcher has applied it.
func replaceAndWait(t *testing.T, applied <-chan fsnotify.Event, path string, data []byte) {
	t.Helper()
	replaceFile(t, path, data)
	waitApplied(t, applied, path, fsnotify.Create)
}

// snapshot reads the watcher goroutine's state.
func (w *Watcher) snapshot(t *testing.T) snapshot {
	t.Helper()
	reply := make(chan snapshot, 1)
	select {
	case w.probe <- reply:
	case <-time.After(waitLimit):
		require.FailNow(t, "watcher goroutine not responding")
	}
	return <-reply
}

func requireState(t *testing.T, w *Watcher, due, ready []string) {
	t.Helper()
	s := w.snapshot(t)
	require.Equal(t, due, s.due, "directories waiting to be quiet")
	require.Equal(t, ready, s.ready, "notifications waiting for the consumer")
}

func TestWriteManifestInPlace(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	// Given with a trailing "/.": notifications name the directory as
	// given, not as cleaned.
	given := dir + string(filepath.Separator) + "."
	w := newRealWatcher(t, given)

	require.NoError(t, os.WriteFile(filepath.Join(dir, plugins.ManifestFile), manifestFor("echo", moduleBytes(1)), 0o644))
	require.Equal(t, given, receive(t, w))
}

func TestRemoveAndRecreateManifest(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	w := newRealWatcher(t, dir)

	manifest := filepath.Join(dir, plugins.ManifestFile)
	require.NoError(t, os.Remove(manifest))
	require.NoError(t, os.WriteFile(manifest, manifestFor("echo", moduleBytes(1)), 0o644))
	require.Equal(t, dir, receive(t, w))
}

func TestAtomicReplaceByRename(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	w := newRealWatcher(t, dir)

	replaceFile(t, filepath.Join(dir, plugins.ManifestFile), manifestFor("echo", moduleBytes(1)))
	require.Equal(t, dir, receive(t, w))
}

func TestModuleMovedIntoPlace(t *testing.T) {
	root := t.TempDir()
	dir := newPluginDir(t, root, "echo")
	w := newRealWatcher(t, dir)

	// Built elsewhere, then moved over the old module, as `mv` does: the
	// watched directory sees only the new name appear.
	built := filepath.Join(root, "echo.wasm")
	require.NoError(t, os.WriteFile(built, moduleBytes(1), 0o644))
	require.NoError(t, os.Rename(built, filepath.Join(dir, "echo.wasm")))
	require.Equal(t, dir, receive(t, w))
}

func TestBurstGivesOneNotification(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	w, clock, applied := newFakeWatcher(t, dir)

	// A rebuild: the module written several times, then the manifest
	// replaced with the new checksum. See newFakeWatcher for why, after
	// waitApplied, the whole burst has been seen and nothing more will come.
	module := filepath.Join(dir, "echo.wasm")
	for i := 1; i <= 5; i++ {
		require.NoError(t, os.WriteFile(module, moduleBytes(i), 0o644))
	}
	replaceAndWait(t, applied, filepath.Join(dir, plugins.ManifestFile), manifestFor("echo", moduleBytes(5)))

	requireState(t, w, []string{dir}, []string{})
	clock.Advance(testDebounce - time.Nanosecond)
	requireState(t, w, []string{dir}, []string{})
	clock.Advance(time.Nanosecond)
	require.Equal(t, dir, receive(t, w))
	// Nothing is scheduled or waiting: there is no second notification.
	requireState(t, w, []string{}, []string{})
}

func TestNotificationWaitsForQuiet(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	w, clock, applied := newFakeWatcher(t, dir)

	replaceAndWait(t, applied, filepath.Join(dir, "echo.wasm"), moduleBytes(1))
	clock.Advance(testDebounce / 2)
	replaceAndWait(t, applied, filepath.Join(dir, plugins.ManifestFile), manifestFor("echo", moduleBytes(1)))
	// A full debounce since the first change, half of one since the last.
	clock.Advance(testDebounce / 2)
	requireState(t, w, []string{dir}, []string{})
	clock.Advance(testDebounce / 2)
	require.Equal(t, dir, receive(t, w))
	requireState(t, w, []string{}, []string{})
}

func TestDirectoriesNotifyIndependently(t *testing.T) {
	root := t.TempDir()
	a := newPluginDir(t, root, "a")
	b := newPluginDir(t, root, "b")
	w, clock, applied := newFakeWatcher(t, a, b)

	replaceAndWait(t, applied, filepath.Join(a, plugins.ManifestFile), manifestFor("a", moduleBytes(1)))
	clock.Advance(testDebounce / 2)
	replaceAndWait(t, applied, filepath.Join(b, plugins.ManifestFile), manifestFor("b", moduleBytes(1)))
	// b's change neither delays a nor is folded into it.
	clock.Advance(testDebounce / 2)
	require.Equal(t, a, receive(t, w))
	requireState(t, w, []string{b}, []string{})
	clock.Advance(testDebounce / 2)
	require.Equal(t, b, receive(t, w))
	requireState(t, w, []string{}, []string{})
}

func TestBusyConsumerGetsOneCoalescedNotification(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	manifest := filepath.Join(dir, plugins.ManifestFile)
	w, clock, applied := newFakeWatcher(t, dir)

	// Nobody receives: the notification waits.
	replaceAndWait(t, applied, manifest, manifestFor("echo", moduleBytes(1)))
	clock.Advance(testDebounce)
	requireState(t, w, []string{}, []string{dir})

	// A change while it waits withdraws it until the directory is quiet.
	replaceAndWait(t, applied, manifest, manifestFor("echo", moduleBytes(2)))
	requireState(t, w, []string{dir}, []string{})
	clock.Advance(testDebounce)
	requireState(t, w, []string{}, []string{dir})

	// Any number of such rounds leave one notification.
	replaceAndWait(t, applied, manifest, manifestFor("echo", moduleBytes(3)))
	clock.Advance(testDebounce)
	requireState(t, w, []string{}, []string{dir})
	require.Equal(t, dir, receive(t, w))
	requireState(t, w, []string{}, []string{})

	// A change after the consumer took the notification gets its own.
	replaceAndWait(t, applied, manifest, manifestFor("echo", moduleBytes(4)))
	clock.Advance(testDebounce)
	require.Equal(t, dir, receive(t, w))
}

func TestAttributeChangeIgnored(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	manifest := filepath.Join(dir, plugins.ManifestFile)
	w, _, applied := newFakeWatcher(t, dir)

	require.NoError(t, os.Chmod(manifest, 0o600))
	waitApplied(t, applied, manifest, fsnotify.Chmod)
	requireState(t, w, []string{}, []string{})
}

func TestDirGone(t *testing.T) {
	for name, remove := range map[string]func(dir string) error{
		"removed": os.RemoveAll,
		"renamed": func(dir string) error { return os.Rename(dir, dir+"-old") },
	} {
		t.Run(name, func(t *testing.T) {
			dir := newPluginDir(t, t.TempDir(), "echo")
			w := newRealWatcher(t, dir)

			require.NoError(t, remove(dir))
			// Both arrive, in either order: the error at once, the
			// notification after the debounce.
			var gotErr, gotChange bool
			timeout := time.After(waitLimit)
			for !gotErr || !gotChange {
				select {
				case err := <-w.Errors():
					require.ErrorIs(t, err, ErrDirGone)
					var de *DirError
					require.ErrorAs(t, err, &de)
					require.Equal(t, dir, de.Dir)
					gotErr = true
				case changed := <-w.Changes():
					require.Equal(t, dir, changed)
					gotChange = true
				case <-timeout:
					require.FailNow(t, "missing", "error seen %v, notification seen %v", gotErr, gotChange)
				}
			}
		})
	}
}

func TestCloseEndsChannels(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	w := newRealWatcher(t, dir)

	// A consumer blocked on Changes is released by Close.
	released := make(chan bool)
	go func() {
		_, ok := <-w.Changes()
		released <- ok
	}()
	require.NoError(t, w.Close())
	select {
	case ok := <-released:
		require.False(t, ok, "Changes delivered instead of closing")
	case <-time.After(waitLimit):
		require.FailNow(t, "Close did not release the consumer")
	}
	_, ok := <-w.Errors()
	require.False(t, ok, "Errors not closed")
	require.NoError(t, w.Close(), "second Close") // and once more by Cleanup
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	dir := newPluginDir(t, t.TempDir(), "echo")
	before := runtime.NumGoroutine()
	w, err := New([]string{dir}, WithDebounce(testDebounce))
	require.NoError(t, err)
	require.Greater(t, runtime.NumGoroutine(), before, "New started no goroutine?")
	require.NoError(t, w.Close())

	// Close returns after the watcher goroutine and fsnotify's reader have
	// done their last work, but each still has to return from its deferred
	// calls, so the count may lag by a scheduling step: yield until it is
	// back (no sleeping; a goroutine that really leaked keeps it high until
	// waitLimit).
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

func TestNewRejects(t *testing.T) {
	root := t.TempDir()
	dir := newPluginDir(t, root, "echo")
	empty := filepath.Join(root, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	link := filepath.Join(root, "link")
	require.NoError(t, os.Symlink(dir, link))

	for name, tc := range map[string]struct {
		dirs []string
		opts []Option
		want string
	}{
		"missing":       {dirs: []string{filepath.Join(root, "nope")}, want: "no such file"},
		"not a dir":     {dirs: []string{filepath.Join(dir, plugins.ManifestFile)}, want: "not a directory"},
		"no manifest":   {dirs: []string{empty}, want: "not a plugin directory"},
		"same twice":    {dirs: []string{dir, dir + "/."}, want: "same directory"},
		"via a symlink": {dirs: []string{dir, link}, want: "same directory"},
		"negative":      {dirs: []string{dir}, opts: []Option{WithDebounce(-time.Second)}, want: "negative debounce"},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := New(tc.dirs, tc.opts...)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, w)
		})
	}
}

func TestNoDirectories(t *testing.T) {
	w, err := New(nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, ok := <-w.Changes()
	require.False(t, ok)
}

// The remaining tests drive state directly with synthetic input: overflow
// and error storms cannot be provoked reliably through the kernel.

func newTestState(t *testing.T, dirs ...string) *state {
	clock := newFakeClock(t)
	s := &state{
		debounce: testDebounce,
		clock:    clock,
		timer:    clock.NewTimer(),
		watched:  make(map[string]string),
		due:      make(map[string]time.Time),
	}
	for _, dir := range dirs {
		s.watched[dir] = dir
	}
	return s
}

func TestOverflowNotifiesEveryDirectory(t *testing.T) {
	s := newTestState(t, "a", "b", "c")
	s.event(fsnotify.Event{Name: "c", Op: fsnotify.Remove}) // c is gone
	s.errs = nil

	s.fsError(fsnotify.ErrEventOverflow)
	require.Len(t, s.errs, 1)
	require.ErrorIs(t, s.errs[0], fsnotify.ErrEventOverflow)
	require.Equal(t, []string{"a", "b", "c"}, s.snapshot().due, "a and b for the overflow, c for its removal")
}

func TestErrorsBoundedButNotSilent(t *testing.T) {
	s := newTestState(t)
	for i := range maxQueuedErrors + 5 {
		s.addErr(fmt.Errorf("error %d", i))
	}
	require.Len(t, s.errs, maxQueuedErrors)

	s.popErr()
	last := s.errs[len(s.errs)-1]
	require.ErrorIs(t, last, ErrErrorsDropped)
	require.True(t, strings.HasSuffix(last.Error(), ": 5"), last.Error())
	for range maxQueuedErrors {
		s.popErr()
	}
	require.Empty(t, s.errs)
	require.Zero(t, s.dropped)
}
