package c_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/internal/keytest"
)

// keyfieldsBin builds the native driver testdata/keyfields/main.c with
// the SDK under clang's AddressSanitizer and UndefinedBehaviorSanitizer,
// once per test binary, and returns its path.
var keyfieldsBin = sync.OnceValues(func() (string, error) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		return "", fmt.Errorf("the key fields driver needs clang: %w", err)
	}
	dir, err := os.MkdirTemp("", "flowhost-c-keyfields-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "keyfields")
	out, err := exec.Command(clang, "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1", "-I", ".",
		"-o", bin, "testdata/keyfields/main.c", "flowhost.c", "cbor.c", "testdata/guest/main.c", "-lm").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("clang: %w\n%s", err, out)
	}
	return bin, nil
})

// runKeyfields sends the cases to the C driver and returns its lines.
func runKeyfields(t testing.TB, cases []keytest.Case) []string {
	t.Helper()
	bin, err := keyfieldsBin()
	require.NoError(t, err)
	var in bytes.Buffer
	for _, c := range cases {
		names := make([]string, len(c.Names))
		for i, n := range c.Names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		fmt.Fprintf(&in, "%s %s\n", hex.EncodeToString([]byte(c.Key)), strings.Join(names, ","))
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdin = &in
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Equal(t, len(cases), len(lines), "lines from the driver")
	return lines
}

// keyTable is keytest's table and the bytes a C key may hold: NUL,
// invalid UTF-8 (U+FFFD each, as Go).
var keyTable = append(keytest.Table(),
	keytest.Case{Key: "\x00", Names: []string{"a"}},
	keytest.Case{Key: "[\"a\x00b\xff\xc3\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82\"]", Names: []string{"a"}},
	keytest.Case{Key: "[\"\xff1\"]", Names: []string{"a"}},
)

// TestParseKeyLikeGo runs the C SDK's fh_parse_key (natively, with
// sanitizers, through testdata/keyfields/main.c) over the table and requires every accessor's
// value and error text to be the Go SDK's ParseKey's.
func TestParseKeyLikeGo(t *testing.T) {
	lines := runKeyfields(t, keyTable)
	for i, c := range keyTable {
		want := keytest.GoLine(c)
		if want != lines[i] {
			t.Errorf("key %.80q names %q:\n    c %s\n   go %s", c.Key, c.Names, keytest.DecodeLine(lines[i]), keytest.DecodeLine(want))
		}
	}
}

// TestParseKeyGuestLikeGo runs the table through the test guest
// testdata/keyguest compiled to WebAssembly and run by the host's engine:
// each case is a key with one message naming the fields, answered by an
// emit.
func TestParseKeyGuestLikeGo(t *testing.T) {
	inst, _ := instanceWith(t, keyGuest, engine.NewConfig())
	initWith(t, inst, "keyfields", abi.KindTransform, nil, "out")
	for _, c := range keyTable {
		if !utf8.ValidString(c.Key) {
			continue // a key is CBOR text: the envelope refuses invalid UTF-8 (the native test covers it)
		}
		names := make([]string, len(c.Names))
		for i, n := range c.Names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		req := &abi.Request{ABI: abi.Version, Computation: "keyfields", Kind: abi.KindTransform, Epoch: 1,
			Keys: []abi.RequestKey{{Key: c.Key, Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte(strings.Join(names, ","))}}}}}
		resp, err := abi.DecodeResponse(process(t, inst, req), abi.ResponseLimits{})
		require.NoError(t, err)
		require.NoError(t, abi.ValidateResponse(resp, req, []string{"out"}))
		require.Len(t, resp.Keys, 1)
		require.Len(t, resp.Keys[0].Emits, 1, "key %.80q: %s", c.Key, resp.Keys[0].Error)
		if got, want := string(resp.Keys[0].Emits[0].Payload), keytest.GoLine(c); got != want {
			t.Errorf("key %.80q names %q:\n    c %s\n   go %s", c.Key, c.Names, keytest.DecodeLine(got), keytest.DecodeLine(want))
		}
	}
}

// FuzzParseKeyLikeGo compares the C SDK's fh_parse_key with Go's on
// arbitrary keys, invalid UTF-8 included, of none to three fields.
func FuzzParseKeyLikeGo(f *testing.F) {
	for _, c := range keyTable {
		if len(c.Key) < 1000 {
			f.Add(c.Key, uint8(len(c.Names)))
		}
	}
	f.Fuzz(func(t *testing.T, key string, n uint8) {
		c := keytest.Case{Key: key, Names: []string{"a", "b", "c"}[:n%4]}
		got := runKeyfields(t, []keytest.Case{c})[0]
		if want := keytest.GoLine(c); got != want {
			t.Fatalf("key %q:\n    c %s\n   go %s", key, keytest.DecodeLine(got), keytest.DecodeLine(want))
		}
	})
}
