// Package rust builds flowhost guests written in Rust with the guest SDK
// of this directory (crate flowhost-sdk, library flowhost; README.md). It
// is the one place that knows how: Debian's cargo and rustc, never a
// rustup toolchain found first on PATH; crates only from Debian's
// packaged sources in /usr/share/cargo/registry, offline; the release
// profile; the wasm32-wasi target (wasm32-wasip1 where the installed Rust
// ships that instead).
package rust

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Packages are the Debian packages that building a Rust guest needs: the
// compiler and cargo, Rust's standard library for WebAssembly, the linker
// rustc uses for it, and the crates the SDK depends on.
const Packages = "rustc cargo libstd-rust-dev-wasm32 lld librust-serde-cbor-dev librust-serde+serde-derive-dev"

// ErrToolchain is wrapped by the error of Build when the toolchain or the
// SDK's crates are not installed; the error names what is missing.
var ErrToolchain = errors.New("install rustc cargo libstd-rust-dev-wasm32 librust-serde-cbor-dev (Debian: apt-get install " + Packages + ")")

// The toolchain is Debian's, at fixed paths: a rustup installation earlier
// on PATH has other versions and no access to the packaged crates. (Tests
// point them elsewhere to check the errors of a missing toolchain.)
var (
	cargoPath   = "/usr/bin/cargo"
	rustcPath   = "/usr/bin/rustc"
	rustLLDPath = "/usr/bin/rust-lld"
	registryDir = "/usr/share/cargo/registry"
)

// wasmTargets are the WebAssembly targets a guest may be built for, in
// order of preference: newer Rust names WASI preview 1 wasm32-wasip1,
// Debian 12's Rust 1.63 wasm32-wasi.
var wasmTargets = []string{"wasm32-wasip1", "wasm32-wasi"}

// Build compiles the Rust guest crate in crateDir (a directory with a
// Cargo.toml whose library is a cdylib that uses flowhost::export!) with
// `cargo build --release` for WebAssembly, copies the module into outDir
// (which must exist) as <library name>.wasm and returns its path.
//
// Cargo's target directory is kept in the user's cache directory
// (flowhost/rust/target/<workspace>-<hash of its path>), one per cargo
// workspace, unless CARGO_TARGET_DIR is set, so dependencies compile once
// per workspace and an unchanged crate rebuilds in well under a second. Concurrent calls are safe: cargo locks the directory.
// A missing toolchain gives an error wrapping ErrToolchain; a crate that
// does not compile gives an error carrying cargo's diagnostics.
func Build(crateDir, outDir string) (string, error) {
	manifest, err := filepath.Abs(filepath.Join(crateDir, "Cargo.toml"))
	if err != nil {
		return "", fmt.Errorf("rust: %w", err)
	}
	if _, err := os.Stat(manifest); err != nil {
		return "", fmt.Errorf("rust: %s is not a Rust crate: %w", crateDir, err)
	}
	target, err := wasmTarget()
	if err != nil {
		return "", err
	}
	cmd, err := cargoCommand(filepath.Dir(manifest), "build", "--release", "--target", target,
		"--manifest-path", manifest, "--message-format=json-render-diagnostics")
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rust: cargo build of %s: %w\n%s", crateDir, err, strings.TrimSpace(stderr.String()))
	}
	built, err := wasmArtifact(&stdout, manifest)
	if err != nil {
		return "", fmt.Errorf("rust: cargo build of %s: %w", crateDir, err)
	}
	out := filepath.Join(outDir, filepath.Base(built))
	if err := copyFile(built, out); err != nil {
		return "", fmt.Errorf("rust: %w", err)
	}
	return out, nil
}

// BuildConformanceGuest builds the Rust SDK's conformance guest
// (conformance/, the script of sdk/conformance/SCRIPT.md) into outDir as
// flowhost_conformance.wasm and returns its path. It needs the source tree
// of this module.
func BuildConformanceGuest(outDir string) (string, error) {
	dir, err := sdkDir()
	if err != nil {
		return "", err
	}
	return Build(filepath.Join(dir, "conformance"), outDir)
}

// BuildWindowGuest builds the SDK's window conformance guest
// (windowguest/: counts per window with flowhost::Windows, the behaviour
// every SDK's window guest shares) into outDir as
// flowhost_windowguest.wasm and returns the .wasm path. It fails (never
// skips) when the toolchain is missing, with an error wrapping
// ErrToolchain that names the packages. It needs the source tree of this
// module.
func BuildWindowGuest(outDir string) (wasmPath string, err error) {
	dir, err := sdkDir()
	if err != nil {
		return "", err
	}
	return Build(filepath.Join(dir, "windowguest"), outDir)
}

// BuildJoinGuest builds the SDK's join conformance guest (joinguest/:
// flowhost::IntervalJoin or flowhost::EnrichJoin with payloads joined by
// '|', the behaviour every SDK's join guest shares) into outDir as
// flowhost_joinguest.wasm and returns the .wasm path. It fails (never
// skips) when the toolchain is missing, with an error wrapping
// ErrToolchain that names the packages. It needs the source tree of this
// module.
func BuildJoinGuest(outDir string) (wasmPath string, err error) {
	dir, err := sdkDir()
	if err != nil {
		return "", err
	}
	return Build(filepath.Join(dir, "joinguest"), outDir)
}

// sdkDir is the directory of the SDK's sources: this file's.
func sdkDir() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("rust: cannot locate the SDK's sources")
	}
	dir := filepath.Dir(self)
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err != nil {
		return "", fmt.Errorf("rust: the SDK's sources are not at %s: %w", dir, err)
	}
	return dir, nil
}

