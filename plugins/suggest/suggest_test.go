package suggest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestClosest(t *testing.T) {
	streams := []string{"orders", "payments", "joined", "unmatched"}
	for _, tc := range []struct {
		name, want string
	}{
		{"ordrs", "orders"},     // a dropped letter
		{"oredrs", "orders"},    // swapped letters (two edits)
		{"orderss", "orders"},   // a doubled letter
		{"Orders", "orders"},    // case
		{"paymnts", "payments"}, // several candidates, the nearest
		{"customers", ""},       // far from all
		{"orders", ""},          // the name itself is no misspelling
		{"x", ""},               // too short to be a misspelling of anything
		{"", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Closest(tc.name, streams)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want != "", ok)
			if tc.want == "" {
				require.Empty(t, DidYouMean(tc.name, streams))
			} else {
				require.Equal(t, `did you mean "`+tc.want+`"?`, DidYouMean(tc.name, streams))
			}
		})
	}
	got, ok := Closest("ab", []string{"ax", "ay"})
	require.True(t, ok)
	require.Equal(t, "ax", got, "the first of equally near candidates")
	_, ok = Closest("ab", nil)
	require.False(t, ok)
}

// TestDistanceProperties checks the metric's laws on random strings, and
// that Closest never suggests a candidate farther than two edits.
func TestDistanceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.StringOfN(rapid.RuneFrom([]rune("abc_-")), 0, 8, -1)
		a, b, c := gen.Draw(t, "a"), gen.Draw(t, "b"), gen.Draw(t, "c")
		require.Equal(t, Distance(a, b), Distance(b, a))
		require.Equal(t, a == b, Distance(a, b) == 0)
		require.LessOrEqual(t, Distance(a, c), Distance(a, b)+Distance(b, c))
		require.LessOrEqual(t, Distance(a, b), max(len(a), len(b)))
		if best, ok := Closest(a, []string{b, c}); ok {
			require.LessOrEqual(t, Distance(a, best), maxEdits)
			require.NotEqual(t, a, best)
		}
	})
}
