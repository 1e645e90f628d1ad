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

// Figure is one line of the second table: a figure of issue 13 that is not
// a rate of the same pipeline (costs per message, scaling ratios, sizes,
// latencies), beside the goal it is held to.
type Figure struct {
	Label, Bench, Metric, Goal string
	// Worst takes the largest value over the runs (-count) instead of the
	// mean: for goals that must hold in every run.
	Worst bool
}

// Figures are issue 13's other goals, in the order of the issue.
var Figures = []Figure{
	{Label: "native, 1 partition, msgs/s", Bench: "BenchmarkNativeHost", Metric: "p1-msgs/s", Goal: ">= 1M, and ahead of Benthos no-op"},
	{Label: "native, heap allocations per message", Bench: "BenchmarkNativeHost", Metric: "p1-allocs/msg", Goal: "<= 3"},
	{Label: "native, CPU ns per message", Bench: "BenchmarkNativeHost", Metric: "p1-cpu-ns/msg", Goal: "<= 1000"},
	{Label: "native, a chain of 3 over one (time)", Bench: "BenchmarkNativeHost", Metric: "chain3/p1-time", Goal: "<= 1.5"},
	{Label: "native, 4 partitions over 1 (speed)", Bench: "BenchmarkNativeHost", Metric: "p4/p1-speed", Goal: ">= 1.6 on 2 cores"},
	{Label: "ABI response decoding, ns per message", Bench: "BenchmarkDecodeResponse/specialised", Metric: "ns/message", Goal: "<= 150"},
	{Label: "Go SDK identity guest, module bytes", Bench: "BenchmarkIdentityLanguages/go/wazero", Metric: "wasm-bytes", Goal: "< 4.8M"},
	{Label: "exactly-once over in memory, 1 partition", Bench: "BenchmarkExactlyOnce/partitions=1", Metric: "exactly-once/memory", Goal: ">= 0.7"},
	{Label: "exactly-once, bytes written to disk per message", Bench: "BenchmarkExactlyOnce/partitions=1", Metric: "disk-B/msg", Goal: "<= 400"},
	{Label: "exactly-once, p99 ingest-to-sink ms at half the peak, worst run", Bench: "BenchmarkExactlyOnceLatency/exactly-once", Metric: "p99-ms", Goal: "< 50 in every run", Worst: true},
	{Label: "peak RSS MiB, in memory, 1M records", Bench: "BenchmarkNativeHostRSS/records=1000000", Metric: "peak-rss-MiB", Goal: "bounded by the buffers"},
	{Label: "peak RSS MiB, in memory, 10M records (after 1M)", Bench: "BenchmarkNativeHostRSS/records=10000000", Metric: "peak-rss-MiB", Goal: "the same as 1M"},
	{Label: "peak RSS MiB, after the exactly-once run", Bench: "BenchmarkExactlyOnce/partitions=1", Metric: "peak-RSS-MB-after-exactly-once", Goal: "bounded by the buffers"},
}

// lookup returns the mean of metric over every result of bench (several
// with -count), and whether there was one.
func lookup(results []Result, bench, metric string) (float64, bool) {
	return aggregate(results, bench, metric, false)
}

// aggregate returns the mean (or, when worst, the largest value) of metric
// over every result of bench, and whether there was one.
func aggregate(results []Result, bench, metric string, worst bool) (float64, bool) {
	var sum, most float64
	n := 0
	for _, r := range results {
		if v, ok := r.Metrics[metric]; ok && r.Name == bench {
			if n == 0 || v > most {
				most = v
			}
			sum += v
			n++
		}
	}
	switch {
	case n == 0:
		return 0, false
	case worst:
		return most, true
	}
	return sum / float64(n), true
}

// RenderFigures writes figs as a Markdown table of the measured value
// beside its goal, and returns the "bench metric" of every figure the
// results lack (printed as missing, never left out).
func RenderFigures(w io.Writer, figs []Figure, results []Result) (missing []string) {
	fmt.Fprintln(w, "| figure | measured | goal |")
	fmt.Fprintln(w, "|---|---:|---|")
	for _, f := range figs {
		v, ok := aggregate(results, f.Bench, f.Metric, f.Worst)
		if !ok {
			missing = append(missing, f.Bench+" "+f.Metric)
			fmt.Fprintf(w, "| %s | missing | %s |\n", f.Label, f.Goal)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", f.Label, plain(v), f.Goal)
	}
	return missing
}

// plain prints a figure with two decimals below 100 and as a rate (k, M)
// above.
func plain(v float64) string {
	if math.Abs(v) < 100 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return human(v)
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
