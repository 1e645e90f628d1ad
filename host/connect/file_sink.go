package connect

import (
	"fmt"
	"os"
)

// CommittedFileSink is a file sink that takes part in the host's commits:
// after each Write the host calls Commit, which makes the file durable and
// returns its length, and stores that length with the records' removal
// from the sink's queue in one transaction. On restart the file is cut
// back to the last committed length, so records written after the last
// commit (a crash between write and commit) are removed and written again
// from the queue: each record is in the file exactly once.
type CommittedFileSink struct {
	*WriterSink
	f    *os.File
	path string
}

// OpenCommittedFileSink opens the sink file of cfg whose committed content
// is committed bytes long (0 for a new sink). A longer file is truncated
// to it; a shorter one is refused, because then records that were
// committed are gone (the file was cut or replaced outside flowhost). A
// sink that has committed nothing yet appends to an existing file, as
// [OpenFileSink] does, unless cfg.Truncate.
func OpenCommittedFileSink(cfg FileSinkConfig, committed int64, fresh bool) (s *CommittedFileSink, discarded int64, err error) {
	flags := os.O_CREATE | os.O_WRONLY
	if cfg.Truncate && fresh {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(cfg.Path, flags, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("file sink: %w", err)
	}
	fail := func(err error) (*CommittedFileSink, int64, error) {
		f.Close()
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("file sink: %w", err))
	}
	size := info.Size()
	switch {
	case fresh:
		committed = size // what was there before the sink's first record is the user's
	case size < committed:
		return fail(fmt.Errorf("file sink %s: the file has %d bytes, fewer than the %d already committed: it was cut or replaced outside flowhost; restore it, or start from a fresh data directory", cfg.Path, size, committed))
	case size > committed:
		if err := f.Truncate(committed); err != nil {
			return fail(fmt.Errorf("file sink %s: removing the %d uncommitted bytes after %d: %w", cfg.Path, size-committed, committed, err))
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("file sink %s: %w", cfg.Path, err))
		}
		discarded = size - committed
	}
	if _, err := f.Seek(committed, 0); err != nil {
		return fail(fmt.Errorf("file sink %s: %w", cfg.Path, err))
	}
	ws, err := NewWriterSink(f, cfg.Format)
	if err != nil {
		return fail(err)
	}
	ws.closer, ws.sync = f, f.Sync
	return &CommittedFileSink{WriterSink: ws, f: f, path: cfg.Path}, discarded, nil
}

// Commit syncs what Write wrote to disk and returns the file's length, the
// length to store as committed.
func (s *CommittedFileSink) Commit() (int64, error) {
	if err := s.f.Sync(); err != nil {
		return 0, fmt.Errorf("file sink %s: sync: %w", s.path, err)
	}
	off, err := s.f.Seek(0, 1)
	if err != nil {
		return 0, fmt.Errorf("file sink %s: %w", s.path, err)
	}
	return off, nil
}
