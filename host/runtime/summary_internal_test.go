package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestDeadLetterCausesNameTheMostCommon checks the tally behind a
// summary's most common cause against a plain count: top is a cause of
// the highest count (the least in byte order of those), every dead letter
// is counted once, and past maxCausesPerNode distinct causes the rest
// count as otherCauses.
func TestDeadLetterCausesNameTheMostCommon(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := []string{"a", "b"}
		distinct := rapid.IntRange(1, maxCausesPerNode+20).Draw(t, "distinct")
		adds := rapid.SliceOf(rapid.IntRange(0, 2*distinct-1)).Draw(t, "adds")
		var d deadLetterCauses
		want := map[string]map[string]int64{}
		seen := map[string][]string{} // distinct causes in the order first added
		for _, a := range adds {
			node, cause := nodes[a%2], fmt.Sprintf("cause %d", a/2)
			d.add(node, "guest", errors.New(cause))
			if want[node] == nil {
				want[node] = map[string]int64{}
			}
			if _, ok := want[node][cause]; !ok {
				if len(seen[node]) >= maxCausesPerNode {
					cause = otherCauses
				} else {
					seen[node] = append(seen[node], cause)
				}
			}
			want[node][cause]++
		}
		for _, node := range nodes {
			top := d.top(node)
			if len(want[node]) == 0 {
				require.Nil(t, top)
				continue
			}
			require.NotNil(t, top)
			var best string
			var bestN int64
			for cause, n := range want[node] {
				if n > bestN || n == bestN && cause < best {
					best, bestN = cause, n
				}
			}
			require.Equal(t, DeadLetterCause{Error: best, Count: bestN}, *top)
			total := int64(0)
			for _, n := range d.byNode[node] {
				total += n
			}
			require.Equal(t, int64(len(adds)), total+otherNodeTotal(d.byNode, node))
		}
	})
}

// otherNodeTotal adds up the dead letters of every node but node.
func otherNodeTotal(byNode map[string]map[string]int64, node string) int64 {
	total := int64(0)
	for n, causes := range byNode {
		if n == node {
			continue
		}
		for _, c := range causes {
			total += c
		}
	}
	return total
}

// TestDeadLetterCauseIsCut checks that a long error is cut to
// maxCauseBytes, on a rune boundary, and marked as cut.
func TestDeadLetterCauseIsCut(t *testing.T) {
	for _, tc := range []struct {
		name, err string
		cut       bool
	}{
		{"short", "trap: unreachable", false},
		{"exactly the bound", strings.Repeat("x", maxCauseBytes), false},
		{"ascii over the bound", strings.Repeat("x", maxCauseBytes+1), true},
		{"a rune across the bound", strings.Repeat("x", maxCauseBytes-1) + "é and more", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d deadLetterCauses
			d.add("n", "guest", errors.New(tc.err))
			top := d.top("n")
			require.NotNil(t, top)
			if !tc.cut {
				require.Equal(t, tc.err, top.Error)
				return
			}
			require.True(t, strings.HasSuffix(top.Error, "…"))
			body := strings.TrimSuffix(top.Error, "…")
			require.LessOrEqual(t, len(body), maxCauseBytes)
			require.True(t, strings.HasPrefix(tc.err, body))
			require.True(t, utf8.ValidString(body))
		})
	}
}

// The recent dead letters keep the latest maxRecentDeadLetters, oldest
// first, with their node, stage and cause.
func TestDeadLetterCausesRecent(t *testing.T) {
	var d deadLetterCauses
	total := maxRecentDeadLetters + 5
	for i := range total {
		d.add(fmt.Sprintf("n%d", i%3), "guest", fmt.Errorf("bad %d", i))
	}
	recent := d.recentCopy()
	require.Len(t, recent, maxRecentDeadLetters)
	for i, r := range recent {
		n := total - maxRecentDeadLetters + i
		require.Equal(t, fmt.Sprintf("n%d", n%3), r.Node)
		require.Equal(t, fmt.Sprintf("bad %d", n), r.Cause)
		require.Equal(t, "guest", r.Stage)
		if i > 0 {
			require.GreaterOrEqual(t, r.Time, recent[i-1].Time)
		}
	}
}
