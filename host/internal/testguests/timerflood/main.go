// Command timerflood is a hostile guest for per-tenant timer quotas: a
// transform that, for every message it is given, sets 100 timers for the
// message's key and emits the message unchanged on its first declared
// output stream.
//
// The timers' trigger timestamps are distinct, within a message and
// across the messages of a key (so that none is merged with another:
// timers of one key with the same trigger are one timer), and lie in the
// far future, past 2116 (1<<62 ns since the Unix epoch), so that no
// watermark of a test reaches them: they never fire, and a key's pending
// timers grow by 100 with every message. The triggers of a message are
// derived from its message_id, so a replay sets the same timers. Init
// fails when the computation declares no output stream.
package main

import (
	"errors"
	"hash/fnv"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

const (
	// perMessage is how many timers every message sets.
	perMessage = 100
	// farFuture is the earliest trigger: 1<<62 ns after the Unix epoch,
	// in 2116.
	farFuture = int64(1) << 62
)

// out is the first declared output stream, from Init.
var out string

func init() {
	flowhost.Register(flowhost.Computation{
		Init: func(p flowhost.Params) error {
			streams := p.OutputStreams()
			if len(streams) == 0 {
				return errors.New("timerflood needs an output stream")
			}
			out = streams[0]
			return nil
		},
		Process: func(b *flowhost.Batch) error {
			for k := range b.Keys() {
				for m := range k.Messages() {
					base := triggerBase(m.ID)
					for i := range int64(perMessage) {
						k.SetTimer(base + i)
					}
					k.Emit(out, m.Payload)
				}
			}
			return nil
		},
	})
}

// triggerBase is the first of a message's perMessage consecutive triggers:
// farFuture plus 1024 times a 50-bit hash of its message_id, which keeps
// every trigger below 1<<63 and the ranges of two messages apart unless
// their ids' hashes collide.
func triggerBase(id string) int64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return farFuture + int64(h.Sum64()&(1<<50-1))*1024
}

func main() {}
