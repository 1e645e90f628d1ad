//go:build !cgo || nowasmtime

package engine

import "errors"

// WasmtimeAvailable reports whether this build has the wasmtime engine:
// it needs cgo and is left out with -tags nowasmtime.
const WasmtimeAvailable = false

// NewWasmtime would return the wasmtime engine; this build has none, so it
// always fails and names the alternative.
func NewWasmtime(Config) (Engine, error) {
	return nil, errors.New("flowhost was built without wasmtime (cgo disabled or -tags nowasmtime); use engine: wazero")
}
