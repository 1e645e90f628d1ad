package plugins

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/flowhost/flowhost/abi"
)

// ManifestFile is the name of the manifest inside every plugin directory.
const ManifestFile = "plugin.yaml"

// Kind is a computation kind a plugin can serve (spec/flow-reference.md,
// "Computation kinds").
type Kind string

const (
	// KindTransform is arbitrary, possibly stateful logic whose outputs are
	// materialized and stamped with the time they were created.
	KindTransform Kind = "transform"
	// KindMap is a deterministic, stateless per-message map whose outputs
	// inherit the AlignmentTimestamp of their single parent.
	KindMap Kind = "map"
)

// Engine names the WebAssembly engine a plugin asks to run on.
type Engine string

const (
	// EngineDefault (no engine named) leaves the choice to the host: a
	// flowhost built with cgo runs such plugins on wasmtime, one without
	// on wazero (see the host's README, "Which engine is the default").
	EngineDefault Engine = ""
	// EngineWazero is the pure-Go engine: no cgo, the cheapest calls on
	// tiny batches without limits.
	EngineWazero Engine = "wazero"
	// EngineWasmtime is the second engine (fuel and epoch limits).
	EngineWasmtime Engine = "wasmtime"
)

// Limits a manifest asks for. A zero field means the manifest sets no limit
// of its own; the host always applies the smaller of the manifest's value
// and its tenant or host policy, so a manifest can only tighten limits.
type Limits struct {
	// MemoryPages caps the guest's linear memory in 64 KiB pages, 1..65536.
	MemoryPages uint32
	// BatchTimeout caps the CPU and wall time the guest may spend on one batch.
	BatchTimeout time.Duration
	// MaxResponseBytes caps the size of one encoded response, 1 byte..4 GiB.
	MaxResponseBytes int64
}

// Capabilities a manifest grants its guest. The zero value grants nothing.
type Capabilities struct {
	// Clock gives the guest the real wall and monotonic clocks; without it
	// the guest sees no real time.
	Clock bool
	// ReadOnlyDirs are directories, relative to the plugin directory and
	// inside it, that the host mounts read-only into the guest. Each entry
	// is cleaned and slash-separated.
	ReadOnlyDirs []string
}

// Manifest is a parsed and checked plugin.yaml. A Manifest returned by
// [ParseManifest] satisfies every rule in README.md: required fields are
// present, ABI equals abi.Version, Wasm stays inside the plugin directory,
// SHA256 is 64 lowercase hex digits, Kinds is non-empty without repeats and
// Engine is a known engine or EngineDefault when the manifest names none.
type Manifest struct {
	// Name identifies the plugin in pipelines; unique within a [Catalog].
	Name string
	// Version is a semantic version, MAJOR.MINOR.PATCH[-PRE][+BUILD].
	Version string
	// ABI is the flowhost ABI version the module implements.
	ABI int
	// Wasm is the module's path relative to the plugin directory, cleaned
	// and slash-separated.
	Wasm string
	// SHA256 is the expected checksum of the module, lowercase hex.
	SHA256 string
	// Kinds are the computation kinds the plugin can serve.
	Kinds []Kind
	// Description is free text for people.
	Description string
	// Parameters are defaults merged under a pipeline's parameters; see
	// [Manifest.MergeParameters]. Values are as YAML decodes them: string,
	// uint64, int64, float64, bool, nil, []any and map[string]any.
	Parameters map[string]any
	// Limits the plugin asks for.
	Limits Limits
	// Capabilities the plugin is granted.
	Capabilities Capabilities
	// Engine the plugin asks to run on; EngineDefault leaves it to its
	// tenant's engine, then to the host's default.
	Engine Engine
}

// Serves reports whether the plugin declares kind k.
func (m *Manifest) Serves(k Kind) bool {
	return slices.Contains(m.Kinds, k)
}

// MergeParameters returns a new map holding the manifest's default
// parameters overridden by the pipeline's. The merge is shallow: a
// pipeline value replaces the default of the same name whole, because a
// partial merge of nested values would surprise whoever reads the pipeline.
// Neither input is modified.
func (m *Manifest) MergeParameters(pipeline map[string]any) map[string]any {
	merged := make(map[string]any, len(m.Parameters)+len(pipeline))
	maps.Copy(merged, m.Parameters)
	maps.Copy(merged, pipeline)
	return merged
}

// ManifestError is one problem in a manifest. Line and Column are 1-based
// and point at the offending value (or key, for unknown and missing
// fields); both are 0 only for a Manifest built in code rather than parsed.
// Field is the dotted path of the field, such as "limits.memory_pages" or
// "kinds[1]"; it is empty for YAML syntax errors.
type ManifestError struct {
	File         string
	Line, Column int
	Field        string
	Msg          string
}

