package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Ranking the hits of a words query (contract: Search, query: rows with more words first, then
// by BM25) without FTS5 scoring every matching row.
//
// The one-statement ranking (rankAll) scores every row matching any word with bm25() and
// counts its matched words through one temporary rowid table per word; at 1M rows a common
// word makes that tens of milliseconds (FTS5 reads each row's size from its docsize table).
// rankTiers returns the same hits, in the same order, with the same Rank, from smaller
// statements when at most one word is common:
//
//   - The rows of every word but the most common one (L) are read as rowid lists, and the
//     rows among them that also contain L by one FTS5 AND. Each of these rows then has its
//     exact set P of words, so its matched count.
//   - Each distinct P is scored by one statement whose expression matches exactly the rows
//     with P: (p1 AND p2 …) NOT (q1 OR q2 …), the words of P in query order first.
//   - The rows with L alone, the only ones not read yet, all have matched = 1; only as many
//     as the rows with two or more words leave room for are ranked: from L's postings when it
//     has them (search_postings.go), else by one statement with LIMIT.
//
// A query of one word is the third tier alone: ranked from the word's postings when it is
// common, else by rankAll.
//
// Why the scores are bit-for-bit those of the one statement: FTS5's bm25 of a row is
// -(0 + t1 + t2 + … + tn) over the expression's phrases in order, with ti = idf_i ·
// f_i·(k1+1) / (f_i + k1·(1−b+b·D/avgdl)). idf_i counts the rows holding phrase i in the
// whole table (never the filters or the rest of the expression), D and avgdl do not depend on
// the query, and f_i is the phrase's instances in the row (0 when absent, and then ti is
// exactly +0.0). So for a row with words P, an expression with the same phrases in the same
// relative order adds the same non-zero terms in the same order: the absent phrases add +0.0,
// which leaves a double unchanged. TestRankTiersMatchesRankAll checks it on generated rows.
//
// The statements of a search do not share one snapshot (a Reader runs no transactions): a row
// a writer appends or moves in or out of context between them is either left out or counted
// as the statement that saw it found it, as the counts already are.

// rankTiersCap is the most rows a word other than the most common one may match for
// rankTiers to run; a query with two words above it is ranked by rankAll.
const rankTiersCap = 4096

// rankedRow is one candidate hit: its row, matched words and bm25.
type rankedRow struct {
	seq     int64
	matched int
	score   float64
}

// compareRanked is the order of the hits (contract: Search): more matched words, then the
// lower bm25, then the newer row.
func compareRanked(a, b rankedRow) int {
	return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(a.score, b.score), cmp.Compare(b.seq, a.seq))
}

// rankQuery is one words query's ranking statement parts: the words and their FTS5 phrases,
// the join and filter of SearchOptions and the filter's arguments.
type rankQuery struct {
	words     []string
	phrases   []string
	join      string
	filter    string
	fargs     []any
	roles     []string // the roles filter holds; empty: all
	inContext bool     // filter holds in_context, which a writer changes
}

// rankHits returns the best limit rows matching any of q's phrases, in the contract's order,
// with their matched words and bm25 (Hit.Seq, MatchedTerms, Rank).
func rankHits(ctx context.Context, db conn, q rankQuery, limit int) ([]Hit, error) {
	hits, _, err := rankHitsCount(ctx, db, q, limit)
	return hits, err
}

// rankHitsCount is rankHits, and the rows matching any of q's phrases under its filters
// (TotalMatches) when the ranking counted them on the way (rankTiersCount), else -1.
func rankHitsCount(ctx context.Context, db conn, q rankQuery, limit int) ([]Hit, int, error) {
	rows, total, ok, err := rankTiersCount(ctx, db, q, limit, rankTiersCap)
	if err == nil && !ok {
		rows, err = rankAll(ctx, db, q, limit)
		total = -1
	}
	if err != nil {
		return nil, -1, err
	}
	hits := make([]Hit, len(rows))
	for i, r := range rows {
		hits[i] = Hit{Seq: r.seq, MatchedTerms: r.matched, Rank: r.score}
	}
	return hits, total, nil
}

