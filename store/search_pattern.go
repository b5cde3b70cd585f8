package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
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

// searchPatternScan is searchPattern on the fast path (the rows' texts held in memory by the
// trigram index, narrowed by its filters, each row's lines counted in one pass of the regexp)
// or, with fast false, the reference its test compares with: every row under the filters read
// from SQLite and each of its lines tested on its own, as before the index.
func searchPatternScan(ctx context.Context, db conn, o SearchOptions, fast bool) (SearchResult, error) {
	deadline := time.Now().Add(o.Budget)
	t := &patternTally{lc: newLineCounter(o.Pattern), limit: o.Limit, fast: fast}
	filter, args := where(o, "m.role", nil)
	var done, scanned bool
	var err error
	if fast {
		scanned, done, err = scanIndexed(ctx, db, o, filter, args, deadline, t)
	}
	if err == nil && !scanned {
		done, err = scanAll(ctx, db, o.Pattern, filter, args, deadline, t.add)
	}
	if err != nil {
		return SearchResult{}, fmt.Errorf("scan rows: %w", err)
	}
	res := SearchResult{Hits: t.hits, TotalMatches: t.total, LineMatches: t.lines, TimedOut: !done}
	if len(t.hits) == 0 || o.KeysOnly {
		return res, nil
	}
	return res, patternDetails(ctx, db, o.Pattern, t.hits, t.pos)
}

// patternTally is what a pattern scan found in the rows it was shown (add), newest first.
type patternTally struct {
	lc    *lineCounter
	limit int  // hits kept
	fast  bool // lines counted in one pass where lc allows (lineCounter.scan)
	hits  []Hit
	pos   []int // byte offset of each hit's match
	total int   // rows matching
	lines int   // lines matching
}

// add tests row seq: head is its first PatternChars characters, text all of it, cut true
// when text is longer than head.
func (t *patternTally) add(seq int64, head, text string, cut bool) {
	hit := func(at int) {
		t.total++
		if len(t.hits) < t.limit {
			t.hits = append(t.hits, Hit{Seq: seq, Rank: -float64(seq)})
			t.pos = append(t.pos, at)
		}
	}
	if t.fast && t.lc.local && !cut {
		at, n := t.lc.scan(text)
		if at >= 0 {
			hit(at)
		}
		t.lines += n
		return
	}
	re := t.lc.re
	matched := false
	if len(t.hits) < t.limit {
		if loc := re.FindStringIndex(head); loc != nil {
			hit(loc[0])
			matched = true
		}
	} else if matched = re.MatchString(head); matched {
		t.total++
	}
	t.lines += t.lc.count(text, matched || cut)
}

// merge adds what the parts found, parts in scan order, to t.
func (t *patternTally) merge(parts []patternTally) {
	for _, p := range parts {
		n := min(len(p.hits), t.limit-len(t.hits))
		t.hits = append(t.hits, p.hits[:n]...)
		t.pos = append(t.pos, p.pos[:n]...)
		t.total += p.total
		t.lines += p.lines
	}
}

