package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
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
