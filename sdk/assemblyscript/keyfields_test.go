package assemblyscript_test

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// keyGuestInstance starts the key fields test guest.
func keyGuestInstance(tb testing.TB) engine.Instance {
	tb.Helper()
	m, _ := guestModule(tb, keyGuest)
	inst := instantiate(tb, m)
	initGuest(tb, inst, &abi.Init{ABI: abi.Version, Computation: "keys", Kind: abi.KindTransform, OutputStreams: []string{"out"}})
	return inst
}

// runKeyfields passes each case to the guest as a key with one message
// naming the fields, and returns the lines it emits.
func runKeyfields(tb testing.TB, inst engine.Instance, cases []keyCase) []string {
	tb.Helper()
	var lines []string
	for _, c := range cases {
		names := make([]string, len(c.names))
		for i, n := range c.names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		req := &abi.Request{ABI: abi.Version, Computation: "keys", Kind: abi.KindTransform, Epoch: 1,
			Keys: []abi.RequestKey{{Key: c.key, Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte(strings.Join(names, ","))}}}}}
		resp := process(tb, inst, req, []string{"out"})
		require.Len(tb, resp.Keys, 1)
		require.Len(tb, resp.Keys[0].Emits, 1, "key %.80q: %s", c.key, resp.Keys[0].Error)
		lines = append(lines, string(resp.Keys[0].Emits[0].Payload))
	}
	return lines
}

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

// TestParseKeyLikeGo runs the AssemblyScript SDK's parseKey in the test
// guest testdata/keyguest through the host's wazero engine over the table
// and requires every accessor's value and error text to be the Go SDK's
// ParseKey's.
func TestParseKeyLikeGo(t *testing.T) {
	lines := runKeyfields(t, keyGuestInstance(t), keyTable)
	for i, c := range keyTable {
		want := goKeyLine(c)
		if want != lines[i] {
			t.Errorf("key %.80q names %q:\n   as %s\n   go %s", c.key, c.names, decodeKeyLine(lines[i]), decodeKeyLine(want))
		}
	}
}

// FuzzParseKeyLikeGo compares the AssemblyScript SDK's parseKey with Go's
// on arbitrary keys (valid UTF-8: an AssemblyScript key is a string) of
// none to three fields.
func FuzzParseKeyLikeGo(f *testing.F) {
	for _, c := range keyTable {
		if len(c.key) < 1000 {
			f.Add(c.key, uint8(len(c.names)))
		}
	}
	inst := keyGuestInstance(f)
	f.Fuzz(func(t *testing.T, key string, n uint8) {
		if !utf8.ValidString(key) {
			t.Skip("an AssemblyScript key is valid UTF-8")
		}
		c := keyCase{key: key, names: []string{"a", "b", "c"}[:n%4]}
		got := runKeyfields(t, inst, []keyCase{c})[0]
		if want := goKeyLine(c); got != want {
			t.Fatalf("key %q:\n   as %s\n   go %s", key, decodeKeyLine(got), decodeKeyLine(want))
		}
	})
}
