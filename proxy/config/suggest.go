package config

import (
	"fmt"
	"strings"
)

// suggest returns the candidate closest to typo by edit distance (Damerau–Levenshtein,
// optimal string alignment: insert, delete, substitute, swap two neighbours), or "" when
// none is close enough to be what the user meant: at most 1 edit for words of up to 4
// letters, 2 up to 8, 3 beyond. Case and leading dashes are ignored; on a tie the earlier
// candidate wins.
func Suggest(typo string, candidates []string) string {
	t := strings.ToLower(strings.TrimLeft(typo, "-"))
	if t == "" {
		return ""
	}
	limit := 3
	switch n := len([]rune(t)); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(t, strings.ToLower(strings.TrimLeft(c, "-"))); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean is suggest for an error message, to follow the name the user typed:
// ` (did you mean "x"?)`, or "".
func DidYouMean(typo string, candidates []string) string {
	if s := Suggest(typo, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// editDistance is the optimal-string-alignment distance between a and b, in runes.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// d[i][j] is the distance between x[:i] and y[:j]; three rows are enough.
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
