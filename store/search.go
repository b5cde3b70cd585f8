package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Search defaults and limits (contract: Search).
const (
	DefaultSearchLimit  = 8
	DefaultSearchBudget = time.Second
	MaxSearchContext    = 5
	// PatternChars is how much of a row's or line's text a pattern is tested against.
	PatternChars = 20000
	// ExcerptChars is the size of a hit's excerpt, NeighbourChars that of a neighbour's (its
	// head), in characters, "…" marks not counted.
	ExcerptChars   = 600
	NeighbourChars = 300
)

// budgetEvery is how many scanned rows pass between two looks at the pattern budget.
const budgetEvery = 32

// SearchOptions is one smart_compact_search over one session (contract: Search). Exactly one
// of Query and Pattern is set.
type SearchOptions struct {
	Query     string         // words; each becomes an FTS5 string; any-word match; "" when Pattern is set
	Pattern   *regexp.Regexp // tested against each row's and line's first 20,000 characters
	Roles     []string       // user, assistant, tool; empty = all
	InContext *bool          // nil = both
	Context   int            // 0–5 neighbouring rows of the same thread before and after each hit (clamped)
	Limit     int            // hits returned; 0 = DefaultSearchLimit, negative = none (counts only)
	Budget    time.Duration  // pattern budget; 0 = DefaultSearchBudget
	// QueryVector and VectorModel turn a query search hybrid (contract: Search): the
	// HybridNearest rows nearest to QueryVector by cosine among VectorModel's vectors of the
	// same dimension, under the same filters, fused with the lexical ranking by reciprocal
	// rank fusion. Ignored for pattern searches.
	QueryVector []float32
	VectorModel string
	// KeysOnly: hits carry Seq, MatchedTerms and Rank only (no thread, role, excerpt or
	// neighbours), for a caller that ranks hits across many sessions and reads the details of
	// the few it keeps with Reader.Details. Ignored for hybrid searches.
	KeysOnly bool
}

// Hybrid ranking (contract: Search): the nearest rows taken from the vectors, and the k of
// reciprocal rank fusion, score = Σ 1/(rrfK + rank) with rank from 1.
const (
	HybridNearest = 50
	rrfK          = 60
)

// Hit is one matching row.
type Hit struct {
	Seq          int64
	Thread       string
	Role, Kind   string
	Name         string
	InContext    bool
	Excerpt      string // a window of the row text around the first match, at most ~600 characters
	MatchedTerms int    // distinct query words the row contains (0 for pattern searches)
	BlobID       string
	Rank         float64 // lower is better: bm25 for queries, -seq for patterns, -RRF score for hybrid
	Similarity   float64 // hybrid: cosine similarity to the query
	HasVector    bool    // hybrid: the row has a vector of the query's model (Similarity is set)
	Before       []Neighbour
	After        []Neighbour
}

// Neighbour is a row next to a hit in the same thread; Excerpt is the head of its text.
type Neighbour struct {
	Seq        int64
	Role, Kind string
	Name       string
	Excerpt    string
}

// SearchResult is the answer for one session.
type SearchResult struct {
	Hits         []Hit // best first: more matched words, then bm25 (query); newest first (pattern)
	TotalMatches int   // rows matching under the filters
	LineMatches  int   // lines rows matching under the filters (every word for query; the regex per line)
	TimedOut     bool  // the pattern budget ran out: counts are partial
}

