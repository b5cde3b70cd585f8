package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Trigram prefilter for pattern search (contract: Search, pattern), the technique of Google
// Code Search and zoekt: a regexp whose every match holds some literals can match only in a
// row whose text holds their trigrams. Each row's trigrams are kept in a small Bloom filter
// (no false negatives: a row it leaves out holds no match), in memory beside the pooled reader
// and outside the contract's schema: the database is only read. Rows are never deleted and
// their text never changes, so the index follows the session by reading the rows stored
// since its last look.

// gramIndex is a pooled reader's trigram filters, one per messages row in seq order.
// Guarded by mu.
type gramIndex struct {
	mu      sync.Mutex
	lastSeq int64       // highest seq indexed
	seqs    []int64     // per row, ascending
	roles   []string    // per row: its role (interned)
	texts   []string    // per row: its text, while the search memory budget keeps them
	noTexts bool        // the budget dropped texts (the session's are too large): filters only
	bytes   int64       // what the filters and texts take, about
	mem     memEntry    // its place in the search memory budget (search_memory.go)
	freq    [256]uint64 // how often each byte occurs in the rows' texts
	offs    []uint32    // per row: its filter's chunk in words (high 16 bits) and first word there
	logBits []uint8     // per row: log2 of its filter's size in bits (≥ 6)
	words   [][]uint64  // the filters, back to back in chunks of gramChunkWords (a larger one alone)
	seen    []uint64    // scratch during refresh: one bit per trigram value (2²⁴), cleared after each row
	distinc []uint32    // scratch: the row's distinct trigrams
}

// gramIndex returns the reader's trigram index, refreshed, and whether it covers every row:
// a refresh stops at until (the first search of a large session reads every row's text), and
// the next one goes on from there. The caller holds the index's mu. It returns nil when the
// session's filters alone are past the search memory budget: the caller scans the rows, and
// later searches do not index them again while the budget is that one (rows are never
// deleted, so the session's filters only grow).
func (sr *sharedReader) gramIndex(ctx context.Context, db conn, until time.Time) (*gramIndex, bool, error) {
	budget := searchMem.budget()
	sr.gimu.Lock()
	if sr.gramsTooBig != 0 && sr.gramsTooBig >= budget {
		sr.gimu.Unlock()
		return nil, false, nil
	}
	if sr.grams == nil {
		sr.grams = &gramIndex{}
	}
	gi := sr.grams
	sr.gimu.Unlock()
	gi.mu.Lock()
	drop := func() {
		sr.gimu.Lock()
		if sr.grams == gi {
			sr.grams = nil
		}
		sr.gimu.Unlock()
	}
	complete, err := gi.refresh(ctx, db, until)
	if err == nil && !searchMem.use(&gi.mem, gi.bytes, drop) && !gi.noTexts {
		gi.dropTexts()
		if !searchMem.use(&gi.mem, gi.bytes, drop) {
			err = errGramsTooBig
		}
	} else if err == nil && gi.noTexts && gi.mem.elem == nil {
		err = errGramsTooBig
	}
	if errors.Is(err, errGramsTooBig) {
		searchMem.forget(&gi.mem)
		drop()
		sr.gimu.Lock()
		sr.gramsTooBig = budget
		sr.gimu.Unlock()
		gi.mu.Unlock()
		return nil, false, nil
	}
	if err != nil {
		gi.mu.Unlock()
		return nil, false, err
	}
	return gi, complete, nil
}

// errGramsTooBig: the session's filters alone are past the search memory budget.
var errGramsTooBig = errors.New("trigram filters past the search memory budget")

// dropTexts lets the texts go when they alone are past the search memory budget: the index
// keeps its filters and pattern searches read the texts from SQLite.
func (gi *gramIndex) dropTexts() {
	gi.noTexts = true
	for _, t := range gi.texts {
		gi.bytes -= int64(len(t))
	}
	gi.texts = nil
}

// refreshEvery is how many rows a refresh indexes between two looks at the clock.
const refreshEvery = 256

