// Package suggest finds the name a user probably meant, for the "did you
// mean" hints of flowhost's error messages (spec fields, stream, tenant,
// source and plugin names), so that every such hint follows one rule. It lives under plugins, the
// lowest package that gives such hints, so that host/spec can share it
// without an arrow pointing back.
package suggest

import "fmt"

// maxEdits is how far a misspelling may be from the name meant: two edits
// catch a dropped, doubled or swapped letter without suggesting unrelated
// names.
const maxEdits = 2

// Closest returns the candidate that name is most likely a misspelling
// of: the nearest one by edit distance (the first of equals, in the order
// given), if it is at most two edits away, and fewer edits than name has
// characters, so that a short name does not suggest any other short one.
// A candidate equal to name is not a misspelling of it and is skipped. ok
// is false when no candidate qualifies.
func Closest(name string, candidates []string) (best string, ok bool) {
	bestDist := maxEdits + 1
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := Distance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist > maxEdits || bestDist >= len(name) {
		return "", false
	}
	return best, true
}

// DidYouMean returns `did you mean "BEST"?` for the [Closest] candidate,
// or "" when there is none.
func DidYouMean(name string, candidates []string) string {
	best, ok := Closest(name, candidates)
	if !ok {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// Distance is the Levenshtein distance between a and b (insertions,
// deletions and substitutions of bytes).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