// Search runs one smart_compact_search over the session (contract: Search).
//
// Query: each whitespace-separated word (duplicates ignored case-insensitively) becomes an
// FTS5 string; a row matches when it contains any word, and hits are ordered by the number of
// words they contain, then bm25. LineMatches counts lines containing every word.
//
// Pattern: the regexp is tested against the first PatternChars characters of each row (hits,
// newest first, and TotalMatches) and of each line (LineMatches, one line at a time, like
// grep -c), until Budget runs out (TimedOut; both counts are then partial). Characters are
// counted as SQLite's substr counts them, a NUL included.
//
// Roles and InContext filter hits and both counts. Each hit carries up to Context rows of its
// thread before and after it.
//
// An error reading the database is a *ReadError.
func (rd *Reader) Search(ctx context.Context, o SearchOptions) (_ SearchResult, err error) {
	defer func() { err = readError(rd.path, err) }()
	c, err := rd.conn()
	if err != nil {
		return SearchResult{}, err
	}
	o = normalize(o)
	words := queryWords(o.Query)
	hybrid := o.Pattern == nil && len(o.QueryVector) > 0 && o.VectorModel != ""
	var res SearchResult
	switch {
	case o.Pattern != nil && len(words) > 0:
		return SearchResult{}, errors.New("search: give query or pattern, not both")
	case o.Pattern != nil:
		res, err = searchPattern(ctx, c, o)
	case hybrid:
		o.KeysOnly = false
		res, err = searchHybrid(ctx, c, o, words)
	case len(words) > 0:
		res, err = searchQuery(ctx, c, o, words)
	case strings.TrimSpace(o.Query) != "":
		return res, nil // only separators ("-", "…"): FTS5 matches them nowhere
	default:
		return SearchResult{}, errors.New("search: give a query or a pattern")
	}
	if err == nil && o.Context > 0 && !o.KeysOnly {
		err = addNeighbours(ctx, c, res.Hits, o.Context)
	}
	if err != nil {
		return SearchResult{}, fmt.Errorf("search %s: %w", rd.path, err)
	}
	return res, nil
}

// normalize applies the defaults and clamps of SearchOptions.
func normalize(o SearchOptions) SearchOptions {
	if o.Limit == 0 {
		o.Limit = DefaultSearchLimit
	}
	o.Limit = max(o.Limit, 0)
	o.Context = min(max(o.Context, 0), MaxSearchContext)
	if o.Budget <= 0 {
		o.Budget = DefaultSearchBudget
	}
	return o
}

// Details fills in what a KeysOnly search left out of hits (each with its Seq, and for a
// query search its MatchedTerms and Rank): thread, role, kind, name, in_context, blob, the
// excerpt around the first match and, with o.Context, the neighbours. o is the search the
// hits came from (Query or Pattern, Context). A hit whose row no longer exists is an error.
// An error reading the database is a *ReadError.
func (rd *Reader) Details(ctx context.Context, o SearchOptions, hits []Hit) (err error) {
	defer func() { err = readError(rd.path, err) }()
	c, err := rd.conn()
	if err != nil {
		return err
	}
	o = normalize(o)
	switch words := queryWords(o.Query); {
	case o.Pattern != nil:
		err = patternDetails(ctx, c, o.Pattern, hits, nil)
	case len(words) > 0:
		err = queryDetails(ctx, c, anyWordQuery(words), hits)
	default:
		return errors.New("search details: give a query or a pattern")
	}
	if err == nil && o.Context > 0 {
		err = addNeighbours(ctx, c, hits, o.Context)
	}
	if err != nil {
		return fmt.Errorf("search %s: %w", rd.path, err)
	}
	return nil
}

func addNeighbours(ctx context.Context, c conn, hits []Hit, n int) error {
	for i := range hits {
		if err := neighbours(ctx, c, &hits[i], n); err != nil {
			return err
		}
	}
	return nil
}

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

