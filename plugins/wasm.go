package plugins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMaxWasmBytes bounds the size of a module file that ReadWasm and
// Validate read when Plugin.MaxWasmBytes is zero.
const DefaultMaxWasmBytes = 256 << 20

// Errors that classify a module file; test for them with errors.Is. The
// errors returned wrap them with the file and the details.
var (
	// ErrNotWasm means the file is not a WebAssembly core module binary.
	ErrNotWasm = errors.New("not a WebAssembly binary")
	// ErrTruncated means the file ends inside the header or inside a section.
	ErrTruncated = errors.New("truncated WebAssembly binary")
	// ErrTooLarge means the file is larger than the plugin's size limit.
	ErrTooLarge = errors.New("WebAssembly file too large")
	// ErrOutsidePluginDir means a path of the plugin leads, through symbolic
	// links, out of the plugin directory.
	ErrOutsidePluginDir = errors.New("path leads outside the plugin directory")
)

// ChecksumError reports a module whose SHA-256 differs from its manifest's.
type ChecksumError struct {
	// File is the module file; Manifest the manifest that names it.
	File, Manifest string
	// Want is the manifest's checksum, Got the file's; both lowercase hex.
	Want, Got string
}

// Error names the file, the manifest and both checksums.
func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: sha256 mismatch: %s says %s, the file has %s", e.File, e.Manifest, e.Want, e.Got)
}

// Plugin is one discovered plugin directory. A Plugin is not modified by
// this package after it is returned and is safe for concurrent reads; a
// caller that sets MaxWasmBytes does so before sharing it.
type Plugin struct {
	// Manifest is the parsed plugin.yaml.
	Manifest *Manifest
	// Dir is the plugin directory, cleaned, as it was given (relative paths
	// stay relative so that messages show what the user typed).
	Dir string
	// WasmPath is Dir joined with Manifest.Wasm.
	WasmPath string
	// MaxWasmBytes bounds the module file ReadWasm and Validate read;
	// zero means DefaultMaxWasmBytes.
	MaxWasmBytes int64
}

// ManifestPath returns the path of the plugin's manifest.
func (p *Plugin) ManifestPath() string {
	return filepath.Join(p.Dir, ManifestFile)
}

func (p *Plugin) maxWasmBytes() int64 {
	if p.MaxWasmBytes > 0 {
		return p.MaxWasmBytes
	}
	return DefaultMaxWasmBytes
}

// ReadWasm reads the plugin's module and returns its bytes only when the
// file stays inside the plugin directory after resolving symbolic links,
// is a regular file no larger than the size limit, is framed as a
// WebAssembly core module (header and section sizes; the contents are left
// to the engine) and has the manifest's SHA-256. Errors name the file and
// wrap ErrOutsidePluginDir, ErrTooLarge, ErrNotWasm, ErrTruncated, or are a
// *ChecksumError.
func (p *Plugin) ReadWasm() ([]byte, error) {
	if err := p.checkInside(p.WasmPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &explainedError{msg: fmt.Sprintf("%s (named in %s)", err, p.ManifestPath()), err: err}
		}
		return nil, err
	}
	data, err := readBounded(p.WasmPath, p.maxWasmBytes())
	if err != nil {
		return nil, err
	}
	if err := checkWasmFraming(p.WasmPath, data); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != p.Manifest.SHA256 {
		return nil, &ChecksumError{File: p.WasmPath, Manifest: p.ManifestPath(), Want: p.Manifest.SHA256, Got: got}
	}
	return data, nil
}

// checkInside refuses target when, after resolving symbolic links, it is
// not inside the plugin directory: a tenant's plugin directory must not
// give its guest, or its error messages, another tenant's files.
func (p *Plugin) checkInside(target string) error {
	root, err := filepath.EvalSymlinks(p.Dir)
	if err != nil {
		return fmt.Errorf("plugin directory %s: %w", p.Dir, err)
	}
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &explainedError{msg: target + " does not exist", err: err}
		}
		return err
	}
	rel, err := filepath.Rel(root, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s: %w %s (it resolves to %s)", target, ErrOutsidePluginDir, p.Dir, resolved)
	}
	return nil
}

