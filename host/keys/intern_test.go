package keys

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestInternerSharesOneStringPerText: a text seen again comes back as the
// string handed out the first time (the same backing array), whatever
// buffer it was read from.
func TestInternerSharesOneStringPerText(t *testing.T) {
	in := &Interner{}
	first := in.String([]byte(`["a"]`))
	again := in.String(append([]byte(nil), `["a"]`...))
	require.Equal(t, `["a"]`, again)
	require.True(t, unsafe.StringData(first) == unsafe.StringData(again), "one backing array")
	other := in.String([]byte(`["b"]`))
	require.Equal(t, `["b"]`, other)
	require.False(t, unsafe.StringData(first) == unsafe.StringData(other))
}

// TestInternerStaysBounded: however many distinct texts go through it,
// the Interner holds at most maxInterned, keeps none longer than
// maxInternedLen, and still returns each text exactly.
func TestInternerStaysBounded(t *testing.T) {
	cases := []struct {
		name  string
		texts int
		size  int
	}{
		{"few short", 10, 8},
		{"more than it holds", 3*maxInterned + 7, 8},
		{"too long to keep", 10, maxInternedLen + 1},
		{"exactly as long as it keeps", 10, maxInternedLen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &Interner{}
			for i := range c.texts {
				text := fmt.Sprintf("%0*d", c.size, i)
				require.Equal(t, text, in.String([]byte(text)))
				require.LessOrEqual(t, len(in.texts), maxInterned)
			}
			for k := range in.texts {
				require.LessOrEqual(t, len(k), maxInternedLen)
			}
			if c.size > maxInternedLen {
				require.Empty(t, in.texts)
			}
		})
	}
}

// TestInternerStepsAsideWhenKeysRarelyRepeat: after a filling with more
// misses than hits, the next skipAfterMisses texts are not kept (nor
// looked up), and then it interns again; after a filling with more hits,
// it keeps interning.
func TestInternerStepsAsideWhenKeysRarelyRepeat(t *testing.T) {
	in := &Interner{}
	for i := range maxInterned + 1 { // every text new: the last one finds it full
		in.String(fmt.Appendf(nil, "u%d", i))
	}
	require.Equal(t, skipAfterMisses, in.skip)
	for i := range skipAfterMisses {
		require.Equal(t, fmt.Sprint("v", i), in.String(fmt.Appendf(nil, "v%d", i)))
	}
	require.Zero(t, in.skip)
	in.String([]byte("w"))
	require.Contains(t, in.texts, "w", "interning again")

	in = &Interner{}
	for i := range 2 * maxInterned { // half of them repeat
		in.String(fmt.Appendf(nil, "r%d", i%(maxInterned/2)))
	}
	for i := range maxInterned / 2 {
		in.String(fmt.Appendf(nil, "n%d", i))
	}
	in.String([]byte("last"))
	require.Zero(t, in.skip, "more hits than misses: keep interning")
}

// TestNilInternerInterns nothing and still returns the text.
func TestNilInternerInternsNothing(t *testing.T) {
	var in *Interner
	require.Equal(t, "k", in.String([]byte("k")))
}

// ExampleExtractor_KeyIn: a goroutine that computes many keys keeps an
// Interner, so that a key it has seen before costs no allocation.
func ExampleExtractor_KeyIn() {
	e, err := NewExtractor([]string{"customer.id"})
	if err != nil {
		panic(err)
	}
	in := &Interner{}
	for _, p := range []string{`{"customer":{"id":3}}`, `{"customer":{"id":3.0}}`} {
		key, err := e.KeyIn([]byte(p), in)
		fmt.Println(key, err)
	}
	// Output:
	// [3] <nil>
	// [3] <nil>
}

// BenchmarkKeyJSONInterned is BenchmarkKeyJSON through an Interner, with
// 1000 keys (all hits after the first round) and with every key new (all
// misses, the Interner's worst case), beside the plain Key as a baseline.
func BenchmarkKeyJSONInterned(b *testing.B) {
	e, err := NewExtractor([]string{"order_id"})
	require.NoError(b, err)
	payloads := make([][]byte, 1<<16)
	for i := range payloads {
		payloads[i] = []byte(strings.Replace(string(payload100), "o-1234567", fmt.Sprintf("o-%07d", i), 1))
	}
	for _, c := range []struct {
		name     string
		distinct int
		in       func() *Interner
	}{
		{"plain", 1000, func() *Interner { return nil }},
		{"hits", 1000, func() *Interner { return &Interner{} }},
		{"misses", len(payloads), func() *Interner { return &Interner{} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := c.in()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := e.KeyIn(payloads[i%c.distinct], in); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestValidJSONIsEncodingJSONValid on texts at the edges: scalars at the
// top, white space, bytes that are not UTF-8 inside a string, escapes,
// numbers, truncation and nesting at and past encoding/json's limit.
func TestValidJSONIsEncodingJSONValid(t *testing.T) {
	for _, text := range []string{
		``, ` `, `1`, ` "a" `, `null`, `nul`, `true `, `[1,2]`, `[1,]`, `{"a":1}`, `{"a":1,}`,
		"\"\xff\xfe\"", "\"a\x01\"", `"\u00e9\n"`, `"\x"`, `"\u12"`, `"abc`, `-0.5e+3`, `01`, `1.`, `.5`,
		`{"a":{"b":[{"c":"d"}]}}`, `{"a" 1}`, `{"a":1}{}`,
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		name := text
		if len(name) > 20 {
			name = name[:20]
		}
		t.Run(name, func(t *testing.T) {
			require.Equal(t, json.Valid([]byte(text)), ValidJSON([]byte(text)))
		})
	}
}

// BenchmarkValidJSON is ValidJSON beside encoding/json's Valid, its
// baseline, on a typical 100-byte payload.
func BenchmarkValidJSON(b *testing.B) {
	for _, c := range []struct {
		name  string
		valid func([]byte) bool
	}{{"encoding-json", json.Valid}, {"keys", ValidJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload100)))
			for b.Loop() {
				if !c.valid(payload100) {
					b.Fatal("payload100 is valid JSON")
				}
			}
		})
	}
}