// where builds the filter conditions for a query over messages aliased m (or, for roles,
// over roleCol) and appends their arguments; "" when there is no filter.
func where(o SearchOptions, roleCol string, args []any) (string, []any) {
	var conds []string
	if len(o.Roles) > 0 {
		conds = append(conds, roleCol+" IN (?"+strings.Repeat(", ?", len(o.Roles)-1)+")")
		for _, r := range o.Roles {
			args = append(args, r)
		}
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

func searchQuery(ctx context.Context, db conn, o SearchOptions, words []string) (SearchResult, error) {
	var res SearchResult
	phrases := make([]string, len(words))
	for i, w := range words {
		phrases[i] = ftsString(w)
	}
	anyWord := strings.Join(phrases, " OR ")
	everyWord := strings.Join(phrases, " AND ")

	join := ""
	if len(o.Roles) > 0 || o.InContext != nil {
		join = " JOIN messages m ON m.seq = messages_fts.rowid"
	}
	filter, fargs := where(o, "m.role", nil)

	// Total.
	args := append([]any{anyWord}, fargs...)
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM messages_fts"+join+" WHERE messages_fts MATCH ?"+filter, args...).Scan(&res.TotalMatches); err != nil {
		return res, fmt.Errorf("count matches: %w", err)
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
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM lines_fts"+lineJoin+" WHERE lines_fts MATCH ?"+lfilter, args...).Scan(&res.LineMatches); err != nil {
		return res, fmt.Errorf("count line matches: %w", err)
	}

	if res.TotalMatches == 0 || o.Limit == 0 {
		return res, nil
	}

	// Hits: matched words are counted in SQL, one IN (word's rows) per word, so only the
	// best Limit rows come back. ?1…?n are the words, ?n+1 the any-word expression.
	n := len(words)
	args = make([]any, 0, n+2+len(fargs))
	matched := "1"
	if n > 1 {
		parts := make([]string, n)
		for i := range words {
			parts[i] = "(messages_fts.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?" + strconv.Itoa(i+1) + "))"
		}
		matched = strings.Join(parts, " + ")
		for _, p := range phrases {
			args = append(args, p)
		}
	}
	args = append(args, anyWord)
	args = append(args, fargs...)
	args = append(args, o.Limit)
	q := "SELECT messages_fts.rowid, " + matched + " AS matched, bm25(messages_fts) AS score FROM messages_fts" + join +
		" WHERE messages_fts MATCH ?" + strconv.Itoa(len(args)-len(fargs)-1) + numbered(filter, len(args)-len(fargs)) +
		" ORDER BY matched DESC, score, messages_fts.rowid DESC LIMIT ?" + strconv.Itoa(len(args))
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return res, fmt.Errorf("rank matches: %w", err)
	}
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.Seq, &h.MatchedTerms, &h.Rank); err != nil {
			rows.Close()
			return res, fmt.Errorf("rank matches: %w", err)
		}
		res.Hits = append(res.Hits, h)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return res, fmt.Errorf("rank matches: %w", err)
	}
	rows.Close()

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

// searchHybrid fuses the lexical ranking (as searchQuery orders it) with the HybridNearest
// rows nearest by cosine: each row scores Σ 1/(60 + rank) over the lists it is in. Counts
// stay lexical. Rank is the negated score; Similarity is set for every hit with a vector.
func searchHybrid(ctx context.Context, db conn, o SearchOptions, words []string) (SearchResult, error) {
	var res SearchResult
	if len(words) > 0 {
		lo := o
		lo.Limit = max(o.Limit, HybridNearest)
		var err error
		if res, err = searchQuery(ctx, db, lo, words); err != nil {
			return res, err
		}
	}
	if o.Limit == 0 {
		res.Hits = nil
		return res, nil
	}
	near, sims, err := nearest(ctx, db.db, o, HybridNearest)
	if err != nil {
		return res, err
	}
	score := make(map[int64]float64, len(res.Hits)+len(near))
	byseq := make(map[int64]Hit, len(res.Hits)+len(near))
	for i, h := range res.Hits {
		score[h.Seq] += 1 / float64(rrfK+i+1)
		byseq[h.Seq] = h
	}
	for i, seq := range near {
		score[seq] += 1 / float64(rrfK+i+1)
	}
	order := make([]int64, 0, len(score))
	for seq := range score {
		order = append(order, seq)
	}
	slices.SortFunc(order, func(a, b int64) int { return cmp.Or(cmp.Compare(score[b], score[a]), cmp.Compare(b, a)) })
	if len(order) > o.Limit {
		order = order[:o.Limit]
	}
	st, err := db.prepare(ctx, "SELECT thread, role, kind, coalesce(name, ''), in_context, coalesce(blob_id, ''), substr(text, 1, "+
		strconv.Itoa(ExcerptChars+1)+") FROM messages WHERE seq = ?")
	if err != nil {
		return res, fmt.Errorf("read hits: %w", err)
	}
	defer st.done()
	hits := make([]Hit, len(order))
	for i, seq := range order {
		h, lexical := byseq[seq]
		if !lexical { // vector-only: matched_terms 0, the excerpt is the row's head
			h = Hit{Seq: seq}
			var text string
			if err := st.QueryRowContext(ctx, seq).Scan(&h.Thread, &h.Role, &h.Kind, &h.Name, &h.InContext, &h.BlobID, &text); err != nil {
				return res, fmt.Errorf("read hit %d: %w", seq, err)
			}
			h.Excerpt = excerpt(text, 0, ExcerptChars)
		}
		h.Rank = -score[seq]
		h.Similarity, h.HasVector = sims[seq]
		hits[i] = h
	}
	res.Hits = hits
	return res, nil
}

