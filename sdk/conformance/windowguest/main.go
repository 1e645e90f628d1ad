// Command windowguest is the Go SDK's window conformance guest
// (sdk/conformance/README.md, "The window guest"; the design is sdk/WINDOWS.md): a transform
// that counts each key's records in event-time windows with the SDK's
// window helper, configured by its Init parameters, so that the real-host
// window test of sdk/conformance can run it through the runtime and
// compare its outputs with a model computed from the input.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o windowguest.wasm ./sdk/conformance/windowguest
//
// Parameters: kind (tumbling, hopping, session), size_ns (tumbling,
// hopping), advance_ns (hopping), gap_ns (session), lateness_ns (default
// 0). Results go to `windows` as {"start":S,"end":E,"count":N}; late
// records go to `late` unchanged.
package main

import (
	"encoding/binary"
	"fmt"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// The streams the window test declares.
const (
	output = "windows"
	late   = "late"
)

// windows is the helper Init configured; nil until Init succeeded.
var windows *flowhost.Windows

func init() {
	flowhost.Register(computation)
}

// computation is a variable so that tests can run it natively.
var computation = flowhost.Computation{Init: start, Process: process}

func main() {}

// counter counts records: the accumulator is the count as an unsigned
// varint, the encoding every language's window guest uses.
var counter = flowhost.Aggregator{
	Init: func() []byte { return nil },
	Add: func(acc []byte, _ flowhost.Message) []byte {
		return binary.AppendUvarint(nil, count(acc)+1)
	},
	Merge: func(a, b []byte) []byte {
		return binary.AppendUvarint(nil, count(a)+count(b))
	},
	Result: func(w flowhost.Window, acc []byte) []byte {
		return fmt.Appendf(nil, `{"start":%d,"end":%d,"count":%d}`, w.Start, w.End, count(acc))
	},
}

// count reads an accumulator; the empty one is 0. The helper only hands
// back what Add and Merge wrote, so a bad varint cannot occur.
func count(acc []byte) uint64 {
	n, _ := binary.Uvarint(acc)
	return n
}

// start reads the window parameters and refuses to start, naming the
// parameter, when one is missing or out of range.
func start(p flowhost.Params) error {
	kind, err := p.String("kind")
	if err != nil {
		return err
	}
	positive := func(name string) (time.Duration, error) {
		v, err := p.Int(name)
		if err != nil {
			return 0, err
		}
		if v <= 0 {
			return 0, fmt.Errorf("parameter %q: expected an integer above 0; got %d", name, v)
		}
		return time.Duration(v), nil
	}
	var lateness int64
	if p.Has("lateness_ns") {
		if lateness, err = p.Int("lateness_ns"); err != nil {
			return err
		}
		if lateness < 0 {
			return fmt.Errorf("parameter %q: expected an integer at or above 0; got %d", "lateness_ns", lateness)
		}
	}
	var spec flowhost.WindowSpec
	switch kind {
	case "tumbling":
		size, err := positive("size_ns")
		if err != nil {
			return err
		}
		spec = flowhost.Tumbling(size)
	case "hopping":
		size, err := positive("size_ns")
		if err != nil {
			return err
		}
		advance, err := positive("advance_ns")
		if err != nil {
			return err
		}
		if advance > size {
			return fmt.Errorf("parameter %q: expected at most size_ns (%d); got %d", "advance_ns", size, advance)
		}
		spec = flowhost.Hopping(size, advance)
	case "session":
		gap, err := positive("gap_ns")
		if err != nil {
			return err
		}
		spec = flowhost.Session(gap)
	default:
		return fmt.Errorf("parameter %q: expected tumbling, hopping or session; got %q", "kind", kind)
	}
	windows = flowhost.NewWindows(spec, counter, output, late, flowhost.WithAllowedLateness(time.Duration(lateness)))
	return nil
}

// process hands every key of the batch to the helper, and does nothing
// else. A key whose state the helper cannot read is failed by the helper
// (its inputs go to dead letters); the other keys of the batch go on.
func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		_ = windows.Process(k)
	}
	return nil
}
