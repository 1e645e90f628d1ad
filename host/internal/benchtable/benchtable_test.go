package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/flowhost/flowhost/host
cpu: AMD EPYC
BenchmarkLimit-2   	       1	 292732908 ns/op	        96.00 B/msg	   3416189 msgs/s
BenchmarkIdentityLanguages
BenchmarkIdentityLanguages/native-2         	       1	3000000000 ns/op	300000 msgs/s	 1.000 x-native
BenchmarkIdentityLanguages/c/wazero-2       	       1	6000000000 ns/op	150000 msgs/s	 0.5000 x-native
BenchmarkIdentityLanguages/c/wasmtime-2     	       1	4000000000 ns/op	225000 msgs/s	 0.7500 x-native
BenchmarkExactlyOnce/partitions=1-2 	       1	9 ns/op	120000 exactly-once-msgs/s	 300000 memory-msgs/s
PASS
ok  	github.com/flowhost/flowhost/host	12.3s
BenchmarkBenthos/noop-2         	       1	 320407990 ns/op	    624208 msgs/s
BenchmarkBenthos/noop-2         	       1	 320407990 ns/op	    624210 msgs/s
BenchmarkSameProcess-2   	       1	7387536304 ns/op	    800000 benthos-noop-msgs/s	    200000 flowhost-native-msgs/s
`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Result
		err      string
	}{
		{name: "empty", in: ""},
		{name: "not results", in: "goos: linux\nPASS\nBenchmarkX\nBenchmarkX some log line\n--- FAIL: BenchmarkY\n"},
		{name: "one", in: "BenchmarkA/b=1-8 \t 10\t 5 ns/op\t 2.5 msgs/s\n",
			want: []Result{{Name: "BenchmarkA/b=1", Iterations: 10, Metrics: map[string]float64{"ns/op": 5, "msgs/s": 2.5}}}},
		{name: "no procs suffix", in: "BenchmarkA-x 1 5 ns/op\n",
			want: []Result{{Name: "BenchmarkA-x", Iterations: 1, Metrics: map[string]float64{"ns/op": 5}}}},
		{name: "value without unit", in: "ok\nBenchmarkA-2 1 5 ns/op 7\n", err: `line 2: BenchmarkA-2: value "7" has no unit`},
		{name: "value not a number", in: "BenchmarkA-2 1 5 ns/op x msgs/s\n", err: `line 1: BenchmarkA-2: field 5 ("x", unit "msgs/s") is not a number`},
		{name: "zero iterations", in: "BenchmarkA-2 0 5 ns/op\n", err: "line 1: BenchmarkA-2: iteration count 0 is not positive"},
		{name: "unit twice", in: "BenchmarkA-2 1 5 ns/op 6 ns/op\n", err: `line 1: BenchmarkA-2: unit "ns/op" appears twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRender(t *testing.T) {
	results, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	var out strings.Builder
	missing := Render(&out, Rows, results)
	require.Equal(t, []string{
		"BenchmarkIdentityLanguages/rust/wasmtime msgs/s",
		"BenchmarkIdentityLanguages/rust/wazero msgs/s",
		"BenchmarkIdentityLanguages/assemblyscript/wasmtime msgs/s",
		"BenchmarkIdentityLanguages/assemblyscript/wazero msgs/s",
		"BenchmarkIdentityLanguages/go/wasmtime msgs/s",
		"BenchmarkIdentityLanguages/go/wazero msgs/s",
		"BenchmarkExactlyOnce/partitions=2 exactly-once-msgs/s",
		"BenchmarkBenthos/wazero msgs/s",
		"BenchmarkSameProcess benthos-wazero-msgs/s",
	}, missing)
	require.Equal(t, `| what | msgs/s | x flowhost native |
|---|---:|---:|
| limit baseline: generate the records and count them, no host | 3.42M | 11.39 |
| flowhost native Go, 1 partition | 300k | 1.00 |
| flowhost C guest, wasmtime with the CPU limit (the default) | 225k | 0.75 |
| flowhost C guest, wazero without a CPU limit | 150k | 0.50 |
| flowhost Rust guest, wasmtime with the CPU limit (the default) | missing | - |
| flowhost Rust guest, wazero without a CPU limit | missing | - |
| flowhost AssemblyScript guest, wasmtime with the CPU limit (the default) | missing | - |
| flowhost AssemblyScript guest, wazero without a CPU limit | missing | - |
| flowhost Go guest, wasmtime with the CPU limit (the default) | missing | - |
| flowhost Go guest, wazero without a CPU limit | missing | - |
| flowhost native, exactly-once, 1 partition | 120k | 0.40 |
| flowhost native, exactly-once, 2 partitions | missing | - |
| Benthos v4, no-op batch processor | 624k | 2.08 |
| Benthos v4, wazero identity per message | missing | - |
| same process, alternating: flowhost native Go, 1 partition | 200k | 1.00 |
| same process, alternating: Benthos v4, no-op batch processor | 800k | 4.00 |
| same process, alternating: Benthos v4, wazero identity per message | missing | - |
`, out.String())
}

