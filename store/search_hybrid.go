package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Hybrid search (contract: Search, hybrid): the lexical ranking fused with the rows nearest to
// the query's vector.

// searchHybrid fuses the lexical ranking (as searchQuery orders it) with the HybridNearest
// rows nearest by cosine: each row scores Σ 1/(60 + rank) over the lists it is in. Counts
// stay lexical. Rank is the negated score; Similarity is set for every hit with a vector.
func searchHybrid(ctx context.Context, db conn, o SearchOptions, words []string) (SearchResult, error) {
	var res SearchResult
	if len(words) > 0 {
		lo := o
		lo.Limit = max(o.Limit, HybridNearest)
		lo.KeysOnly = true // the details are read below for the hits that stay
		var err error
		if res, err = searchQuery(ctx, db, lo, words); err != nil {
			return res, err
		}
	}
	if o.Limit == 0 {
		res.Hits = nil
		return res, nil
	}
	lexical := make([]int64, len(res.Hits))
	for i, h := range res.Hits {
		lexical[i] = h.Seq
	}
	near, sims, err := nearest(ctx, db, o, HybridNearest, lexical)
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
	var kept []Hit
	for _, seq := range order {
		if h, ok := byseq[seq]; ok {
			kept = append(kept, h)
		}
	}
	if err := queryDetails(ctx, db, anyWordQuery(words), kept); err != nil {
		return res, err
	}
	for _, h := range kept {
		byseq[h.Seq] = h
	}
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