// rankAll ranks in one statement: every matching row scored by bm25, matched words counted
// in SQL, one IN (word's rows) per word. ?1…?n are the words, ?n+1 the any-word expression.
func rankAll(ctx context.Context, db conn, q rankQuery, limit int) ([]rankedRow, error) {
	n := len(q.phrases)
	args := make([]any, 0, n+2+len(q.fargs))
	matched := "1"
	if n > 1 {
		parts := make([]string, n)
		for i := range q.phrases {
			parts[i] = "(messages_fts.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?" + strconv.Itoa(i+1) + "))"
		}
		matched = strings.Join(parts, " + ")
		for _, p := range q.phrases {
			args = append(args, p)
		}
	}
	args = append(args, strings.Join(q.phrases, " OR "))
	args = append(args, q.fargs...)
	args = append(args, limit)
	stmt := "SELECT messages_fts.rowid, " + matched + " AS matched, bm25(messages_fts) AS score FROM messages_fts" + q.join +
		" WHERE messages_fts MATCH ?" + strconv.Itoa(len(args)-len(q.fargs)-1) + numbered(q.filter, len(args)-len(q.fargs)) +
		" ORDER BY matched DESC, score, messages_fts.rowid DESC LIMIT ?" + strconv.Itoa(len(args))
	return queryRanked(ctx, db, stmt, args, func(r *rankedRow) []any { return []any{&r.seq, &r.matched, &r.score} })
}

// queryRanked runs stmt and returns its rows in order, each read by rows.Scan into the
// fields dest names of a fresh rankedRow.
func queryRanked(ctx context.Context, db conn, stmt string, args []any, dest func(*rankedRow) []any) ([]rankedRow, error) {
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("rank matches: %w", err)
	}
	defer rows.Close()
	var out []rankedRow
	for rows.Next() {
		var r rankedRow
		if err := rows.Scan(dest(&r)...); err != nil {
			return nil, fmt.Errorf("rank matches: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rank matches: %w", err)
	}
	return out, nil
}

// rankTiers ranks as rankAll does, from the statements described above; ok is false (and
// nothing was ranked) for more than 63 words, when two words each match more than maxRows
// rows under the filters, and for one word unless it is ranked from its postings (it has
// them, or it matches more than maxRows rows and they can be built).
func rankTiers(ctx context.Context, db conn, q rankQuery, limit, maxRows int) (_ []rankedRow, ok bool, err error) {
	rows, _, ok, err := rankTiersCount(ctx, db, q, limit, maxRows)
	return rows, ok, err
}

