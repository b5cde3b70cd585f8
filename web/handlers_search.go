package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
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
	spec := store.SessionSearch{Options: opts, Limit: searchLimit, PatternBudget: searchPatternTime,
		Workers: searchWorkers, StartBudget: budget, Unreadable: map[string]string{}}
	info := make(map[string]*store.SessionInfo, len(list))
	for i := range list {
		si := &list[i]
		spec.Sessions = append(spec.Sessions, si.SessionID)
		info[si.SessionID] = si
		if si.Problem != "" {
			spec.Unreadable[si.SessionID] = si.Problem
		}
	}
	found, _ := s.root.SearchSessions(ctx, spec) // with Workers, a ctx that ends skips sessions instead
	res.NotSearched = found.NotSearched
	res.Sessions, res.Total, res.Lines = len(found.Searched), found.TotalMatches, found.LineMatches
	res.TimedOut, res.Truncated = found.TimedOut, found.Truncated
	for _, k := range found.Skipped {
		if k.Why == store.SkipUnreadable && errors.Is(k.Err, store.ErrNoSchema) {
			continue // created, nothing stored yet
		}
		res.Skipped = append(res.Skipped, k.Session+": "+skipReason(k))
	}
	mark := highlighter(opts)
	for _, h := range found.Hits {
		si := info[h.Session]
		res.Hits = append(res.Hits, ui.SearchHit{
			SID: si.SessionID, Href: rowHref(si.SessionID, h.Seq), Seq: h.Seq, Role: h.Role, Kind: h.Kind,
			Name: h.Name, InContext: h.InContext, Excerpt: highlight(h.Excerpt, mark), BlobHref: blobHref(h.BlobID),
			Agent: agentOf(*si), Cwd: si.Cwd,
		})
	}
	return res
}

// skipReason says why a session was not searched.
func skipReason(k store.SkippedSearch) string {
	switch k.Why {
	case store.SkipKnown:
		return k.Reason
	case store.SkipOutOfTime:
		return "the search ran out of time before this session"
	case store.SkipPatternBudget:
		return "the 1 s pattern budget ran out before this session"
	}
	return readProblem(k.Err)
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