// explainedError replaces the text of err, keeping it for errors.Is.
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a file", path)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	tooLarge := func(size string) error {
		return fmt.Errorf("%s: %w: %s bytes, the limit is %d bytes", path, ErrTooLarge, size, limit)
	}
	if info.Size() > limit {
		return nil, tooLarge(fmt.Sprint(info.Size()))
	}
	// The file may grow between Stat and Read; the limit holds regardless.
	// Sized from Stat so that a module is read without regrowing; the
	// extra byte lets ReadFrom see EOF without growing the buffer.
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, tooLarge(fmt.Sprintf("more than %d", limit))
	}
	return data, nil
}

// wasmHeader is the magic "\0asm" followed by the core module version 1.
var wasmHeader = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory",
	"global", "export", "start", "element", "code", "data", "data count", "tag"}

// checkWasmFraming checks the header and that every section's declared
// size fits in the file, which is what an engine-free check can say about
// a module: a file cut short almost always ends inside a section.
func checkWasmFraming(path string, data []byte) error {
	if n := min(len(data), 4); !bytes.Equal(data[:n], wasmHeader[:n]) {
		return fmt.Errorf("%s: %w: it starts with % x, a module starts with 00 61 73 6d (\\0asm)%s",
			path, ErrNotWasm, data[:n], sniff(data))
	}
	if len(data) < len(wasmHeader) {
		return fmt.Errorf("%s: %w: %d bytes, the header alone is %d", path, ErrTruncated, len(data), len(wasmHeader))
	}
	if !bytes.Equal(data[4:8], wasmHeader[4:]) {
		if data[4] == 0x0d && data[5] == 0x00 && data[6] == 0x01 && data[7] == 0x00 {
			return fmt.Errorf("%s: %w: it is a WebAssembly component; flowhost runs core modules", path, ErrNotWasm)
		}
		return fmt.Errorf("%s: %w: version % x, flowhost reads version 1 (01 00 00 00)", path, ErrNotWasm, data[4:8])
	}
	for off := len(wasmHeader); off < len(data); {
		start := off
		id := data[off]
		off++
		size, n := uleb32(data[off:])
		name := "unknown"
		if int(id) < len(sectionNames) {
			name = sectionNames[id]
		}
		switch {
		case n == 0:
			return fmt.Errorf("%s: %w: the size of section %d (%s) at offset %d is cut off", path, ErrTruncated, id, name, start)
		case n < 0:
			return fmt.Errorf("%s: %w: section %d (%s) at offset %d has a malformed size", path, ErrNotWasm, id, name, start)
		}
		off += n
		if uint64(size) > uint64(len(data)-off) {
			return fmt.Errorf("%s: %w: section %d (%s) at offset %d declares %d bytes, only %d remain",
				path, ErrTruncated, id, name, start, size, len(data)-off)
		}
		off += int(size)
	}
	return nil
}

// uleb32 decodes an unsigned LEB128 u32. It returns n = 0 when b ends
// before the number does and n < 0 when the encoding is too long.
func uleb32(b []byte) (uint32, int) {
	var v uint32
	for i := range 5 {
		if i == len(b) {
			return 0, 0
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, -1
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, -1
}

// sniff names common files mistaken for a module.
func sniff(data []byte) string {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	switch {
	case bytes.HasPrefix(trimmed, []byte("(module")) || bytes.HasPrefix(trimmed, []byte(";;")):
		return "; it looks like WebAssembly text (.wat), compile it with wat2wasm"
	case bytes.HasPrefix(data, []byte("\x7fELF")):
		return "; it is an ELF executable"
	case bytes.HasPrefix(data, []byte("\x1f\x8b")):
		return "; it is gzip-compressed"
	case bytes.HasPrefix(trimmed, []byte("<")):
		return "; it looks like HTML or XML, perhaps an error page saved by a download"
	}
	return ""
}

// Checksum returns the SHA-256 of the file at path as lowercase hex, the
// form a manifest's sha256 field takes. It streams the file, so it is not
// bounded by a size limit.
func Checksum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
