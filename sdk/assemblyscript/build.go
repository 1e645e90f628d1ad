// Package assemblyscript builds flowhost guest computations written in
// AssemblyScript with the SDK in this directory (@flowhost/sdk, see
// README.md). It is the single place that knows how an AssemblyScript
// guest is compiled: which compiler, which runtime, which flags make the
// module import nothing but flowhost.log. Tests and tools call Build; the
// conformance suite calls BuildConformanceGuest, BuildWindowGuest and
// BuildJoinGuest.
//
// Building needs Node.js 20 or newer with npm (Debian packages nodejs and
// npm). The compiler, AssemblyScript from npm, is pinned by this
// directory's package-lock.json; Build installs it with `npm ci` the first
// time, which needs the npm registry.
package assemblyscript

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// minNodeMajor is the oldest Node.js the pinned AssemblyScript compiler
// supports (its package.json says "node": ">=20").
const minNodeMajor = 20

// installHint is what every error about a missing toolchain says.
const installHint = "install node and npm (Debian: apt-get install nodejs npm; Node.js >= 20); run npm install in sdk/assemblyscript"

// pathDir is the directory, inside node_modules, that holds the link
// @flowhost/sdk -> the SDK, so that guests in this repository import the
// SDK by its package name as users do. npm ignores dot directories in
// node_modules, and recreates nothing there.
const pathDir = ".flowhost-path"

// sdkDir returns the directory of this package's source, which is the
// SDK: the build helper runs only where the source tree is.
func sdkDir() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("assemblyscript: cannot locate the SDK's source directory")
	}
	dir := filepath.Dir(self)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return "", fmt.Errorf("assemblyscript: the SDK's source directory %s is not available (the build helper needs the source tree): %w", dir, err)
	}
	return dir, nil
}

// Build compiles the AssemblyScript entry file to the guest module
// outFile (created or replaced; its directory must exist). The entry
// imports the SDK as "@flowhost/sdk" and re-exports the ABI functions with
// `export * from "@flowhost/sdk/assembly/exports"`; its own node_modules,
// if any, are searched first.
//
// The module is an optimised release build with AssemblyScript's minimal
// runtime (the SDK collects garbage between batches), the SDK's abort
// handler instead of the env.abort import, and its start function
// exported as _initialize, so that it imports only flowhost.log.
//
// When the compiler is not installed yet, Build runs `npm ci` in the SDK
// directory first, under a lock shared by every process on the machine.
// A missing node or npm is an error that names the packages to install.
func Build(entry, outFile string) error {
	dir, err := sdkDir()
	if err != nil {
		return err
	}
	entry, err = filepath.Abs(entry)
	if err != nil {
		return fmt.Errorf("assemblyscript: entry %s: %w", entry, err)
	}
	if _, err := os.Stat(entry); err != nil {
		return fmt.Errorf("assemblyscript: entry file: %w", err)
	}
	outFile, err = filepath.Abs(outFile)
	if err != nil {
		return fmt.Errorf("assemblyscript: output %s: %w", outFile, err)
	}
	node, err := nodeTool()
	if err != nil {
		return err
	}
	if err := ensureInstalled(dir); err != nil {
		return err
	}
	modules := filepath.Join(dir, "node_modules")
	cmd := exec.Command(node, filepath.Join(modules, "assemblyscript", "bin", "asc.js"),
		filepath.Base(entry),
		"--config", filepath.Join(dir, "asconfig.json"),
		"--target", "release",
		"--path", filepath.Join(modules, pathDir),
		"--noColors",
		"--outFile", outFile,
	)
	// The entry's directory is the compiler's base directory, so that the
	// entry's own node_modules are found first.
	cmd.Dir = filepath.Dir(entry)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("assemblyscript: asc %s: %w\n%s", entry, err, output.Bytes())
	}
	return nil
}