// numbered turns the ? placeholders of a filter into ?from, ?from+1, … so they can follow
// numbered ones.
func numbered(filter string, from int) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(filter, '?')
		if i < 0 {
			b.WriteString(filter)
			return b.String()
		}
		b.WriteString(filter[:i+1])
		b.WriteString(strconv.Itoa(from))
		from++
		filter = filter[i+1:]
	}
}

// searchPattern scans the rows under the filters newest first, testing the regexp against
// each row's first PatternChars characters (hits and TotalMatches) and each of its lines' (the
// rows of the lines table are the \n-separated lines of the row text, with the row's role, so
// LineMatches is counted from the row text in the same pass, without reading lines).
func searchPattern(ctx context.Context, db conn, o SearchOptions) (SearchResult, error) {
	var res SearchResult
	deadline := time.Now().Add(o.Budget)
	re := o.Pattern
	lc := newLineCounter(re)
	var hits []Hit
	var pos []int // byte offset of each hit's match

	filter, args := where(o, "m.role", nil)
	if g := globLiteral(re); g != "" {
		// Rows without the literal every match starts with can match neither as rows nor by
		// their lines: SQLite leaves them out before they are copied (GLOB reads up to a NUL,
		// so a text with one passes anyway).
		filter += " AND (m.text GLOB ? OR octet_length(printf('%s', m.text)) < octet_length(m.text))"
		args = append(args, g)
	}
	done, err := scanRows(ctx, db, filter, args, deadline, func(seq int64, head, text string, cut bool) {
		matched := false
		if len(hits) < o.Limit {
			if loc := re.FindStringIndex(head); loc != nil {
				hits = append(hits, Hit{Seq: seq, Rank: -float64(seq)})
				pos = append(pos, loc[0])
				matched = true
			}
		} else {
			matched = re.MatchString(head)
		}
		if matched {
			res.TotalMatches++
		}
		res.LineMatches += lc.count(text, matched || cut)
	})
	if err != nil {
		return res, fmt.Errorf("scan rows: %w", err)
	}
	res.TimedOut = !done
	res.Hits = hits
	if len(hits) == 0 || o.KeysOnly {
		return res, nil
	}
	return res, patternDetails(ctx, db, re, hits, pos)
}

// patternDetails reads the row of each hit and its excerpt around the first match of re in
// its first PatternChars characters (at pos[i] when pos is given).
func patternDetails(ctx context.Context, db conn, re *regexp.Regexp, hits []Hit, pos []int) error {
	// The excerpt may run past the characters the pattern saw. The text is cut as bytes (a
	// character takes at most 4 in UTF-8) and then as characters: substr on text would stop
	// at a NUL, which the scan counts as a character.
	st, err := db.prepare(ctx, "SELECT thread, role, kind, coalesce(name, ''), in_context, coalesce(blob_id, ''), substr(CAST(text AS BLOB), 1, "+
		strconv.Itoa(4*(PatternChars+ExcerptChars))+") FROM messages WHERE seq = ?")
	if err != nil {
		return fmt.Errorf("read hits: %w", err)
	}
	defer st.done()
	for i := range hits {
		h := &hits[i]
		var text string
		if err := st.QueryRowContext(ctx, h.Seq).Scan(&h.Thread, &h.Role, &h.Kind, &h.Name, &h.InContext, &h.BlobID, &text); err != nil {
			return fmt.Errorf("read hit %d: %w", h.Seq, err)
		}
		text = headChars(text, PatternChars+ExcerptChars)
		at := 0
		if pos != nil {
			at = pos[i]
		} else if loc := re.FindStringIndex(headChars(text, PatternChars)); loc != nil {
			at = loc[0]
		}
		h.Excerpt = excerpt(text, at, ExcerptChars)
	}
	return nil
}

// headChars is the first n characters of s as SQLite's substr(s, 1, n) counts them: a byte
// from 0xc0 up starts a character that takes the 0x80–0xbf bytes after it; any other byte
// is one character.
func headChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		c := s[i]
		i++
		if c >= 0xc0 {
			for i < len(s) && s[i]&0xc0 == 0x80 {
				i++
			}
		}
	}
	return s[:i]
}

