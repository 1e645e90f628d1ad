// Command tagger is the guest of the hot-reload tests: a transform that
// emits every message, wrapped as {"tag": TAG, "in": PAYLOAD}, on each of
// its declared output streams, where TAG is its "tag" parameter (a
// manifest default). Two versions of a plugin differ in their manifest's
// tag, so the sink shows which version processed each message.
package main

import (
	"fmt"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var (
	tag  string
	outs []string
)

func init() {
	flowhost.Register(flowhost.Computation{
		Init: func(p flowhost.Params) error {
			var err error
			tag, err = p.String("tag")
			outs = p.OutputStreams()
			return err
		},
		Process: func(b *flowhost.Batch) error {
			for k := range b.Keys() {
				for m := range k.Messages() {
					for _, s := range outs {
						k.Emit(s, fmt.Appendf(nil, `{"tag":%q,"in":%s}`, tag, m.Payload))
					}
				}
			}
			return nil
		},
	})
}

func main() {}