// BuildConformanceGuest compiles the SDK's conformance guest
// (conformance/index.ts, the script of sdk/conformance/SCRIPT.md) into
// outDir as assemblyscript-conformance.wasm and returns its path. It is
// safe to call concurrently with other builds.
func BuildConformanceGuest(outDir string) (wasmPath string, err error) {
	dir, err := sdkDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, "assemblyscript-conformance.wasm")
	if err := Build(filepath.Join(dir, "conformance", "index.ts"), out); err != nil {
		return "", err
	}
	return out, nil
}

// nodeTool finds node and checks its version.
func nodeTool() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("assemblyscript: no node on PATH: %s", installHint)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("assemblyscript: %s --version: %w: %s", node, err, installHint)
	}
	version := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(version, ".")
	if n, err := strconv.Atoi(major); err != nil || n < minNodeMajor {
		return "", fmt.Errorf("assemblyscript: node %s is too old for AssemblyScript, which needs Node.js >= %d: %s", version, minNodeMajor, installHint)
	}
	return node, nil
}

// ensureInstalled runs `npm ci` in dir when the compiler is missing, and
// links the SDK into node_modules/.flowhost-path. Concurrent builds, in
// this process or another, wait for one installation.
func ensureInstalled(dir string) error {
	asc := filepath.Join(dir, "node_modules", "assemblyscript", "bin", "asc.js")
	link := filepath.Join(dir, "node_modules", pathDir, "@flowhost", "sdk")
	if exists(asc) && exists(filepath.Join(link, "package.json")) {
		return nil
	}
	sum := sha256.Sum256([]byte(dir))
	unlock, err := lockFile(filepath.Join(os.TempDir(), "flowhost-assemblyscript-"+hex.EncodeToString(sum[:8])+".lock"))
	if err != nil {
		return fmt.Errorf("assemblyscript: locking the SDK's installation: %w", err)
	}
	defer unlock()
	if !exists(asc) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return fmt.Errorf("assemblyscript: the compiler is not installed and there is no npm on PATH: %s", installHint)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("assemblyscript: npm ci in %s: %w\n%s\n%s", dir, err, output.Bytes(), installHint)
		}
		if !exists(asc) {
			return fmt.Errorf("assemblyscript: npm ci in %s did not install %s: %s", dir, asc, installHint)
		}
	}
	if !exists(filepath.Join(link, "package.json")) {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return fmt.Errorf("assemblyscript: %w", err)
		}
		_ = os.Remove(link) // a dangling link from a moved tree
		if err := os.Symlink(filepath.Join("..", "..", ".."), link); err != nil {
			return fmt.Errorf("assemblyscript: linking the SDK for the compiler: %w", err)
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// BuildWindowGuest compiles the SDK's window conformance guest
// (windowguest/index.ts, the behaviour of /sdk/WINDOWS.md's window guest:
// counts per window with the Windows helper) into outDir as
// assemblyscript-windowguest.wasm and returns its path. It fails, never
// skips, when node or npm is missing, naming what to install.
func BuildWindowGuest(outDir string) (wasmPath string, err error) {
	dir, err := sdkDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, "assemblyscript-windowguest.wasm")
	if err := Build(filepath.Join(dir, "windowguest", "index.ts"), out); err != nil {
		return "", err
	}
	return out, nil
}

// BuildJoinGuest compiles the SDK's join conformance guest
// (joinguest/index.ts, the behaviour of sdk/conformance/README.md's join
// guest: the IntervalJoin or EnrichJoin helper, payloads joined by one '|'
// byte) into outDir as assemblyscript-joinguest.wasm and returns its path.
// It fails, never skips, when node or npm is missing, naming what to
// install.
func BuildJoinGuest(outDir string) (wasmPath string, err error) {
	dir, err := sdkDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, "assemblyscript-joinguest.wasm")
	if err := Build(filepath.Join(dir, "joinguest", "index.ts"), out); err != nil {
		return "", err
	}
	return out, nil
}
