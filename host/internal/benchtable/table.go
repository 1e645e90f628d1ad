package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
)

// Row is one line of the table: a metric of one benchmark.
type Row struct {
	Label, Bench, Metric string
	// Reference marks the row every ratio is taken against.
	Reference bool
	// Against, when set, is a metric of the same benchmark (the same
	// process and iteration) that this row's ratio is taken against
	// instead of the reference row.
	Against string
}

// Rows are the figures of issue 13, in the order of the table.
var Rows = []Row{
	{Label: "limit baseline: generate the records and count them, no host", Bench: "BenchmarkLimit", Metric: "msgs/s"},
	{Label: "flowhost native Go, 1 partition", Bench: "BenchmarkIdentityLanguages/native", Metric: "msgs/s", Reference: true},
	{Label: "flowhost C guest, wasmtime with the CPU limit (the default)", Bench: "BenchmarkIdentityLanguages/c/wasmtime", Metric: "msgs/s"},
	{Label: "flowhost C guest, wazero without a CPU limit", Bench: "BenchmarkIdentityLanguages/c/wazero", Metric: "msgs/s"},
	{Label: "flowhost Rust guest, wasmtime with the CPU limit (the default)", Bench: "BenchmarkIdentityLanguages/rust/wasmtime", Metric: "msgs/s"},
	{Label: "flowhost Rust guest, wazero without a CPU limit", Bench: "BenchmarkIdentityLanguages/rust/wazero", Metric: "msgs/s"},
	{Label: "flowhost AssemblyScript guest, wasmtime with the CPU limit (the default)", Bench: "BenchmarkIdentityLanguages/assemblyscript/wasmtime", Metric: "msgs/s"},
	{Label: "flowhost AssemblyScript guest, wazero without a CPU limit", Bench: "BenchmarkIdentityLanguages/assemblyscript/wazero", Metric: "msgs/s"},
	{Label: "flowhost Go guest, wasmtime with the CPU limit (the default)", Bench: "BenchmarkIdentityLanguages/go/wasmtime", Metric: "msgs/s"},
	{Label: "flowhost Go guest, wazero without a CPU limit", Bench: "BenchmarkIdentityLanguages/go/wazero", Metric: "msgs/s"},
	{Label: "flowhost native, exactly-once, 1 partition", Bench: "BenchmarkExactlyOnce/partitions=1", Metric: "exactly-once-msgs/s"},
	{Label: "flowhost native, exactly-once, 2 partitions", Bench: "BenchmarkExactlyOnce/partitions=2", Metric: "exactly-once-msgs/s"},
	{Label: "Benthos v4, no-op batch processor", Bench: "BenchmarkBenthos/noop", Metric: "msgs/s"},
	{Label: "Benthos v4, wazero identity per message", Bench: "BenchmarkBenthos/wazero", Metric: "msgs/s"},
	{Label: "same process, alternating: flowhost native Go, 1 partition", Bench: "BenchmarkSameProcess", Metric: "flowhost-native-msgs/s", Against: "flowhost-native-msgs/s"},
	{Label: "same process, alternating: Benthos v4, no-op batch processor", Bench: "BenchmarkSameProcess", Metric: "benthos-noop-msgs/s", Against: "flowhost-native-msgs/s"},
	{Label: "same process, alternating: Benthos v4, wazero identity per message", Bench: "BenchmarkSameProcess", Metric: "benthos-wazero-msgs/s", Against: "flowhost-native-msgs/s"},
}

// lookup returns the mean of metric over every result of bench (several
// with -count), and whether there was one.
func lookup(results []Result, bench, metric string) (float64, bool) {
	var sum float64
	n := 0
	for _, r := range results {
		if v, ok := r.Metrics[metric]; ok && r.Name == bench {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// Render writes rows as a Markdown table of msgs/s and the ratio to the
// reference row (or to the row's Against metric), and returns the "bench
// metric" of every row the results lack (printed as missing, never left
// out). Without the figure a ratio needs, the ratio column is "-".
func Render(w io.Writer, rows []Row, results []Result) (missing []string) {
	ref, haveRef := 0.0, false
	for _, r := range rows {
		if r.Reference {
			ref, haveRef = lookup(results, r.Bench, r.Metric)
		}
	}
	haveRef = haveRef && ref > 0
	fmt.Fprintln(w, "| what | msgs/s | x flowhost native |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, r := range rows {
		v, ok := lookup(results, r.Bench, r.Metric)
		if !ok {
			missing = append(missing, r.Bench+" "+r.Metric)
			fmt.Fprintf(w, "| %s | missing | - |\n", r.Label)
			continue
		}
		ratio := "-"
		if r.Against != "" {
			if against, ok := lookup(results, r.Bench, r.Against); ok && against > 0 {
				ratio = strconv.FormatFloat(v/against, 'f', 2, 64)
			}
		} else if haveRef {
			ratio = strconv.FormatFloat(v/ref, 'f', 2, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.Label, human(v), ratio)
	}
	return missing
}

// human prints a rate with three significant figures and a k or M suffix.
func human(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}
