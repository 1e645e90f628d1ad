// Package store is flowhost's embedded transactional store: the durable
// source queues, the queues between computations (Flow's output buffers),
// keyed state, pending timers, positions and watermarks of one pipeline,
// in one pebble database under a data directory.
//
// # Guarantees
//
// A [Batch] commits atomically and durably: when [Batch.Commit] returns nil
// the batch is on disk (fsync) and survives a crash or a power cut; when it
// returns an error, or the process dies before it returns, none of the
// batch is visible after a restart. Concurrent commits from several
// goroutines are grouped into one fsync by pebble, so many partitions
// committing at once cost about one disk flush.
//
// Every block pebble writes carries a checksum. A store whose files were
// damaged is reported as corrupted ([ErrCorrupted]) when the damaged part
// is read, never taken for an empty one: a data directory that held a
// store and lost it ([ErrMissing]) is refused, not recreated.
//
// One process holds a data directory at a time; a second one gets
// [ErrLocked].
//
// # One copy of a source record
//
// A source record is stored once, in its partition's source log. A queue
// entry routing it to a computation or a sink holds only its position,
// routing key and timestamps; recovery reads the payload back from the
// log, and retention keeps every record a queue still refers to. Records
// and queued messages use the compact binary codec of codec.go; positions
// and metadata, written once per batch, stay CBOR.
//
// # Why pebble
//
// flowhost's commits are many small synced writes from several partitions
// at once, and its queues are appended at one end and deleted at the
// other. Pebble groups concurrent synced commits into one WAL flush,
// deletes a consumed range with one tombstone, and checksums every block;
// bbolt serialises writers (one fsync each), rewrites B+tree pages on every
// commit and does not checksum data pages. The measured difference on this
// workload is in host/store/internal/enginebench.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatVersion is the version of the store's key and value layout.
// Format 2 stores source records and queued messages in the compact codec
// of codec.go instead of CBOR. Format 3 adds the V2 value layouts and
// sinks' queues kept as runs taken by TaskId (tableTaken), which a
// flowhost of format 2 cannot read; it reads every format 2 value as it
// is, so a format 2 store is upgraded in place when opened. Any other
// format is refused at Open (no migration).
const FormatVersion = 3

// upgradableFormat is the older format a store is upgraded from.
const upgradableFormat = 2

var (
	// ErrLocked is returned by Open when another process holds the data
	// directory.
	ErrLocked = errors.New("store: data directory is in use by another flowhost process")
	// ErrMissing is returned by Open when the data directory says it held a
	// store (its marker file exists) but the store's files are gone: the
	// host refuses to start empty, which would process everything again.
	ErrMissing = errors.New("store: the data directory's store is missing")
	// ErrCorrupted is wrapped by every error caused by damaged store files.
	ErrCorrupted = errors.New("store: corrupted")
	// ErrPipelineMismatch is returned by [Store.Bind] when the data
	// directory belongs to another pipeline.
	ErrPipelineMismatch = errors.New("store: the data directory belongs to another pipeline")
	// ErrNoStore is returned by Open with [Options.ReadOnly] when the
	// data directory does not exist or holds no store: nothing was ever
	// committed there.
	ErrNoStore = errors.New("store: no flowhost store in the data directory")
)

// markerName is the file that records that a data directory holds a store.
// It is written after the store's first commit and never removed, so a
// store that disappears (deleted, unmounted) is noticed.
const markerName = "flowhost-store.json"

type marker struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
}

// Options configure [Open]. The zero value is the production setting.
type Options struct {
	// FS replaces the file system; tests inject faults with it (pebble's
	// vfs/errorfs). Nil is the operating system's.
	FS vfs.FS
	// CacheBytes is the block cache size; 0 means 32 MiB.
	CacheBytes int64
	// OnFatal is called when the store cannot go on (a commit that failed
	// half-way, a failed MANIFEST write: pebble's fatal errors) and must
	// not return. The default prints the error, naming the data directory,
	// and exits with status 70: what was committed before is intact, and
	// a restart resumes from it. Tests run such cases in a child process.
	OnFatal func(msg string)
	// Changelog, if set, makes the store a cache of the log (see
	// [Changelog]): Open rebuilds it from the log, into dir, which must
	// hold no store, and every commit goes to the log before the cache.
	// Any FS will do for the cache, vfs.NewMem() included. The store
	// owns the log from the call on: its Close, or a failed Open, closes
	// it.
	Changelog Changelog
	// ReadOnly opens an existing store to read it (flowhost inspect):
	// nothing is created or written, and a directory that does not exist
	// or holds no store is refused with [ErrNoStore]. Writes through a
	// read-only store fail.
	ReadOnly bool
}

// Store is an open data directory. Its methods are safe for concurrent use.
type Store struct {
	db    *pebble.DB
	dir   string
	cache *pebble.Cache

	log        Changelog // nil: pebble's own WAL is the durable copy
	logMu      sync.Mutex
	logPending []logged
	logLeading bool

	closeOnce sync.Once
}