// lineCounter counts the lines of a row text whose first PatternChars characters match a
// regexp, as grep -c over the lines table would.
type lineCounter struct {
	re *regexp.Regexp
	// prefix is a literal every match starts with ("" when none): a line without it cannot
	// match.
	prefix string
	// substring: the regexp has no empty-width assertion (^, $, \A, \z, \b, \B), so it
	// matches a line only if it matches the whole text (a line is a substring of it).
	substring bool
}

func newLineCounter(re *regexp.Regexp) *lineCounter {
	lc := &lineCounter{re: re}
	lc.prefix, _ = re.LiteralPrefix()
	if t, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
		lc.substring = !hasEmptyWidth(t)
	}
	return lc
}

func hasEmptyWidth(t *syntax.Regexp) bool {
	switch t.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	return slices.ContainsFunc(t.Sub, hasEmptyWidth)
}

// count returns the number of matching lines of text. maybe is false when the text is known
// not to match the regexp (its first PatternChars characters, which are all of it, did not).
func (lc *lineCounter) count(text string, maybe bool) int {
	if lc.prefix != "" && !strings.Contains(text, lc.prefix) {
		return 0
	}
	if lc.substring && (!maybe || !lc.re.MatchString(text)) {
		return 0
	}
	n := 0
	for {
		line, rest, more := strings.Cut(text, "\n")
		if (lc.prefix == "" || strings.Contains(line, lc.prefix)) && lc.re.MatchString(headChars(line, PatternChars)) {
			n++
		}
		if !more {
			return n
		}
		text = rest
	}
}

// globLiteral returns a GLOB pattern that every text holding a match of re matches: the
// literal every match starts with between stars, cut after its last ASCII character (SQLite
// reads a stray continuation byte after a multi-byte character as part of it, Go does not),
// "" when there is none or it holds a character SQLite reads as U+FFFD.
func globLiteral(re *regexp.Regexp) string {
	lit, _ := re.LiteralPrefix()
	end := 0
	for i, r := range lit {
		switch {
		case r == utf8.RuneError || r == 0xfffe || r == 0xffff || r == 0:
			return ""
		case r < utf8.RuneSelf:
			end = i + 1
		}
	}
	if end == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('*')
	for _, c := range []byte(lit[:end]) {
		switch c {
		case '*', '?', '[':
			b.WriteByte('[')
			b.WriteByte(c)
			b.WriteByte(']')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('*')
	return b.String()
}

// Pattern scan blocks: scanRows reads rows a block at a time, each block one value of
// "<seq>:<bytes>:<head>" entries, because a driver round trip per row costs more than the
// regexp test. Blocks aim at scanBlockBytes, under the size where SQLite's and Go's
// allocators hand out fresh pages (page faults, and TLB flushes when Go gives them back, cost
// more than the copy on a small VM), between 1 and scanBlockRows rows; a block is at most
// 256 × 20,000 characters (80 MB would pass maxValueLength; 256 rows stay under 21 MB).
const (
	scanBlockBytes = 24 << 10
	scanBlockRows  = 256
)

// scanRows calls fn for each messages row m under filter in descending seq order, until
// deadline; done is false when the deadline stopped it. head is the row's first PatternChars
// characters (headChars; a NUL is a character), text all of it; cut is true when text is
// longer than head. A row of more than PatternChars bytes is read whole on its own, the others
// in blocks. The byte length makes the framing exact whatever the text holds.
func scanRows(ctx context.Context, db conn, filter string, args []any, deadline time.Time, fn func(seq int64, head, text string, cut bool)) (done bool, err error) {
	pc := strconv.Itoa(PatternChars)
	q := "SELECT count(*), min(k), coalesce(group_concat(k || ':' || octet_length(t) || ':' || t, ''), ''), " +
		"coalesce(group_concat(CASE WHEN n > octet_length(t) THEN k END, ','), '') " +
		"FROM (SELECT m.seq AS k, CASE WHEN octet_length(m.text) <= " + pc + " THEN m.text ELSE '' END AS t, " +
		"octet_length(m.text) AS n FROM messages m WHERE m.seq < ?1" + numbered(filter, 3) + " ORDER BY m.seq DESC LIMIT ?2)"
	st, err := db.prepare(ctx, q)
	if err != nil {
		return false, err
	}
	defer st.done()
	type entry struct {
		key  int64
		text string
	}
	var entries []entry
	var long map[int64]bool
	last, limit := int64(1)<<62, 32
	for first := true; ; first = false {
		if !first && time.Now().After(deadline) {
			return false, nil
		}
		var n int
		var minKey sql.NullInt64
		var block, cut string
		if err := st.QueryRowContext(ctx, append([]any{last, limit}, args...)...).Scan(&n, &minKey, &block, &cut); err != nil {
			return false, err
		}
		if n == 0 {
			return true, nil
		}
		limit = min(max(limit*scanBlockBytes/max(len(block), 1), 1), scanBlockRows)
		entries = entries[:0]
		for len(block) > 0 {
			var e entry
			var size int
			if e.key, block, err = cutInt(block); err == nil {
				var sz int64
				sz, block, err = cutInt(block)
				size = int(sz)
			}
			if err != nil || size < 0 || size > len(block) {
				return false, fmt.Errorf("malformed scan block")
			}
			e.text, block = block[:size], block[size:]
			entries = append(entries, e)
		}
		clear(long)
		for f := range strings.SplitSeq(cut, ",") {
			if f == "" {
				continue
			}
			k, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return false, fmt.Errorf("malformed scan block")
			}
			if long == nil {
				long = map[int64]bool{}
			}
			long[k] = true
		}
		// group_concat keeps the subquery's order in practice; sorting makes it a guarantee.
		slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(b.key, a.key) })
		for i, e := range entries {
			if i%budgetEvery == budgetEvery-1 && time.Now().After(deadline) {
				return false, nil
			}
			head, text := e.text, e.text
			if long[e.key] {
				if err := db.QueryRowContext(ctx, "SELECT text FROM messages WHERE seq = ?", e.key).Scan(&text); err != nil {
					return false, fmt.Errorf("read row %d: %w", e.key, err)
				}
				head = headChars(text, PatternChars)
			}
			fn(e.key, head, text, len(head) < len(text))
		}
		last = minKey.Int64
	}
}

