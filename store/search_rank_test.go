package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// rankVocab are the words of TestRankTiersMatchesRankAll's rows with the share of rows that
// hold them: one common word, a few middling and rare ones, a two-token phrase (key-7 is the
// tokens key 7), a folded non-ASCII word; fillers make up the rest of a row.
var rankVocab = []struct {
	word  string
	share float64
}{
	{"alpha", 0.6}, {"beta", 0.3}, {"gamma", 0.12}, {"delta", 0.04}, {"key-7", 0.08}, {"key", 0.1}, {"naïve", 0.05}, {"omega", 0.01},
}

// rankText is one generated row: each vocabulary word it holds 1–4 times (more than once
// in a quarter of the rows that hold it), among 0–40 filler tokens, in random order and case.
func rankText(rng *rand.Rand) string {
	var toks []string
	for _, v := range rankVocab {
		if rng.Float64() >= v.share {
			continue
		}
		n := 1
		if rng.IntN(4) == 0 {
			n += 1 + rng.IntN(3)
		}
		for range n {
			w := v.word
			if rng.IntN(3) == 0 {
				w = strings.ToUpper(w)
			}
			toks = append(toks, w)
		}
	}
	for range rng.IntN(41) {
		toks = append(toks, fmt.Sprintf("f%d", rng.IntN(60)))
	}
	rng.Shuffle(len(toks), func(i, j int) { toks[i], toks[j] = toks[j], toks[i] })
	return strings.Join(toks, " ")
}

// TestRankTiersMatchesRankAll is the equivalence of the tiered ranking with the one
// statement (search_rank.go): on generated sessions and queries, under every filter and
// limit, and with the common-word threshold low enough that one word or none is above it,
// rankTiers returns the same rows in the same order with the same matched words and
// bit-identical bm25.
func TestRankTiersMatchesRankAll(t *testing.T) {
	ctx := context.Background()
	f, tr := false, true
	filters := []SearchOptions{{}, {Roles: []string{"user", "tool"}}, {InContext: &tr}, {Roles: []string{"assistant"}, InContext: &f}}
	words := []string{"alpha", "BETA", "gamma", "delta", "key-7", "key", "NAÏVE", "omega", "absent"}
	ran, tiered, threeTerms := 0, 0, 0
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			r := newRoot(t)
			rows := make([]testRow, 600)
			for i := range rows {
				rows[i] = testRow{thread: "a", role: []string{"user", "assistant", "tool"}[rng.IntN(3)], text: rankText(rng), out: rng.IntN(4) == 0}
			}
			syncTestRows(t, mustSession(t, r, "s"), rows)
			c, err := mustReader(t, r, "s").conn()
			if err != nil {
				t.Fatal(err)
			}
			for range 30 {
				ws, o, q := drawRankQuery(rng, words, 2, 3, filters)
				for _, limit := range []int{1, 3, 8, 1000} {
					want, err := rankAll(ctx, c, q, limit)
					if err != nil {
						t.Fatal(err)
					}
					for _, maxRows := range []int{5, 60, 10000} {
						got, ok, err := rankTiers(ctx, c, q, limit, maxRows)
						if err != nil {
							t.Fatal(err)
						}
						ran++
						if !ok {
							continue
						}
						tiered++
						if len(want) > 0 && want[0].matched >= 3 {
							threeTerms++
						}
						if d := diffRanked(got, want); d != "" {
							t.Fatalf("query %q %+v limit %d maxRows %d: %s", ws, o, limit, maxRows, d)
						}
					}
				}
			}
		})
	}
	// The comparison must have covered the tiered path, with sums of three terms (where the
	// order of the additions shows in the last bit).
	t.Logf("rankTiers ran %d of %d cases, %d with a three-word hit", tiered, ran, threeTerms)
	if tiered < ran/3 || threeTerms == 0 {
		t.Fatalf("rankTiers ran %d of %d cases, %d with a three-word hit: the generator no longer exercises it", tiered, ran, threeTerms)
	}
}

// drawRankQuery draws least to least+more-1 distinct words of words and one of filters, and
// returns them with their rankQuery.
func drawRankQuery(rng *rand.Rand, words []string, least, more int, filters []SearchOptions) ([]string, SearchOptions, rankQuery) {
	var ws []string
	for _, i := range rng.Perm(len(words))[:least+rng.IntN(more)] {
		ws = append(ws, words[i])
	}
	o := filters[rng.IntN(len(filters))]
	return ws, o, newRankQuery(o, queryWords(strings.Join(ws, " ")))
}

// diffRanked describes the first difference of got from want, bm25 compared bit for bit.
func diffRanked(got, want []rankedRow) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("hit %d missing, want %+v", i, want[i])
		case i >= len(want):
			return fmt.Sprintf("extra hit %d %+v", i, got[i])
		case got[i].seq != want[i].seq || got[i].matched != want[i].matched || math.Float64bits(got[i].score) != math.Float64bits(want[i].score):
			return fmt.Sprintf("hit %d is %+v, want %+v", i, got[i], want[i])
		}
	}
	return ""
}
