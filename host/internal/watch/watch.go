// Package watch tells the host when a plugin directory changed on disk, so
// that it can reload the plugin.
//
// A [Watcher] watches a fixed set of plugin directories (each holds
// plugin.yaml and the module it names) and delivers a directory's path on
// [Watcher.Changes] once the directory has been quiet for the debounce
// interval ([WithDebounce]) after a change. Updating a plugin is a burst of
// changes (the module is written, then the manifest is rewritten with the
// new checksum), and reloading in the middle of it would see a module that
// does not match its manifest; waiting for quiet turns the burst into one
// reload of the finished state.
//
// The Watcher only says "look again": it never reads the files. The
// consumer reloads the directory, and the checksum in the manifest decides
// whether what it finds is consistent.
package watch

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/flowhost/flowhost/plugins"
)

// DefaultDebounce is the quiet interval used when [WithDebounce] is not
// given: long enough to cover a build writing the module and then the
// manifest, short enough that a person saving a file sees the reload at once.
const DefaultDebounce = 200 * time.Millisecond

// maxQueuedErrors bounds the errors kept for a consumer that does not drain
// [Watcher.Errors], so that such a consumer costs bounded memory; what does
// not fit is counted and reported as one [ErrErrorsDropped].
const maxQueuedErrors = 64

var (
	// ErrDirGone is wrapped in the [*DirError] reported when a watched
	// directory is removed or renamed away. The Watcher stops watching that
	// directory for good: it does not watch the parent, so it cannot see the
	// directory come back; make a new Watcher for that.
	ErrDirGone = errors.New("plugin directory removed or renamed")

	// ErrErrorsDropped is wrapped in the error reported, once the consumer
	// catches up on [Watcher.Errors], in place of the errors that did not fit
	// in the queue; the message says how many there were. Errors are
	// therefore never lost without trace, only summarised.
	ErrErrorsDropped = errors.New("errors dropped because Errors was not drained")
)

// DirError is an error about one watched directory. Dir is the directory
// exactly as given to [New]; Err is the cause, such as [ErrDirGone].
type DirError struct {
	// Dir is the directory as given to New.
	Dir string
	// Err is the cause.
	Err error
}

// Error returns "Dir: Err".
func (e *DirError) Error() string { return e.Dir + ": " + e.Err.Error() }

// Unwrap returns Err, so errors.Is(err, ErrDirGone) works.
func (e *DirError) Unwrap() error { return e.Err }

// Option configures [New].
type Option func(*config)

type config struct {
	debounce time.Duration
	clock    clock
	// onEvent, when set, is called by the watcher goroutine after it has
	// applied each fsnotify event; tests use it to know that an event has
	// been taken into account before they move the fake clock.
	onEvent func(fsnotify.Event)
}

// WithDebounce sets the quiet interval d: a directory's notification is
// queued once no change has been seen in it for d. Zero queues it as soon as
// the watcher has seen the change; a negative d makes [New] fail. The
// default is [DefaultDebounce].
func WithDebounce(d time.Duration) Option {
	return func(c *config) { c.debounce = d }
}

