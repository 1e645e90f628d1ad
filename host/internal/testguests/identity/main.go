// Command identity is the benchmark guest: a transform that emits every
// message unchanged on stream "out". It is the WASM side of the
// native-versus-WASM comparison in package host's benchmarks.
package main

import flowhost "github.com/flowhost/flowhost/sdk/go"

func init() {
	flowhost.Register(flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				k.Emit("out", m.Payload)
			}
		}
		return nil
	}})
}

func main() {}