// cutInt parses the decimal integer before the first ':' of s and returns the rest after it.
func cutInt(s string) (int64, string, error) {
	var n int64
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9' && i < 18:
			n = n*10 + int64(c-'0')
		case c == ':' && i > 0:
			return n, s[i+1:], nil
		default:
			return 0, "", errors.New("no number")
		}
	}
	return 0, "", errors.New("no number")
}

// neighbours fills h.Before and h.After with up to n rows of h's thread on each side, in seq
// order.
func neighbours(ctx context.Context, db conn, h *Hit, n int) error {
	cols := "SELECT seq, role, kind, coalesce(name, ''), substr(text, 1, " + strconv.Itoa(NeighbourChars+1) + ") FROM messages WHERE thread = ? AND "
	read := func(q string) ([]Neighbour, error) {
		rows, err := db.QueryContext(ctx, q, h.Thread, h.Seq, n)
		if err != nil {
			return nil, fmt.Errorf("read context of %d: %w", h.Seq, err)
		}
		defer rows.Close()
		var out []Neighbour
		for rows.Next() {
			var nb Neighbour
			var text string
			if err := rows.Scan(&nb.Seq, &nb.Role, &nb.Kind, &nb.Name, &text); err != nil {
				return nil, fmt.Errorf("read context of %d: %w", h.Seq, err)
			}
			nb.Excerpt, _ = cutText(text, NeighbourChars)
			out = append(out, nb)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read context of %d: %w", h.Seq, err)
		}
		return out, nil
	}
	var err error
	if h.Before, err = read(cols + "seq < ? ORDER BY seq DESC LIMIT ?"); err != nil {
		return err
	}
	slices.Reverse(h.Before)
	h.After, err = read(cols + "seq > ? ORDER BY seq LIMIT ?")
	return err
}

// excerpt returns about n characters of text around byte offset pos (a quarter of them before
// it), with "…" where text was cut. pos is moved back to a rune boundary.
func excerpt(text string, pos, n int) string {
	pos = min(max(pos, 0), len(text))
	for pos > 0 && pos < len(text) && !utf8.RuneStart(text[pos]) {
		pos--
	}
	start, end := pos, pos
	for k := 0; k < n/4 && start > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	k := utf8.RuneCountInString(text[start:pos])
	for ; k < n && end < len(text); k++ {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	for ; k < n && start > 0; k++ { // near the end: show more before the match
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	s := text[start:end]
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}
