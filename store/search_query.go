package store

import (
	"context"
	"fmt"
	"strings"
	"unicode"
)

// Word search (contract: Search, query): FTS5 strings, any-word match, ranked by matched words
// then bm25.

// queryWords splits a query on whitespace. A word that repeats another's tokens ("Fox",
// "fox,") is dropped, as is one without any token character ("-", "…"), which FTS5 matches
// nowhere and which would empty the every-word line count.
func queryWords(q string) []string {
	var words []string
	seen := make(map[string]bool)
	for _, w := range strings.Fields(q) {
		k := strings.Join(strings.FieldsFunc(strings.ToLower(w), notTokenChar), " ")
		if k != "" && !seen[k] {
			seen[k] = true
			words = append(words, w)
		}
	}
	return words
}

// notTokenChar reports a separator of FTS5's default unicode61 tokenizer, whose token
// characters are the categories L*, N* and Co.
func notTokenChar(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.Is(unicode.Co, r)
}

// ftsString quotes a word as an FTS5 string: matched by token, case-insensitively, never as
// query syntax.
func ftsString(w string) string {
	return `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
}

// inList is the placeholders of an SQL IN list of xs, "(?, ?, ?)" (xs not empty), and args
// with xs appended as their arguments.
func inList[T any](xs []T, args []any) (string, []any) {
	for _, x := range xs {
		args = append(args, x)
	}
	return "(?" + strings.Repeat(", ?", len(xs)-1) + ")", args
}

// where builds the filter conditions for a query over messages aliased m (or, for roles,
// over roleCol) and appends their arguments; "" when there is no filter.
func where(o SearchOptions, roleCol string, args []any) (string, []any) {
	var conds []string
	if len(o.Roles) > 0 {
		var in string
		in, args = inList(o.Roles, args)
		conds = append(conds, roleCol+" IN "+in)
	}
	if o.InContext != nil {
		conds = append(conds, "m.in_context = ?")
		args = append(args, *o.InContext)
	}
	if len(conds) == 0 {
		return "", args
	}
	return " AND " + strings.Join(conds, " AND "), args
}

// anyWordQuery is the FTS5 expression matching a row with any of words.
func anyWordQuery(words []string) string {
	phrases := make([]string, len(words))
	for i, w := range words {
		phrases[i] = ftsString(w)
	}
	return strings.Join(phrases, " OR ")
}

// newRankQuery is words with their FTS5 phrases, and the messages join and filter of o's
// roles and in_context.
func newRankQuery(o SearchOptions, words []string) rankQuery {
	q := rankQuery{words: words, phrases: make([]string, len(words))}
	for i, w := range words {
		q.phrases[i] = ftsString(w)
	}
	if len(o.Roles) > 0 || o.InContext != nil {
		q.join = " JOIN messages m ON m.seq = messages_fts.rowid"
	}
	q.roles, q.inContext = o.Roles, o.InContext != nil
	q.filter, q.fargs = where(o, "m.role", nil)
	return q
}

func searchQuery(ctx context.Context, db conn, o SearchOptions, words []string) (SearchResult, error) {
	var res SearchResult
	rq := newRankQuery(o, words)
	anyWord := strings.Join(rq.phrases, " OR ")
	everyWord := strings.Join(rq.phrases, " AND ")

	// A common word alone, without an in_context filter, is counted by its postings
	// (search_postings.go).
	counted := false
	if len(words) == 1 {
		var err error
		if res.TotalMatches, res.LineMatches, counted, err = postingCounts(ctx, db, rq, rankTiersCap); err != nil {
			return res, err
		}
	}

	// Two words or more are ranked first: the ranking counts the rows on the way when it
	// ranks a common word's rows from its postings (rankTiersCount).
	var hits []Hit
	ranked, total := false, -1
	if !counted && len(words) > 1 && o.Limit != 0 {
		var err error
		if hits, total, err = rankHitsCount(ctx, db, rq, o.Limit); err != nil {
			return res, err
		}
		ranked = true
		res.TotalMatches = total
	}

	// Total.
	args := append([]any{anyWord}, rq.fargs...)
	if !counted && total < 0 {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM messages_fts"+rq.join+" WHERE messages_fts MATCH ?"+rq.filter, args...).Scan(&res.TotalMatches); err != nil {
			return res, fmt.Errorf("count matches: %w", err)
		}
	}

	// Lines containing every word. The role is copied into lines; in_context needs the message.
	lineJoin := ""
	if len(o.Roles) > 0 || o.InContext != nil {
		lineJoin = " JOIN lines l ON l.id = lines_fts.rowid"
	}
	if o.InContext != nil {
		lineJoin += " JOIN messages m ON m.seq = l.message_seq"
	}
	lfilter, lfargs := where(o, "l.role", nil)
	args = append([]any{everyWord}, lfargs...)
	if !counted {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM lines_fts"+lineJoin+" WHERE lines_fts MATCH ?"+lfilter, args...).Scan(&res.LineMatches); err != nil {
			return res, fmt.Errorf("count line matches: %w", err)
		}
	}

	if res.TotalMatches == 0 || o.Limit == 0 {
		return res, nil
	}

	if !ranked {
		var err error
		if hits, err = rankHits(ctx, db, rq, o.Limit); err != nil {
			return res, err
		}
	}
	res.Hits = hits

	if o.KeysOnly {
		return res, nil
	}
	return res, queryDetails(ctx, db, anyWord, res.Hits)
}

// queryDetails reads the row of each hit and its excerpt around the first match of anyWord.
// highlight() marks the matched tokens, so the first byte where it differs from the text is
// where the first match starts.
func queryDetails(ctx context.Context, db conn, anyWord string, hits []Hit) error {
	if len(hits) == 0 {
		return nil
	}
	st, err := db.prepare(ctx, "SELECT m.thread, m.role, m.kind, coalesce(m.name, ''), m.in_context, coalesce(m.blob_id, ''), m.text, "+
		"highlight(messages_fts, 0, char(1), char(2)) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid "+
		"WHERE messages_fts MATCH ? AND messages_fts.rowid = ?")
	if err != nil {
		return fmt.Errorf("read hits: %w", err)
	}
	defer st.done()
	for i := range hits {
		h := &hits[i]
		var text, marked string
		if err := st.QueryRowContext(ctx, anyWord, h.Seq).Scan(&h.Thread, &h.Role, &h.Kind, &h.Name, &h.InContext, &h.BlobID, &text, &marked); err != nil {
			return fmt.Errorf("read hit %d: %w", h.Seq, err)
		}
		pos := 0
		for pos < len(text) && pos < len(marked) && text[pos] == marked[pos] {
			pos++
		}
		h.Excerpt = excerpt(text, pos, ExcerptChars)
	}
	return nil
}