// withClock replaces the real clock; tests use a fake one so that "nothing
// fires before the directory has been quiet for d" does not depend on how
// fast the machine runs.
func withClock(c clock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// withEventHook sets config.onEvent.
func withEventHook(f func(fsnotify.Event)) Option {
	return func(cfg *config) { cfg.onEvent = f }
}

// Watcher watches plugin directories; see [New]. Its methods are safe for
// concurrent use.
type Watcher struct {
	fsw     *fsnotify.Watcher
	changes chan string
	errs    chan error
	// probe lets tests read the watcher goroutine's state without a data
	// race; nothing else sends on it.
	probe   chan chan snapshot
	onEvent func(fsnotify.Event)

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New starts watching dirs, each a plugin directory: an existing directory
// holding plugin.yaml. It fails, watching nothing, if a directory is
// missing, is not a directory, has no plugin.yaml, is given twice (under
// any spelling, symbolic links included), or cannot be watched. No
// directories give a Watcher that never notifies.
//
// Every change to an entry directly inside a watched directory counts: a
// write, a create, a removal, a rename out of or into it (so an editor's or
// `mv`'s atomic replace, a new file renamed over the old one, counts, as
// does removing a file and creating it again). Any name counts, not only
// plugin.yaml and the module, because the manifest may be about to name a
// new module; an editor's temporary file costs at most one extra reload.
// Attribute-only changes (chmod, touch without write) do not count.
// Subdirectories are not watched: a module kept in one is still covered
// whenever it changes validly, because its new checksum has to be written
// to plugin.yaml.
//
// Changes made before New is called are not reported (changes while it runs
// may be), so create the Watcher before loading the plugins: a change made
// during the load is then reported.
func New(dirs []string, opts ...Option) (*Watcher, error) {
	cfg := config{debounce: DefaultDebounce, clock: realClock{}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.debounce < 0 {
		return nil, fmt.Errorf("watch: negative debounce %v", cfg.debounce)
	}

	watched := make(map[string]string, len(dirs))
	cleaned := make([]string, 0, len(dirs))
	infos := make([]os.FileInfo, 0, len(dirs))
	for _, dir := range dirs {
		clean := filepath.Clean(dir)
		fi, err := os.Stat(clean)
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("watch: %s is not a directory", dir)
		}
		if _, err := os.Stat(filepath.Join(clean, plugins.ManifestFile)); err != nil {
			return nil, fmt.Errorf("watch: %s is not a plugin directory: %w", dir, err)
		}
		// Reject the same directory twice: inotify gives both the same
		// watch, so only one name would ever be reported, and a caller
		// that gave two names expects both.
		for i, prev := range infos {
			if os.SameFile(prev, fi) {
				return nil, fmt.Errorf("watch: %s and %s are the same directory", dirs[i], dir)
			}
		}
		infos = append(infos, fi)
		cleaned = append(cleaned, clean)
		watched[clean] = dir
	}

	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	for i, clean := range cleaned {
		if err := fsw.Add(clean); err != nil {
			fsw.Close()
			return nil, fmt.Errorf("watch: %s: %w", dirs[i], err)
		}
	}

	w := &Watcher{
		fsw: fsw,
		// Unbuffered on purpose: the pending notifications live in the
		// watcher goroutine, where a new change can withdraw or coalesce
		// them; a buffer would hold stale duplicates beyond its reach.
		changes: make(chan string),
		errs:    make(chan error),
		probe:   make(chan chan snapshot),
		onEvent: cfg.onEvent,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	s := &state{
		debounce: cfg.debounce,
		clock:    cfg.clock,
		timer:    cfg.clock.NewTimer(),
		watched:  watched,
		due:      make(map[string]time.Time),
	}
	go w.run(s)
	return w, nil
}

// Changes delivers the path of a plugin directory, exactly as given to
// [New], each time it has been quiet for the debounce interval after one or
// more changes. It guarantees:
//
//   - No change is lost: a change made at any time, including while the
//     consumer is busy handling an earlier notification, is followed by a
//     notification for its directory that the consumer receives after the
//     change was made (until [Watcher.Close]).
//   - Coalescing: at most one notification per directory waits for the
//     consumer; changes while it waits are folded into it. A change while
//     it waits also withdraws it until the directory is quiet again, so the
//     consumer is not sent into a burst that is still going on.
//   - Directories are independent: a busy directory neither delays nor
//     absorbs another's notification. Notifications leave in the order the
//     directories became quiet.
//   - A directory that keeps changing more often than the debounce interval
//     is notified once it stops.
//
// The watcher never blocks on the consumer, so a slow consumer delays only
// its own notifications. The channel is closed by Close and the same
// channel is returned on every call.
func (w *Watcher) Changes() <-chan string { return w.changes }

// Errors delivers problems the Watcher cannot handle itself: errors from
// fsnotify, and a [*DirError] wrapping [ErrDirGone] when a watched directory
// is removed or renamed (its directory also gets a last notification on
// [Watcher.Changes], since its contents changed). After an event queue
// overflow (fsnotify.ErrEventOverflow, which it wraps) it does not know
// which directories changed, so it also notifies every watched directory.
//
// Read it alongside Changes. An unread error never blocks Changes; up to 64
// are kept and any more are counted and reported as one [ErrErrorsDropped].
// The channel is closed by [Watcher.Close].
func (w *Watcher) Errors() <-chan error { return w.errs }

// Close stops watching, closes [Watcher.Changes] and [Watcher.Errors], and
// returns once every goroutine the Watcher started (its own and fsnotify's
// reader) has done its last work; all that is left of them is returning
// from their deferred calls, so none leaks. Pending
// notifications are discarded; none is delivered after Close returns. Close
// may be called from any goroutine, also while another is receiving from
// Changes, and more than once: later calls return the first one's result.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop)
		<-w.done
		// After run has returned nobody reads fsw.Events; fsnotify's Close
		// unblocks its reader and waits for it to exit.
		if err := w.fsw.Close(); err != nil {
			w.closeErr = fmt.Errorf("watch: %w", err)
		}
	})
	return w.closeErr
}

