package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A savepoint is a consistent copy of a store, taken while it runs or not:
// a directory holding the copy (db/) and its description. It is not a data
// directory: a run starts from it with [RestoreSavepoint], which copies it
// into one, so that the savepoint can be restored again. Every store commit is atomic, and
// the copy holds exactly the commits made before it was taken, so a run
// started from it is in the same state as a run that was stopped (or
// killed) at that moment: what a restart after a crash resumes from.

// savepointName is the file that describes a savepoint.
const savepointName = "flowhost-savepoint.json"

// SavepointInfo describes a savepoint.
type SavepointInfo struct {
	// Format is the store format of the copy.
	Format int `json:"format"`
	// Created is when the copy was taken.
	Created time.Time `json:"created"`
	// DataDir is the data directory it was taken from.
	DataDir string `json:"data_dir"`
	// Pipeline is the fingerprint of the pipeline that wrote the store
	// (see [Store.Bind]); empty if it never ran one.
	Pipeline string `json:"pipeline,omitempty"`
}

// HasStore reports whether dir holds a store (its marker file), without
// creating anything.
func HasStore(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, markerName))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, dirError(dir, err)
}

// ErrNotEmpty is wrapped by the error of a savepoint or a restore whose
// target directory already holds something.
var ErrNotEmpty = errors.New("is not empty")

// checkEmptyDir fails unless dir is absent or an empty directory.
func checkEmptyDir(dir, what string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s %s: %w", what, dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%s %s %w (it holds %s and %d more): choose a new or empty directory", what, dir, ErrNotEmpty, entries[0].Name(), len(entries)-1)
	}
	return nil
}

// Savepoint writes a consistent copy of the store into dir, which must not
// exist or be empty. It is cheap: pebble hard-links the immutable table
// files when dir is on the same file system, and copies only the log and
// manifest. The running pipeline is not paused.
func (s *Store) Savepoint(dir string) (SavepointInfo, error) {
	if err := checkEmptyDir(dir, "savepoint directory"); err != nil {
		return SavepointInfo{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return SavepointInfo{}, fmt.Errorf("savepoint directory %s: %w", dir, err)
	}
	info := SavepointInfo{Format: FormatVersion, Created: time.Now().UTC(), DataDir: s.dir}
	if v, ok, err := s.get(newKey(tableMeta).rest("pipeline"), "pipeline fingerprint"); err != nil {
		return SavepointInfo{}, err
	} else if ok {
		info.Pipeline = string(v)
	}
	if err := s.db.Checkpoint(filepath.Join(dir, "db"), pebble.WithFlushedWAL()); err != nil {
		return SavepointInfo{}, fmt.Errorf("savepoint of %s into %s: %w", s.dir, dir, err)
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return SavepointInfo{}, err
	}
	if err := writeFileSync(filepath.Join(dir, savepointName), append(b, '\n')); err != nil {
		return SavepointInfo{}, fmt.Errorf("savepoint %s: %w", dir, err)
	}
	return info, syncDir(dir)
}

// ReadSavepoint checks that dir is a savepoint and returns its description.
func ReadSavepoint(dir string) (SavepointInfo, error) {
	var info SavepointInfo
	b, err := os.ReadFile(filepath.Join(dir, savepointName))
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("%s is not a savepoint: it has no %s (make one with `flowhost savepoint create`)", dir, savepointName)
	}
	if err != nil {
		return info, fmt.Errorf("savepoint %s: %w", dir, err)
	}
	if info, err = parseSavepointInfo(dir, b); err != nil {
		return info, err
	}
	if fi, err := os.Stat(filepath.Join(dir, "db")); err != nil || !fi.IsDir() {
		return info, fmt.Errorf("savepoint %s: its store (db/) is missing", dir)
	}
	return info, nil
}

