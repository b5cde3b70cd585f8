package store

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// SessionSearch is one search over several session databases (Root.SearchSessions): the MCP
// tool's over the resolved sessions, the dashboard's over every session.
type SessionSearch struct {
	// Sessions are the session ids to search, newest first: hits that rank the same keep this
	// order.
	Sessions []string
	// Options is the search of each session; its Limit is the hits one session contributes.
	Options SearchOptions
	// Limit is how many hits are kept across sessions after ranking; 0 keeps all.
	Limit int
	// PatternBudget is the budget of a pattern search for all sessions together, counted from
	// the first session searched; a session not started within it is skipped (SkipPatternBudget).
	PatternBudget time.Duration

	// Workers 0 searches the sessions one at a time after opening every one of them first (a
	// hybrid search needs each one's vector model before the query is embedded), and a ctx
	// that ends fails the search. Workers above 0 searches that many sessions at once for
	// their keys only, reads the details of the hits kept afterwards, and a ctx that ends
	// skips the sessions not searched yet (SkipOutOfTime); results do not depend on timing.
	Workers int
	// StartBudget above 0 (with Workers) stops starting sessions after that long: they count
	// in NotSearched.
	StartBudget time.Duration
	// Unreadable are sessions the caller already knows cannot be read, with its reason:
	// skipped unopened (SkipKnown).
	Unreadable map[string]string

	// Vectors reads each session's vector status for VectorModel (a query search, Workers 0):
	// SessionSearchResult.Vectors sums it, and a hybrid search needs it.
	Vectors     bool
	VectorModel string
	// EmbedQuery, when set and a session has vectors, embeds Options.Query once per model the
	// sessions use, and the search ranks by fusion (hybrid, contract: Search). Its first error
	// stops embedding and the search runs lexically (EmbedModel, EmbedErr).
	EmbedQuery func(ctx context.Context, model string) ([]float32, error)
}

// SkipReason is why a session of a SessionSearch was not searched.
type SkipReason int

// The reasons a session is skipped.
const (
	SkipUnreadable    SkipReason = iota // opening or reading it failed: Err (a *ReadError when the database could not be read)
	SkipKnown                           // SessionSearch.Unreadable named it: Reason
	SkipPatternBudget                   // the pattern budget ran out before it
	SkipOutOfTime                       // ctx ended before it (Workers above 0)
)

// SkippedSearch is a session a SessionSearch skipped, and why.
type SkippedSearch struct {
	Session string
	Why     SkipReason
	Err     error  // SkipUnreadable
	Reason  string // SkipKnown
}

// SessionHit is a hit with its session.
type SessionHit struct {
	Session string
	Hit
}

// SessionSearchResult is the answer of Root.SearchSessions.
type SessionSearchResult struct {
	// Hits are ranked across sessions (contract: Search): by fusion score (hybrid); by more
	// matched words, then bm25 (query); in session order, newest first (pattern). At most Limit.
	Hits      []SessionHit
	Truncated bool // more hits than Limit ranked
	// Skipped lists the sessions not searched with their reason: in Sessions order, those
	// that failed to open first when Workers is 0, and those whose hits' details could not
	// be read last when Workers is above 0.
	Skipped     []SkippedSearch
	Searched    []string          // the sessions searched, in Sessions order
	Paths       map[string]string // session → its database file, for the sessions searched
	NotSearched int               // not started within StartBudget

	TotalMatches, LineMatches int  // summed over the sessions searched
	TimedOut                  bool // a pattern budget or ctx ran out: counts are partial

	HasVectors bool         // a session has vectors (Vectors set)
	Vectors    VectorStatus // Filled, Pending and Skipped summed over the sessions opened (Vectors set)
	Hybrid     bool         // the query was embedded and the ranking is by fusion
	EmbedModel string       // the model whose query embedding failed
	EmbedErr   error        // EmbedQuery's error; the search ran lexically
}

// SearchSessions runs s over its sessions (contract: Search, across sessions): it opens each
// database through OpenReader, runs the word, pattern or hybrid search with the shared
// pattern budget, merges and ranks the hits, and collects the sessions skipped with their
// reason. The error is ctx's (Workers 0 only); a session that cannot be read is skipped, not
// an error.
func (r *Root) SearchSessions(ctx context.Context, s SessionSearch) (SessionSearchResult, error) {
	res := SessionSearchResult{Paths: map[string]string{}}
	var err error
	if s.Workers > 0 {
		r.searchParallel(ctx, s, &res)
	} else if err = r.searchSequential(ctx, s, &res); err != nil {
		return SessionSearchResult{}, err
	}
	rankSessionHits(s.Options, res.Hybrid, res.Hits)
	if s.Limit > 0 && len(res.Hits) > s.Limit {
		res.Hits, res.Truncated = res.Hits[:s.Limit], true
	}
	if s.Workers > 0 {
		r.sessionHitDetails(ctx, s.Options, &res)
	}
	return res, nil
}