// cargoCommand prepares Debian's cargo to run in dir with args: the
// environment selects Debian's toolchain, the packaged crates offline, and
// the shared target and cargo home directories.
func cargoCommand(dir string, args ...string) (*exec.Cmd, error) {
	if err := checkToolchain(); err != nil {
		return nil, err
	}
	cache, err := cacheDir()
	if err != nil {
		return nil, err
	}
	args = append(args, "--offline",
		"--config", `source.crates-io.replace-with="debian"`,
		"--config", `source.debian.directory="`+registryDir+`"`)
	cmd := exec.Command(cargoPath, args...)
	cmd.Dir = dir
	env := make([]string, 0, len(os.Environ())+4)
	targetDir := filepath.Join(cache, "target", workspaceKey(dir))
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch name {
		case "PATH", "RUSTC", "CARGO", "CARGO_HOME", "RUSTUP_TOOLCHAIN", "CARGO_BUILD_TARGET":
			continue // set below, or rustup's and not ours
		case "CARGO_TARGET_DIR":
			if value != "" {
				targetDir = value
			}
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env,
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
		"RUSTC="+rustcPath,
		"CARGO_HOME="+filepath.Join(cache, "cargo-home"),
		"CARGO_TARGET_DIR="+targetDir,
	)
	return cmd, nil
}

// workspaceKey names the target directory of the cargo workspace that
// holds dir. One target directory per workspace, not one for all: cargo
// hashes a path crate by its path relative to its workspace root, so two
// checkouts of one workspace (or two projects of the same crate name)
// sharing a target directory take each other's build for fresh, and a
// build could link a stale copy of the SDK.
func workspaceKey(dir string) string {
	root, err := filepath.Abs(dir)
	if err != nil {
		root = dir
	}
	for d := root; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "Cargo.toml")); err == nil && hasWorkspaceTable(b) {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	sum := sha256.Sum256([]byte(samePath(root)))
	return filepath.Base(root) + "-" + hex.EncodeToString(sum[:6])
}

// hasWorkspaceTable reports whether a Cargo.toml declares a [workspace].
func hasWorkspaceTable(manifest []byte) bool {
	for _, line := range strings.Split(string(manifest), "\n") {
		if strings.TrimSpace(line) == "[workspace]" {
			return true
		}
	}
	return false
}

// cacheDir is where cargo's target and home directories live between runs.
func cacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "flowhost", "rust")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("rust: cache directory: %w", err)
	}
	return dir, nil
}

// checkToolchain reports what of the toolchain is missing, naming it.
func checkToolchain() error {
	for _, p := range []struct{ path, what string }{
		{cargoPath, "cargo"},
		{rustcPath, "rustc"},
		{rustLLDPath, "the WebAssembly linker rust-lld (lld)"},
	} {
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("rust: %s is missing (%s): %w", p.what, p.path, ErrToolchain)
		}
	}
	for _, crate := range []string{"serde_cbor-0.11", "serde_derive-1", "serde-1"} {
		if m, _ := filepath.Glob(filepath.Join(registryDir, crate+".*")); len(m) == 0 {
			return fmt.Errorf("rust: crate %s is missing from %s: %w", crate, registryDir, ErrToolchain)
		}
	}
	return nil
}

// wasmTarget is the WebAssembly target whose standard library is
// installed.
func wasmTarget() (string, error) {
	if err := checkToolchain(); err != nil {
		return "", err
	}
	out, err := exec.Command(rustcPath, "--print", "sysroot").Output()
	if err != nil {
		return "", fmt.Errorf("rust: %s --print sysroot: %w", rustcPath, err)
	}
	sysroot := strings.TrimSpace(string(out))
	for _, t := range wasmTargets {
		if _, err := os.Stat(filepath.Join(sysroot, "lib", "rustlib", t, "lib")); err == nil {
			return t, nil
		}
	}
	return "", fmt.Errorf("rust: no standard library for %s under %s/lib/rustlib (libstd-rust-dev-wasm32): %w",
		strings.Join(wasmTargets, " or "), sysroot, ErrToolchain)
}

// cargoMessage is the part of a line of cargo's JSON output that names
// what a build produced.
type cargoMessage struct {
	Reason       string `json:"reason"`
	ManifestPath string `json:"manifest_path"`
	Target       struct {
		Kind []string `json:"kind"`
	} `json:"target"`
	Filenames []string `json:"filenames"`
}

// wasmArtifact finds, in cargo's --message-format=json output, the .wasm
// file of the cdylib of the package whose manifest is manifest.
func wasmArtifact(r io.Reader, manifest string) (string, error) {
	want := samePath(manifest)
	var found string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var m cargoMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Reason != "compiler-artifact" || samePath(m.ManifestPath) != want {
			continue
		}
		isCdylib := false
		for _, k := range m.Target.Kind {
			isCdylib = isCdylib || k == "cdylib"
		}
		for _, f := range m.Filenames {
			if isCdylib && strings.HasSuffix(f, ".wasm") {
				found = f
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading cargo's output: %w", err)
	}
	if found == "" {
		return "", fmt.Errorf("%s built no WebAssembly module: its [lib] needs crate-type = [\"cdylib\"]", manifest)
	}
	return found, nil
}

// samePath resolves symbolic links, so that two spellings of one file
// compare equal.
func samePath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// copyFile copies src to dst through a temporary file, so that a reader
// of dst never sees half a module.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".build-*.wasm")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
