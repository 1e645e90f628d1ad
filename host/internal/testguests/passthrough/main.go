// Command passthrough is a well-behaved guest: a transform that emits
// every message unchanged on each of its declared output streams. Unlike
// identity, which always emits on "out", it can run beside another
// computation under any output stream name; the hostile suite pads it to
// a 100 MiB module.
package main

import flowhost "github.com/flowhost/flowhost/sdk/go"

// outs are the declared output streams, from Init.
var outs []string

func init() {
	flowhost.Register(flowhost.Computation{
		Init: func(p flowhost.Params) error {
			outs = p.OutputStreams()
			return nil
		},
		Process: func(b *flowhost.Batch) error {
			for k := range b.Keys() {
				for m := range k.Messages() {
					for _, s := range outs {
						k.Emit(s, m.Payload)
					}
				}
			}
			return nil
		},
	})
}

func main() {}
