// Package c builds flowhost guests written in C or C++ with the C SDK that
// lives in this directory (flowhost.h, flowhost.c, cbor.h, cbor.c; README.md
// is its reference). It is the one place that knows how to turn C sources
// into a guest module: the SDK's tests, the conformance suite and
// `flowhost new --lang c` all build through it.
//
// The SDK's sources are embedded, so building needs only the toolchain, not
// this source tree: clang with the wasm32-wasi target, lld (wasm-ld),
// wasi-libc and compiler-rt's wasm32 builtins; C++ also needs libc++ for
// wasm32. On Debian:
//
//	apt-get install clang lld wasi-libc libclang-rt-dev-wasm32 libc++-dev-wasm32
package c

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed flowhost.h flowhost.c cbor.h cbor.c typed_state.h typed_state.c conformance/main.c windowguest/main.c joinguest/main.c
var files embed.FS

// sdkHeaders and sdkSources are the SDK's files a guest is compiled with.
var (
	sdkHeaders = []string{"flowhost.h", "cbor.h", "typed_state.h"}
	sdkSources = []string{"flowhost.c", "cbor.c", "typed_state.c"}
)

// Toolchain names the Debian packages a C guest build needs; CxxToolchain
// the ones C++ sources need on top.
const (
	Toolchain    = "clang lld wasi-libc libclang-rt-dev-wasm32"
	CxxToolchain = "libc++-dev-wasm32"
)

// compileFlags are passed to every compilation; linkFlags to the link. A
// guest is a WASI reactor (ABI.md: the host calls _initialize, never
// _start). The SDK's exports come from export_name attributes, so nothing
// else is exported.
var (
	compileFlags = []string{"--target=wasm32-wasi", "-O2", "-mbulk-memory", "-Wall", "-Werror=implicit-function-declaration"}
	cxxFlags     = []string{"-fno-exceptions"} // wasm32-wasi has no C++ exceptions in clang 14
	linkFlags    = []string{"--target=wasm32-wasi", "-mexec-model=reactor", "-Wl,--strip-debug"}
)

// WriteSDK writes the SDK's header and source files (flowhost.h, cbor.h,
// typed_state.h, flowhost.c, cbor.c, typed_state.c) into dir, which must exist, for projects that build
// with their own build system.
func WriteSDK(dir string) error {
	for _, name := range append(append([]string{}, sdkHeaders...), sdkSources...) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("c: writing the SDK: %w", err)
		}
	}
	return nil
}

// Build compiles the C and C++ files srcFiles (.c; .cc, .cpp, .cxx, .C for
// C++) together with the SDK into the guest module out. The sources may
// include "flowhost.h". C++ is compiled with -fno-exceptions and linked
// with libc++. Compiler output is part of the error, and an error caused
// by a missing toolchain names the Debian packages to install. Build is
// safe for concurrent use: each call works in its own temporary directory.
func Build(srcFiles []string, out string) error {
	if len(srcFiles) == 0 {
		return errors.New("c: Build needs at least one source file")
	}
	cxx := false
	for _, src := range srcFiles {
		if isCxx(src) {
			cxx = true
		} else if filepath.Ext(src) != ".c" {
			return fmt.Errorf("c: %s is neither C (.c) nor C++ (.cc, .cpp, .cxx, .C)", src)
		}
	}
	clang, err := tool("clang", cxx)
	if err != nil {
		return err
	}
	clangxx := ""
	if cxx {
		if clangxx, err = tool("clang++", cxx); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "flowhost-c-build-")
	if err != nil {
		return fmt.Errorf("c: %w", err)
	}
	defer os.RemoveAll(work)
	if err := WriteSDK(work); err != nil {
		return err
	}

	var objects []string
	compile := func(src string) error {
		obj := filepath.Join(work, fmt.Sprintf("%d-%s.o", len(objects), filepath.Base(src)))
		args := append(append([]string{}, compileFlags...), "-I", work)
		compiler := clang
		if isCxx(src) {
			compiler = clangxx
			args = append(args, cxxFlags...)
		}
		args = append(args, "-c", src, "-o", obj)
		objects = append(objects, obj)
		return run(compiler, args, cxx)
	}
	for _, src := range srcFiles {
		abs, err := filepath.Abs(src)
		if err != nil {
			return fmt.Errorf("c: %w", err)
		}
		if err := compile(abs); err != nil {
			return err
		}
	}
	for _, name := range sdkSources {
		if err := compile(filepath.Join(work, name)); err != nil {
			return err
		}
	}
	linker := clang
	if cxx {
		linker = clangxx
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("c: %w", err)
	}
	return run(linker, append(append(append([]string{}, linkFlags...), objects...), "-o", absOut), cxx)
}

