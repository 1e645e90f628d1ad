package c_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
)

// nativeRecord is one call of the native harness (testdata/native).
type nativeRecord struct {
	init bool
	data []byte
	// check judges the answer.
	check func(t *testing.T, status int64, out []byte)
}

// runNative sends records to the harness and checks every answer.
func runNative(t *testing.T, harness string, records []nativeRecord) {
	cmd := exec.Command(harness)
	// LeakSanitizer needs ptrace, which containers often refuse; leaks
	// are not what this test looks for.
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0", "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		defer stdin.Close()
		for _, r := range records {
			kind := byte('P')
			if r.init {
				kind = 'I'
			}
			var head [5]byte
			head[0] = kind
			binary.LittleEndian.PutUint32(head[1:], uint32(len(r.data)))
			if _, err := stdin.Write(append(head[:], r.data...)); err != nil {
				return // the harness died; Wait reports why
			}
		}
	}()
	for i, r := range records {
		var head [8]byte
		if _, err := io.ReadFull(stdout, head[:]); err != nil {
			_ = cmd.Wait()
			require.Failf(t, "the native harness stopped", "at record %d (%x): %v\n%s", i, r.data, err, stderr.String())
		}
		status := int64(int32(binary.LittleEndian.Uint32(head[:4])))
		out := make([]byte, binary.LittleEndian.Uint32(head[4:]))
		_, err := io.ReadFull(stdout, out)
		require.NoError(t, err)
		r.check(t, status, out)
	}
	require.NoError(t, cmd.Wait(), "%s", stderr.String())
	require.NotContains(t, stderr.String(), "runtime error", "UndefinedBehaviorSanitizer")
}

// corruptions returns b cut at every length and b with every byte changed
// in a few ways.
func corruptions(b []byte) [][]byte {
	var out [][]byte
	for n := range len(b) {
		out = append(out, b[:n])
	}
	for i := range b {
		for _, x := range []byte{0x01, 0x20, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[i] ^= x
			out = append(out, c)
		}
	}
	return out
}