// rankSessionHits orders hits across sessions (SessionSearchResult.Hits).
func rankSessionHits(o SearchOptions, hybrid bool, hits []SessionHit) {
	switch {
	case hybrid:
		// Fusion scores (Rank is the negated score) compare across sessions.
		slices.SortStableFunc(hits, func(a, b SessionHit) int { return cmp.Compare(a.Rank, b.Rank) })
	case o.Pattern == nil:
		// Sessions come newest first; across them, more matched words and then a better bm25
		// rank first (the stable sort keeps the newer session first on ties).
		slices.SortStableFunc(hits, func(a, b SessionHit) int {
			return cmp.Or(cmp.Compare(b.MatchedTerms, a.MatchedTerms), cmp.Compare(a.Rank, b.Rank))
		})
	}
}

// add counts one session's result.
func (res *SessionSearchResult) add(sid, path string, sr SearchResult) {
	res.Searched = append(res.Searched, sid)
	res.Paths[sid] = path
	res.TotalMatches += sr.TotalMatches
	res.LineMatches += sr.LineMatches
	res.TimedOut = res.TimedOut || sr.TimedOut
	for _, h := range sr.Hits {
		res.Hits = append(res.Hits, SessionHit{Session: sid, Hit: h})
	}
}

func (res *SessionSearchResult) skip(k SkippedSearch) {
	res.Skipped = append(res.Skipped, k)
	res.TimedOut = res.TimedOut || k.Why == SkipPatternBudget || k.Why == SkipOutOfTime
}

// openedSession is a session searchSequential opened, with its vector status.
type openedSession struct {
	sid     string
	rd      *Reader
	vectors VectorStatus
}

// searchSequential is SearchSessions with Workers 0.
func (r *Root) searchSequential(ctx context.Context, s SessionSearch, res *SessionSearchResult) error {
	sessions, err := r.openSessions(ctx, s, res)
	defer func() {
		for _, se := range sessions {
			_ = se.rd.Close()
		}
	}()
	if err != nil {
		return err
	}
	queryVecs, err := embedQuery(ctx, s, sessions, res)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.PatternBudget)
	for _, se := range sessions {
		o := s.Options
		if o.Pattern != nil {
			if o.Budget = time.Until(deadline); o.Budget <= 0 {
				res.skip(SkippedSearch{Session: se.sid, Why: SkipPatternBudget})
				continue
			}
		}
		if res.Hybrid {
			o.VectorModel, o.QueryVector = queryVector(queryVecs, se.vectors.Model)
		}
		sr, err := se.rd.Search(ctx, o)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			res.skip(SkippedSearch{Session: se.sid, Why: SkipUnreadable, Err: err})
			continue
		}
		res.add(se.sid, se.rd.Path(), sr)
	}
	return nil
}

// openSessions opens every session of s (and reads its vector status when s.Vectors),
// skipping those that fail. The sessions returned are open even with an error.
func (r *Root) openSessions(ctx context.Context, s SessionSearch, res *SessionSearchResult) ([]openedSession, error) {
	var sessions []openedSession
	for _, sid := range s.Sessions {
		if reason, ok := s.Unreadable[sid]; ok {
			res.skip(SkippedSearch{Session: sid, Why: SkipKnown, Reason: reason})
			continue
		}
		rd, err := r.OpenReader(sid)
		if err == nil && s.Vectors {
			var vs VectorStatus
			if vs, err = rd.Vectors(ctx, s.VectorModel); err == nil {
				sessions = append(sessions, openedSession{sid, rd, vs})
				res.HasVectors = res.HasVectors || vs.Filled > 0
				res.Vectors.Filled += vs.Filled
				res.Vectors.Pending += vs.Pending
				res.Vectors.Skipped += vs.Skipped
				continue
			}
			_ = rd.Close()
		}
		if ctx.Err() != nil {
			return sessions, ctx.Err()
		}
		if err != nil {
			res.skip(SkippedSearch{Session: sid, Why: SkipUnreadable, Err: err})
			continue
		}
		sessions = append(sessions, openedSession{sid: sid, rd: rd})
	}
	return sessions, nil
}

// embedQuery embeds the query once per model the opened sessions have vectors of, when s
// asks for a hybrid search and a session has vectors; it sets res.Hybrid when it did.
func embedQuery(ctx context.Context, s SessionSearch, sessions []openedSession, res *SessionSearchResult) (map[string][]float32, error) {
	if s.EmbedQuery == nil || s.Options.Pattern != nil || !res.HasVectors {
		return nil, nil
	}
	vecs := map[string][]float32{}
	for _, se := range sessions {
		m := se.vectors.Model
		if se.vectors.Filled == 0 || vecs[m] != nil {
			continue
		}
		v, err := s.EmbedQuery(ctx, m)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			res.EmbedModel, res.EmbedErr = m, err
			return nil, nil
		}
		vecs[m] = v
	}
	res.Hybrid = len(vecs) > 0
	return vecs, nil
}

