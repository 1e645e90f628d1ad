package conformance_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
)

// TestRawNotes checks the report of non-canonical guest bytes: a response
// whose key entry lists "emits" before "key" is valid, is noted, and is
// equal to the canonical one once decoded.
func TestRawNotes(t *testing.T) {
	// {"keys": [{"emits": [{"stream": "out", "payload": h'78'}], "key": "k"}]}
	raw, err := hex.DecodeString("a1646b65797381a265656d69747381a26673747265616d636f7574677061796c6f61644178636b6579616b")
	require.NoError(t, err)
	resp, err := abi.DecodeResponse(raw, abi.ResponseLimits{})
	require.NoError(t, err, "the host accepts any key order")
	canon, err := abi.EncodeResponse(resp)
	require.NoError(t, err)
	require.NotEqual(t, raw, canon)

	r := &run{steps: []stepRun{{raw: raw, resp: resp, canon: canon}}}
	notes := rawNotes(t, r)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "step 0: raw response of 43 bytes is not canonical (43 bytes); first difference at offset 8")

	r = &run{initRaw: []byte{0xa0}, initResult: &abi.InitResult{}}
	require.Equal(t, []string{"started with the InitResult a0 instead of 0"}, rawNotes(t, r))

	r = &run{steps: []stepRun{{raw: canon, resp: resp, canon: canon}}}
	require.Empty(t, rawNotes(t, r))
}
