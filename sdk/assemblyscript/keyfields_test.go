package assemblyscript_test

import (
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/internal/keytest"
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
func runKeyfields(tb testing.TB, inst engine.Instance, cases []keytest.Case) []string {
	tb.Helper()
	var lines []string
	for _, c := range cases {
		names := make([]string, len(c.Names))
		for i, n := range c.Names {
			names[i] = hex.EncodeToString([]byte(n))
		}
		req := &abi.Request{ABI: abi.Version, Computation: "keys", Kind: abi.KindTransform, Epoch: 1,
			Keys: []abi.RequestKey{{Key: c.Key, Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte(strings.Join(names, ","))}}}}}
		resp := process(tb, inst, req, []string{"out"})
		require.Len(tb, resp.Keys, 1)
		require.Len(tb, resp.Keys[0].Emits, 1, "key %.80q: %s", c.Key, resp.Keys[0].Error)
		lines = append(lines, string(resp.Keys[0].Emits[0].Payload))
	}
	return lines
}

// TestParseKeyLikeGo runs the AssemblyScript SDK's parseKey in the test
// guest testdata/keyguest through the host's wazero engine over the table
// and requires every accessor's value and error text to be the Go SDK's
// ParseKey's.
func TestParseKeyLikeGo(t *testing.T) {
	lines := runKeyfields(t, keyGuestInstance(t), keytest.Table())
	for i, c := range keytest.Table() {
		want := keytest.GoLine(c)
		if want != lines[i] {
			t.Errorf("key %.80q names %q:\n   as %s\n   go %s", c.Key, c.Names, keytest.DecodeLine(lines[i]), keytest.DecodeLine(want))
		}
	}
}

// FuzzParseKeyLikeGo compares the AssemblyScript SDK's parseKey with Go's
// on arbitrary keys (valid UTF-8: an AssemblyScript key is a string) of
// none to three fields.
func FuzzParseKeyLikeGo(f *testing.F) {
	for _, c := range keytest.Table() {
		if len(c.Key) < 1000 {
			f.Add(c.Key, uint8(len(c.Names)))
		}
	}
	inst := keyGuestInstance(f)
	f.Fuzz(func(t *testing.T, key string, n uint8) {
		if !utf8.ValidString(key) {
			t.Skip("an AssemblyScript key is valid UTF-8")
		}
		c := keytest.Case{Key: key, Names: []string{"a", "b", "c"}[:n%4]}
		got := runKeyfields(t, inst, []keytest.Case{c})[0]
		if want := keytest.GoLine(c); got != want {
			t.Fatalf("key %q:\n   as %s\n   go %s", key, keytest.DecodeLine(got), keytest.DecodeLine(want))
		}
	})
}