// parseSavepointInfo reads the description of the savepoint in dir: a JSON
// object of SavepointInfo's fields only, in this store format.
func parseSavepointInfo(dir string, b []byte) (SavepointInfo, error) {
	var info SavepointInfo
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		return info, fmt.Errorf("savepoint %s: %s: %w", dir, savepointName, err)
	}
	if dec.More() {
		return info, fmt.Errorf("savepoint %s: %s: more than one JSON value", dir, savepointName)
	}
	if info.Format != FormatVersion && info.Format != upgradableFormat {
		return info, fmt.Errorf("savepoint %s was written in store format %d; this flowhost reads formats %d and %d", dir, info.Format, upgradableFormat, FormatVersion)
	}
	return info, nil
}

// RestoreSavepoint copies the savepoint in savepoint into the data
// directory dataDir, which must be absent or empty unless replace: then
// the store it holds (which no process may be using) is deleted first.
// The savepoint itself is left as it was, and can be restored again.
func RestoreSavepoint(savepoint, dataDir string, replace bool) (SavepointInfo, error) {
	return RestoreSavepointProgress(savepoint, dataDir, replace, nil)
}

// RestoreSavepointProgress is [RestoreSavepoint] telling progress (nil:
// no one) how far the copy has got: done of total bytes of the
// savepoint's store, from 0 until done equals total once every file is
// copied. It is called from the caller's goroutine.
func RestoreSavepointProgress(savepoint, dataDir string, replace bool, progress func(done, total int64)) (SavepointInfo, error) {
	info, err := ReadSavepoint(savepoint)
	if err != nil {
		return info, err
	}
	if err := checkEmptyDir(dataDir, "data directory"); err != nil {
		if !replace {
			return info, fmt.Errorf("restoring savepoint %s: %w, or give --replace-data-dir to delete what it holds", savepoint, err)
		}
		if err := clearDataDir(dataDir); err != nil {
			return info, err
		}
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return info, dirError(dataDir, err)
	}
	// Copied under a temporary name and renamed: a data directory never
	// holds half a store under the name Open reads.
	tmp := filepath.Join(dataDir, "db.restoring")
	if err := os.RemoveAll(tmp); err != nil {
		return info, dirError(dataDir, err)
	}
	if err := copyTree(filepath.Join(savepoint, "db"), tmp, progress); err != nil {
		return info, fmt.Errorf("restoring savepoint %s into %s: %w", savepoint, dataDir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, "db")); err != nil {
		return info, dirError(dataDir, err)
	}
	if err := writeMarker(vfs.Default, filepath.Join(dataDir, markerName)); err != nil {
		return info, dirError(dataDir, err)
	}
	return info, syncDir(dataDir)
}

// clearDataDir deletes a data directory's contents, refusing one that a
// running flowhost holds. A damaged or missing store is replaced too:
// that is what a restore is for.
func clearDataDir(dir string) error {
	if ok, err := HasStore(dir); err != nil {
		return err
	} else if ok {
		s, err := Open(dir, Options{})
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("not replacing data directory %s: %w", dir, err)
		}
		if err == nil {
			if err := s.Close(); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return dirError(dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return dirError(dir, err)
		}
	}
	return nil
}

// copyTree copies the regular files of directory src (one level: a
// pebble directory has no subdirectories) into a new directory dst,
// telling progress (when set) the bytes copied of the files' sizes.
func copyTree(src, dst string, progress func(done, total int64)) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", filepath.Join(src, e.Name()))
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	var done int64
	if progress != nil {
		progress(0, total)
	}
	for _, e := range entries {
		n, err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		if err != nil {
			return err
		}
		if done += n; progress != nil {
			// A file that grew since it was measured (a savepoint is
			// not written to, but nothing stops it) keeps done <= total.
			total = max(total, done)
			progress(done, total)
		}
	}
	return syncDir(dst)
}

// copyFile copies src to a new file dst and returns the bytes copied.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err != nil {
		_ = out.Close()
		return n, err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return n, err
	}
	return n, out.Close()
}

func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
