package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Word postings (contract: Search, query: rows with more words first, then by BM25): the
// rows of a common word with the word's instances in each, and every row's size in tokens, so
// that the rows holding the word alone are ranked without FTS5 scoring each of them. At 1M
// rows a word in 84,000 of them made that one statement about 100 ms: FTS5's bm25 reads each
// row's size from its docsize table. The numbers are FTS5's own, read once: the sizes from
// messages_fts_docsize (for all rows, in one pass), a word's rows and instances from an
// fts5vocab table of messages_fts (a temp table of a connection of its own), the table's rows
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
	// rankings and counts it answered.
	built, added, ranked, counted int
}

// postings is one word's rows, in seq order.
type postings struct {
	state   tableState        // the table when last read: every row up to state.top holding the word is here
	seqs    []int64           // ascending
	tf      []uint32          // per row: the word's instances
	roles   []uint8           // per row: its role, an index into postingIndex.roles; nil until a search filters by role
	weights []float64         // per row: bm25Weight under weighed
	weighed tableState        // what weights were computed for; zero: none yet
	exact   map[int64]float64 // FTS5's bm25 of rows, as the table is at state
	lines   int64             // lines holding the word, every one up to lineTop
	lineTop int64
	byRole  map[string]int64 // lines holding the word by role; nil until a count filters by role
	used    uint64           // the index's tick at its last use
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
func rankAlone(ctx context.Context, db conn, q rankQuery, w int, seen map[int64]uint64, upTo int64, k int) (_ []rankedRow, ok bool, err error) {
	token, ok := postingToken(q.words[w])
	if !ok {
		return nil, false, nil
	}
	pi := db.sr.postingIndex()
	pi.mu.Lock()
	defer pi.mu.Unlock()
	p, err := pi.current(ctx, db, q.phrases[w], token)
	switch {
	case errors.Is(err, errNoPostings):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	var role []bool // by role index: under the roles filter; nil: every role
	if len(q.roles) > 0 {
		if err := pi.readRoles(ctx, db, p, q.phrases[w]); errors.Is(err, errNoPostings) {
			return nil, false, nil
		} else if err != nil {
			return nil, false, err
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
		return nil, false, err
	}
	if ok, err := p.score(ctx, db, q.phrases[w], picked); !ok || err != nil {
		return nil, false, err
	}
	out := make([]rankedRow, len(picked))
	for i, b := range picked {
		out[i] = rankedRow{seq: p.seqs[b], matched: 1, score: p.exact[p.seqs[b]]}
	}
	slices.SortFunc(out, compareRanked)
	pi.ranked++
	return out[:min(k, len(out))], true, nil
}

// postingCounts returns the counts of q, one word without an in_context filter, TotalMatches
// and LineMatches, from the word's postings, built first when the word has more than maxRows
// rows under q's filters; ok is false when the word has no postings (the statements count).
func postingCounts(ctx context.Context, db conn, q rankQuery, maxRows int) (total, lines int, ok bool, err error) {
	token, ok := postingToken(q.words[0])
	if !ok || q.inContext {
		return 0, 0, false, nil
	}
	if !db.sr.hasPostings(q.phrases[0]) {
		seqs, err := matchSeqs(ctx, db, q, q.phrases[0], maxRows+1)
		if err != nil || len(seqs) <= maxRows {
			return 0, 0, false, err
		}
	}
	pi := db.sr.postingIndex()
	pi.mu.Lock()
	defer pi.mu.Unlock()
	p, err := pi.current(ctx, db, q.phrases[0], token)
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

// postingBlock is how many rows pick confirms a statement at least; postingWalkCap how many
// it confirms for one search before it leaves the ranking to the one statement (a filter that
// few of the word's rows pass).
const (
	postingBlock   = 32
	postingWalkCap = 4096
)

// rowFilter is the filters of a search on a word's rows: the roles, by role index (nil: all),
// and confirm, which returns which of seqs pass the rest (nil: all).
type rowFilter struct {
	role    []bool
	confirm func(seqs []int64) (map[int64]bool, error)
}

// rowConfirmer confirms rows holding word w alone under q's filters when it takes a
// statement: never without an in_context filter (the roles of a row never change, its
// words neither); with one, by each row's messages row, or with other words by scoreSet's
// expression, whose NOT leaves out a row holding another word.
func rowConfirmer(ctx context.Context, db conn, q rankQuery, w int) func(seqs []int64) (map[int64]bool, error) {
	switch {
	case !q.inContext:
		return nil
	case len(q.phrases) > 1:
		expr, _ := maskExpr(q, 1<<w, 0)
		return func(seqs []int64) (map[int64]bool, error) {
			return confirmRows(ctx, db, "SELECT messages_fts.rowid FROM messages_fts"+q.join+" WHERE messages_fts MATCH ? AND messages_fts.rowid IN ", q.filter,
				[]any{expr}, seqs, q.fargs)
		}
	}
	return func(seqs []int64) (map[int64]bool, error) {
		return confirmRows(ctx, db, "SELECT m.seq FROM messages m WHERE m.seq IN ", q.filter, nil, seqs, q.fargs)
	}
}

// confirmRows returns which of seqs the statement head + "(seqs…)" + filter returns, run
// with the arguments lead, the seqs (candidateBlock a statement, padded with 0, no row's seq)
// and fargs.
func confirmRows(ctx context.Context, db conn, head, filter string, lead []any, seqs []int64, fargs []any) (map[int64]bool, error) {
	st, err := db.prepare(ctx, head+"(?"+strings.Repeat(", ?", candidateBlock-1)+")"+filter)
	if err != nil {
		return nil, fmt.Errorf("confirm ranked rows: %w", err)
	}
	defer st.done()
	pass := make(map[int64]bool, len(seqs))
	args := make([]any, len(lead)+candidateBlock, len(lead)+candidateBlock+len(fargs))
	copy(args, lead)
	for len(seqs) > 0 {
		chunk := seqs[:min(candidateBlock, len(seqs))]
		seqs = seqs[len(chunk):]
		for i := range candidateBlock {
			args[len(lead)+i] = int64(0)
			if i < len(chunk) {
				args[len(lead)+i] = chunk[i]
			}
		}
		rows, err := st.QueryContext(ctx, append(args[:len(lead)+candidateBlock], fargs...)...)
		if err != nil {
			return nil, fmt.Errorf("confirm ranked rows: %w", err)
		}
		for rows.Next() {
			var s int64
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return nil, fmt.Errorf("confirm ranked rows: %w", err)
			}
			pass[s] = true
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("confirm ranked rows: %w", err)
		}
	}
	return pass, nil
}

// pick returns the positions, below end, of the best k rows of p not in skip that pass f, by
// weight, and of the rows past them whose weight is within the margin of the k-th:
// FTS5's k best are among them. Rows of the same instances and size have the same score, so
// the newer of them rank first: of those past the k-th, at most k of each instances and size
// are taken. ok is false when f's statements turned down too many rows.
func (p *postings) pick(sizes []uint32, f rowFilter, end int32, skip []int32, k int) (_ []int32, ok bool, err error) {
	examined := 0
	confirm := f.confirm
	keep := func(block []int32) ([]int32, bool, error) { // the rows of block that pass
		if confirm == nil {
			return block, true, nil
		}
		if examined += len(block); examined > postingWalkCap {
			return nil, false, nil
		}
		seqs := make([]int64, len(block))
		for i, b := range block {
			seqs[i] = p.seqs[b]
		}
		pass, err := confirm(seqs)
		if err != nil {
			return nil, false, err
		}
		return slices.DeleteFunc(block, func(b int32) bool { return !pass[p.seqs[b]] }), true, nil
	}
	if k <= 0 {
		return nil, true, nil
	}

	var picked []int32
	last := int32(-1) // the last row walked
	for len(picked) < k {
		want := k - len(picked)
		if confirm != nil {
			want = max(2*want, postingBlock)
		}
		block := p.best(want, last, end, skip, f.role)
		if len(block) == 0 {
			return picked, true, nil
		}
		last = block[len(block)-1]
		if block, ok, err = keep(block); !ok || err != nil {
			return nil, ok, err
		}
		picked = append(picked, block[:min(len(block), k-len(picked))]...)
		if len(picked) == k {
			last = picked[k-1] // rows of block past the k-th are walked again below
		}
	}

	// The rows past the k-th within the margin, newest first in each instances and size;
	// without statements to turn rows down, only as many of each as can still rank. taken
	// counts the rows picked of each instances and size (a few classes near the margin).
	type class struct {
		tf, size uint32
		n        int
	}
	var classes []class
	taken := func(b int32) *int {
		tf, size := p.tf[b], sizes[p.seqs[b]-1]
		for i := range classes {
			if classes[i].tf == tf && classes[i].size == size {
				return &classes[i].n
			}
		}
		classes = append(classes, class{tf: tf, size: size})
		return &classes[len(classes)-1].n
	}
	for _, b := range picked {
		*taken(b)++
	}
	floor := p.weights[picked[k-1]] * (1 - bm25Margin)
	var near []int32
	for i, j := end-1, len(skip)-1; i >= 0; i-- {
		for j >= 0 && skip[j] > i {
			j--
		}
		if j >= 0 && skip[j] == i || p.weights[i] < floor || !p.rankBefore(last, i) || f.role != nil && !f.role[p.roles[i]] {
			continue
		}
		if confirm == nil {
			if n := taken(i); *n < k {
				*n++
			} else {
				continue
			}
		}
		near = append(near, i)
	}
	slices.SortFunc(near, p.compare)
	if confirm == nil {
		return append(picked, near...), true, nil
	}
	for len(near) > 0 {
		var block []int32
		for len(near) > 0 && len(block) < postingBlock {
			b := near[0]
			near = near[1:]
			if *taken(b) < k {
				block = append(block, b)
			}
		}
		if block, ok, err = keep(block); !ok || err != nil {
			return nil, ok, err
		}
		for _, b := range block {
			*taken(b)++
		}
		picked = append(picked, block...)
	}
	return picked, true, nil
}

// score makes sure p.exact holds FTS5's bm25 of the rows at positions picked, reading those it
// lacks in one statement: the word's phrase alone, whose bm25 of a row holding no other word
// of the query is the query's (each absent phrase adds 0.0). ok is false when the table
// changed since p was read (the scores would be of another table than the ranking's).
func (p *postings) score(ctx context.Context, db conn, phrase string, picked []int32) (ok bool, err error) {
	var list []string
	for _, b := range picked {
		if _, ok := p.exact[p.seqs[b]]; !ok {
			list = append(list, strconv.FormatInt(p.seqs[b], 10))
		}
	}
	if len(list) == 0 {
		return true, nil
	}
	// +rowid: matched while walking the word's rows once, not looked up (each lookup would
	// count the word's rows again for its IDF). The list changes with every search: not a
	// statement to keep prepared.
	rows, err := db.db.QueryContext(ctx, "SELECT messages_fts.rowid, bm25(messages_fts), "+tableStateColumns+
		" FROM messages_fts WHERE messages_fts MATCH ? AND +messages_fts.rowid IN ("+strings.Join(list, ", ")+")", phrase)
	if err != nil {
		return false, fmt.Errorf("score ranked rows: %w", err)
	}
	defer rows.Close()
	got := make(map[int64]float64, len(list))
	for rows.Next() {
		var seq int64
		var s float64
		var block []byte
		var top sql.NullInt64
		if err := rows.Scan(&seq, &s, &block, &top); err != nil {
			return false, fmt.Errorf("score ranked rows: %w", err)
		}
		if st, err := readTableState(block, top); err != nil || st != p.state {
			return false, err
		}
		got[seq] = s
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("score ranked rows: %w", err)
	}
	if len(got) != len(list) {
		return false, nil // a row left the phrase's rows: not possible unless the table changed
	}
	if p.exact == nil {
		p.exact = make(map[int64]float64, len(got))
	}
	maps.Copy(p.exact, got)
	return true, nil
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
	drop := func() {
		sr.pimu.Lock()
		if sr.posts == pi {
			sr.posts = nil
		}
		sr.pimu.Unlock()
	}
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
		if searchMem.use(&pi.mem, total, drop) {
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
	sr.pimu.Lock()
	if sr.posts == pi {
		sr.posts = nil
	}
	sr.pimu.Unlock()
}

// weigh computes each row's weight under p.state, unless done already.
func (p *postings) weigh(sizes []uint32) {
	if p.weighed == p.state && len(p.weights) == len(p.seqs) {
		return
	}
	avgdl := p.state.avgdl()
	p.weights = slices.Grow(p.weights[:0], len(p.seqs))[:len(p.seqs)]
	for i, s := range p.seqs {
		p.weights[i] = bm25Weight(p.tf[i], sizes[s-1], avgdl)
	}
	p.weighed = p.state
}

// rankBefore reports whether row i of p comes before row j when picking: the higher weight
// (the lower bm25), then the newer row (positions follow seq).
func (p *postings) rankBefore(i, j int32) bool {
	return p.weights[i] > p.weights[j] || p.weights[i] == p.weights[j] && i > j
}

// compare is rankBefore as a sort order.
func (p *postings) compare(a, b int32) int {
	switch {
	case p.rankBefore(a, b):
		return -1
	case p.rankBefore(b, a):
		return 1
	}
	return 0
}

// best returns the positions, below end, of up to n rows after row last (-1: from the first)
// in the picking order, best first, leaving out the positions in skip (ascending) and, when
// role is set, the rows whose role it does not hold.
func (p *postings) best(n int, last, end int32, skip []int32, role []bool) []int32 {
	h := make([]int32, 0, n) // a max-heap by rankBefore's order: the worst of the best so far on top
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && p.rankBefore(h[c], h[c+1]) {
				c++
			}
			if !p.rankBefore(h[i], h[c]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	floor := math.Inf(-1) // the weight of the worst row kept, once n are
	for i := int32(0); i < end; i++ {
		if len(skip) > 0 && skip[0] == i {
			skip = skip[1:]
			continue
		}
		if p.weights[i] < floor || last >= 0 && !p.rankBefore(last, i) || role != nil && !role[p.roles[i]] {
			continue
		}
		switch {
		case len(h) < n:
			h = append(h, i)
			for c := len(h) - 1; c > 0; { // up
				parent := (c - 1) / 2
				if !p.rankBefore(h[parent], h[c]) {
					break
				}
				h[parent], h[c] = h[c], h[parent]
				c = parent
			}
		case p.rankBefore(i, h[0]):
			h[0] = i
			down(0)
		}
		if len(h) == n {
			floor = p.weights[h[0]]
		}
	}
	slices.SortFunc(h, p.compare)
	return h
}

// tableStateColumns are read by one statement, so from one snapshot: the averages record
// (rows and tokens; parseAverages) and the highest seq of messages_fts.
const tableStateColumns = "(SELECT block FROM messages_fts_data WHERE id = 1), (SELECT max(id) FROM messages_fts_docsize)"

// readTableState reads tableStateColumns' values from one row being scanned: block and top.
func readTableState(block []byte, top sql.NullInt64) (tableState, error) {
	rows, tokens, err := parseAverages(block)
	return tableState{rows: rows, tokens: tokens, top: top.Int64}, err
}

// readSizes extends pi.sizes to row top, from messages_fts_docsize on db (any connection:
// the rows up to top never change). Every seq from 1 must have its row.
func (pi *postingIndex) readSizes(ctx context.Context, db *sql.DB, top int64) error {
	from := int64(len(pi.sizes))
	if top <= from {
		return nil
	}
	var n int64
	var sizeHex sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT count(*), group_concat(hex(sz), '') FROM (SELECT sz FROM messages_fts_docsize WHERE id > ? AND id <= ? ORDER BY id)",
		from, top).Scan(&n, &sizeHex); err != nil {
		return fmt.Errorf("read row sizes: %w", err)
	}
	if n != top-from {
		return fmt.Errorf("read row sizes: %d rows from seq %d to %d: %w", n, from+1, top, errNoPostings)
	}
	b, err := hex.DecodeString(sizeHex.String)
	if err != nil {
		return fmt.Errorf("read row sizes: %w", err)
	}
	sizes := slices.Grow(pi.sizes, int(n))
	for len(b) > 0 {
		v, used := fts5Varint(b)
		if used == 0 || v > math.MaxUint32 {
			return fmt.Errorf("read row sizes: a docsize record: %w", errNoPostings)
		}
		sizes = append(sizes, uint32(v))
		b = b[used:]
	}
	if int64(len(sizes)) != top { // one varint a row: messages_fts has one column
		return fmt.Errorf("read row sizes: %d sizes for %d rows: %w", int64(len(sizes))-from, n, errNoPostings)
	}
	pi.sizes = sizes
	return nil
}

// refresh adds to p the rows stored since it was last read, and returns how many. Their
// instances come from FTS5's bm25 of each (one statement reads them all, with the table's
// state it scored them at), solved for the count with the row's size: a score no count gives
// is errNoPostings. The line count follows the lines table the same way.
func (pi *postingIndex) refresh(ctx context.Context, db conn, p *postings, phrase string) (int, error) {
	var block []byte
	var top, lineTop sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT "+tableStateColumns+", (SELECT max(id) FROM lines)").Scan(&block, &top, &lineTop); err != nil {
		return 0, fmt.Errorf("read postings: %w", err)
	}
	now, err := readTableState(block, top)
	if err != nil {
		return 0, err
	}
	if lineTop.Int64 > p.lineTop {
		if err := p.readLines(ctx, db, phrase, p.lineTop, math.MaxInt64); err != nil {
			return 0, err
		}
	}
	if now == p.state {
		return 0, nil
	}
	type newRow struct {
		seq   int64
		score float64
		role  string
	}
	var adds []newRow
	if now.top > p.state.top {
		rows, err := db.QueryContext(ctx, "SELECT messages_fts.rowid, bm25(messages_fts), "+tableStateColumns+
			", (SELECT role FROM messages WHERE seq = messages_fts.rowid) FROM messages_fts WHERE messages_fts MATCH ? AND messages_fts.rowid > ?", phrase, p.state.top)
		if err != nil {
			return 0, fmt.Errorf("read postings: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var a newRow
			if err := rows.Scan(&a.seq, &a.score, &block, &top, &a.role); err != nil {
				return 0, fmt.Errorf("read postings: %w", err)
			}
			adds = append(adds, a)
		}
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("read postings: %w", err)
		}
		if len(adds) > 0 { // the state the scores were computed at
			if now, err = readTableState(block, top); err != nil {
				return 0, err
			}
		}
		if err := pi.readSizes(ctx, db.db, now.top); err != nil {
			return 0, err
		}
	}
	hits := int64(len(p.seqs) + len(adds))
	for _, a := range adds {
		f, ok := bm25Instances(now, hits, pi.sizes[a.seq-1], a.score)
		if !ok {
			return 0, fmt.Errorf("read postings: FTS5 scores row %d %v, which no instance count gives: %w", a.seq, a.score, errNoPostings)
		}
		p.seqs = append(p.seqs, a.seq)
		p.tf = append(p.tf, f)
		if p.roles != nil {
			i, ok := pi.roleIndex(a.role)
			if !ok {
				return 0, fmt.Errorf("read postings: %w", errNoPostings)
			}
			p.roles = append(p.roles, i)
		}
	}
	p.state, p.exact = now, nil
	return len(adds), nil
}

// readLines adds to p's line counts the lines past from and up to to holding the word, and
// moves lineTop to the highest line id then (to when lower): by role when p counts by role.
func (p *postings) readLines(ctx context.Context, db conn, phrase string, from, to int64) error {
	stmt := "SELECT '', count(*), (SELECT max(id) FROM lines) FROM lines_fts WHERE lines_fts MATCH ? AND lines_fts.rowid > ? AND lines_fts.rowid <= ?"
	if p.byRole != nil {
		stmt = "SELECT l.role, count(*), (SELECT max(id) FROM lines) FROM lines_fts JOIN lines l ON l.id = lines_fts.rowid " +
			"WHERE lines_fts MATCH ? AND lines_fts.rowid > ? AND lines_fts.rowid <= ? GROUP BY l.role"
	}
	rows, err := db.QueryContext(ctx, stmt, phrase, from, to)
	if err != nil {
		return fmt.Errorf("read postings' lines: %w", err)
	}
	defer rows.Close()
	top := to
	for rows.Next() {
		var role string
		var n int64
		var last sql.NullInt64
		if err := rows.Scan(&role, &n, &last); err != nil {
			return fmt.Errorf("read postings' lines: %w", err)
		}
		if p.byRole != nil {
			p.byRole[role] += n
		}
		p.lines += n
		top = min(top, last.Int64)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read postings' lines: %w", err)
	}
	if top == math.MaxInt64 { // no line holds the word: lineTop stays (a later look reads the lines past it again)
		return nil
	}
	p.lineTop = max(p.lineTop, top)
	return nil
}

// readLineRoles counts p's lines by role, unless done already: a line's role never changes.
func (p *postings) readLineRoles(ctx context.Context, db conn, phrase string) error {
	if p.byRole != nil {
		return nil
	}
	lines := p.lines
	p.byRole, p.lines = map[string]int64{}, 0
	if err := p.readLines(ctx, db, phrase, 0, p.lineTop); err != nil {
		p.byRole, p.lines = nil, lines
		return err
	}
	if byRole := p.lines; byRole != lines {
		p.byRole, p.lines = nil, lines
		return fmt.Errorf("read postings' lines: %d lines by role, %d in all: %w", byRole, lines, errNoPostings)
	}
	return nil
}

// readRoles reads the roles of p's rows, unless read already: a row's role never changes.
func (pi *postingIndex) readRoles(ctx context.Context, db conn, p *postings, phrase string) error {
	if p.roles != nil || len(p.seqs) == 0 {
		return nil
	}
	var list sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT group_concat(m.role, char(10)) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid "+
		"WHERE messages_fts MATCH ? AND messages_fts.rowid <= ?", phrase, p.state.top).Scan(&list); err != nil {
		return fmt.Errorf("read postings' roles: %w", err)
	}
	roles := make([]uint8, 0, len(p.seqs))
	for r := range strings.SplitSeq(list.String, "\n") {
		i, ok := pi.roleIndex(r)
		if !ok {
			return fmt.Errorf("read postings' roles: %w", errNoPostings)
		}
		roles = append(roles, i)
	}
	if len(roles) != len(p.seqs) { // a role holding a line feed
		return fmt.Errorf("read postings' roles: %d roles for %d rows: %w", len(roles), len(p.seqs), errNoPostings)
	}
	p.roles = roles
	return nil
}

// roleMask tells by role index whether a role is one of roles.
func (pi *postingIndex) roleMask(roles []string) []bool {
	mask := make([]bool, len(pi.roles))
	for i, r := range pi.roles {
		mask[i] = slices.Contains(roles, r)
	}
	return mask
}

// roleIndex returns role's index in pi.roles, added when new; ok is false past 256 roles (the
// contract has three).
func (pi *postingIndex) roleIndex(role string) (uint8, bool) {
	i := slices.Index(pi.roles, role)
	if i < 0 && len(pi.roles) < 256 {
		i = len(pi.roles)
		pi.roles = append(pi.roles, internRole(role))
	}
	return uint8(i), i >= 0
}

// build reads phrase's postings, token its FTS5 term, on a connection of its own in one read
// transaction: the table's state, the rows of the term with their instances (an fts5vocab
// table in that connection's temp schema), the count of the phrase's rows (as many as the
// term's) and lines, and FTS5's bm25 of some of the rows, which the formula must give. The
// rows' sizes are read on the pooled connection. errNoPostings: messages_fts is not the
// contract's, or its rows or scores are not the postings'.
func (pi *postingIndex) build(ctx context.Context, db conn, phrase, token string) (_ *postings, err error) {
	sr := db.sr
	params := "mode=ro&_busy_timeout=1000"
	if sr.immutable {
		params = "mode=ro&immutable=1"
	}
	sdb, err := sql.Open("sqlite3", sqliteURI(sr.path, params))
	if err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	defer sdb.Close()
	c, err := sdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	defer c.Close()
	for _, s := range []string{"PRAGMA temp_store = MEMORY", "CREATE VIRTUAL TABLE temp.postings_vocab USING fts5vocab(main, messages_fts, instance)", "BEGIN"} {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("build postings: %w", err)
		}
	}
	defer func() {
		if _, rerr := c.ExecContext(context.Background(), "ROLLBACK"); err == nil && rerr != nil {
			err = fmt.Errorf("build postings: %w", rerr)
		}
	}()

	var block []byte
	var top, lineTop sql.NullInt64
	var create string
	if err := c.QueryRowContext(ctx, "SELECT "+tableStateColumns+", (SELECT max(id) FROM lines), (SELECT sql FROM sqlite_master WHERE name = 'messages_fts')").
		Scan(&block, &top, &lineTop, &create); err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	// The connection opened the file by its path: it must be the pooled reader's.
	if fi, err := os.Stat(sr.path); err != nil || !os.SameFile(fi, sr.fi) {
		return nil, fmt.Errorf("build postings: %s is no longer the file the reader opened", sr.path)
	}
	// Terms are unicode61's and instances have positions only as the contract creates the
	// table: no tokenize or detail option.
	if lower := strings.ToLower(create); strings.Contains(lower, "tokenize") || strings.Contains(lower, "detail") {
		return nil, fmt.Errorf("build postings: messages_fts is %q: %w", create, errNoPostings)
	}
	p := &postings{lineTop: lineTop.Int64}
	if p.state, err = readTableState(block, top); err != nil {
		return nil, err
	}
	if err := pi.readSizes(ctx, db.db, p.state.top); err != nil {
		return nil, err
	}

	var docList sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT group_concat(doc) FROM temp.postings_vocab WHERE term = ?", token).Scan(&docList); err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	docs, err := parseSeqs(docList.String) // one per instance, ascending
	if err != nil {
		return nil, err
	}
	for i, d := range docs {
		if d > p.state.top {
			return nil, fmt.Errorf("build postings: term %q holds row %d past the table's %d: %w", token, d, p.state.top, errNoPostings)
		}
		if i == 0 || d != docs[i-1] {
			p.seqs = append(p.seqs, d)
			p.tf = append(p.tf, 0)
		}
		p.tf[len(p.tf)-1]++
	}
	var rows int
	if err := c.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?1), (SELECT count(*) FROM lines_fts WHERE lines_fts MATCH ?1)",
		phrase).Scan(&rows, &p.lines); err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	if rows != len(p.seqs) {
		return nil, fmt.Errorf("build postings: %s matches %d rows, term %q is in %d: %w", phrase, rows, token, len(p.seqs), errNoPostings)
	}
	if err := p.check(ctx, c, phrase, pi.sizes); err != nil {
		return nil, err
	}
	return p, nil
}

