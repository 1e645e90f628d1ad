package rust_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/sdk/internal/keytest"
	"github.com/flowhost/flowhost/sdk/rust"
)

// keyfieldsBin builds the native driver examples/keyfields.rs once per
// test binary and returns its path.
var keyfieldsBin = sync.OnceValues(func() (string, error) {
	sdk, err := rust.SDKDir()
	if err != nil {
		return "", err
	}
	cmd, err := rust.CargoCommand(sdk, "build", "--example", "keyfields", "--message-format=json")
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cargo build --example keyfields: %w\n%s", err, stderr.Bytes())
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		var m struct {
			Target     struct{ Name string }
			Executable string
		}
		if json.Unmarshal(line, &m) == nil && m.Target.Name == "keyfields" && m.Executable != "" {
			return m.Executable, nil
		}
	}
	return "", fmt.Errorf("cargo build --example keyfields: no executable in its output")
})

// runKeyfields sends the cases to the Rust driver and returns its lines.
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
	cmd.Stdin = &in
	out, err := cmd.Output()
	require.NoError(t, err)
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

// TestParseKeyLikeGo runs the Rust SDK's parse_key (natively, through
// examples/keyfields.rs) over the table and requires every accessor's
// value and error text to be the Go SDK's ParseKey's.
func TestParseKeyLikeGo(t *testing.T) {
	lines := runKeyfields(t, keytest.Table())
	for i, c := range keytest.Table() {
		want := keytest.GoLine(c)
		if want != lines[i] {
			t.Errorf("key %.80q names %q:\n rust %s\n   go %s", c.Key, c.Names, keytest.DecodeLine(lines[i]), keytest.DecodeLine(want))
		}
	}
}

// TestParseKeyGuestLikeGo runs the table through the test guest's script
// "keyfields" compiled to WebAssembly and run by the host's engine: each
// case is a key with one message naming the fields, answered by an emit.
func TestParseKeyGuestLikeGo(t *testing.T) {
	inst := instantiate(t, compiledModule(t, "testguest"))
	initWith(t, inst, &abi.Init{ABI: abi.Version, Computation: "keyfields", Kind: abi.KindTransform,
		Parameters: map[string]any{"script": "keyfields"}, OutputStreams: []string{"out"}})
	for _, c := range keytest.Table() {
		names := make([]string, len(c.Names))
		for i, n := range c.Names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		req := &abi.Request{ABI: abi.Version, Computation: "keyfields", Kind: abi.KindTransform, Epoch: 1,
			Keys: []abi.RequestKey{{Key: c.Key, Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte(strings.Join(names, ","))}}}}}
		b, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		raw, err := inst.Process(context.Background(), b)
		require.NoError(t, err)
		resp, err := abi.DecodeResponse(raw, abi.ResponseLimits{})
		require.NoError(t, err)
		require.NoError(t, abi.ValidateResponse(resp, req, []string{"out"}))
		require.Len(t, resp.Keys, 1)
		require.Len(t, resp.Keys[0].Emits, 1, "key %.80q: %s", c.Key, resp.Keys[0].Error)
		if got, want := string(resp.Keys[0].Emits[0].Payload), keytest.GoLine(c); got != want {
			t.Errorf("key %.80q names %q:\n rust %s\n   go %s", c.Key, c.Names, keytest.DecodeLine(got), keytest.DecodeLine(want))
		}
	}
}

// FuzzParseKeyLikeGo compares the Rust SDK's parse_key with Go's on
// arbitrary keys (valid UTF-8: a Rust key is a &str) of one, two or three
// fields.
func FuzzParseKeyLikeGo(f *testing.F) {
	for _, c := range keytest.Table() {
		if len(c.Key) < 1000 {
			f.Add(c.Key, uint8(len(c.Names)))
		}
	}
	f.Fuzz(func(t *testing.T, key string, n uint8) {
		if !utf8.ValidString(key) {
			t.Skip("a Rust key is valid UTF-8")
		}
		c := keytest.Case{Key: key, Names: []string{"a", "b", "c"}[:n%4]}
		got := runKeyfields(t, []keytest.Case{c})[0]
		if want := keytest.GoLine(c); got != want {
			t.Fatalf("key %q:\n rust %s\n   go %s", key, keytest.DecodeLine(got), keytest.DecodeLine(want))
		}
	})
}
