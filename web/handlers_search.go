package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// Search limits: the MCP tool's pattern rules, with more hits on a page.
const (
	searchLimit       = 50
	searchPerSession  = 10 // hits a session contributes, so one busy session cannot fill the page
	searchWorkers     = 8  // sessions searched at once
	maxPatternChars   = 500
	searchPatternTime = time.Second     // pattern budget for all sessions together
	searchTimeout     = 5 * time.Second // the whole search
	// searchLiveBudget bounds a search sent while the user types (htmx, without all=1):
	// sessions not started by then are left out and the answer says so; the Search button
	// (all=1) and a full page load search every session.
	searchLiveBudget = 60 * time.Millisecond
)

// search answers GET /ui/search?q=|pattern=&role=&in_context=: the MCP search engine
// (store.Reader.Search, lexical or pattern) over every session, newest first. An htmx request
// gets the results fragment. Bad input answers 400 with the page (or fragment) saying what
// to fix.
func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	form := ui.SearchForm{Q: v.Get("q"), Pattern: v.Get("pattern"), Role: v.Get("role"), InContext: v.Get("in_context")}
	if form.Role == "" {
		form.Role = "all"
	}
	if form.InContext == "" {
		form.InContext = "any"
	}
	var budget time.Duration
	if isHTMX(r) && v.Get("all") != "1" {
		budget = searchLiveBudget
	}
	res := s.runSearch(r.Context(), form, budget)
	if err := r.Context().Err(); err != nil {
		return err
	}
	code := http.StatusOK
	if res.Error != "" {
		code = http.StatusBadRequest
	}
	if isHTMX(r) {
		return s.render(w, r, code, ui.SearchResultsFragment(res))
	}
	return s.render(w, r, code, ui.SearchView(ui.SearchPage{Page: s.page("Search", "search"), Form: form, Results: res}))
}

// searchHit is one hit with its session, ranked across sessions before its details are read.
type searchHit struct {
	si  *store.SessionInfo
	hit store.Hit
}