// postingChecks is how many rows of a word's postings, besides its best, are checked against
// FTS5's bm25 when they are built: those with the most instances, the largest and the
// smallest, and others spread over the session.
const postingChecks = 16

// check compares the formula's scores of some of p's rows with FTS5's bm25 of them, in the
// build's transaction, and keeps FTS5's as p's first exact scores.
func (p *postings) check(ctx context.Context, c *sql.Conn, phrase string, sizes []uint32) error {
	if len(p.seqs) == 0 {
		return nil
	}
	size := func(i int) uint32 { return sizes[p.seqs[i]-1] }
	pick := map[int]bool{}
	argmax := func(better func(i, j int) bool) {
		m := 0
		for i := range p.seqs {
			if better(i, m) {
				m = i
			}
		}
		pick[m] = true
	}
	argmax(func(i, j int) bool { return p.tf[i] > p.tf[j] })
	argmax(func(i, j int) bool { return size(i) > size(j) })
	argmax(func(i, j int) bool { return size(i) < size(j) })
	for i := 0; len(pick) < min(postingChecks, len(p.seqs)); i++ { // spread, then the first rows
		if i < postingChecks {
			pick[i*len(p.seqs)/postingChecks] = true
		} else {
			pick[i-postingChecks] = true
		}
	}
	// And the best rows, which a search without filters ranks first: their scores are kept.
	p.weigh(sizes)
	for _, b := range p.best(2*postingBlock, -1, int32(len(p.seqs)), nil, nil) {
		pick[int(b)] = true
	}
	want := map[int64]int{}
	var list []string
	for i := range pick {
		want[p.seqs[i]] = i
		list = append(list, strconv.FormatInt(p.seqs[i], 10))
	}
	// +rowid: matched while walking the phrase's rows, not one lookup (and IDF) per row.
	rows, err := c.QueryContext(ctx, "SELECT rowid, bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ? AND +rowid IN ("+strings.Join(list, ", ")+")", phrase)
	if err != nil {
		return fmt.Errorf("build postings: %w", err)
	}
	defer rows.Close()
	idf, avgdl := bm25IDF(p.state.rows, int64(len(p.seqs))), p.state.avgdl()
	p.exact = make(map[int64]float64, len(want))
	for rows.Next() {
		var seq int64
		var s float64
		if err := rows.Scan(&seq, &s); err != nil {
			return fmt.Errorf("build postings: %w", err)
		}
		i, ok := want[seq]
		if !ok {
			return fmt.Errorf("build postings: FTS5 scored row %d, not asked for: %w", seq, errNoPostings)
		}
		if f := -idf * bm25Weight(p.tf[i], size(i), avgdl); !bm25Close(s, f) {
			return fmt.Errorf("build postings: FTS5 scores row %d %v, the formula %v: %w", seq, s, f, errNoPostings)
		}
		p.exact[seq] = s
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("build postings: %w", err)
	}
	if len(p.exact) != len(want) {
		return fmt.Errorf("build postings: FTS5 scored %d of %d rows: %w", len(p.exact), len(want), errNoPostings)
	}
	return nil
}