func TestRenderWithoutReference(t *testing.T) {
	var out strings.Builder
	missing := Render(&out, Rows[:2], []Result{{Name: "BenchmarkLimit", Iterations: 1, Metrics: map[string]float64{"msgs/s": 10}}})
	require.Equal(t, []string{"BenchmarkIdentityLanguages/native msgs/s"}, missing)
	require.Contains(t, out.String(), "| limit baseline: generate the records and count them, no host | 10 | - |\n")
}

// A result line go test would print parses back to its name, count and
// metrics.
func TestParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := "Benchmark" + rapid.StringMatching(`[A-Za-z]{1,8}(/[a-z=0-9]{1,6}){0,2}`).Draw(t, "name")
		procs := rapid.IntRange(1, 64).Draw(t, "procs")
		n := rapid.Int64Range(1, 1<<40).Draw(t, "n")
		units := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z][a-z/-]{0,10}`), 0, 5, rapid.ID[string]).Draw(t, "units")
		line := fmt.Sprintf("%s-%d \t %d", name, procs, n)
		want := map[string]float64{}
		for _, u := range units {
			v := rapid.Float64Range(0, 1e12).Draw(t, "v")
			want[u] = v
			line += fmt.Sprintf("\t%g %s", v, u)
		}
		got, err := Parse(strings.NewReader("pkg: x\n" + line + "\nPASS\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Name != name || got[0].Iterations != n || fmt.Sprint(got[0].Metrics) != fmt.Sprint(want) {
			t.Fatalf("%q parsed as %+v", line, got)
		}
	})
}

// FuzzParse: any input either fails with an error naming its line, or
// parses into results with positive counts and names of benchmarks.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkA-2 1 5 ns/op 7\n")
	f.Add("BenchmarkA-2 1 5 ns/op x msgs/s\n")
	f.Add("BenchmarkA 0\n")
	f.Fuzz(func(t *testing.T, in string) {
		res, err := Parse(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && !strings.Contains(err.Error(), "too long") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, r := range res {
			if r.Iterations <= 0 || !strings.HasPrefix(r.Name, "Benchmark") {
				t.Fatalf("bad result %+v", r)
			}
		}
		var out strings.Builder
		Render(&out, Rows, res)
	})
}

func TestRenderFigures(t *testing.T) {
	results, err := Parse(strings.NewReader(`BenchmarkNativeHost-2 1 5 ns/op 650000 p1-msgs/s 11.84 p1-allocs/msg
BenchmarkLat/eo-2 1 5 ns/op 20 p99-ms
BenchmarkLat/eo-2 1 5 ns/op 70 p99-ms
BenchmarkLat/eo-2 1 5 ns/op 30 p99-ms
`))
	require.NoError(t, err)
	var out strings.Builder
	missing := RenderFigures(&out, []Figure{
		{Label: "rate", Bench: "BenchmarkNativeHost", Metric: "p1-msgs/s", Goal: ">= 1M"},
		{Label: "allocs", Bench: "BenchmarkNativeHost", Metric: "p1-allocs/msg", Goal: "<= 3"},
		{Label: "p99 worst", Bench: "BenchmarkLat/eo", Metric: "p99-ms", Goal: "< 50", Worst: true},
		{Label: "p99 mean", Bench: "BenchmarkLat/eo", Metric: "p99-ms", Goal: "< 50"},
		{Label: "absent", Bench: "BenchmarkNone", Metric: "x", Goal: "any"},
	}, results)
	require.Equal(t, []string{"BenchmarkNone x"}, missing)
	require.Equal(t, `| figure | measured | goal |
|---|---:|---|
| rate | 650k | >= 1M |
| allocs | 11.84 | <= 3 |
| p99 worst | 70.00 | < 50 |
| p99 mean | 40.00 | < 50 |
| absent | missing | any |
`, out.String())
}

// Every figure of make bench names a benchmark that make bench runs.
func TestFiguresNameTheBenchmarksMakeBenchRuns(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	require.NoError(t, err)
	for _, f := range Figures {
		top := strings.SplitN(f.Bench, "/", 2)[0]
		require.True(t, strings.Contains(string(makefile), top), "figure %q: make bench does not run %s", f.Label, top)
	}
	for _, r := range Rows {
		top := strings.SplitN(r.Bench, "/", 2)[0]
		require.True(t, strings.Contains(string(makefile), top), "row %q: make bench does not run %s", r.Label, top)
	}
}