// runSearch validates the form and searches the sessions, newest activity first, like the
// MCP tool's lexical mode: each session's best hits, then across sessions more matched words
// and a better bm25 first (query) or newest session first (pattern). A budget above 0 stops
// starting sessions after that long; the results count the sessions left out.
func (s *Server) runSearch(ctx context.Context, f ui.SearchForm, budget time.Duration) ui.SearchResults {
	res := ui.SearchResults{Limit: searchLimit}
	q := strings.TrimSpace(f.Q)
	var opts store.SearchOptions
	switch {
	case q != "" && f.Pattern != "":
		res.Error, res.ErrorFor = "Give words or a pattern, not both: clear one of the two fields.", "pattern"
		return res
	case f.Pattern != "":
		re, msg := compilePattern(f.Pattern)
		if msg != "" {
			res.Error, res.ErrorFor = msg, "pattern"
			return res
		}
		opts.Pattern = re
	case q != "":
		opts.Query = q
	default:
		return res // nothing asked yet
	}
	switch f.Role {
	case "all":
	case "user", "assistant", "tool":
		opts.Roles = []string{f.Role}
	default:
		res.Error = fmt.Sprintf("role must be all, user, assistant or tool, not %q.", truncate(f.Role, 20))
		return res
	}
	switch f.InContext {
	case "any":
	case "true", "false":
		b := f.InContext == "true"
		opts.InContext = &b
	default:
		res.Error = fmt.Sprintf("in_context must be any, true or false, not %q.", truncate(f.InContext, 20))
		return res
	}
	res.Asked = true
	opts.Limit = searchPerSession

	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	list, err := s.root.Sessions(ctx)
	if err != nil {
		res.Error = "The sessions could not be listed: " + err.Error()
		return res
	}
	// Sessions are searched in parallel (each on its pooled read-only connection) for their
	// best hits without details; results are combined in list order, newest session first, so
	// the answer does not depend on timing. Only the hits that make the page have their
	// details and excerpts read, afterwards.
	start := time.Now()
	deadline := start.Add(searchPatternTime)
	type outcome struct {
		res       store.SearchResult
		err       error
		skipped   string
		timedOut  bool // skipped because a time budget ran out
		notSearch bool // left out by the live budget
	}
	outs := make([]outcome, len(list))
	jobs := make(chan int)
	var wg sync.WaitGroup
	keys := opts
	keys.KeysOnly = true
	for range min(searchWorkers, len(list)) {
		wg.Go(func() {
			for i := range jobs {
				si := list[i]
				o := keys
				switch {
				case si.Problem != "":
					outs[i].skipped = si.Problem
					continue
				case ctx.Err() != nil:
					outs[i].skipped, outs[i].timedOut = "the search ran out of time before this session", true
					continue
				case budget > 0 && time.Since(start) > budget:
					outs[i].notSearch = true
					continue
				case o.Pattern != nil:
					if o.Budget = time.Until(deadline); o.Budget <= 0 {
						outs[i].skipped, outs[i].timedOut = "the 1 s pattern budget ran out before this session", true
						continue
					}
				}
				outs[i].res, outs[i].err = s.searchSession(ctx, si.SessionID, o)
			}
		})
	}
	for i := range list {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	var hits []searchHit
	for i, out := range outs {
		si := &list[i]
		switch {
		case out.notSearch:
			res.NotSearched++
			continue
		case out.skipped != "":
			res.Skipped = append(res.Skipped, si.SessionID+": "+out.skipped)
			res.TimedOut = res.TimedOut || out.timedOut
			continue
		case errors.Is(out.err, store.ErrNoSchema):
			continue // created, nothing stored yet
		case out.err != nil:
			res.Skipped = append(res.Skipped, si.SessionID+": "+readProblem(out.err))
			continue
		}
		sr := out.res
		res.Sessions++
		res.Total += sr.TotalMatches
		res.Lines += sr.LineMatches
		res.TimedOut = res.TimedOut || sr.TimedOut
		for _, h := range sr.Hits {
			hits = append(hits, searchHit{si: si, hit: h})
		}
	}
	if opts.Pattern == nil {
		slices.SortStableFunc(hits, func(a, b searchHit) int {
			return cmp.Or(cmp.Compare(b.hit.MatchedTerms, a.hit.MatchedTerms), cmp.Compare(a.hit.Rank, b.hit.Rank))
		})
	}
	if len(hits) > searchLimit {
		hits, res.Truncated = hits[:searchLimit], true
	}
	mark := highlighter(opts)
	for _, h := range s.hitDetails(ctx, opts, hits, &res) {
		si := h.si
		res.Hits = append(res.Hits, ui.SearchHit{
			SID: si.SessionID, Href: rowHref(si.SessionID, h.hit.Seq), Seq: h.hit.Seq, Role: h.hit.Role, Kind: h.hit.Kind,
			Name: h.hit.Name, InContext: h.hit.InContext, Excerpt: highlight(h.hit.Excerpt, mark), BlobHref: blobHref(h.hit.BlobID),
			Agent: agentOf(*si), Cwd: si.Cwd,
		})
	}
	return res
}

// hitDetails reads the details and excerpts of the hits kept for the page, session by
// session, and returns them in the same order; the hits of a session that can no longer be
// read are left out and the session is listed as skipped.
func (s *Server) hitDetails(ctx context.Context, o store.SearchOptions, hits []searchHit, res *ui.SearchResults) []searchHit {
	bySession := map[string][]int{}
	var order []string
	for i, h := range hits {
		sid := h.si.SessionID
		if bySession[sid] == nil {
			order = append(order, sid)
		}
		bySession[sid] = append(bySession[sid], i)
	}
	failed := map[string]bool{}
	for _, sid := range order {
		idx := bySession[sid]
		part := make([]store.Hit, len(idx))
		for k, i := range idx {
			part[k] = hits[i].hit
		}
		err := s.details(ctx, sid, o, part)
		if err != nil {
			failed[sid] = true
			res.Skipped = append(res.Skipped, sid+": "+readProblem(err))
			continue
		}
		for k, i := range idx {
			hits[i].hit = part[k]
		}
	}
	if len(failed) == 0 {
		return hits
	}
	return slices.DeleteFunc(hits, func(h searchHit) bool { return failed[h.si.SessionID] })
}

func (s *Server) searchSession(ctx context.Context, sid string, o store.SearchOptions) (store.SearchResult, error) {
	rd, err := s.root.OpenReader(sid)
	if err != nil {
		return store.SearchResult{}, err
	}
	defer rd.Close()
	return rd.Search(ctx, o)
}

func (s *Server) details(ctx context.Context, sid string, o store.SearchOptions, hits []store.Hit) error {
	rd, err := s.root.OpenReader(sid)
	if err != nil {
		return err
	}
	defer rd.Close()
	return rd.Details(ctx, o, hits)
}

// compilePattern compiles a Go regular expression; the message says what to fix.
func compilePattern(p string) (*regexp.Regexp, string) {
	if n := utf8.RuneCountInString(p); n > maxPatternChars {
		return nil, fmt.Sprintf("The pattern has %d characters; at most %d are allowed: shorten it to the distinctive part.", n, maxPatternChars)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		msg := "The pattern is not a valid Go regular expression: " + strings.TrimPrefix(err.Error(), "error parsing regexp: ") + "."
		if strings.Contains(p, "(?=") || strings.Contains(p, "(?!") || strings.Contains(p, "(?<") || strings.Contains(p, `\1`) {
			msg += " Go's RE2 syntax has no lookarounds or backreferences."
		}
		return nil, msg + " Escape special characters with \\ (e.g. \\( or \\.); prefix (?i) to ignore case."
	}
	return re, ""
}

// readProblem says why a session could not be searched (the kind of its store.ReadError).
func readProblem(err error) string {
	re := store.AsReadError(err)
	if re == nil {
		return err.Error()
	}
	switch re.Kind {
	case store.ReadNewerSchema:
		return "written by a newer smarter-compact (newer schema); update to search it"
	case store.ReadMissing:
		return "deleted while searching (retention?)"
	case store.ReadLocked:
		return "locked by another process; " + re.Hint
	}
	return err.Error()
}

// highlighter is what highlight marks for a search: the pattern's matches, or the query's
// words (case-insensitive substrings; FTS matches whole tokens, so this may mark a little
// more than matched). nil marks nothing. Built once per search, not per hit.
func highlighter(o store.SearchOptions) *regexp.Regexp {
	if o.Pattern != nil {
		return o.Pattern
	}
	var alts []string
	for _, w := range strings.Fields(o.Query) {
		w = strings.TrimFunc(w, func(r rune) bool { return !isWordRune(r) })
		if w != "" {
			alts = append(alts, regexp.QuoteMeta(w))
		}
	}
	if len(alts) == 0 {
		return nil
	}
	return regexp.MustCompile("(?i)" + strings.Join(alts, "|"))
}

// highlight splits an excerpt into plain and matched pieces by re (highlighter).
func highlight(text string, re *regexp.Regexp) []ui.Seg {
	if re == nil {
		return []ui.Seg{{Text: text}}
	}
	var out []ui.Seg
	last := 0
	for _, m := range re.FindAllStringIndex(text, 100) {
		if m[1] == m[0] {
			continue // an empty match marks nothing
		}
		if m[0] > last {
			out = append(out, ui.Seg{Text: text[last:m[0]]})
		}
		out = append(out, ui.Seg{Text: text[m[0]:m[1]], Mark: true})
		last = m[1]
	}
	if last < len(text) {
		out = append(out, ui.Seg{Text: text[last:]})
	}
	return out
}

func isWordRune(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127
}