// refresh indexes the rows stored since the last refresh, until the deadline; complete is
// false when it stopped there.
func (gi *gramIndex) refresh(ctx context.Context, db conn, until time.Time) (complete bool, err error) {
	var top sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT max(seq) FROM messages").Scan(&top); err != nil {
		return false, fmt.Errorf("index trigrams: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT seq, role, text FROM messages WHERE seq > ? ORDER BY seq", gi.lastSeq)
	if err != nil {
		return false, fmt.Errorf("index trigrams: %w", err)
	}
	defer rows.Close()
	defer func() { gi.seen = nil }() // 2 MB of scratch, allocated again when rows arrive
	for n := 1; rows.Next(); n++ {
		var seq int64
		var role, text sql.RawBytes
		if err := rows.Scan(&seq, &role, &text); err != nil {
			return false, fmt.Errorf("index trigrams: %w", err)
		}
		gi.addRaw(seq, role, text)
		if n%refreshEvery != 0 {
			continue
		}
		// The texts go as soon as the index, at the size its rows so far make for the session's
		// rows (seqs are 1, 2, …), would be past gramTextShare of the budget: kept until then,
		// they would push the other caches out (a session's postings among them) to be let go
		// anyway.
		if !gi.noTexts && gi.bytes > searchMem.budget()/gramTextShare/max(top.Int64, 1)*gi.lastSeq {
			gi.dropTexts()
		}
		if gi.noTexts && gi.bytes > searchMem.budget() {
			return false, errGramsTooBig // no use reading the rest
		}
		if time.Now().After(until) {
			return false, nil
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("index trigrams: %w", err)
	}
	if !gi.noTexts && gi.bytes > searchMem.budget()/gramTextShare {
		gi.dropTexts()
	}
	return true, nil
}

// gramTextShare: an index keeps the row texts only while it takes at most 1/gramTextShare of
// the search memory budget, leaving the rest to the other caches (the same session's word
// postings among them: at 1M rows the texts took the index to 232 MB of 256, and the postings
// were pushed out by it and rebuilt, each word, by the next words searches). Without them a
// pattern reads the rows its filters leave from SQLite.
const gramTextShare = 2

// trigram is the 24-bit value of three bytes.
func trigram(a, b, c byte) uint32 { return uint32(a)<<16 | uint32(b)<<8 | uint32(c) }

// gramBit is the bit of trigram g in a filter of 2^logBits bits.
func gramBit(g uint32, logBits uint8) uint32 { return (g * 0x9e3779b1) >> (32 - logBits) }

// gramFilterBits is the fewest bits of a row's filter per distinct trigram, one bit set for
// each (rounded up to a power of two: 4 to 8 bits, a trigram not in the row found set in its
// filter 1 − e^(−1/4) to 1 − e^(−1/8) of the time, 22 % to 12 %). A pattern's rare trigrams
// together leave out all but a few rows; 4 rather than 8 keeps a 1M-row session's filters
// inside the budget: about 170 bytes a row for cmd/bench's scale rows (295 with 8: 295 MB at
// 1M rows, past the 256 MB budget), 98 for bench1M's (151).
const gramFilterBits = 4

// add appends row seq's filter (gramFilterBits or more per distinct trigram), role and text.
func (gi *gramIndex) add(seq int64, role, text string) {
	addFilter(gi, text)
	gi.addRow(seq, internRole(role), text)
}

// addRaw is add for a row scanned as bytes the scan reuses: its text is copied only while the
// index keeps texts (a 1M-row session's, let go early, would be as many strings to allocate).
func (gi *gramIndex) addRaw(seq int64, role, text []byte) {
	addFilter(gi, text)
	var s string
	if !gi.noTexts {
		s = string(text)
	}
	gi.addRow(seq, internRoleBytes(role), s)
}

// internRoleBytes is internRole of a role read as bytes.
func internRoleBytes(r []byte) string {
	switch string(r) {
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "tool":
		return "tool"
	}
	return string(r)
}

// addFilter appends a row's filter of text and its place, and counts text's bytes.
func addFilter[T string | []byte](gi *gramIndex, text T) {
	if gi.seen == nil {
		gi.seen = make([]uint64, 1<<24/64)
	}
	gi.distinc = gi.distinc[:0]
	for i := range len(text) {
		gi.freq[text[i]]++
	}
	for i := 0; i+2 < len(text); i++ {
		g := trigram(text[i], text[i+1], text[i+2])
		if w, b := g/64, uint64(1)<<(g%64); gi.seen[w]&b == 0 {
			gi.seen[w] |= b
			gi.distinc = append(gi.distinc, g)
		}
	}
	logBits := uint8(max(6, bits.Len(uint(max(gramFilterBits*len(gi.distinc), 1)-1))))
	n := 1 << (logBits - 6)
	if len(gi.words) == 0 || len(gi.words[len(gi.words)-1])+n > cap(gi.words[len(gi.words)-1]) {
		// Chunks double up to gramChunkWords, so a small session's filters take little more
		// than they hold.
		size := 64
		if k := len(gi.words); k > 0 {
			size = min(2*cap(gi.words[k-1]), gramChunkWords)
		}
		gi.words = append(gi.words, make([]uint64, 0, max(n, size)))
	}
	chunk := &gi.words[len(gi.words)-1]
	off := uint32(len(gi.words)-1)<<16 | uint32(len(*chunk))
	*chunk = (*chunk)[:len(*chunk)+n]
	f := (*chunk)[len(*chunk)-n:]
	for _, g := range gi.distinc {
		gi.seen[g/64] = 0
		b := gramBit(g, logBits)
		f[b/64] |= 1 << (b % 64)
	}
	gi.bytes += int64(8 * n)
	gi.offs = append(gi.offs, off)
	gi.logBits = append(gi.logBits, logBits)
}

// addRow appends row seq's role (interned) and, while the index keeps texts, its text.
func (gi *gramIndex) addRow(seq int64, role, text string) {
	gi.seqs = append(gi.seqs, seq)
	gi.roles = append(gi.roles, role)
	if !gi.noTexts {
		gi.texts = append(gi.texts, text)
		gi.bytes += int64(len(text))
	}
	gi.bytes += gramRowBytes
	gi.lastSeq = seq
}

// gramChunkWords is the largest chunk of filters: filters are appended to chunks that are
// never grown, so indexing 1M rows (about 150 MB of filters) copies none of them, as one
// growing slice did (half of the index's build time at 1M rows, in memmove). Offsets within
// a chunk take 16 bits; a filter larger than a chunk has one of its own.
const gramChunkWords = 1 << 16

// gramRowBytes is what a row takes in a gramIndex besides its filter and text: seq, offset,
// log, and the role's and text's string headers.
const gramRowBytes = 8 + 4 + 1 + 16 + 16

// holds reports whether row i's filter holds every trigram of grams.
func (gi *gramIndex) holds(i int, grams []uint32) bool {
	lb := gi.logBits[i]
	off := gi.offs[i]
	f := gi.words[off>>16][off&0xffff:]
	for _, g := range grams {
		if b := gramBit(g, lb); f[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// candidates returns, newest first, the seqs of the rows whose filters hold every trigram of
// grams.
func (gi *gramIndex) candidates(grams []uint32) []int64 {
	var out []int64
	for i := len(gi.seqs) - 1; i >= 0; i-- {
		if gi.holds(i, grams) {
			out = append(out, gi.seqs[i])
		}
	}
	return out
}

// scanTexts shows t, as scanRows does, the rows whose texts gi holds that hold grams and are
// under o's filters, newest first, until deadline; done is false when the deadline stopped it.
// The rows are split in parts scanned at once, one per core (the scan is bound by the regexp,
// and one search has the cores to itself most of the time), each tallied on its own and merged
// in order, so the result is the one scan's. in_context changes after rows are stored, so it
// is read per search (only when asked for).
func (gi *gramIndex) scanTexts(ctx context.Context, db conn, o SearchOptions, grams []uint32, deadline time.Time, t *patternTally) (done bool, err error) {
	var inContext map[int64]bool
	if o.InContext != nil {
		if inContext, err = inContextSeqs(ctx, db, *o.InContext); err != nil {
			return false, err
		}
	}
	n := len(gi.seqs)
	parts := make([]patternTally, min(runtime.GOMAXPROCS(0), max(n/scanPartRows, 1), 8))
	stopped := make([]bool, len(parts))
	var wg sync.WaitGroup
	for p := range parts {
		// Part 0 is the newest rows.
		lo, hi := n-n*(p+1)/len(parts), n-n*p/len(parts)
		parts[p] = patternTally{lc: t.lc, limit: t.limit, fast: t.fast}
		wg.Go(func() {
			k := 0
			for i := hi - 1; i >= lo; i-- {
				if !gi.holds(i, grams) || len(o.Roles) > 0 && !slices.Contains(o.Roles, gi.roles[i]) || inContext != nil && !inContext[gi.seqs[i]] {
					continue
				}
				if k++; k%budgetEvery == 0 && time.Now().After(deadline) {
					stopped[p] = true
					return
				}
				text := gi.texts[i]
				head := headChars(text, PatternChars)
				parts[p].add(gi.seqs[i], head, text, len(head) < len(text))
			}
		})
	}
	wg.Wait()
	t.merge(parts)
	return !slices.Contains(stopped, true), nil
}

// scanPartRows is the fewest rows scanTexts gives a part of its own (tests lower it).
var scanPartRows = 4096

// inContextSeqs returns the seqs of the rows whose in_context is want.
func inContextSeqs(ctx context.Context, db conn, want bool) (map[int64]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT m.seq FROM messages m WHERE m.in_context = ?", want)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seqs := map[int64]bool{}
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		seqs[s] = true
	}
	return seqs, rows.Err()
}

// patternTrigrams returns the distinct trigrams (as bytes of UTF-8) of the literals every
// match of re holds, nil when it has none of three bytes or more.
func patternTrigrams(re *regexp.Regexp) []uint32 {
	t, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	seen := map[uint32]bool{}
	var out []uint32
	for _, lit := range requiredLiterals(t) {
		// A literal U+FFFD matches any invalid byte, which the text holds as itself.
		if strings.ContainsRune(lit, utf8.RuneError) {
			continue
		}
		for i := 0; i+2 < len(lit); i++ {
			if g := trigram(lit[i], lit[i+1], lit[i+2]); !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	return out
}

// requiredLiterals returns strings each of which every match of t holds (case-sensitive
// literals only; an alternation, a class or a repetition that may be absent adds nothing).
func requiredLiterals(t *syntax.Regexp) []string {
	exact := func(t *syntax.Regexp) (string, bool) {
		if t.Op == syntax.OpLiteral && t.Flags&syntax.FoldCase == 0 {
			return string(t.Rune), true
		}
		return "", false
	}
	switch t.Op {
	case syntax.OpLiteral:
		if s, ok := exact(t); ok {
			return []string{s}
		}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return requiredLiterals(t.Sub[0])
		}
	case syntax.OpConcat:
		var out []string
		var run strings.Builder
		flush := func() {
			if run.Len() > 0 {
				out = append(out, run.String())
				run.Reset()
			}
		}
		for _, sub := range t.Sub {
			if s, ok := exact(sub); ok {
				run.WriteString(s)
				continue
			}
			// x+ and x{n,}: the first x follows the run at once.
			if sub.Op == syntax.OpPlus || sub.Op == syntax.OpRepeat && sub.Min >= 1 {
				if s, ok := exact(sub.Sub[0]); ok {
					run.WriteString(s)
					flush()
					run.WriteString(s) // and the last one precedes what follows
					continue
				}
			}
			flush()
			out = append(out, requiredLiterals(sub)...)
		}
		flush()
		return out
	}
	return nil
}

// candidateBlock is how many candidate rows scanCandidates reads a statement.
const candidateBlock = 64

// scanCandidates calls fn as scanRows does, for the rows of seqs (newest first) under
// filter, until deadline; done is false when the deadline stopped it.
func scanCandidates(ctx context.Context, db conn, filter string, args []any, seqs []int64, deadline time.Time, fn func(seq int64, head, text string, cut bool)) (done bool, err error) {
	q := "SELECT m.seq, m.text FROM messages m WHERE m.seq IN (?" + strings.Repeat(", ?", candidateBlock-1) + ")" +
		numbered(filter, candidateBlock+1)
	st, err := db.prepare(ctx, q)
	if err != nil {
		return false, err
	}
	defer st.done()
	type entry struct {
		seq  int64
		text string
	}
	var entries []entry
	bound := make([]any, candidateBlock, candidateBlock+len(args))
	for first := true; len(seqs) > 0; first = false {
		if !first && time.Now().After(deadline) {
			return false, nil
		}
		block := seqs[:min(candidateBlock, len(seqs))]
		seqs = seqs[len(block):]
		for i := range candidateBlock {
			bound[i] = int64(0) // no row has seq 0
			if i < len(block) {
				bound[i] = block[i]
			}
		}
		rows, err := st.QueryContext(ctx, append(bound[:candidateBlock], args...)...)
		if err != nil {
			return false, err
		}
		entries = entries[:0]
		for rows.Next() {
			var e entry
			if err := rows.Scan(&e.seq, &e.text); err != nil {
				rows.Close()
				return false, err
			}
			entries = append(entries, e)
		}
		if err := rows.Close(); err != nil {
			return false, err
		}
		slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(b.seq, a.seq) })
		for i, e := range entries {
			if i%budgetEvery == budgetEvery-1 && time.Now().After(deadline) {
				return false, nil
			}
			head := headChars(e.text, PatternChars)
			fn(e.seq, head, e.text, len(head) < len(e.text))
		}
	}
	return true, nil
}
