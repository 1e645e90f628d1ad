package spec_test

import (
	"fmt"

	"github.com/flowhost/flowhost/host/spec"
)

func ExampleParse() {
	src := `
name: orders
sources:
  - {name: orders-in, type: generator, stream: orders, partitions: 2}
computations:
  - name: totals
    plugin: sum-by-customer
    group_by: [customer]
    input_streams: [orders]
    output_streams: [totals]
    batch: {max_rows: 500}
sinks:
  - {name: out, type: stdout, streams: [totals]}
`
	p, err := spec.Parse("pipeline.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := p.Computation("totals")
	fmt.Println(c.Kind, c.Partitions, c.Batch.MaxRows, c.Batch.MaxBytes, c.Batch.MaxDuration, c.BufferBytes)
	w, _ := p.Writer("totals")
	fmt.Println(w, "->", p.Readers("totals"))
	// Output:
	// transform 1 500 10485760 10ms 67108864
	// computation "totals" -> [sink "out"]
}

func ExampleParse_errors() {
	src := `
name: orders
sources:
  - {name: orders-in, type: generator, stream: orders}
computations:
  - name: totals
    plugin: sum-by-customer
    kind: transfrom
    input_streams: [order]
`
	_, err := spec.Parse("pipeline.yaml", []byte(src))
	fmt.Println(err)
	// Output:
	// pipeline.yaml:8:11: computations[0].kind: expected one of transform, map; got "transfrom"
}

func ExampleFormatError() {
	src := "name: orders\nsources:\n  - {name: orders-in, type: generator, stream: orders}\nsinks:\n  - {name: out, type: stdout, streams: [totals]}\n"
	_, err := spec.Parse("pipeline.yaml", []byte(src))
	fmt.Println(spec.FormatError(err, false))
	// Output:
	// pipeline.yaml:5:41: sinks[0].streams[0]: stream "totals" is not declared: no source or computation writes it and streams does not list it
	//    2 | sources:
	//    3 |   - {name: orders-in, type: generator, stream: orders}
	//    4 | sinks:
	// >  5 |   - {name: out, type: stdout, streams: [totals]}
	//                                                ^
}

func ExampleParseSize() {
	for _, s := range []string{"65536", "10MB", "64MiB"} {
		n, _ := spec.ParseSize(s)
		fmt.Println(s, n)
	}
	// Output:
	// 65536 65536
	// 10MB 10000000
	// 64MiB 67108864
}

func ExamplePipeline_TopologicalOrder() {
	src := `
name: chain
sources: [{name: in, type: generator, stream: raw}]
computations:
  - {name: enrich, plugin: p, input_streams: [clean], output_streams: [rich]}
  - {name: clean, plugin: p, kind: map, input_streams: [raw], output_streams: [clean]}
`
	p, _ := spec.Parse("chain.yaml", []byte(src))
	for _, c := range p.TopologicalOrder() {
		fmt.Println(c.Name)
	}
	// Output:
	// clean
	// enrich
}
