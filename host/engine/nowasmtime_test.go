//go:build !cgo || nowasmtime

package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/engine"
)

func TestNoWasmtime(t *testing.T) {
	require.False(t, engine.WasmtimeAvailable)
	_, err := engine.NewWasmtime(engine.NewConfig())
	require.EqualError(t, err, "flowhost was built without wasmtime (cgo disabled or -tags nowasmtime); use engine: wazero")
}