// Error formats the problem as file:line:column: field: message.
func (e *ManifestError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

const (
	// maxNameLen keeps names usable as file and metric label names.
	maxNameLen = 128
	// maxMemoryPages is the whole wasm32 address space.
	maxMemoryPages = 65536
	// maxResponseBytes is the wasm32 address space too: a response is
	// returned as a 32-bit length into guest memory.
	maxResponseBytes = 1 << 32
)

// semverPattern is the regular expression published on semver.org.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// The check functions below hold every rule once. They return "" when the
// value is fine and otherwise the message of a ManifestError; the parser
// adds positions and (*Manifest).problems reuses them for manifests built
// in code.

func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("is %d characters long, at most %d are allowed", len(s), maxNameLen)
	case !isAlnum(s[0]):
		// A leading '-' reads as a flag on command lines and a leading '.'
		// makes hidden files and the names "." and "..".
		return fmt.Sprintf("%q must start with a letter or digit", s)
	}
	for _, r := range s {
		if r > 0x7f || !(isAlnum(byte(r)) || r == '_' || r == '-' || r == '.') {
			return fmt.Sprintf("invalid character %q in %q; a name may hold only letters, digits, '_', '-' and '.'", r, s)
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func checkVersion(s string) string {
	if semverPattern.MatchString(s) {
		return ""
	}
	msg := fmt.Sprintf("expected a semantic version MAJOR.MINOR.PATCH[-PRERELEASE], got %q", s)
	if rest, ok := strings.CutPrefix(s, "v"); ok && semverPattern.MatchString(rest) {
		msg += "; drop the leading 'v'"
	}
	return msg
}

func checkABI(v int64) string {
	if v == abi.Version {
		return ""
	}
	return fmt.Sprintf("the plugin is built for ABI %d, this host speaks ABI %d", v, abi.Version)
}

// normalizeSHA256 returns s in lowercase when it is 64 hex digits.
func normalizeSHA256(s string) (string, string) {
	if len(s) != 64 {
		msg := fmt.Sprintf("expected 64 hex digits, got %d characters", len(s))
		if strings.HasPrefix(s, "sha256:") {
			msg += "; drop the \"sha256:\" prefix"
		}
		return "", msg
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return "", fmt.Sprintf("expected 64 hex digits, found %q", r)
		}
	}
	return strings.ToLower(s), ""
}

// cleanRelPath checks that p names something inside the plugin directory
// and returns it cleaned. The check is lexical; Validate and ReadWasm also
// resolve symbolic links.
func cleanRelPath(p string, allowDir bool) (string, string) {
	switch {
	case p == "":
		return "", "must not be empty"
	case strings.ContainsRune(p, 0):
		return "", "contains a NUL byte"
	case strings.ContainsRune(p, '\\'):
		// Manifests travel between systems; '\' is a separator on one and a
		// file name character on another.
		return "", fmt.Sprintf("%q: use '/' as the path separator", p)
	case path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		return "", fmt.Sprintf("%q is absolute; give a path relative to the plugin directory", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Sprintf("%q escapes the plugin directory", p)
	}
	if clean == "." && !allowDir {
		return "", fmt.Sprintf("%q names the plugin directory itself, not a file in it", p)
	}
	return clean, ""
}

func checkKind(s string) string {
	switch Kind(s) {
	case KindTransform, KindMap:
		return ""
	}
	return fmt.Sprintf("unknown kind %q; use %s or %s", s, KindTransform, KindMap)
}

func checkEngine(s string) string {
	switch Engine(s) {
	case EngineWazero, EngineWasmtime:
		return ""
	}
	return fmt.Sprintf("unknown engine %q; use %s or %s", s, EngineWazero, EngineWasmtime)
}

func checkMemoryPages(v int64) string {
	if v < 1 || v > maxMemoryPages {
		return fmt.Sprintf("must be between 1 and %d (64 KiB pages), got %d", maxMemoryPages, v)
	}
	return ""
}

func checkBatchTimeout(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("must be positive, got %s", d)
	}
	return ""
}

func checkMaxResponseBytes(v int64) string {
	if v < 1 || v > maxResponseBytes {
		return fmt.Sprintf("must be between 1 byte and 4GiB, got %d bytes", v)
	}
	return ""
}

// parseSize parses a manifest's byte count with [ParseSize] and words the
// error for a manifest field.
func parseSize(s string) (int64, string) {
	n, err := ParseSize(s)
	switch {
	case errors.Is(err, ErrSizeTooLarge):
		return 0, fmt.Sprintf("%q is too large", s)
	case err != nil:
		return 0, fmt.Sprintf("expected a byte count such as 1048576 or \"64MiB\" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got %q", s)
	}
	return n, ""
}

// problems checks m as ParseManifest would, for a Manifest built in code.
// The errors carry no position.
func (m *Manifest) problems(file string) []error {
	var errs []error
	add := func(field, msg string) {
		if msg != "" {
			errs = append(errs, &ManifestError{File: file, Field: field, Msg: msg})
		}
	}
	add("name", checkName(m.Name))
	add("version", checkVersion(m.Version))
	add("abi", checkABI(int64(m.ABI)))
	_, msg := cleanRelPath(m.Wasm, false)
	add("wasm", msg)
	_, msg = normalizeSHA256(m.SHA256)
	add("sha256", msg)
	if len(m.Kinds) == 0 {
		add("kinds", "at least one kind is required: transform or map")
	}
	for i, k := range m.Kinds {
		field := fmt.Sprintf("kinds[%d]", i)
		add(field, checkKind(string(k)))
		if slices.Index(m.Kinds, k) < i {
			add(field, fmt.Sprintf("%q is listed twice", k))
		}
	}
	if m.Limits.MemoryPages != 0 {
		add("limits.memory_pages", checkMemoryPages(int64(m.Limits.MemoryPages)))
	}
	if m.Limits.BatchTimeout != 0 {
		add("limits.batch_timeout", checkBatchTimeout(m.Limits.BatchTimeout))
	}
	if m.Limits.MaxResponseBytes != 0 {
		add("limits.max_response_bytes", checkMaxResponseBytes(m.Limits.MaxResponseBytes))
	}
	for i, d := range m.Capabilities.ReadOnlyDirs {
		_, msg := cleanRelPath(d, true)
		add(fmt.Sprintf("capabilities.read_only_dirs[%d]", i), msg)
	}
	if m.Engine != "" {
		add("engine", checkEngine(string(m.Engine)))
	}
	return errs
}
