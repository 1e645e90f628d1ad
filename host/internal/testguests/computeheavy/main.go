// Command computeheavy is the compute-bound benchmark guest: a transform
// that does a fixed amount of hashing per message (Rounds chained SHA-256
// sums, starting from the payload) and then emits the message unchanged on
// stream "out", like identity. It is the guest-bound side of the engine
// comparison in package host's benchmarks: with it, the guest's own code,
// not the runtime or the ABI, takes most of the time of a batch.
package main

import (
	"crypto/sha256"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// Rounds is the number of SHA-256 sums per message.
const Rounds = 64

// digest keeps the last message's hash, so that the compiler cannot drop
// the hashing.
var digest [sha256.Size]byte

func init() {
	flowhost.Register(flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				d := sha256.Sum256(m.Payload)
				for range Rounds - 1 {
					d = sha256.Sum256(d[:])
				}
				digest = d
				k.Emit("out", m.Payload)
			}
		}
		return nil
	}})
}

func main() {}
