// Package conformance checks that the guest SDKs of every language speak
// ABI v1 (abi/ABI.md) alike. Each SDK ships a conformance guest that
// interprets its input messages as the script of SCRIPT.md; the tests of
// this package build every registered guest, run it through the host's
// wazero engine with the same scripted requests, and require each
// response to validate and to re-encode canonically to exactly the bytes
// of the Go guest's. README.md describes the cases and how to add a
// language.
package conformance

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Guest is one language's conformance guest, as the suite registers it.
type Guest struct {
	// Name names the language in test names and reports ("go", "rust").
	Name string
	// Build compiles the guest into outDir, which exists and is empty or
	// holds only what earlier calls of Build put there, and returns the
	// path of the module. It runs the language's toolchain and, when the
	// toolchain is missing, fails with an error naming the package that
	// provides it. It must be safe to call concurrently with the other
	// languages' Build functions.
	Build func(outDir string) (wasmPath string, err error)
}

// BuildGoGuest compiles the Go conformance guest (./goguest, written with
// sdk/go) into outDir as goguest.wasm, the way users build Go guests:
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared. It needs the source
// tree of this module and the go tool on PATH.
func BuildGoGuest(outDir string) (string, error) {
	return buildGo(outDir, "goguest")
}

// BuildWindowGuest compiles the Go window conformance guest
// (./windowguest, the SDK's window helper counting records) into outDir as
// windowguest.wasm, as BuildGoGuest builds the script guest. It fails,
// never skips, when the go tool is missing.
func BuildWindowGuest(outDir string) (string, error) {
	return buildGo(outDir, "windowguest")
}

// BuildJoinGuest compiles the Go join conformance guest (./joinguest, the
// SDK's interval and enrichment join helpers, chosen by the parameter
// join; README.md, "The join guest") into outDir as joinguest.wasm, as
// BuildGoGuest builds the script guest, and returns its path. It fails,
// never skips, when the go tool is missing.
func BuildJoinGuest(outDir string) (wasmPath string, err error) {
	return buildGo(outDir, "joinguest")
}

// buildGo builds the guest in the directory pkg next to this file.
func buildGo(outDir, pkg string) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("conformance: cannot locate the source of the Go guest")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("conformance: building the Go guest needs the go tool on PATH (Go 1.26): %w", err)
	}
	out := filepath.Join(outDir, pkg+".wasm")
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), pkg)
	cmd.Env = append(withoutRace(os.Environ()), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("conformance: go build of the Go guest %s: %w\n%s", pkg, err, output.Bytes())
	}
	return out, nil
}

// withoutRace drops -race from GOFLAGS: a test run with the race detector
// passes it down, and the wasm port has none.
func withoutRace(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if flags, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			kept := slices.DeleteFunc(strings.Fields(flags), func(f string) bool { return f == "-race" })
			kv = "GOFLAGS=" + strings.Join(kept, " ")
		}
		out = append(out, kv)
	}
	return out
}
