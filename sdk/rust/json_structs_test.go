package rust_test

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	flowhost "github.com/flowhost/flowhost/sdk/go"
	"github.com/flowhost/flowhost/sdk/rust"
)

// jsonStructsPath is read by the Rust test json_structs
// (tests/json_structs.rs), which encodes the same values with the Rust
// SDK's Json codec and requires these bytes.
const jsonStructsPath = "testdata/json_structs.golden"

type jsEmpty struct{}

// jsFlat's fields are deliberately not in name order: Go keeps
// declaration order, and so must Rust.
type jsFlat struct {
	Zeta  string `json:"zeta"`
	Alpha int64  `json:"alpha"`
	Mid   bool   `json:"mid"`
	Amp   string `json:"a&b"`
}

type jsNumbers struct {
	I       int64   `json:"i"`
	Min     int64   `json:"min"`
	U       uint64  `json:"u"`
	F       float64 `json:"f"`
	Small   float64 `json:"small"`
	Tiny    float64 `json:"tiny"`
	Big     float64 `json:"big"`
	Plain   float64 `json:"plain"`
	Neg     float64 `json:"neg"`
	Zero    float64 `json:"zero"`
	NegZero float64 `json:"neg_zero"`
	F32     float32 `json:"f32"`
	F32Big  float32 `json:"f32_big"`
	Third   float64 `json:"third"`
}

type jsInner struct {
	B int      `json:"b"`
	A []string `json:"a"`
}

type jsNested struct {
	Name  string            `json:"name"`
	Inner jsInner           `json:"inner"`
	Empty jsEmpty           `json:"empty"`
	Tags  map[string]int    `json:"tags"`
	NoMap map[string]int    `json:"no_map"`
	Nums  map[int]string    `json:"nums"`
	Opt   *int64            `json:"opt"`
	Some  *int64            `json:"some"`
	List  []jsInner         `json:"list"`
	None  []int64           `json:"none"`
	Zero  []int64           `json:"zero"`
	Bytes []byte            `json:"bytes"`
	Deep  map[string]jsFlat `json:"deep"`
}

// jsonStructCases are the values both SDKs encode; tests/json_structs.rs
// builds the same values in the same order.
func jsonStructCases() []struct {
	name string
	v    any
} {
	seven := int64(7)
	return []struct {
		name string
		v    any
	}{
		{"empty", jsEmpty{}},
		{"flat", jsFlat{Zeta: "z", Alpha: -3, Mid: true, Amp: "&"}},
		{"escapes", jsFlat{Zeta: "<a href=\"x\">&amp;</a>\u2028\u2029\n\r\t\b\f\x01\x1f\x7f é 😀 \\ /", Amp: ""}},
		{"numbers", jsNumbers{
			I: 42, Min: math.MinInt64, U: math.MaxUint64, F: 1.5, Small: 1e-7, Tiny: 5e-324, Big: 1e21,
			Plain: 1e20, Neg: -2.5e-6, Zero: 0, NegZero: math.Copysign(0, -1), F32: 0.1, F32Big: 3e38,
			Third: 1.0 / 3,
		}},
		{"nested", jsNested{
			Name:  "n",
			Inner: jsInner{B: 2, A: []string{"y", "x"}},
			Tags:  map[string]int{"b": 2, "a": 1, "<": 0},
			NoMap: nil,
			Nums:  map[int]string{10: "ten", 9: "nine", -1: "minus"},
			Some:  &seven,
			List:  []jsInner{{B: 1, A: []string{}}, {B: 0}},
			Zero:  []int64{},
			Bytes: []byte("hi>\x00"),
			Deep:  map[string]jsFlat{"k": {Zeta: "deep"}},
		}},
	}
}

// TestJSONStructsMatchGo checks that the Rust SDK's Json codec writes
// structs byte for byte as the Go SDK's flowhost.JSON does: the golden
// file is Go's output, and the Rust test json_structs must reproduce it.
func TestJSONStructsMatchGo(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Typed state JSON elements written by the Go SDK (flowhost.JSON); the Rust SDK's Json must write the same (tests/json_structs.rs).\n")
	for _, c := range jsonStructCases() {
		out, err := flowhost.JSON.Encode(c.v)
		require.NoError(t, err, c.name)
		b.WriteString(c.name + "\t" + string(out) + "\n")
	}
	if *updateGolden {
		require.NoError(t, os.WriteFile(jsonStructsPath, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(jsonStructsPath)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String(), "the golden file is not Go's output (go test -run TestJSONStructsMatchGo -update)")

	sdk, err := rust.SDKDir()
	require.NoError(t, err)
	cmd, err := rust.CargoCommand(sdk, "test", "--test", "json_structs")
	require.NoError(t, err)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "cargo test --test json_structs:\n%s", out)
	require.Contains(t, string(out), "test result: ok")
}