// queryVector is the model and query vector a hybrid search of a session with vectors of
// model uses. A session without vectors still ranks by fusion (its lexical list alone), so
// scores compare across sessions: any model's vector, under a model name no vector has,
// finds nothing there.
func queryVector(vecs map[string][]float32, model string) (string, []float32) {
	if v := vecs[model]; v != nil {
		return model, v
	}
	for m, v := range vecs {
		return m + "\x00none", v
	}
	return model, nil
}

// searchOutcome is what searchParallel learned of one session.
type searchOutcome struct {
	res     SearchResult
	path    string
	skipped *SkippedSearch
	later   bool // not started within the start budget
}

// searchParallel is SearchSessions with Workers above 0: sessions are searched at once, each
// on its pooled read-only connection, for their best hits without details; outcomes are
// combined in Sessions order, so the answer does not depend on timing.
func (r *Root) searchParallel(ctx context.Context, s SessionSearch, res *SessionSearchResult) {
	start := time.Now()
	deadline := start.Add(s.PatternBudget)
	outs := make([]searchOutcome, len(s.Sessions))
	keys := s.Options
	keys.KeysOnly = true
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(s.Workers, len(s.Sessions)) {
		wg.Go(func() {
			for i := range jobs {
				outs[i] = r.searchOne(ctx, s, keys, i, start, deadline)
			}
		})
	}
	for i := range s.Sessions {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for i, out := range outs {
		switch {
		case out.later:
			res.NotSearched++
		case out.skipped != nil:
			res.skip(*out.skipped)
		default:
			res.add(s.Sessions[i], out.path, out.res)
		}
	}
}

// searchOne is one session of searchParallel.
func (r *Root) searchOne(ctx context.Context, s SessionSearch, o SearchOptions, i int, start, deadline time.Time) searchOutcome {
	sid := s.Sessions[i]
	skip := func(k SkippedSearch) searchOutcome { k.Session = sid; return searchOutcome{skipped: &k} }
	if reason, ok := s.Unreadable[sid]; ok {
		return skip(SkippedSearch{Why: SkipKnown, Reason: reason})
	}
	switch {
	case ctx.Err() != nil:
		return skip(SkippedSearch{Why: SkipOutOfTime})
	case s.StartBudget > 0 && time.Since(start) > s.StartBudget:
		return searchOutcome{later: true}
	case o.Pattern != nil:
		if o.Budget = time.Until(deadline); o.Budget <= 0 {
			return skip(SkippedSearch{Why: SkipPatternBudget})
		}
	}
	rd, err := r.OpenReader(sid)
	if err != nil {
		return skip(SkippedSearch{Why: SkipUnreadable, Err: err})
	}
	defer rd.Close()
	sr, err := rd.Search(ctx, o)
	if err != nil {
		return skip(SkippedSearch{Why: SkipUnreadable, Err: err})
	}
	return searchOutcome{res: sr, path: rd.Path()}
}

// sessionHitDetails reads the details and excerpts of the hits kept, session by session, in
// place; the hits of a session that can no longer be read are left out and the session is
// listed as skipped.
func (r *Root) sessionHitDetails(ctx context.Context, o SearchOptions, res *SessionSearchResult) {
	bySession := map[string][]int{}
	var order []string
	for i, h := range res.Hits {
		if bySession[h.Session] == nil {
			order = append(order, h.Session)
		}
		bySession[h.Session] = append(bySession[h.Session], i)
	}
	failed := map[string]bool{}
	for _, sid := range order {
		idx := bySession[sid]
		part := make([]Hit, len(idx))
		for k, i := range idx {
			part[k] = res.Hits[i].Hit
		}
		if err := r.details(ctx, sid, o, part); err != nil {
			failed[sid] = true
			res.Skipped = append(res.Skipped, SkippedSearch{Session: sid, Why: SkipUnreadable, Err: err})
			continue
		}
		for k, i := range idx {
			res.Hits[i].Hit = part[k]
		}
	}
	if len(failed) > 0 {
		res.Hits = slices.DeleteFunc(res.Hits, func(h SessionHit) bool { return failed[h.Session] })
	}
}

func (r *Root) details(ctx context.Context, sid string, o SearchOptions, hits []Hit) error {
	rd, err := r.OpenReader(sid)
	if err != nil {
		return err
	}
	defer rd.Close()
	return rd.Details(ctx, o, hits)
}
