package store

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
)

// Word postings (contract: Search, query: rows with more words first, then by BM25): the
// rows of a common word with the word's instances in each, and every row's size in tokens, so
// that the rows holding the word alone are ranked without FTS5 scoring each of them. At 1M
// rows a word in 84,000 of them made that one statement about 100 ms: FTS5's bm25 reads each
// row's size from its docsize table. The numbers are FTS5's own, read once: the sizes from
// messages_fts_docsize (for all rows, in one pass), a word's rows and instances from FTS5's
// doclist of its term, the leaf pages decoded here (search_postings_doclist.go; checked against
// an fts5vocab table's counts, and read from that table when the pages are not ones the reader
// knows), its lines counted when a count first needs them, the table's rows
// and tokens from its averages record in messages_fts_data. The database is only read; the
// contract's schema is untouched.
//
// From them a search weighs each row of the word (search_bm25.go) and takes the best, under
// the filters, with every row whose weight is within bm25Margin of the last one taken; FTS5
// then scores those rows, in one statement that walks the word's rows once, and they are
// ranked by its scores. So the Rank values are FTS5's, bit for bit. Its scores are kept while
// the table is unchanged: in a session no writer touches, a word is ranked again without a
// statement. A one-word search without an in_context filter also takes its counts from
// them (rows, and lines, by role when filtered by role).
//
// Postings live in memory beside the pooled reader and count against the search memory
// budget (search_memory.go). Rows are never deleted and their text never changes, so the
// postings follow the session by reading the rows stored since their last look.
//
// A word has postings when it is one ASCII token and messages_fts has the contract's
// tokenizer (unicode61, which folds ASCII by case only, so the word's term is the word
// lowercased). Other words, and a word whose postings alone would not fit the budget, are
// ranked by the one FTS5 statement as before.
//
// This file holds the index and its entry points; search_postings_rank.go picks and scores a
// word's rows, search_postings_read.go reads FTS5's numbers and follows new rows.

// postingIndex is a pooled reader's postings: every row's size and, by FTS5 phrase, the
// common words searched. Guarded by mu.
type postingIndex struct {
	mu     sync.Mutex
	sizes  []uint32 // row seq's size in tokens at sizes[seq-1] (seqs are 1, 2, … per the contract)
	roles  []string // the roles of the rows read, by postings.roles' index
	words  map[string]*postings
	failed map[string]bool // phrases that cannot have postings (errNoPostings)
	tick   uint64          // LRU clock of words
	mem    memEntry        // its place in the search memory budget (search_memory.go)
	// What it did, for the tests and benchmarks: words built, rows added to them since, and
	// rankings and counts it answered, rankings that counted the rows with the word alone,
	// and words read from an fts5vocab table (the doclist reader did not know the segments).
	built, added, ranked, counted, alone, vocab int
}

// postings is one word's rows, in seq order.
type postings struct {
	state     tableState        // the table when last read: every row up to state.top holding the word is here
	seqs      []int64           // ascending
	tf        []uint32          // per row: the word's instances
	roles     []uint8           // per row: its role, an index into postingIndex.roles; nil until a search filters by role
	weights   []float64         // per row: bm25Weight under weighed
	weighed   tableState        // what weights were computed for; zero: none yet
	exact     map[int64]float64 // FTS5's bm25 of rows, as the table is at state
	lines     int64             // lines holding the word, every one up to lineTop, once linesRead
	lineTop   int64
	linesRead bool
	byRole    map[string]int64 // lines holding the word by role; nil until a count filters by role
	used      uint64           // the index's tick at its last use
}

// postingRowBytes is what a word's row takes: seq, tf and weight (and its role, when read).
const postingRowBytes = 8 + 4 + 8

func (p *postings) bytes() int64 {
	return int64(len(p.seqs))*postingRowBytes + int64(len(p.roles)) + int64(len(p.exact))*32 + 256
}

// errNoPostings: the word cannot have postings (the table is not the contract's, or FTS5's
// rows or scores are not the postings'); the caller ranks as before.
var errNoPostings = errors.New("no postings for this word")

// postingToken returns FTS5's term for word when the word's phrase is that one token: ASCII
// with one run of letters and digits (unicode61's ASCII token characters), lowercased.
func postingToken(word string) (string, bool) {
	start, end := -1, -1
	for i := 0; i < len(word); i++ {
		c := word[i]
		switch {
		case c >= 0x80:
			return "", false
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
			if end >= 0 {
				return "", false // a second run
			}
			if start < 0 {
				start = i
			}
		case start >= 0 && end < 0:
			end = i
		}
	}
	if start < 0 {
		return "", false
	}
	if end < 0 {
		end = len(word)
	}
	return strings.ToLower(word[start:end]), true
}

