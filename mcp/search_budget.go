package mcp

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// queryBudget bounds a query (words) search of all sessions together, as the SQL tool's
// timeout bounds a statement (contract: SQL step 3) and the pattern budget a pattern search.
// A 50,000-word query ran 6.9 s (32–48 s with six at once) and reported timed_out: false.
// A hybrid search has the query embedding's timeout on top.
const queryBudget = 2 * time.Second

// searchSessions runs spec, a query search under the query budget: when the budget runs out
// the result is timed_out with every session skipped as out of time, not an error, so the
// model learns to narrow the query. A pattern search has its own budget inside the store.
func (s *Server) searchSessions(ctx context.Context, spec store.SessionSearch, query bool) (store.SessionSearchResult, error) {
	if !query {
		return s.root.SearchSessions(ctx, spec)
	}
	budget := s.queryBudget
	if spec.EmbedQuery != nil {
		budget += s.embedTimeout
	}
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	found, err := s.root.SearchSessions(bctx, spec)
	if err == nil || ctx.Err() != nil || !errors.Is(bctx.Err(), context.DeadlineExceeded) {
		return found, err
	}
	out := store.SessionSearchResult{TimedOut: true, Paths: map[string]string{}}
	for _, sid := range spec.Sessions {
		out.Skipped = append(out.Skipped, store.SkippedSearch{Session: sid, Why: store.SkipOutOfTime})
	}
	return out, nil
}

// maxQueryWords caps the distinct words of a query. Each word is one FTS5 string and one
// term of the matched-words ranking, and SQLite prepares the statement before any timeout
// can stop it: 50,000 words took 36 s to prepare. A search for more words than this is a
// pasted text, not a search.
const maxQueryWords = 100

// checkQueryWords refuses a query of more than maxQueryWords distinct words (compared
// case-insensitively), saying what to do instead.
func checkQueryWords(query string) error {
	seen := make(map[string]bool)
	for _, w := range strings.Fields(query) {
		seen[strings.ToLower(w)] = true
		if len(seen) > maxQueryWords {
			return toolErrorf("query has more than %d distinct words (%d in all): search for the few rarest words of what you need, or use pattern for an exact phrase",
				maxQueryWords, len(strings.Fields(query)))
		}
	}
	return nil
}