// DefaultDataDir returns the data directory of pipeline name when the user
// gives none: $XDG_STATE_HOME/flowhost/NAME, or ~/.local/state/flowhost/NAME.
func DefaultDataDir(name string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no data directory given and no home directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "flowhost", name), nil
}

// Open opens the store in dir, creating it (and dir) unless o.ReadOnly.
func Open(dir string, o Options) (*Store, error) {
	s, err := open(dir, o)
	if err != nil && o.Changelog != nil {
		err = errors.Join(err, o.Changelog.Close())
	}
	return s, err
}

func open(dir string, o Options) (*Store, error) {
	fsys := o.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	if o.ReadOnly {
		if err := checkHoldsStore(fsys, dir); err != nil {
			return nil, err
		}
	} else if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, dirError(dir, err)
	}
	markerPath := fsys.PathJoin(dir, markerName)
	hadStore := false
	if _, err := fsys.Stat(markerPath); err == nil {
		hadStore = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, dirError(dir, err)
	}
	if hadStore && o.Changelog != nil {
		return nil, fmt.Errorf("store: %s already holds a store; the cache of a changelog is rebuilt from the log into an empty directory", dir)
	}
	cacheBytes := o.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = 32 << 20
	}
	cache := pebble.NewCache(cacheBytes)
	opts := &pebble.Options{
		FS:               fsys,
		Cache:            cache,
		ErrorIfNotExists: hadStore,
		ReadOnly:         o.ReadOnly,
		Logger:           fatalLogger{dir: dir, onFatal: o.OnFatal},
		// Damage found while reading is returned to the reader as an
		// error (wrapped in ErrCorrupted); pebble's default would end
		// the process from inside the read.
		EventListener: &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}},
		// Queues are written and deleted within seconds: a large memtable
		// lets most of them meet their deletion before a flush, and
		// single deletes (Batch.Dequeue) then leave nothing to write.
		MemTableSize: 64 << 20,
		// The cache of a changelog needs no WAL: the log is the durable
		// copy, and the cache is rebuilt from it on every Open.
		DisableWAL: o.Changelog != nil,
	}
	for i := range opts.Levels {
		// Payloads are small and short-lived: compressing them costs more
		// CPU than the disk it saves. A bloom filter answers "no state
		// for this key" without reading blocks.
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	dbDir := fsys.PathJoin(dir, "db")
	db, err := pebble.Open(dbDir, opts)
	if err != nil {
		cache.Unref()
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), strings.Contains(err.Error(), "lock held"):
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		case hadStore && errors.Is(err, fs.ErrNotExist), hadStore && isNotExistText(err):
			return nil, fmt.Errorf("%w: %s has %s but no store files (%v); restore them, or remove the directory to start afresh and process everything again", ErrMissing, dir, markerName, err)
		case pebble.IsCorruptionError(err):
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupted, dbDir, err)
		}
		return nil, dirError(dir, err)
	}
	s := &Store{db: db, dir: dir, cache: cache}
	if o.Changelog != nil {
		s.log = o.Changelog
		restored, err := s.restoreFrom(o.Changelog)
		if err != nil {
			_ = s.closeCache()
			return nil, err
		}
		hadStore = restored > 0
	}
	if err := s.checkFormat(hadStore); err != nil {
		_ = s.closeCache()
		return nil, err
	}
	if !hadStore {
		if err := writeMarker(fsys, markerPath); err != nil {
			_ = s.closeCache()
			return nil, dirError(dir, err)
		}
	}
	return s, nil
}

// checkHoldsStore refuses, with [ErrNoStore], a dir that does not exist,
// is not a directory, or has no store marker (no store was ever committed
// there), without creating anything.
func checkHoldsStore(fsys vfs.FS, dir string) error {
	info, err := fsys.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist (no pipeline has run with this data directory)", ErrNoStore, dir)
	case err != nil:
		return dirError(dir, err)
	case !info.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrNoStore, dir)
	}
	if _, err := fsys.Stat(fsys.PathJoin(dir, markerName)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s has no %s (no pipeline has committed to this data directory)", ErrNoStore, dir, markerName)
	} else if err != nil {
		return dirError(dir, err)
	}
	return nil
}

// isNotExistText recognises pebble's "does not exist" for a missing
// database, which it reports without wrapping fs.ErrNotExist.
func isNotExistText(err error) bool {
	if err == nil {
		return false
	}
	text := err.Error()
	return strings.Contains(text, "does not exist") || strings.Contains(text, "no such file")
}