// postingIndex returns the reader's postings, created on first use.
func (sr *sharedReader) postingIndex() *postingIndex {
	sr.pimu.Lock()
	defer sr.pimu.Unlock()
	if sr.posts == nil {
		sr.posts = &postingIndex{words: map[string]*postings{}, failed: map[string]bool{}}
	}
	return sr.posts
}

// rankAlone ranks as scoreSet(q, 1<<w, k) does, from word w's postings: the best k rows up
// to seq upTo holding word w and no other word of q, under q's filters, that are not keys of
// seen (the rows the tiers read with other words, which hold every such row up to upTo when
// there is no filter on in_context). ok is false, with nothing ranked, when the word has no
// postings or the table changed while the search read it; the caller then runs scoreSet.
//
// A row a writer stores after upTo is left out, as the statements of a search leave out a row
// stored after them. Roles are filtered in memory (a row's role never changes); under an
// in_context filter the rows taken are confirmed in blocks, by their messages row or, with
// other words, by scoreSet's own expression (a row a writer moved into context since the
// tiers read theirs may hold another word of q).
//
// alone is how many rows up to upTo hold word w and are not keys of seen, under the roles
// filter: the rows with w alone when seen holds every row with another word (its count
// without an in_context filter; -1 under one).
func rankAlone(ctx context.Context, db conn, q rankQuery, w int, seen map[int64]uint64, upTo int64, k int) (_ []rankedRow, alone int, ok bool, err error) {
	token, ok := postingToken(q.words[w])
	if !ok {
		return nil, 0, false, nil
	}
	pi := db.sr.postingIndex()
	pi.mu.Lock()
	defer pi.mu.Unlock()
	p, err := pi.current(ctx, db, q.phrases[w], token)
	switch {
	case errors.Is(err, errNoPostings):
		return nil, 0, false, nil
	case err != nil:
		return nil, 0, false, err
	}
	var role []bool // by role index: under the roles filter; nil: every role
	if len(q.roles) > 0 {
		if err := pi.readRoles(ctx, db, p, q.phrases[w]); errors.Is(err, errNoPostings) {
			return nil, 0, false, nil
		} else if err != nil {
			return nil, 0, false, err
		}
		role = pi.roleMask(q.roles)
	}
	if !pi.account(db.sr, p) {
		defer pi.drop(db.sr) // p alone is past the budget: it serves this search only
	}
	p.weigh(pi.sizes)

	var skip []int32 // positions of seen rows, ascending
	for s := range seen {
		if i, found := slices.BinarySearch(p.seqs, s); found {
			skip = append(skip, int32(i))
		}
	}
	slices.Sort(skip)
	end := len(p.seqs)
	if upTo < math.MaxInt64 {
		end, _ = slices.BinarySearch(p.seqs, upTo+1)
	}
	picked, ok, err := p.pick(pi.sizes, rowFilter{role, rowConfirmer(ctx, db, q, w)}, int32(end), skip, k)
	if !ok || err != nil {
		return nil, 0, false, err
	}
	if ok, err := p.score(ctx, db, q.phrases[w], picked); !ok || err != nil {
		return nil, 0, false, err
	}
	out := make([]rankedRow, len(picked))
	for i, b := range picked {
		out[i] = rankedRow{seq: p.seqs[b], matched: 1, score: p.exact[p.seqs[b]]}
	}
	slices.SortFunc(out, compareRanked)
	pi.ranked++
	if q.inContext {
		return out[:min(k, len(out))], -1, true, nil
	}
	pi.alone++
	for i := range int32(end) {
		if role == nil || role[p.roles[i]] {
			alone++
		}
	}
	for _, i := range skip {
		if i < int32(end) && (role == nil || role[p.roles[i]]) {
			alone--
		}
	}
	return out[:min(k, len(out))], alone, true, nil
}

