// Package wat holds flowhost guests written by hand in the WebAssembly text
// format, and builds them with wat2wasm from wabt. They show ABI v1
// (abi/ABI.md) with nothing in between: README.md walks through the ABI
// in their text.
//
//   - identity.wat is the smallest possible guest: it answers every batch
//     with {"keys": []}, a valid computation that does nothing.
//   - echo.wat decodes the request strictly and emits every message's
//     payload unchanged on stream "out", with the message as its parent.
//   - conformance.wat is the conformance guest: it interprets every
//     message as the script of sdk/conformance/SCRIPT.md exactly as the Go
//     guest does, and the conformance suite holds it to every case.
package wat

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/flowhost/flowhost/abi"
)

// The guests' names, as Build and Source take them.
const (
	// Identity names identity.wat, the no-op guest.
	Identity = "identity"
	// Echo names echo.wat, the guest that echoes every message to "out".
	Echo = "echo"
	// Conformance names conformance.wat, the SCRIPT.md interpreter.
	Conformance = "conformance"
)

//go:embed identity.wat echo.wat conformance.wat
var sources embed.FS

// Source returns the WebAssembly text of the guest called name.
func Source(name string) ([]byte, error) {
	b, err := sources.ReadFile(name + ".wat")
	if err != nil {
		return nil, fmt.Errorf("wat: no guest %q (have %q, %q and %q)", name, Identity, Echo, Conformance)
	}
	return b, nil
}

// Build compiles the guest called name with wat2wasm into outDir as
// <name>.wasm and returns the module's path. It fails, naming the Debian
// package, when wat2wasm is not on PATH. Concurrent calls for different
// names or directories are safe.
func Build(outDir, name string) (wasmPath string, err error) {
	src, err := Source(name)
	if err != nil {
		return "", err
	}
	tool, err := exec.LookPath("wat2wasm")
	if err != nil {
		return "", fmt.Errorf("wat: wat2wasm not found on PATH: install wabt (Debian package wabt): %w", err)
	}
	in := filepath.Join(outDir, name+".wat")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		return "", fmt.Errorf("wat: %w", err)
	}
	out := filepath.Join(outDir, name+".wasm")
	cmd := exec.Command(tool, in, "-o", out)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("wat: wat2wasm %s: %w\n%s", name+".wat", err, output.Bytes())
	}
	return out, nil
}

// BuildConformanceGuest compiles conformance.wat into outDir, as the
// conformance suite (sdk/conformance) registers every language's guest:
// Build(outDir, Conformance).
func BuildConformanceGuest(outDir string) (wasmPath string, err error) {
	return Build(outDir, Conformance)
}

// EchoResponse returns the response echo.wat gives to req, built from its
// description rather than from the guest: one emit per message of each
// key, in order, on stream "out", with the message's input index (after
// the key's due timers) as its only parent; keys without messages are left
// out. Its canonical encoding (abi.EncodeResponse) is byte for byte what
// echo.wat returns for a request the host's decoder accepts.
func EchoResponse(req *abi.Request) *abi.Response {
	resp := &abi.Response{Keys: []abi.ResponseKey{}}
	for _, k := range req.Keys {
		if len(k.Messages) == 0 {
			continue
		}
		rk := abi.ResponseKey{Key: k.Key, Emits: make([]abi.Emit, len(k.Messages))}
		for j, m := range k.Messages {
			rk.Emits[j] = abi.Emit{Stream: "out", Payload: m.Payload, Parents: []uint32{uint32(len(k.Timers) + j)}}
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp
}