// run is the only goroutine that touches s, so s needs no lock.
func (w *Watcher) run(s *state) {
	defer close(w.done)
	defer close(w.errs)
	defer close(w.changes)
	defer s.timer.Stop()

	events, fsErrs := w.fsw.Events, w.fsw.Errors
	for {
		// A nil channel disables its case: offer a notification or an
		// error only when one is waiting.
		var changes chan<- string
		var next string
		if len(s.ready) > 0 {
			changes, next = w.changes, s.ready[0]
		}
		var errs chan<- error
		var nextErr error
		if len(s.errs) > 0 {
			errs, nextErr = w.errs, s.errs[0]
		}

		select {
		case <-w.stop:
			return
		case ev, ok := <-events:
			if !ok {
				// fsnotify closes its channels only when closed, which
				// Close does after run returns; say so if it ever happens
				// otherwise rather than going quiet.
				events = nil
				s.addErr(errors.New("watch: fsnotify stopped delivering events"))
				continue
			}
			s.event(ev)
			if w.onEvent != nil {
				w.onEvent(ev)
			}
		case err, ok := <-fsErrs:
			if !ok {
				fsErrs = nil
				continue
			}
			s.fsError(err)
		case <-s.timer.C():
			s.fire()
		case changes <- next:
			s.ready = slices.Delete(s.ready, 0, 1)
		case errs <- nextErr:
			s.popErr()
		case reply := <-w.probe:
			reply <- s.snapshot()
		}
	}
}

// state is the watcher goroutine's bookkeeping, apart from the goroutine so
// that tests can drive it with synthetic events.
type state struct {
	debounce time.Duration
	clock    clock
	// timer is armed for the earliest entry of due, stopped when due is
	// empty.
	timer timer
	// watched maps a cleaned directory path, as fsnotify spells it in event
	// names, to the directory as given to New. A directory that is gone is
	// removed, so that its stale events and overflows are ignored.
	watched map[string]string
	// due maps a directory (as given) that changed to the time it will
	// have been quiet for debounce.
	due map[string]time.Time
	// ready holds directories whose notification waits for the consumer,
	// oldest first, each at most once.
	ready []string
	// errs holds errors waiting for the consumer, at most maxQueuedErrors;
	// dropped counts those that did not fit.
	errs    []error
	dropped int
}

