package assemblyscript_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
)

var fuzzGuest struct {
	once sync.Once
	inst engine.Instance
	err  error
}

// fuzzInstance is one conformance guest, started with outputs out and
// side, shared by every input of a fuzzing run: a guest that answers a
// status must stay usable.
func fuzzInstance(f *testing.F) engine.Instance {
	fuzzGuest.once.Do(func() {
		ctx := context.Background()
		e, err := engine.NewWazero(ctx, engine.NewConfig().WithCompilationCacheDir(cacheDir))
		if err != nil {
			fuzzGuest.err = err
			return
		}
		m, err := e.Compile(ctx, "as-conformance", guestWasm[conformanceGuest])
		if err != nil {
			fuzzGuest.err = err
			return
		}
		inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
		if err != nil {
			fuzzGuest.err = err
			return
		}
		init, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "conformance", Kind: abi.KindTransform,
			Parameters: map[string]any{"s": "text"}, OutputStreams: []string{"out", "side"}})
		if err == nil {
			_, err = inst.Init(ctx, init)
		}
		fuzzGuest.inst, fuzzGuest.err = inst, err
	})
	require.NoError(f, fuzzGuest.err)
	return fuzzGuest.inst
}

// FuzzRequestDecoder feeds arbitrary bytes to the AssemblyScript guest's
// flowhost_process and requires a clean answer, never a trap, that agrees
// with the host's strict decoder:
//   - bytes the host decodes as a version-1 request of a known kind get a
//     response that decodes and validates against the request (or status
//     -2, when the script misuses the SDK, as emitting to an undeclared
//     stream);
//   - a newer abi field gets status -3, an unknown kind status -1;
//   - bytes the host refuses get status -1 (or -3 when they name another
//     version).
func FuzzRequestDecoder(f *testing.F) {
	vectors, err := filepath.Glob(filepath.Join(vectorDir, "*.request.cbor"))
	require.NoError(f, err)
	for _, path := range vectors {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, req := range conformanceCases() {
		b, err := abi.EncodeRequest(req)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})
	f.Add([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("\xa1cabi\x02"))
	inst := fuzzInstance(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		got := call(t, inst.Process, data)
		require.False(t, got.trap, "the guest trapped")
		req, decodeErr := abi.DecodeRequest(data)
		switch {
		case decodeErr != nil:
			require.Contains(t, []int64{-1, -3}, got.status, "the host refuses the request: %v", decodeErr)
			if v, ok := abi.PeekVersion(data); got.status == -3 {
				require.True(t, ok && v != abi.Version, "status -3 for a request without another version")
			}
		case req.ABI != abi.Version:
			require.Equal(t, int64(-3), got.status)
		case !req.Kind.Valid():
			require.Equal(t, int64(-1), got.status)
		case got.status == 0:
			resp, err := abi.DecodeResponse(got.result, abi.ResponseLimits{})
			require.NoError(t, err)
			require.NoError(t, abi.ValidateResponse(resp, req, []string{"out", "side"}))
		default:
			require.Equal(t, int64(-2), got.status, "a request the host decodes")
		}
	})
}
