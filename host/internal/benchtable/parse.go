package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Result is one benchmark result line of `go test -bench` output.
type Result struct {
	// Name is the benchmark's full name without the -GOMAXPROCS suffix,
	// e.g. "BenchmarkBenthos/noop".
	Name string
	// Iterations is b.N of the run.
	Iterations int64
	// Metrics maps each unit (ns/op, msgs/s, any b.ReportMetric unit) to
	// its value.
	Metrics map[string]float64
}

// Parse reads `go test -bench` output and returns its result lines in
// order. Lines that are not results (goos:, pkg:, PASS, ok, logs, and a
// sub-benchmark's parent named alone on a line) are skipped; a line that
// starts like a result (a Benchmark name and an iteration count) but whose
// metrics do not parse is an error naming the line and the field. When a
// benchmark appears more than once (-count), every line is returned.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		res, ok, err := parseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if ok {
			out = append(out, res)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseLine parses one line; ok is false for a line that is not a result.
func parseLine(s string) (res Result, ok bool, err error) {
	fields := strings.Fields(s)
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "Benchmark") {
		return Result{}, false, nil
	}
	n, convErr := strconv.ParseInt(fields[1], 10, 64)
	if convErr != nil {
		// "BenchmarkX   some log text": not a result.
		return Result{}, false, nil
	}
	if n <= 0 {
		return Result{}, false, fmt.Errorf("%s: iteration count %d is not positive", fields[0], n)
	}
	rest := fields[2:]
	if len(rest)%2 != 0 {
		return Result{}, false, fmt.Errorf("%s: value %q has no unit", fields[0], rest[len(rest)-1])
	}
	res = Result{Name: trimProcs(fields[0]), Iterations: n, Metrics: make(map[string]float64, len(rest)/2)}
	for i := 0; i < len(rest); i += 2 {
		v, convErr := strconv.ParseFloat(rest[i], 64)
		if convErr != nil {
			return Result{}, false, fmt.Errorf("%s: field %d (%q, unit %q) is not a number", fields[0], i+3, rest[i], rest[i+1])
		}
		if _, dup := res.Metrics[rest[i+1]]; dup {
			return Result{}, false, fmt.Errorf("%s: unit %q appears twice", fields[0], rest[i+1])
		}
		res.Metrics[rest[i+1]] = v
	}
	return res, true, nil
}

// trimProcs drops the "-N" GOMAXPROCS suffix go test appends to the last
// element of a benchmark's name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 || strings.IndexByte(name[i:], '/') >= 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}
