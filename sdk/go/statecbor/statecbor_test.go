package statecbor_test

import (
	"testing"

	"github.com/flowhost/flowhost/sdk/go/statecbor"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestCodecIsDeterministic(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []byte
	}{
		{int64(1), []byte{0x01}},
		{int64(-2), []byte{0x21}},
		{"ada", []byte{0x63, 'a', 'd', 'a'}},
		// Map keys in core deterministic order: shorter first, then bytewise.
		{map[string]int{"bb": 1, "a": 2, "c": 3}, []byte{0xa3, 0x61, 'a', 0x02, 0x61, 'c', 0x03, 0x62, 'b', 'b', 0x01}},
	} {
		got, err := statecbor.Codec.Encode(c.v)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%v", c.v)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOf(rapid.String(), rapid.Int64()).Draw(t, "m")
		p, err := statecbor.Codec.Encode(m)
		require.NoError(t, err)
		var back map[string]int64
		require.NoError(t, statecbor.Codec.Decode(p, &back))
		if len(m) == 0 {
			require.Empty(t, back)
			return
		}
		require.Equal(t, m, back)
	})
}
