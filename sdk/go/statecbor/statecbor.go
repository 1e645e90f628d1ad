// Package statecbor is the CBOR codec of the Go SDK's typed state cells
// (flowhost.Value, List, Map). It is a package of its own because
// fxamacker/cbor is large: merely importing it adds about 350 KB to every
// guest module, and a guest that uses it for cells is about 1.2 MB larger
// than one using flowhost.JSON. A guest that does not import this package
// does not pay for it.
package statecbor

import (
	"github.com/fxamacker/cbor/v2"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// Codec encodes elements with fxamacker/cbor in RFC 8949 core
// deterministic form (sorted map keys, shortest integers and floats), so
// that equal values give equal bytes, and decodes them back.
var Codec flowhost.Codec = codec{}

var enc, _ = cbor.CoreDetEncOptions().EncMode()

type codec struct{}

func (codec) Encode(v any) ([]byte, error)    { return enc.Marshal(v) }
func (codec) Decode(data []byte, v any) error { return cbor.Unmarshal(data, v) }
