// Command benchtable reads the output of `go test -bench` runs (the files
// named on the command line, or standard input) and prints the one table of
// `make bench`: every rate of issue 13 in messages per second and as a
// ratio to flowhost's native path of the same run, then its other figures
// (costs per message, scaling, sizes, latency, RSS) beside their goals.
// A figure missing from
// the output is printed as missing and makes the command exit with status
// 1, so that a benchmark that did not run is never left out silently.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		var readers []io.Reader
		for _, name := range os.Args[1:] {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchtable:", err)
				os.Exit(2)
			}
			defer f.Close()
			readers = append(readers, f)
		}
		in = io.MultiReader(readers...)
	}
	results, err := Parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	missing := Render(os.Stdout, Rows, results)
	fmt.Println()
	missing = append(missing, RenderFigures(os.Stdout, Figures, results)...)
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "benchtable: not in the benchmark output: %v\n", missing)
		os.Exit(1)
	}
}