// scanIndexed shows t the rows as scanRows does, through the reader's trigram index: the texts
// it holds (in parts at once, one per core), or, when the memory budget left it only its
// filters, the candidate rows read from SQLite. Only rows holding the trigrams of the literals every match holds can match, as
// rows or by their lines (search_trigrams.go). Indexing may take half the budget; an index not
// complete by then is finished by the next searches, and scanned is false: the caller scans.
// t's line counter is tuned to the session's byte counts.
func scanIndexed(ctx context.Context, db conn, o SearchOptions, filter string, args []any, deadline time.Time, t *patternTally) (scanned, done bool, err error) {
	grams := patternTrigrams(o.Pattern)
	gi, complete, err := db.sr.gramIndex(ctx, db, time.Now().Add(o.Budget/2))
	if err != nil || gi == nil {
		return false, false, err
	}
	defer gi.mu.Unlock()
	t.lc.tune(&gi.freq)
	switch {
	case !complete:
		return false, false, nil
	case !gi.noTexts:
		done, err = gi.scanTexts(ctx, db, o, grams, deadline, t)
		return true, done, err
	case len(grams) > 0:
		done, err = scanCandidates(ctx, db, filter, args, gi.candidates(grams), deadline, t.add)
		return true, done, err
	}
	return false, false, nil
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
	// local: no match of the regexp holds a \n and it has no ^, $, \A or \z, so it matches
	// in a line exactly where it matches in the text at that line (\b and \B see a \n beside
	// the line as they see its ends: a non-word character), and a text matches exactly when
	// one of its lines does. scan counts such a text's lines in one pass.
	local bool
	// lits are the literals every match holds; need is one of them ("" when none) and scan
	// tests only the lines holding it, found by its bytes at pair[0] < pair[1] (tune).
	lits []string
	need string
	pair [2]int
	// starting: the regexp anchored (^), for a local regexp whose every match starts with
	// prefix (nothing before it to look at): scan tests each place prefix is at, within its line.
	starting *regexp.Regexp
}

func newLineCounter(re *regexp.Regexp) *lineCounter {
	lc := &lineCounter{re: re}
	lc.prefix, _ = re.LiteralPrefix()
	if t, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
		lc.substring = !hasEmptyWidth(t)
		lc.local = !anchored(t) && !matchesNL(t)
		for _, lit := range requiredLiterals(t) {
			// A literal U+FFFD matches any invalid byte, which the text holds as itself.
			if !strings.ContainsRune(lit, utf8.RuneError) {
				lc.lits = append(lc.lits, lit)
			}
		}
		if lc.local && lc.prefix != "" && !strings.ContainsRune(lc.prefix, utf8.RuneError) {
			if a, err := regexp.Compile(`^(?:` + re.String() + `)`); err == nil {
				lc.starting, lc.lits = a, []string{lc.prefix}
			}
		}
	}
	lc.tune(nil)
	return lc
}

// tune picks the literal scan looks for and the two bytes it looks for it by: the literal
// holding the byte freq (byte counts of the texts to scan; nil: none known) counts least, ties
// going to the longer literal, and in it that byte and the next least counted one; without
// freq, the longest literal's first and last bytes.
func (lc *lineCounter) tune(freq *[256]uint64) {
	count := func(lit string, i int) uint64 {
		switch {
		case freq != nil:
			return freq[lit[i]]
		case i == 0:
			return 0
		case i == len(lit)-1:
			return 1
		}
		return 2
	}
	best := uint64(math.MaxUint64)
	for _, lit := range lc.lits {
		for i := range len(lit) {
			if f := count(lit, i); f < best || f == best && len(lit) > len(lc.need) {
				best, lc.need, lc.pair[0] = f, lit, i
			}
		}
	}
	lc.pair[1] = -1
	for i := range len(lc.need) {
		if i != lc.pair[0] && (lc.pair[1] < 0 || count(lc.need, i) < count(lc.need, lc.pair[1])) {
			lc.pair[1] = i
		}
	}
	if lc.pair[1] < lc.pair[0] {
		lc.pair[0], lc.pair[1] = lc.pair[1], lc.pair[0]
	}
}

// index is strings.Index(s, lc.need). A need of one byte is looked for with IndexByte; a
// longer one eight places at a time, each place taken when it has the need's two bytes of
// lc.pair where they belong (a word-wide compare, which skips the stops IndexByte makes at
// every common byte), then compared whole.
func (lc *lineCounter) index(s string) int {
	n := len(lc.need)
	if n == 1 {
		return strings.IndexByte(s, lc.need[0])
	}
	p, q := lc.pair[0], lc.pair[1]
	bp, bq := swarRepeat*uint64(lc.need[p]), swarRepeat*uint64(lc.need[q])
	i := 0
	for ; i+q+8 <= len(s); i += 8 {
		m := swarZeros(binary.LittleEndian.Uint64([]byte(s[i+p:i+p+8]))^bp) & swarZeros(binary.LittleEndian.Uint64([]byte(s[i+q:i+q+8]))^bq)
		for ; m != 0; m &= m - 1 {
			if at := i + bits.TrailingZeros64(m)/8; at+n <= len(s) && s[at:at+n] == lc.need {
				return at
			}
		}
	}
	if j := strings.Index(s[i:], lc.need); j >= 0 {
		return i + j
	}
	return -1
}

