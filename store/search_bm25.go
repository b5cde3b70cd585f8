package store

import "math"

// FTS5's bm25 (SQLite's ext/fts5/fts5_aux.c, fts5Bm25GetData and fts5Bm25Function) of a row
// whose only matched phrase is one word: −idf · f·(k1+1) / (f + k1·(1 − b + b·D/avgdl)), with
// f the word's instances in the row, D the row's size in tokens, k1 = 1.2, b = 0.75, avgdl the
// table's tokens over its rows, and idf = log((N − n + 0.5) / (n + 0.5)) over the table's N
// rows, n of them holding the word, raised to 1e-6 when not positive.
//
// Go computes it only closely, never bit for bit: Go's math.Log differs from the C library's
// log in the last bit for about 7% of the IDF arguments, and a C compiler may fuse a multiply
// and an add where Go does not. So the postings use it to choose rows and FTS5 scores the rows
// chosen (search_postings.go): rows whose weights differ by more than bm25Margin are ranked
// alike by both; rows closer than that are all scored by FTS5.

// bm25K1 and bm25B are FTS5's constants.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// bm25Margin is a relative difference of two rows' weights past which FTS5's scores rank them
// in the same order: far above the few units in the last place by which the two computations
// of a weight can differ (about 1e-15).
const bm25Margin = 1e-9

// tableState is what FTS5's bm25 reads from the whole table besides the phrase's rows: its
// rows and tokens (the averages record), and the highest seq it holds.
type tableState struct {
	rows, tokens, top int64
}

// avgdl is FTS5's average row size in tokens.
func (s tableState) avgdl() float64 { return float64(s.tokens) / float64(s.rows) }

// bm25Weight is a row's bm25 over the word's IDF: f instances among size tokens.
func bm25Weight(f, size uint32, avgdl float64) float64 {
	ff := float64(f)
	return ff * (bm25K1 + 1) / (ff + bm25K1*(1-bm25B+bm25B*float64(size)/avgdl))
}

// bm25IDF is FTS5's IDF of a word held by hits of rows rows, closely (math.Log).
func bm25IDF(rows, hits int64) float64 {
	idf := math.Log((float64(rows-hits) + 0.5) / (float64(hits) + 0.5))
	if idf <= 0 {
		idf = 1e-6
	}
	return idf
}

// bm25Close reports whether a score computed here (want) is FTS5's (got) within the margin.
func bm25Close(got, want float64) bool {
	return math.Abs(got-want) <= bm25Margin*math.Abs(want)
}

// bm25Instances returns the instance count f whose bm25 in a row of size tokens, under st with
// hits rows holding the word, is score (FTS5's); ok is false when no count is within the
// margin or the count cannot be told from its neighbours.
func bm25Instances(st tableState, hits int64, size uint32, score float64) (uint32, bool) {
	// score = −idf·t and t = f·(k1+1)/(f + K), so f = t·K/(k1+1−t).
	idf, avgdl := bm25IDF(st.rows, hits), st.avgdl()
	t := -score / idf
	k := bm25K1 * (1 - bm25B + bm25B*float64(size)/avgdl)
	guess := t * k / (bm25K1 + 1 - t)
	f := math.Round(guess)
	if math.IsNaN(guess) || f < 1 || f > float64(size) || math.Abs(guess-f) > 0.01 {
		return 0, false
	}
	if !bm25Close(score, -idf*bm25Weight(uint32(f), size, avgdl)) {
		return 0, false
	}
	return uint32(f), true
}