// BuildConformanceGuest compiles the C SDK's conformance guest
// (conformance/main.c, which implements sdk/conformance/SCRIPT.md) into
// outDir as cguest.wasm and returns its path. It has the signature of
// conformance.Guest.Build.
func BuildConformanceGuest(outDir string) (string, error) {
	src, err := os.MkdirTemp("", "flowhost-c-conformance-")
	if err != nil {
		return "", fmt.Errorf("c: %w", err)
	}
	defer os.RemoveAll(src)
	b, err := fs.ReadFile(files, "conformance/main.c")
	if err != nil {
		return "", err
	}
	mainC := filepath.Join(src, "main.c")
	if err := os.WriteFile(mainC, b, 0o644); err != nil {
		return "", fmt.Errorf("c: %w", err)
	}
	out := filepath.Join(outDir, "cguest.wasm")
	if err := Build([]string{mainC}, out); err != nil {
		return "", err
	}
	return out, nil
}

// BuildWindowGuest builds the C SDK's window conformance guest
// (windowguest/main.c, the behaviour of the briefs' window guest: windows
// from the parameters kind, size_ns, advance_ns, gap_ns, lateness_ns, a
// record count per window on "windows", late records on "late") into
// outDir as cwindowguest.wasm and returns its path. It fails, naming the
// packages to install, when the toolchain is missing.
func BuildWindowGuest(outDir string) (wasmPath string, err error) {
	return buildEmbedded("windowguest/main.c", filepath.Join(outDir, "cwindowguest.wasm"))
}

// BuildJoinGuest builds the C SDK's join conformance guest
// (joinguest/main.c, the behaviour of sdk/conformance's join guest: the
// interval join of "left" and "right" with bounds lower_ns and upper_ns,
// or the enrichment of "events" by "table", chosen by the parameter join)
// into outDir as cjoinguest.wasm and returns its path. It fails, naming
// the packages to install, when the toolchain is missing.
func BuildJoinGuest(outDir string) (wasmPath string, err error) {
	return buildEmbedded("joinguest/main.c", filepath.Join(outDir, "cjoinguest.wasm"))
}

// buildEmbedded builds one embedded guest source into out.
func buildEmbedded(name, out string) (string, error) {
	src, err := os.MkdirTemp("", "flowhost-c-guest-")
	if err != nil {
		return "", fmt.Errorf("c: %w", err)
	}
	defer os.RemoveAll(src)
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return "", err
	}
	mainC := filepath.Join(src, "main.c")
	if err := os.WriteFile(mainC, b, 0o644); err != nil {
		return "", fmt.Errorf("c: %w", err)
	}
	if err := Build([]string{mainC}, out); err != nil {
		return "", err
	}
	return out, nil
}

func isCxx(src string) bool {
	switch filepath.Ext(src) {
	case ".cc", ".cpp", ".cxx", ".C":
		return true
	}
	return false
}

// toolchainHint says what to install.
func toolchainHint(cxx bool) string {
	pkgs := Toolchain
	if cxx {
		pkgs += " " + CxxToolchain
	}
	return "a C guest needs clang, lld and wasi-libc with compiler-rt's wasm32 builtins: install " + pkgs + " (apt-get install " + pkgs + ")"
}

func tool(name string, cxx bool) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("c: %s not found on PATH; %s", name, toolchainHint(cxx))
	}
	return path, nil
}

// missingToolchain recognises the compiler's complaints about a missing
// linker, libc, builtins or C++ library (not about the guest's own code).
var missingToolchain = []string{
	"unable to execute command", // no wasm-ld
	"cannot open",               // no compiler-rt builtins or crt1-reactor.o
	"unable to find library",    // no libc or libc++
	"'stdlib.h' file not found", "'string.h' file not found", "'stdint.h' file not found", "'stdio.h' file not found",
	"'string' file not found", "'cstdint' file not found", "'cstddef' file not found",
}

func run(tool string, args []string, cxx bool) error {
	cmd := exec.Command(tool, args...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("c: %s %s: %v\n%s", filepath.Base(tool), strings.Join(args, " "), err, output.Bytes())
		for _, s := range missingToolchain {
			if strings.Contains(output.String(), s) {
				return fmt.Errorf("%s\n%s", msg, toolchainHint(cxx))
			}
		}
		return errors.New(msg)
	}
	return nil
}
