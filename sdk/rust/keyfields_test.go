package rust_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
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

type keyCase struct {
	key   string
	names []string
}

// goKeyLine is the driver's answer computed with the Go SDK's ParseKey:
// the reference (see examples/keyfields.rs for the format).
func goKeyLine(c keyCase) string {
	kf, err := flowhost.ParseKey(c.key, c.names...)
	if err != nil {
		return "E " + hex.EncodeToString([]byte(err.Error()))
	}
	res := func(v string, err error) string {
		if err != nil {
			return "e" + hex.EncodeToString([]byte(err.Error()))
		}
		return "o" + hex.EncodeToString([]byte(v))
	}
	var f []string
	for _, n := range append(append([]string{}, c.names...), "zz") {
		r, err := kf.Raw(n)
		f = append(f, res(string(r), err))
		f = append(f, res(kf.String(n)))
		i, err := kf.Int(n)
		f = append(f, res(strconv.FormatInt(i, 10), err))
		fl, err := kf.Float(n)
		f = append(f, res(strconv.FormatUint(math.Float64bits(fl), 10), err))
		b, err := kf.Bool(n)
		f = append(f, res(strconv.FormatBool(b), err))
	}
	return strings.Join(f, " ")
}

// runKeyfields sends the cases to the Rust driver and returns its lines.
func runKeyfields(t testing.TB, cases []keyCase) []string {
	t.Helper()
	bin, err := keyfieldsBin()
	require.NoError(t, err)
	var in bytes.Buffer
	for _, c := range cases {
		names := make([]string, len(c.names))
		for i, n := range c.names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		fmt.Fprintf(&in, "%s %s\n", hex.EncodeToString([]byte(c.key)), strings.Join(names, ","))
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

func decodeKeyLine(l string) string {
	var parts []string
	for _, p := range strings.Fields(l) {
		if len(p) > 1 && (p[0] == 'o' || p[0] == 'e') {
			b, _ := hex.DecodeString(p[1:])
			parts = append(parts, p[:1]+strconv.Quote(string(b)))
		} else {
			b, err := hex.DecodeString(p)
			if err != nil {
				parts = append(parts, p)
			} else {
				parts = append(parts, strconv.Quote(string(b)))
			}
		}
	}
	return strings.Join(parts, " ")
}

// keyTable covers what the host writes and what it never does.
var keyTable = []keyCase{
	{`["o-17",3]`, []string{"id", "n"}},
	{`["a\"b\\c\/\b\f\n\r\t\u00e9\u0000"]`, []string{"s"}},
	{`["héllo 😀 日本"]`, []string{"s"}},
	{`["\ud83d\ude00","\ud800","\udc00\ud800x","\ud800\u0041"]`, []string{"a", "b", "c", "d"}},
	{`[0,-1,9223372036854775807,-9223372036854775808,9223372036854775808,-9223372036854775809,12345678901234567890123]`, []string{"a", "b", "c", "d", "e", "f", "g"}},
	{`[1.5,-0.25,1e3,1E-3,-0,0.0,1e400,-1e400,1e-400,2.2250738585072014e-308]`, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}},
	{`[true,false,null]`, []string{"t", "f", "n"}},
	{`[{"a":[1,{"b":null}]},[],{},[[["x"]]]]`, []string{"o", "e", "eo", "n"}},
	{`["3","-4.5","1e2"," 3","abc","\u0033",""]`, []string{"a", "b", "c", "d", "e", "f", "g"}},
	{` [ 1 , "a" ] `, []string{"x", "y"}},
	{`[1]`, []string{"a", "b"}},
	{`[1,2]`, []string{"a"}},
	{`[]`, nil},
	{`[]`, []string{"a"}},
	{``, nil},
	{``, []string{"a", "b"}},
	{`null`, nil},
	{`null`, []string{"a"}},
	{`{"a":1}`, []string{"a"}},
	{`"x"`, []string{"a"}},
	{`[1,]`, []string{"a"}},
	{`[01]`, []string{"a"}},
	{`[1.]`, []string{"a"}},
	{`[-]`, []string{"a"}},
	{`["\x"]`, []string{"a"}},
	{`["\u12"]`, []string{"a"}},
	{"[\"a\tb\"]", []string{"a"}},
	{`[tru]`, []string{"a"}},
	{`[1] x`, []string{"a"}},
	{`[1][2]`, []string{"a"}},
	{`[{"a" 1}]`, []string{"a"}},
	{`[{1:2}]`, []string{"a"}},
	{`[{"a":1,}]`, []string{"a"}},
	{`[1 2]`, []string{"a"}},
	{`[NaN]`, []string{"a"}},
	{`["x"]`, []string{"a\"b\n"}},
	{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), nil},
	{"[" + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + "]", []string{"a"}},
	{"[" + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "]", []string{"a"}},
}

// TestParseKeyLikeGo runs the Rust SDK's parse_key (natively, through
// examples/keyfields.rs) over the table and requires every accessor's
// value and error text to be the Go SDK's ParseKey's.
func TestParseKeyLikeGo(t *testing.T) {
	lines := runKeyfields(t, keyTable)
	for i, c := range keyTable {
		want := goKeyLine(c)
		if want != lines[i] {
			t.Errorf("key %.80q names %q:\n rust %s\n   go %s", c.key, c.names, decodeKeyLine(lines[i]), decodeKeyLine(want))
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
	for _, c := range keyTable {
		names := make([]string, len(c.names))
		for i, n := range c.names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		req := &abi.Request{ABI: abi.Version, Computation: "keyfields", Kind: abi.KindTransform, Epoch: 1,
			Keys: []abi.RequestKey{{Key: c.key, Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte(strings.Join(names, ","))}}}}}
		b, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		raw, err := inst.Process(context.Background(), b)
		require.NoError(t, err)
		resp, err := abi.DecodeResponse(raw, abi.ResponseLimits{})
		require.NoError(t, err)
		require.NoError(t, abi.ValidateResponse(resp, req, []string{"out"}))
		require.Len(t, resp.Keys, 1)
		require.Len(t, resp.Keys[0].Emits, 1, "key %.80q: %s", c.key, resp.Keys[0].Error)
		if got, want := string(resp.Keys[0].Emits[0].Payload), goKeyLine(c); got != want {
			t.Errorf("key %.80q names %q:\n rust %s\n   go %s", c.key, c.names, decodeKeyLine(got), decodeKeyLine(want))
		}
	}
}

// FuzzParseKeyLikeGo compares the Rust SDK's parse_key with Go's on
// arbitrary keys (valid UTF-8: a Rust key is a &str) of one, two or three
// fields.
func FuzzParseKeyLikeGo(f *testing.F) {
	for _, c := range keyTable {
		if len(c.key) < 1000 {
			f.Add(c.key, uint8(len(c.names)))
		}
	}
	f.Fuzz(func(t *testing.T, key string, n uint8) {
		if !utf8.ValidString(key) {
			t.Skip("a Rust key is valid UTF-8")
		}
		c := keyCase{key: key, names: []string{"a", "b", "c"}[:n%4]}
		got := runKeyfields(t, []keyCase{c})[0]
		if want := goKeyLine(c); got != want {
			t.Fatalf("key %q:\n rust %s\n   go %s", key, decodeKeyLine(got), decodeKeyLine(want))
		}
	})
}
