package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Ranking from postings: which of a word's rows can be among the best, and FTS5's scores of
// just those (search_postings.go).

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
