// Command stategrowth is a hostile guest for per-tenant state quotas: a
// transform that appends 64 KiB to its key's state for every message it
// is given, so that a key's state holds 64 KiB times the number of
// messages the key has seen and never shrinks, and that emits every
// message unchanged on its first declared output stream.
//
// The appended bytes are a deterministic pseudo-random function of their
// offset in the state (no compression can hide the growth, and a replay
// writes the same state). Init fails when the computation declares no
// output stream.
package main

import (
	"encoding/binary"
	"errors"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// growth is how many bytes every message adds to its key's state.
const growth = 64 << 10

// out is the first declared output stream, from Init.
var out string

func init() {
	flowhost.Register(flowhost.Computation{
		Init: func(p flowhost.Params) error {
			streams := p.OutputStreams()
			if len(streams) == 0 {
				return errors.New("stategrowth needs an output stream")
			}
			out = streams[0]
			return nil
		},
		Process: func(b *flowhost.Batch) error {
			for k := range b.Keys() {
				state, _ := k.State()
				state = append([]byte(nil), state...)
				for m := range k.Messages() {
					state = grow(state)
					k.Emit(out, m.Payload)
				}
				k.SetState(state)
			}
			return nil
		},
	})
}

// grow appends growth bytes to state: 8-byte words, each the splitmix64
// mix of the word's offset in the state.
func grow(state []byte) []byte {
	for range growth / 8 {
		x := uint64(len(state)) + 0x9e3779b97f4a7c15
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		x ^= x >> 31
		state = binary.LittleEndian.AppendUint64(state, x)
	}
	return state
}

func main() {}