// rankTiersCount is rankTiers, and the rows matching any word under q's filters when it has
// them on the way, else -1: with two words or more, without an in_context filter, when the
// common word's rows alone are ranked from its postings. Those rows, counted there, and the
// rows of the other words, read whole, are every matching row (up to the highest seq read
// first, as the ranking's).
func rankTiersCount(ctx context.Context, db conn, q rankQuery, limit, maxRows int) (_ []rankedRow, total int, ok bool, err error) {
	n := len(q.phrases)
	if n > 63 {
		return nil, -1, false, nil
	}
	if n == 1 { // the rows with the word alone are all of them
		if common, err := worthPostings(ctx, db, q, maxRows); !common || err != nil {
			return nil, -1, false, err
		}
		rows, _, ok, err := rankAlone(ctx, db, q, 0, nil, math.MaxInt64, limit)
		return rows, -1, ok, err
	}
	// The highest seq before the rows are read: the rows with the common word alone are taken
	// from its postings up to it, where every row holding another word is in the lists below.
	var top sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT max(id) FROM messages_fts_docsize").Scan(&top); err != nil {
		return nil, -1, false, fmt.Errorf("rank matches: %w", err)
	}
	// Each word's rows, up to maxRows+1: a longer list marks the one common word.
	sets := make([]map[int64]bool, n)
	big := -1
	for i, p := range q.phrases {
		seqs, err := matchSeqs(ctx, db, q, p, maxRows+1)
		if err != nil {
			return nil, -1, false, err
		}
		if len(seqs) > maxRows {
			if big >= 0 {
				return nil, -1, false, nil
			}
			big = i
			continue
		}
		sets[i] = make(map[int64]bool, len(seqs))
		for _, s := range seqs {
			sets[i][s] = true
		}
	}
	common := big
	if common < 0 { // every list is whole: L is the longest, its rows alone read like the others'
		for i := range sets {
			if common < 0 || len(sets[i]) > len(sets[common]) {
				common = i
			}
		}
	}

	// The words of each row of another word than L (bit i: word i).
	words := map[int64]uint64{}
	var others []string
	for i := range sets {
		if i == common {
			continue
		}
		others = append(others, q.phrases[i])
		for s := range sets[i] {
			words[s] |= 1 << i
		}
	}
	if big >= 0 {
		both, err := matchSeqs(ctx, db, q, q.phrases[common]+" AND ("+strings.Join(others, " OR ")+")", -1)
		if err != nil {
			return nil, -1, false, err
		}
		for _, s := range both {
			if _, ok := words[s]; ok {
				words[s] |= 1 << common
			}
		}
	} else {
		for s := range sets[common] {
			words[s] |= 1 << common
		}
	}

	// Score each set of words once; rows seen with another set than expected changed between
	// the statements and are left out.
	masks := map[uint64]int{} // set → rows expected
	wide := 0                 // rows with two or more words
	for _, m := range words {
		masks[m]++
		if bits.OnesCount64(m) > 1 {
			wide++
		}
	}
	// Without an in_context filter, words holds every row's words exactly (a row's words and
	// role never change): a set without L need not leave L's rows out by content, which would
	// count L's rows for its IDF; its rows with L are left out below.
	var omit uint64
	if !q.inContext {
		omit = 1 << common
	}
	out := make([]rankedRow, 0, len(words)+limit)
	for _, m := range slices.Sorted(maps.Keys(masks)) {
		got, err := scoreSet(ctx, db, q, m, omit, -1)
		if err != nil {
			return nil, -1, false, err
		}
		for _, r := range got {
			if words[r.seq] == m {
				out = append(out, r)
			}
		}
	}
	total = -1
	if k := limit - wide; big >= 0 && k > 0 {
		got, alone, ok, err := rankAlone(ctx, db, q, common, words, top.Int64, k)
		if ok && alone >= 0 {
			total = len(words) + alone
		}
		if err == nil && !ok {
			got, err = scoreSet(ctx, db, q, 1<<common, 0, k)
		}
		if err != nil {
			return nil, -1, false, err
		}
		for _, r := range got {
			if _, seen := words[r.seq]; !seen {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, compareRanked)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, total, true, nil
}

// matchSeqs returns the rows matching the FTS5 expression under q's filters, at most limit
// (negative: all), in no particular order. One group_concat keeps the rows inside SQLite: a
// Go round trip per row costs more than FTS5's reading of them.
func matchSeqs(ctx context.Context, db conn, q rankQuery, expr string, limit int) ([]int64, error) {
	args := append(append([]any{expr}, q.fargs...), limit)
	var list sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT group_concat(r) FROM (SELECT messages_fts.rowid AS r FROM messages_fts"+q.join+
		" WHERE messages_fts MATCH ?"+q.filter+" LIMIT ?)", args...).Scan(&list); err != nil {
		return nil, fmt.Errorf("match rows: %w", err)
	}
	if !list.Valid || list.String == "" {
		return nil, nil
	}
	parts := strings.Split(list.String, ",")
	seqs := make([]int64, len(parts))
	for i, p := range parts {
		s, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("match rows: %w", err)
		}
		seqs[i] = s
	}
	return seqs, nil
}

// scoreSet returns the rows holding exactly the words of mask (bit i: q.phrases[i]) under
// q's filters, with their bm25 as the any-word expression scores them; the best limit of them
// when limit is positive, else all. The words of omit are not left out: rows holding them
// are returned too, with the score of mask's words alone.
func scoreSet(ctx context.Context, db conn, q rankQuery, mask, omit uint64, limit int) ([]rankedRow, error) {
	expr, have := maskExpr(q, mask, omit)
	args := append([]any{expr}, q.fargs...)
	stmt := "SELECT messages_fts.rowid, bm25(messages_fts) FROM messages_fts" + q.join + " WHERE messages_fts MATCH ?" + q.filter
	if limit > 0 {
		stmt += " ORDER BY 2, 1 DESC LIMIT ?"
		args = append(args, limit)
	}
	return queryRanked(ctx, db, stmt, args, func(r *rankedRow) []any {
		r.matched = have
		return []any{&r.seq, &r.score}
	})
}

// maskExpr is the FTS5 expression matching exactly the rows that hold the words of mask (bit
// i: q.phrases[i]) and no other word of q but those of omit, (p1 AND p2 …) NOT (q1 OR q2 …),
// and how many words mask holds.
func maskExpr(q rankQuery, mask, omit uint64) (string, int) {
	var have, lack []string
	for i, p := range q.phrases {
		switch {
		case mask&(1<<i) != 0:
			have = append(have, p)
		case omit&(1<<i) == 0:
			lack = append(lack, p)
		}
	}
	expr := "(" + strings.Join(have, " AND ") + ")"
	if len(lack) > 0 {
		expr += " NOT (" + strings.Join(lack, " OR ") + ")"
	}
	return expr, len(have)
}