const swarRepeat = 0x0101010101010101

// swarZeros has the high bit of each byte of v that is zero set, and no other bit.
func swarZeros(v uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((v&low7 + low7) | v | low7)
}

func hasEmptyWidth(t *syntax.Regexp) bool {
	switch t.Op {
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	return anchored(t) || slices.ContainsFunc(t.Sub, hasEmptyWidth)
}

// anchored reports a ^, $, \A or \z in t.
func anchored(t *syntax.Regexp) bool {
	switch t.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return true
	}
	return slices.ContainsFunc(t.Sub, anchored)
}

// matchesNL reports whether some match of t may hold a \n: a literal \n, a class holding it
// (negated classes and \s do), or . under the s flag.
func matchesNL(t *syntax.Regexp) bool {
	switch t.Op {
	case syntax.OpLiteral:
		return slices.Contains(t.Rune, '\n')
	case syntax.OpCharClass:
		for i := 0; i+1 < len(t.Rune); i += 2 {
			if t.Rune[i] <= '\n' && '\n' <= t.Rune[i+1] {
				return true
			}
		}
		return false
	case syntax.OpAnyChar:
		return true
	}
	return slices.ContainsFunc(t.Sub, matchesNL)
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

// scanChunk is about how many bytes of whole lines scan hands the regexp at once when the
// regexp has no literal to look for: Go's backtracker clears a bit per instruction and byte of
// its input at each call, and takes an input only up to 256 Ki bits.
const scanChunk = 1024

// scan returns the byte offset of the first match of a local regexp (lc.local) in text, -1 when
// none, and the number of lines of text holding a match: the same as the regexp's first match
// in the text and count over its lines, for a text of at most PatternChars characters. Lines
// without lc.need are skipped; the others are tested at most once each, from their start.
func (lc *lineCounter) scan(text string) (first, lines int) {
	first = -1
	hit := func(at int) (next int) {
		if first < 0 {
			first = at
		}
		lines++
		if nl := strings.IndexByte(text[at:], '\n'); nl >= 0 {
			return at + nl + 1
		}
		return len(text) + 1
	}
	if lc.starting != nil {
		for start := 0; start <= len(text); {
			i := lc.index(text[start:])
			if i < 0 {
				break
			}
			at := start + i
			end := len(text)
			if nl := strings.IndexByte(text[at:], '\n'); nl >= 0 {
				end = at + nl
			}
			if lc.starting.MatchString(text[at:end]) {
				start = hit(at)
			} else {
				start = at + 1
			}
		}
		return first, lines
	}
	for start := 0; start <= len(text); {
		var end int // [start, end) is the whole lines to test next
		if lc.need != "" {
			i := lc.index(text[start:])
			if i < 0 {
				break
			}
			end = start + i
			start += strings.LastIndexByte(text[start:end], '\n') + 1
		} else {
			end = min(start+scanChunk, len(text))
		}
		if nl := strings.IndexByte(text[end:], '\n'); nl >= 0 {
			end += nl
		} else {
			end = len(text)
		}
		// Matches are tested within whole lines, one call per matching line at most.
		for start <= end {
			loc := lc.re.FindStringIndex(text[start:end])
			if loc == nil {
				start = end + 1
				break
			}
			start = hit(start + loc[0])
			if lc.need != "" {
				break // look for the literal again from the next line
			}
		}
	}
	return first, lines
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
