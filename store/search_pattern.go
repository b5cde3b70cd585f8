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
	"unicode/utf8"
)

// Pattern search (contract: Search, pattern): a regular expression over each row's and line's
// head, scanned under the pattern budget.

// searchPattern scans the rows under the filters newest first, testing the regexp against
// each row's first PatternChars characters (hits and TotalMatches) and each of its lines' (the
// rows of the lines table are the \n-separated lines of the row text, with the row's role, so
// LineMatches is counted from the row text in the same pass, without reading lines).
func searchPattern(ctx context.Context, db conn, o SearchOptions) (SearchResult, error) {
	return searchPatternScan(ctx, db, o, true)
}

// searchPatternScan is searchPattern with the trigram prefilter on or off (every row under
// the filters scanned, as before the prefilter: the reference its test compares with).
func searchPatternScan(ctx context.Context, db conn, o SearchOptions, prefilter bool) (SearchResult, error) {
	var res SearchResult
	deadline := time.Now().Add(o.Budget)
	re := o.Pattern
	lc := newLineCounter(re)
	var hits []Hit
	var pos []int // byte offset of each hit's match

	filter, args := where(o, "m.role", nil)
	count := func(seq int64, head, text string, cut bool) {
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
	}
	var done bool
	var err error
	scanned := false
	if grams := patternTrigrams(re); prefilter && len(grams) > 0 {
		// Only rows holding the trigrams of the literals every match holds can match, as rows
		// or by their lines (search_trigrams.go). Indexing may take half the budget; an index
		// not complete by then is finished by the next searches, and this one scans.
		gi, complete, err := db.sr.gramIndex(ctx, db, time.Now().Add(o.Budget/2))
		if err != nil {
			return res, fmt.Errorf("scan rows: %w", err)
		}
		var seqs []int64
		if complete {
			seqs = gi.candidates(grams)
		}
		gi.mu.Unlock()
		if complete {
			done, err = scanCandidates(ctx, db, filter, args, seqs, deadline, count)
			if err != nil {
				return res, fmt.Errorf("scan rows: %w", err)
			}
			scanned = true
		}
	}
	if !scanned {
		done, err = scanAll(ctx, db, re, filter, args, deadline, count)
	}
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

// scanAll is scanRows over every row under filter, left out in SQL only those without the
// literal every match of re starts with.
func scanAll(ctx context.Context, db conn, re *regexp.Regexp, filter string, args []any, deadline time.Time, fn func(seq int64, head, text string, cut bool)) (bool, error) {
	if g := globLiteral(re); g != "" {
		// Rows without the literal every match starts with can match neither as rows nor by
		// their lines: SQLite leaves them out before they are copied (GLOB reads up to a NUL,
		// so a text with one passes anyway).
		filter += " AND (m.text GLOB ? OR octet_length(printf('%s', m.text)) < octet_length(m.text))"
		args = append(args, g)
	}
	return scanRows(ctx, db, filter, args, deadline, fn)
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