// event applies one fsnotify event and re-arms the timer.
func (s *state) event(ev fsnotify.Event) {
	// Attribute-only changes leave the contents alone; Linux also sends
	// one ahead of every removal, which is reported by itself.
	if ev.Op == fsnotify.Chmod || ev.Op == 0 {
		return
	}
	name := filepath.Clean(ev.Name)
	// An event about a watched directory itself: removed or renamed away
	// (then fsnotify has dropped the watch), or, on kqueue and Windows,
	// written because its entries changed.
	if dir, ok := s.watched[name]; ok {
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			delete(s.watched, name)
			s.addErr(&DirError{Dir: dir, Err: ErrDirGone})
		}
		s.touch(dir)
	}
	// An event about an entry of a watched directory. Not an else: a
	// watched directory may itself be an entry of another watched one.
	if dir, ok := s.watched[filepath.Dir(name)]; ok {
		s.touch(dir)
	}
	s.rearm()
}

// fsError applies one error from fsnotify.
func (s *state) fsError(err error) {
	s.addErr(fmt.Errorf("watch: %w", err))
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		// Events were lost and we cannot tell whose: notifying every
		// directory costs some needless reloads but loses no change.
		for _, dir := range s.watched {
			s.touch(dir)
		}
		s.rearm()
	}
}

// touch records a change to dir: its notification is due debounce from now,
// and one waiting for the consumer is withdrawn until then, because the
// directory is evidently not finished changing.
func (s *state) touch(dir string) {
	s.due[dir] = s.clock.Now().Add(s.debounce)
	if i := slices.Index(s.ready, dir); i >= 0 {
		s.ready = slices.Delete(s.ready, i, i+1)
	}
}

// fire moves every directory whose quiet time has come to ready. It checks
// the clock instead of trusting the tick, so an early or stale tick is
// harmless.
func (s *state) fire() {
	now := s.clock.Now()
	var quiet []string
	for dir, at := range s.due {
		if !at.After(now) {
			quiet = append(quiet, dir)
		}
	}
	// Map order is random; deliver in the order the directories became
	// quiet (by name on a tie) so the order is reproducible.
	slices.SortFunc(quiet, func(a, b string) int {
		return cmp.Or(s.due[a].Compare(s.due[b]), cmp.Compare(a, b))
	})
	for _, dir := range quiet {
		delete(s.due, dir)
		// touch removed dir from ready, so it is not there twice.
		s.ready = append(s.ready, dir)
	}
	s.rearm()
}

// rearm points the timer at the earliest due time, or stops it.
func (s *state) rearm() {
	if len(s.due) == 0 {
		s.timer.Stop()
		return
	}
	var earliest time.Time
	for _, at := range s.due {
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	s.timer.Reset(max(earliest.Sub(s.clock.Now()), 0))
}

// addErr queues err for the consumer, or counts it if the queue is full.
func (s *state) addErr(err error) {
	if len(s.errs) >= maxQueuedErrors {
		s.dropped++
		return
	}
	s.errs = append(s.errs, err)
}

// popErr removes the error just delivered and, once there is room, queues
// the summary of those dropped.
func (s *state) popErr() {
	s.errs = slices.Delete(s.errs, 0, 1)
	if s.dropped > 0 {
		s.errs = append(s.errs, fmt.Errorf("watch: %w: %d", ErrErrorsDropped, s.dropped))
		s.dropped = 0
	}
}

// snapshot is what tests can see of a state.
type snapshot struct {
	due   []string // sorted
	ready []string // in delivery order
	errs  int
}

func (s *state) snapshot() snapshot {
	due := make([]string, 0, len(s.due))
	for dir := range s.due {
		due = append(due, dir)
	}
	slices.Sort(due)
	// Never nil, so tests can compare with []string{}.
	return snapshot{due: due, ready: append([]string{}, s.ready...), errs: len(s.errs)}
}

// clock is the time source of the debounce, replaceable for tests.
type clock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() timer
}

// timer is the part of *time.Timer the watcher uses. After Stop or Reset
// returns, C delivers no tick from before the call (the Go 1.23 timer
// semantics); fire does not rely on it anyway.
type timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer() timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }
