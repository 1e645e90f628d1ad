package engine

import (
	"fmt"
	"log/slog"
	"os"
	"path"
)

// MaxMemoryPages is the largest memory a 32-bit WebAssembly module can
// address: 65536 pages of 64 KiB, 4 GiB.
const MaxMemoryPages = 65536

// DefaultMaxResponseBytes is the response limit of a Config that sets none.
const DefaultMaxResponseBytes = 16 << 20

// Config configures an Engine. The zero value is the default: no
// compilation cache, memory limited only by the 4 GiB of wasm32, responses
// up to DefaultMaxResponseBytes, guest logs discarded and no capabilities.
// With methods return modified copies and never change the receiver, so a
// Config can be shared and extended freely.
type Config struct {
	cacheDir         string
	memoryLimitPages uint32
	maxResponseBytes uint32
	logger           *slog.Logger
	caps             Capabilities
	uninterruptible  bool
}

// NewConfig returns the default configuration, the same as Config{}.
func NewConfig() Config { return Config{} }

// WithCompilationCacheDir returns a copy that keeps compiled native code in
// dir (created if missing), so that compiling the same module again, in
// this process or after a restart, skips compilation. Engines of the same
// version may share a directory.
func (c Config) WithCompilationCacheDir(dir string) Config {
	c.cacheDir = dir
	return c
}

// WithMemoryLimitPages returns a copy that limits every instance's linear
// memory to pages of 64 KiB. A guest's attempt to grow beyond it fails;
// a module whose declared minimum or maximum exceeds it fails to compile.
// Zero means MaxMemoryPages.
func (c Config) WithMemoryLimitPages(pages uint32) Config {
	c.memoryLimitPages = pages
	return c
}

// WithMaxResponseBytes returns a copy that refuses responses and init
// results longer than n bytes with ErrResponseTooLarge. Zero means
// DefaultMaxResponseBytes.
func (c Config) WithMaxResponseBytes(n uint32) Config {
	c.maxResponseBytes = n
	return c
}

// WithLogger returns a copy whose guests log to l: flowhost.log lines at
// the level the guest chose, stdout lines at info and stderr lines at warn,
// each with a "plugin" attribute. A nil logger discards guest logs.
func (c Config) WithLogger(l *slog.Logger) Config {
	c.logger = l
	return c
}

// WithCapabilities returns a copy that grants caps to every guest of the
// engine, replacing earlier grants.
func (c Config) WithCapabilities(caps Capabilities) Config {
	c.caps = caps
	return c
}

// WithInterruptible returns a copy whose guests stop when the context of
// a call is done (true, the default) or run to completion (false).
//
// Stopping a guest that never calls out needs wazero's close-on-done mode,
// which checks for cancellation on every loop back-edge and function entry
// of the guest: measured at about 6x on loop-heavy guest code (echo of
// 100 KB: 0.69 ms against 4.4 ms per call). A host that sets no deadline
// on a plugin's calls gains nothing from it and may turn it off.
func (c Config) WithInterruptible(on bool) Config {
	c.uninterruptible = !on
	return c
}

// Interruptible reports whether guests stop when a call's context is done.
func (c Config) Interruptible() bool { return !c.uninterruptible }

// Capabilities returns the capabilities the configuration grants.
func (c Config) Capabilities() Capabilities { return c.caps }

// validate reports settings no engine can honour, before any resource is
// created.
func (c Config) validate() error {
	if c.memoryLimitPages > MaxMemoryPages {
		return fmt.Errorf("engine config: memory limit of %d pages exceeds the wasm32 maximum of %d", c.memoryLimitPages, MaxMemoryPages)
	}
	return c.caps.validate()
}

func (c Config) responseLimit() uint32 {
	if c.maxResponseBytes == 0 {
		return DefaultMaxResponseBytes
	}
	return c.maxResponseBytes
}

func (c Config) guestLogger() *slog.Logger {
	if c.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.logger
}

// Capabilities are what a guest may reach beyond its own memory. The zero
// value grants nothing: no file system, no environment, no arguments, a
// fake clock that starts at a fixed instant and a deterministic random
// source. Without a grant, WASI imports that could reach more (sockets,
// path_open and the other path functions) are refused at Compile. With
// methods return modified copies and never change the receiver.
type Capabilities struct {
	clock bool
	dirs  []DirMount
}

// DirMount is a host directory made visible, read-only, inside the guest.
type DirMount struct {
	// HostPath is the directory on the host.
	HostPath string
	// GuestPath is the absolute path at which the guest sees it.
	GuestPath string
}

// WithClock returns a copy that gives guests the real wall clock and
// monotonic clock instead of the fake ones.
func (c Capabilities) WithClock() Capabilities {
	c.clock = true
	return c
}

// WithReadOnlyDir returns a copy that mounts the host directory hostPath
// read-only at guestPath in every guest and allows the WASI path functions
// needed to open files in it.
func (c Capabilities) WithReadOnlyDir(hostPath, guestPath string) Capabilities {
	c.dirs = append(c.dirs[:len(c.dirs):len(c.dirs)], DirMount{HostPath: hostPath, GuestPath: guestPath})
	return c
}

// Clock reports whether guests get the real clocks.
func (c Capabilities) Clock() bool { return c.clock }

// ReadOnlyDirs returns the granted directory mounts, in grant order.
func (c Capabilities) ReadOnlyDirs() []DirMount {
	return append([]DirMount(nil), c.dirs...)
}

// validate checks every mount names an existing host directory and an
// absolute, unique guest path, so a bad grant fails at engine creation and
// not inside a guest.
func (c Capabilities) validate() error {
	seen := make(map[string]bool, len(c.dirs))
	for _, d := range c.dirs {
		if !path.IsAbs(d.GuestPath) {
			return fmt.Errorf("capabilities: read-only dir %q: guest path %q is not absolute", d.HostPath, d.GuestPath)
		}
		if seen[path.Clean(d.GuestPath)] {
			return fmt.Errorf("capabilities: read-only dir %q: guest path %q is mounted twice", d.HostPath, d.GuestPath)
		}
		seen[path.Clean(d.GuestPath)] = true
		fi, err := os.Stat(d.HostPath)
		if err != nil {
			return fmt.Errorf("capabilities: read-only dir: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("capabilities: read-only dir %q is not a directory", d.HostPath)
		}
	}
	return nil
}