// TestNativeSanitizers builds the SDK, the test guest and a driver natively
// with clang's AddressSanitizer and UndefinedBehaviorSanitizer, and runs
// the golden vectors (which must give the golden bytes) and every
// truncation and many byte flips of the golden and fuzz-script envelopes
// (which must give what the Go SDK gives) through it.
func TestNativeSanitizers(t *testing.T) {
	clang, err := exec.LookPath("clang")
	require.NoError(t, err, "the sanitizer build needs clang: install clang and libclang-rt-dev (the ASan runtime)")
	harness := filepath.Join(t.TempDir(), "harness")
	cmd := exec.Command(clang, "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
		"-g", "-O1", "-Wall", "-Wextra", "-Werror", "-I", ".", "-o", harness,
		"testdata/native/harness.c", "flowhost.c", "cbor.c", "testdata/guest/main.c", "-lm")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "clang -fsanitize=address,undefined (needs libclang-rt-dev, the sanitizer runtimes):\n%s", output)

	var records []nativeRecord
	initFor := func(computation string, kind abi.Kind, outputs ...string) nativeRecord {
		b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: computation, Kind: kind, OutputStreams: outputs})
		require.NoError(t, err)
		return nativeRecord{init: true, data: b, check: func(t *testing.T, status int64, out []byte) {
			require.Zero(t, status)
			require.Empty(t, out)
		}}
	}

	// The golden vectors, byte for byte.
	for _, doc := range vectorDocs(t) {
		if b, ok := readVector(t, doc.Name, "init"); ok {
			want, _ := readVector(t, doc.Name, "init_result")
			records = append(records, nativeRecord{init: true, data: b, check: func(t *testing.T, status int64, out []byte) {
				require.Zero(t, status, doc.Name)
				require.Equal(t, want, nilIfEmpty(out), doc.Name)
			}})
		}
		reqBytes, ok := readVector(t, doc.Name, "request")
		if !ok {
			continue
		}
		req, err := abi.DecodeRequest(reqBytes)
		require.NoError(t, err)
		want, _ := readVector(t, doc.Name, "response")
		records = append(records, initFor(req.Computation, req.Kind, doc.OutputStreams...),
			nativeRecord{data: reqBytes, check: func(t *testing.T, status int64, out []byte) {
				require.Zero(t, status, doc.Name)
				require.Equal(t, want, out, doc.Name)
			}})
	}

	// Corrupt init envelopes: the Go SDK's status.
	for _, name := range []string{"init_parameters", "init_error"} {
		b, ok := readVector(t, name, "init")
		require.True(t, ok)
		for _, c := range corruptions(b) {
			records = append(records, nativeRecord{init: true, data: c, check: func(t *testing.T, status int64, out []byte) {
				want, _, _ := expectInit(c)
				require.Equal(t, want, status, "init %x", c)
				if status == 0 && len(out) > 0 {
					_, err := abi.DecodeInitResult(out)
					require.NoError(t, err, "init %x", c)
				}
			}})
		}
	}

	// Corrupt requests: what the Go SDK makes of them.
	records = append(records, initFor("fuzz", abi.KindTransform, "out"))
	var requests [][]byte
	for _, doc := range vectorDocs(t) {
		if b, ok := readVector(t, doc.Name, "request"); ok {
			requests = append(requests, b)
		}
	}
	for _, req := range fuzzRequests() {
		b, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		requests = append(requests, b)
	}
	for _, b := range requests {
		for _, c := range corruptions(b) {
			records = append(records, nativeRecord{data: c, check: func(t *testing.T, status int64, out []byte) {
				var callErr error
				if status != 0 {
					callErr = abi.Status(status)
				}
				if len(c) == 0 {
					// The engine passes an empty request as (0, 0); the
					// harness passes its region, so it is decoded.
					require.Equal(t, int64(abi.StatusBadRequest), status)
					return
				}
				checkProcess(t, c, out, status, callErr)
			}})
		}
	}
	t.Logf("%d envelopes through the sanitized build", len(records))
	runNative(t, harness, records)
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// TestNativeSanitizersCatch makes sure the sanitized harness would notice:
// a read past the envelope, planted in a copy of the SDK, must crash it.
func TestNativeSanitizersCatch(t *testing.T) {
	clang, err := exec.LookPath("clang")
	require.NoError(t, err, "the sanitizer build needs clang: install clang and libclang-rt-dev (the ASan runtime)")
	dir := t.TempDir()
	src, err := os.ReadFile("flowhost.c")
	require.NoError(t, err)
	// Read one byte past every request before decoding it.
	const anchor = "    fh_cbor_reader_init(&d.r, ptr, (size_t)len);\n    request_abi = 0;"
	require.Contains(t, string(src), anchor)
	planted := strings.Replace(string(src), anchor, "    volatile uint8_t past = ((const uint8_t *)ptr)[len];\n    (void)past;\n"+anchor, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flowhost.c"), []byte(planted), 0o644))
	harness := filepath.Join(dir, "harness")
	cmd := exec.Command(clang, "-fsanitize=address,undefined", "-g", "-O1", "-I", ".", "-o", harness,
		"testdata/native/harness.c", filepath.Join(dir, "flowhost.c"), "cbor.c", "testdata/guest/main.c", "-lm")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
	req, ok := readVector(t, "empty_batch", "request")
	require.True(t, ok)
	initBytes, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "noop", Kind: abi.KindTransform, OutputStreams: []string{"out"}})
	require.NoError(t, err)
	var in bytes.Buffer
	in.Write(append([]byte{'I', byte(len(initBytes)), 0, 0, 0}, initBytes...))
	in.Write(append([]byte{'P', byte(len(req)), 0, 0, 0}, req...))
	run := exec.Command(harness)
	run.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0")
	run.Stdin = &in
	output, err = run.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(output), "heap-buffer-overflow")
}
