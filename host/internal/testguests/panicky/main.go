// Command panicky is a hostile guest built with the Go SDK whose Process
// panics on every batch: the host must fail the batch, name the plugin,
// and dead-letter its inputs.
package main

import flowhost "github.com/flowhost/flowhost/sdk/go"

func init() {
	flowhost.Register(flowhost.Computation{Process: func(b *flowhost.Batch) error {
		panic("hostile guest panics on purpose")
	}})
}

func main() {}
