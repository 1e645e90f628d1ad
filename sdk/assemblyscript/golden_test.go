package assemblyscript_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/abi/abitest"
)

// vectorDir holds the golden vectors every SDK is tested against.
var vectorDir = abitest.Dir()

type vectorDoc = abitest.Vector

var readVector = abitest.Read

// TestGoldenVectors runs every golden request and init envelope through
// the test guest (testdata/testguest, one AssemblyScript script per vector)
// in the host's engine, and requires the golden response and init result
// bytes exactly, as sdk/go/golden_test.go does for Go.
func TestGoldenVectors(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no golden vectors in %s", vectorDir)
	m, logs := guestModule(t, testGuest)
	ctx := context.Background()
	for _, path := range docs {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var doc vectorDoc
		require.NoError(t, json.Unmarshal(raw, &doc))
		t.Run(doc.Name, func(t *testing.T) {
			if initBytes, ok := readVector(t, doc.Name, "init"); ok {
				inst := instantiate(t, m)
				out, err := inst.Init(ctx, initBytes)
				require.NoError(t, err, "guest log:\n%s", logs.text())
				want, ok := readVector(t, doc.Name, "init_result")
				if !ok {
					require.Nil(t, out, "init should succeed with nothing to say, got %q", out)
				} else {
					require.Equal(t, want, out, "init result differs from %s.init_result.cbor", doc.Name)
				}
			}

			reqBytes, ok := readVector(t, doc.Name, "request")
			if !ok {
				return
			}
			req, err := abi.DecodeRequest(reqBytes)
			require.NoError(t, err)
			// Declare the vector's outputs the way the host would, so that
			// emits are checked against them as in production.
			inst := instantiate(t, m)
			initGuest(t, inst, &abi.Init{ABI: abi.Version, Computation: req.Computation, Kind: req.Kind, OutputStreams: doc.OutputStreams})

			want, ok := readVector(t, doc.Name, "response")
			require.True(t, ok, "a request vector needs a response")
			out, err := inst.Process(ctx, reqBytes)
			require.NoError(t, err, "guest log:\n%s", logs.text())
			if !bytes.Equal(want, out) {
				got, err := abi.DecodeResponse(out, abi.ResponseLimits{})
				require.NoError(t, err, "response %x", out)
				wantResp, err := abi.DecodeResponse(want, abi.ResponseLimits{})
				require.NoError(t, err)
				require.Equal(t, wantResp, got, "response differs from %s.response.cbor", doc.Name)
				require.Fail(t, "same value, different bytes", "%x\nwant %x", out, want)
			}
		})
	}
}