// parseAverages reads FTS5's averages record: the table's rows, then each column's tokens
// (messages_fts has one column).
func parseAverages(block []byte) (rows, tokens int64, err error) {
	r, n := fts5Varint(block)
	t, m := fts5Varint(block[n:])
	if n == 0 || m == 0 || r == 0 || r > math.MaxInt64 || t > math.MaxInt64 {
		return 0, 0, fmt.Errorf("read postings: FTS5 averages record %x: %w", block, errNoPostings)
	}
	return int64(r), int64(t), nil
}

// parseSeqs reads a group_concat of rowids (ascending, "" for none).
func parseSeqs(list string) ([]int64, error) {
	if list == "" {
		return nil, nil
	}
	seqs := make([]int64, 0, strings.Count(list, ",")+1)
	for part := range strings.SplitSeq(list, ",") {
		s, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("build postings: %w", err)
		}
		if s < 1 || len(seqs) > 0 && s < seqs[len(seqs)-1] {
			return nil, fmt.Errorf("build postings: rows out of order: %w", errNoPostings)
		}
		seqs = append(seqs, s)
	}
	return seqs, nil
}

// fts5Varint decodes the SQLite varint FTS5 writes (sqlite3Fts5GetVarint: big-endian groups
// of 7 bits, the ninth byte whole) and returns it with its length, 0 when b is cut short.
func fts5Varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 8; i++ {
		if i >= len(b) {
			return 0, 0
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	if len(b) < 9 {
		return 0, 0
	}
	return v<<8 | uint64(b[8]), 9
}