// dirError names the data directory and, for the usual causes, what to do.
func dirError(dir string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("store: data directory %s is on a read-only file system: %w", dir, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("store: data directory %s is not writable: %w", dir, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("store: no space left for data directory %s: %w", dir, err)
	}
	return fmt.Errorf("store: data directory %s: %w", dir, err)
}

func writeMarker(fsys vfs.FS, path string) error {
	b, err := json.Marshal(marker{Format: FormatVersion, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, path)
}

var metaFormat = []byte("format")

// checkFormat writes the format version into a new store and checks it in
// an existing one.
func (s *Store) checkFormat(existing bool) error {
	key := newKey(tableMeta).rest(string(metaFormat))
	v, closer, err := s.db.Get(key)
	var format []byte
	found := err == nil
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if existing {
			return fmt.Errorf("%w: %s: the format record is missing", ErrCorrupted, s.dir)
		}
	case err != nil:
		return s.readError("format", err)
	default:
		format = slices.Clone(v)
		closer.Close()
	}
	switch {
	case len(format) == 1 && format[0] == FormatVersion:
		return nil
	case !found, len(format) == 1 && format[0] == upgradableFormat:
		// A new store, or one that from now on holds what only this
		// format reads.
		b := s.db.NewBatch()
		_ = b.Set(key, []byte{FormatVersion}, nil)
		return s.commit(b)
	}
	return fmt.Errorf("store: %s was written in store format %v; this flowhost reads formats %d and %d only (there is no migration): finish or drain the pipeline with the flowhost that wrote it, or remove the directory to start afresh and process everything again", s.dir, format, upgradableFormat, FormatVersion)
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the directory; what was not committed is not written. It
// is idempotent.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		err = s.closeCache()
		if s.log != nil {
			err = errors.Join(err, s.log.Close())
		}
	})
	return err
}

// closeCache closes pebble; Open's failures call it alone, since Open
// closes the changelog itself.
func (s *Store) closeCache() error {
	err := s.db.Close()
	s.cache.Unref()
	return err
}

// Bind ties the store to a pipeline: the first call records fingerprint,
// later ones (after restarts) check it. A fingerprint names what a store's
// contents depend on (streams, computations, partition counts), so that a
// pipeline whose shape changed is refused rather than resumed wrongly.
func (s *Store) Bind(fingerprint string) error {
	key := newKey(tableMeta).rest("pipeline")
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		b := s.db.NewBatch()
		_ = b.Set(key, []byte(fingerprint), nil)
		return s.commit(b)
	}
	if err != nil {
		return s.readError("pipeline fingerprint", err)
	}
	defer closer.Close()
	if string(v) != fingerprint {
		return fmt.Errorf("%w: %s was written by a pipeline of shape\n  %s\nnot\n  %s\n(use another --data-dir, or remove it to start afresh)", ErrPipelineMismatch, s.dir, v, fingerprint)
	}
	return nil
}

func (s *Store) commit(b *pebble.Batch) error {
	defer b.Close()
	if s.log != nil {
		return s.commitLogged(b)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.writeError(err)
	}
	return nil
}

func (s *Store) writeError(err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s: %v", ErrCorrupted, s.dir, err)
	}
	return dirError(s.dir, fmt.Errorf("commit: %w", err))
}

func (s *Store) readError(what string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s: reading %s: %v", ErrCorrupted, s.dir, what, err)
	}
	return fmt.Errorf("store: %s: reading %s: %w", s.dir, what, err)
}

// Verify reads every record of the store, checking every block's checksum,
// and returns the first damage found (wrapping [ErrCorrupted]).
func (s *Store) Verify() (records int, err error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return 0, s.readError("all records", err)
	}
	for it.First(); it.Valid(); it.Next() {
		if _, err := it.ValueAndErr(); err != nil {
			_ = it.Close()
			return records, s.readError("all records", err)
		}
		records++
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return records, s.readError("all records", err)
	}
	return records, it.Close()
}

// fatalLogger keeps pebble's informational chatter out of flowhost's logs
// (errors reach callers as returned errors) and turns its fatal errors
// into Options.OnFatal.
type fatalLogger struct {
	dir     string
	onFatal func(string)
}

func (fatalLogger) Infof(string, ...interface{})  {}
func (fatalLogger) Errorf(string, ...interface{}) {}
func (l fatalLogger) Fatalf(format string, args ...interface{}) {
	msg := fmt.Sprintf("store: data directory %s: fatal: %s", l.dir, fmt.Sprintf(format, args...))
	if l.onFatal != nil {
		l.onFatal(msg)
	}
	fmt.Fprintln(os.Stderr, "flowhost:", msg)
	fmt.Fprintln(os.Stderr, "flowhost: what was committed before is intact; fix the cause and run again to resume")
	os.Exit(70)
}

// Written is what a store has written to disk since it was opened.
type Written struct {
	// WAL is the bytes appended to the write-ahead log: every committed
	// batch, once.
	WAL uint64
	// Tables is the bytes of tables written by flushes and compactions
	// (what outlived the memtable, once per level it passed through).
	Tables uint64
}

// Total is all bytes written.
func (w Written) Total() uint64 { return w.WAL + w.Tables }

// Written returns how many bytes the store has written to disk since it
// was opened (pebble's metrics). Benchmarks divide it by the records
// processed.
func (s *Store) Written() Written {
	m := s.db.Metrics()
	t := m.Total()
	all := t.TableBytesFlushed + t.TableBytesCompacted + t.BlobBytesFlushed + t.BlobBytesCompacted
	// Total counts the WAL as flushed into level 0; Tables excludes it.
	return Written{WAL: m.WAL.BytesWritten, Tables: all - t.TableBytesIn}
}