// postingCounts returns the counts of q, one word without an in_context filter, TotalMatches
// and LineMatches, from the word's postings, built first when the word has more than maxRows
// rows under q's filters; ok is false when the word has no postings (the statements count).
func postingCounts(ctx context.Context, db conn, q rankQuery, maxRows int) (total, lines int, ok bool, err error) {
	token, ok := postingToken(q.words[0])
	if !ok || q.inContext {
		return 0, 0, false, nil
	}
	if common, err := worthPostings(ctx, db, q, maxRows); !common || err != nil {
		return 0, 0, false, err
	}
	pi := db.sr.postingIndex()
	pi.mu.Lock()
	defer pi.mu.Unlock()
	p, err := pi.current(ctx, db, q.phrases[0], token)
	if err == nil {
		err = p.readAllLines(ctx, db, q.phrases[0])
	}
	if err == nil && len(q.roles) > 0 {
		if err = pi.readRoles(ctx, db, p, q.phrases[0]); err == nil {
			err = p.readLineRoles(ctx, db, q.phrases[0])
		}
	}
	switch {
	case errors.Is(err, errNoPostings):
		return 0, 0, false, nil
	case err != nil:
		return 0, 0, false, err
	}
	if !pi.account(db.sr, p) {
		pi.drop(db.sr)
	}
	pi.counted++
	if len(q.roles) == 0 {
		return len(p.seqs), int(p.lines), true, nil
	}
	role := pi.roleMask(q.roles)
	for _, r := range p.roles {
		if role[r] {
			total++
		}
	}
	for r, n := range p.byRole {
		if slices.Contains(q.roles, r) {
			lines += int(n)
		}
	}
	return total, lines, true, nil
}

// worthPostings reports whether q's one word is ranked and counted from postings: it has them
// already, or it matches more than maxRows rows under q's filters (fewer are cheaper to rank
// and count by statement than to build postings for).
func worthPostings(ctx context.Context, db conn, q rankQuery, maxRows int) (bool, error) {
	if db.sr.hasPostings(q.phrases[0]) {
		return true, nil
	}
	seqs, err := matchSeqs(ctx, db, q, q.phrases[0], maxRows+1)
	return err == nil && len(seqs) > maxRows, err
}

// hasPostings reports whether the reader holds postings of phrase.
func (sr *sharedReader) hasPostings(phrase string) bool {
	sr.pimu.Lock()
	pi := sr.posts
	sr.pimu.Unlock()
	if pi == nil {
		return false
	}
	pi.mu.Lock()
	defer pi.mu.Unlock()
	return pi.words[phrase] != nil
}

// current returns phrase's postings, read up to the table's highest seq now: refreshed with
// the rows stored since their last look, or built (with token, its term) when the word has
// none.
func (pi *postingIndex) current(ctx context.Context, db conn, phrase, token string) (*postings, error) {
	if pi.failed[phrase] {
		return nil, errNoPostings
	}
	pi.tick++
	p := pi.words[phrase]
	var err error
	if p == nil {
		if p, err = pi.build(ctx, db, phrase, token); err == nil {
			pi.words[phrase] = p
			pi.built++
		}
	} else {
		var added int
		added, err = pi.refresh(ctx, db, p, phrase)
		pi.added += added
	}
	if errors.Is(err, errNoPostings) {
		delete(pi.words, phrase)
		pi.failed[phrase] = true
	}
	if err != nil {
		return nil, err
	}
	p.used = pi.tick
	return p, nil
}

// account records the index's size in the search memory budget after p was used, letting the
// least recently used other words go while it is past the budget. It reports whether the
// index may be kept; when not (p alone is past the budget), the caller uses p for this search
// and then drops the index.
func (pi *postingIndex) account(sr *sharedReader, p *postings) bool {
	for {
		total := 4 * int64(len(pi.sizes))
		var lru *postings
		lruPhrase := ""
		for phrase, q := range pi.words {
			total += q.bytes()
			if q != p && (lru == nil || q.used < lru.used) {
				lru, lruPhrase = q, phrase
			}
		}
		if searchMem.use(&pi.mem, total, func() { pi.leave(sr) }) {
			return true
		}
		if lru == nil {
			return false
		}
		delete(pi.words, lruPhrase)
	}
}

// drop takes the index from sr and out of the budget (p alone did not fit).
func (pi *postingIndex) drop(sr *sharedReader) {
	searchMem.forget(&pi.mem)
	pi.leave(sr)
}

// leave takes the index from sr, unless sr holds another one by now.
func (pi *postingIndex) leave(sr *sharedReader) {
	sr.pimu.Lock()
	if sr.posts == pi {
		sr.posts = nil
	}
	sr.pimu.Unlock()
}
