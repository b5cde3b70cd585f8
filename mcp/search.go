package mcp

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/store"
)

// Search limits (contract: Search).
const (
	maxPatternChars = 200
	patternBudget   = time.Second // for all sessions of one call together
	defaultLimit    = 8
	maxLimit        = 100
	maxContext      = 5
)

var (
	allRoles     = []string{"user", "assistant", "tool"}
	defaultRoles = []string{"user", "tool"}
)

func searchTool() mcpgo.Tool {
	opts := []mcpgo.ToolOption{
		mcpgo.WithDescription(`Search every stored message of this coding session, including turns trimmed out of your context. Give query or pattern, not both.
query: words; a row matches when it has any of them (case-insensitive, by token: KEY-7 matches the tokens key and 7); rows with more of the words rank first.
pattern: a Go (RE2) regular expression of at most 200 characters, for exact values, e.g. {"pattern": "KEY-7 = 0x[0-9a-f]+"} finds where KEY-7 was set; prefix (?i) to ignore case. Backreferences (\1) and lookarounds ((?=, (?!, (?<=, (?<!) are not supported.
session_id: the id the [smarter-compact: …] pointer gave; omit it to search this workspace's recent sessions.
role: "user", "assistant", "tool", a list of them, or "all"; default ["user","tool"] (what you were told and what tools returned, not your own replies).
in_context: true for rows still in your context, false for trimmed rows; omit for both.
mode: "hybrid" (default when the session has vectors) also ranks rows whose meaning is near the query, by embedding; "lexical" ranks by words only. The response's mode says which ran; vectors shows embedding progress.
context: 0-5 rows of the same thread to show before and after each hit (default 0). limit: 1-100 results (default 8).
Returns results (session_id, seq, role, kind, name, in_context, excerpt, matched_terms, similarity (hybrid), blob_ids, before, after), total_matches (matching rows), line_matches (matching lines) and sessions_searched. Read a blob in full with smart_compact_get; count or group rows with smart_compact_sql.`),
		mcpgo.WithString("query", mcpgo.Description("Words to look for; a row matches when it contains any of them.")),
		mcpgo.WithString("pattern", mcpgo.MaxLength(maxPatternChars), mcpgo.Description("Go (RE2) regular expression for exact text, at most 200 characters; instead of query.")),
		mcpgo.WithString("session_id", mcpgo.Description("Session id from the [smarter-compact: …] pointer; omit to search this workspace's recent sessions.")),
		mcpgo.WithAny("role", mcpgo.Description(`"user", "assistant", "tool", a list of them, or "all"; default ["user","tool"].`),
			anyOf(
				map[string]any{"type": "string", "enum": append(slices.Clone(allRoles), "all")},
				map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": append(slices.Clone(allRoles), "all")}},
			)),
		mcpgo.WithBoolean("in_context", mcpgo.Description("true: rows still in your context; false: trimmed rows; omit for both.")),
		mcpgo.WithString("mode", mcpgo.Enum("hybrid", "lexical"), mcpgo.Description(`"hybrid" (default when the session has vectors) or "lexical"; without vectors both run lexically.`)),
		mcpgo.WithInteger("context", mcpgo.Min(0), mcpgo.Max(maxContext), mcpgo.DefaultNumber(0), mcpgo.Description("Rows of the same thread shown before and after each hit, 0-5.")),
		mcpgo.WithInteger("limit", mcpgo.Min(1), mcpgo.Max(maxLimit), mcpgo.DefaultNumber(defaultLimit), mcpgo.Description("Results returned, 1-100.")),
	}
	return mcpgo.NewTool(ToolSearch, append(opts, readOnlyHints("Search the session's stored messages")...)...)
}

func anyOf(schemas ...map[string]any) mcpgo.PropertyOption {
	return func(m map[string]any) { m["anyOf"] = schemas }
}

// searchRequest is a validated smart_compact_search call.
type searchRequest struct {
	sessionID    string
	sessionGiven bool
	mode         string // "hybrid" or "lexical"
	modeGiven    bool
	opts         store.SearchOptions
}

func parseSearch(m map[string]any) (searchRequest, error) {
	a, err := newArgs(ToolSearch, m, "query", "pattern", "session_id", "role", "in_context", "mode", "context", "limit")
	if err != nil {
		return searchRequest{}, err
	}
	var r searchRequest
	query, hasQuery, err := a.str("query")
	if err != nil {
		return r, err
	}
	pattern, hasPattern, err := a.str("pattern")
	if err != nil {
		return r, err
	}
	query = strings.TrimSpace(query)
	switch {
	case hasQuery && hasPattern:
		return r, toolErrorf("give query or pattern, not both: query finds words, pattern an exact regular expression")
	case hasPattern:
		re, err := compilePattern(pattern)
		if err != nil {
			return r, err
		}
		r.opts.Pattern = re
	case hasQuery && query != "":
		if err := checkQueryWords(query); err != nil {
			return r, err
		}
		r.opts.Query = query
	case hasQuery:
		return r, toolErrorf("query is empty: give the words to look for, or a pattern")
	default:
		return r, toolErrorf("give query (words to look for) or pattern (a regular expression for exact text)")
	}
	if r.sessionID, r.sessionGiven, err = a.str("session_id"); err != nil {
		return r, err
	}
	if r.opts.Roles, err = parseRoles(a.m["role"]); err != nil {
		return r, err
	}
	if r.opts.InContext, err = a.boolean("in_context"); err != nil {
		return r, err
	}
	mode, hasMode, err := a.str("mode")
	if err != nil {
		return r, err
	}
	r.modeGiven = hasMode
	switch {
	case !hasMode:
		r.mode = "hybrid"
	case mode == "hybrid" || mode == "lexical":
		r.mode = mode
	default:
		return r, toolErrorf(`mode must be "hybrid" or "lexical", not %q`, truncate(mode, 40))
	}
	if r.opts.Context, err = a.integer("context", 0, 0, maxContext); err != nil {
		return r, err
	}
	if r.opts.Limit, err = a.integer("limit", defaultLimit, 1, maxLimit); err != nil {
		return r, err
	}
	return r, nil
}

// compilePattern checks the contract's limits and compiles p with Go's regexp. The contract's
// patterns are JavaScript regular expressions; the constructs RE2 lacks are refused by name
// rather than with regexp's terser message.
func compilePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, toolErrorf("pattern is empty: give a regular expression, or use query for words")
	}
	if n := utf8.RuneCountInString(p); n > maxPatternChars {
		return nil, toolErrorf("pattern has %d characters; at most %d are allowed: shorten it to the distinctive part", n, maxPatternChars)
	}
	if c := jsOnlyConstruct(p); c != "" {
		return nil, toolErrorf("pattern uses %s, a JavaScript regular expression construct that Go's RE2 syntax does not support: rewrite the pattern without it", c)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, toolErrorf("pattern is not a valid Go (RE2) regular expression: %v", err)
	}
	return re, nil
}

// jsOnlyConstruct names the first backreference or lookaround in p, "" when there is none.
func jsOnlyConstruct(p string) string {
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			n := p[i+1]
			switch {
			case n >= '1' && n <= '9':
				return fmt.Sprintf(`a backreference (\%c)`, n)
			case n == 'k' && i+2 < len(p) && p[i+2] == '<':
				return `a named backreference (\k<name>)`
			}
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++ // a leading ] is a literal
			}
		case c == '(':
			for _, l := range []struct{ prefix, name string }{
				{"(?<=", "a lookbehind (?<=…)"},
				{"(?<!", "a negative lookbehind (?<!…)"},
				{"(?=", "a lookahead (?=…)"},
				{"(?!", "a negative lookahead (?!…)"},
			} {
				if strings.HasPrefix(p[i:], l.prefix) {
					return l.name
				}
			}
		}
	}
	return ""
}

// parseRoles reads role: absent is user and tool; "all" (alone or in a list) is every role,
// returned as nil (no filter).
func parseRoles(v any) ([]string, error) {
	var in []string
	switch x := v.(type) {
	case nil:
		return slices.Clone(defaultRoles), nil
	case string:
		in = strings.Split(x, ",")
	case []any:
		if len(x) == 0 {
			return nil, toolErrorf(`role is an empty list: give "user", "assistant", "tool", a list of them, or "all"`)
		}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, toolErrorf(`role list items must be strings ("user", "assistant", "tool" or "all"), not %s`, jsonType(e))
			}
			in = append(in, s)
		}
	default:
		return nil, toolErrorf(`role must be "user", "assistant", "tool", a list of them, or "all", not %s`, jsonType(v))
	}
	var roles []string
	for _, r := range in {
		r = strings.ToLower(strings.TrimSpace(r))
		switch {
		case r == "all":
			return nil, nil
		case slices.Contains(allRoles, r):
			if !slices.Contains(roles, r) {
				roles = append(roles, r)
			}
		default:
			return nil, toolErrorf(`role %q is not a role: give "user", "assistant", "tool", a list of them, or "all"`, truncate(r, 40))
		}
	}
	return roles, nil
}

// searchResponse is the smart_compact_search answer (contract: Search).
type searchResponse struct {
	Results          []searchHit       `json:"results"`
	TotalMatches     int               `json:"total_matches"`
	LineMatches      int               `json:"line_matches"`
	TimedOut         bool              `json:"timed_out"`
	Mode             string            `json:"mode"`
	ModeNote         string            `json:"mode_note,omitempty"`
	EmbeddingError   string            `json:"embedding_error,omitempty"`
	Vectors          *vectorProgress   `json:"vectors,omitempty"`
	Databases        map[string]string `json:"databases"`
	SessionsSearched []string          `json:"sessions_searched"`
	SessionIDNote    string            `json:"session_id_note,omitempty"`
	Skipped          []skippedSession  `json:"skipped,omitempty"`
}

type searchHit struct {
	SessionID    string      `json:"session_id"`
	Seq          int64       `json:"seq"`
	Role         string      `json:"role"`
	Kind         string      `json:"kind"`
	Name         string      `json:"name,omitempty"`
	InContext    bool        `json:"in_context"`
	Excerpt      string      `json:"excerpt"`
	MatchedTerms *int        `json:"matched_terms,omitempty"` // query searches only
	Similarity   *float64    `json:"similarity,omitempty"`    // hybrid, hits with a vector
	BlobIDs      []string    `json:"blob_ids,omitempty"`
	Before       []neighbour `json:"before,omitempty"`
	After        []neighbour `json:"after,omitempty"`
}

type neighbour struct {
	Seq     int64  `json:"seq"`
	Role    string `json:"role"`
	Kind    string `json:"kind"`
	Name    string `json:"name,omitempty"`
	Excerpt string `json:"excerpt"`
}

// vectorProgress is the background embedding progress of the searched sessions for the
// model each one's hybrid search uses (contract: Search, vectors).
type vectorProgress struct {
	Filled  int `json:"filled"`
	Pending int `json:"pending"`
	Skipped int `json:"skipped"`
}

// skippedSession is a session that resolved but could not be read (locked, newer schema,
// out of pattern budget): the call goes on with the others.
type skippedSession struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason"`
}

func (s *Server) search(ctx context.Context, req mcpgo.CallToolRequest, rec *callRecord) (*mcpgo.CallToolResult, error) {
	sr, err := parseSearch(req.GetArguments())
	if err != nil {
		return nil, err
	}
	res, err := s.resolve(ctx, sr.sessionID, sr.sessionGiven)
	if err != nil {
		return nil, err
	}
	rec.SessionIDs = res.sids
	out := searchResponse{
		Results:          []searchHit{},
		Mode:             "lexical",
		Databases:        map[string]string{},
		SessionsSearched: []string{},
		SessionIDNote:    res.note,
	}
	query := sr.opts.Pattern == nil
	spec := store.SessionSearch{Sessions: res.sids, Options: sr.opts, Limit: sr.opts.Limit, PatternBudget: patternBudget,
		Vectors: query, VectorModel: s.embedModel}
	hybridAsked := query && sr.mode != "lexical"
	if hybridAsked && s.embed != nil {
		spec.EmbedQuery = func(ctx context.Context, model string) ([]float32, error) {
			ectx, cancel := context.WithTimeout(ctx, s.embedTimeout)
			defer cancel()
			vecs, err := s.embed.Embed(ectx, model, []string{sr.opts.Query})
			if err != nil {
				return nil, err
			}
			return vecs[0], nil
		}
	}
	found, err := s.searchSessions(ctx, spec, query)
	if err != nil {
		return nil, err
	}
	for _, k := range found.Skipped {
		out.Skipped = append(out.Skipped, skippedSession{k.Session, skipReason(k)})
	}
	if len(found.Searched) == 0 && !found.TimedOut {
		return nil, toolErrorf("could not read %s", describeSkipped(out.Skipped))
	}
	if query && (s.embedModel != "" || found.HasVectors) {
		out.Vectors = &vectorProgress{Filled: found.Vectors.Filled, Pending: found.Vectors.Pending, Skipped: found.Vectors.Skipped}
	}
	if hybridAsked {
		s.hybridNotes(&out, found, sr.modeGiven)
	}
	out.SessionsSearched = append(out.SessionsSearched, found.Searched...)
	out.Databases = found.Paths
	out.TotalMatches, out.LineMatches, out.TimedOut = found.TotalMatches, found.LineMatches, found.TimedOut
	for _, h := range found.Hits {
		out.Results = append(out.Results, hitJSON(h.Session, h.Hit, query, found.Hybrid))
	}
	rec.Mode = out.Mode
	rec.Hits, rec.TotalMatches, rec.LineMatches = intp(len(out.Results)), intp(out.TotalMatches), intp(out.LineMatches)
	rec.Sessions, rec.TimedOut = intp(len(out.SessionsSearched)), out.TimedOut
	rec.SessionIDs = out.SessionsSearched
	return jsonResult(out)
}

// hybridNotes says in out which ranking a search that could be hybrid ran, and why not
// hybrid when it was asked for and could not be.
func (s *Server) hybridNotes(out *searchResponse, found store.SessionSearchResult, modeGiven bool) {
	switch {
	case !found.HasVectors || s.embed == nil:
		if modeGiven {
			out.ModeNote = "hybrid ranking needs vectors, and the searched sessions have none yet: lexical ranking ran"
			if s.embed == nil && found.HasVectors {
				out.ModeNote = "hybrid ranking needs an embedding endpoint, and this server has none configured: lexical ranking ran"
			}
		}
	case found.EmbedErr != nil:
		out.EmbeddingError = fmt.Sprintf("embedding the query with %s at %s failed: %v; lexical ranking ran", found.EmbedModel, s.embed.SafeURL(), found.EmbedErr)
	case found.Hybrid:
		out.Mode = "hybrid"
	}
}

func hitJSON(sid string, h store.Hit, query, hybrid bool) searchHit {
	out := searchHit{
		SessionID: sid, Seq: h.Seq, Role: h.Role, Kind: h.Kind, Name: h.Name, InContext: h.InContext,
		Excerpt: h.Excerpt,
	}
	if query {
		out.MatchedTerms = intp(h.MatchedTerms)
	}
	if hybrid && h.HasVector {
		sim := math.Round(h.Similarity*10000) / 10000
		out.Similarity = &sim
	}
	if h.BlobID != "" {
		out.BlobIDs = []string{h.BlobID}
	}
	for _, n := range h.Before {
		out.Before = append(out.Before, neighbour{n.Seq, n.Role, n.Kind, n.Name, n.Excerpt})
	}
	for _, n := range h.After {
		out.After = append(out.After, neighbour{n.Seq, n.Role, n.Kind, n.Name, n.Excerpt})
	}
	return out
}

// skipReason says why a session was not searched, in words the model can pass on.
func skipReason(k store.SkippedSearch) string {
	switch k.Why {
	case store.SkipPatternBudget:
		return "the 1 s pattern budget ran out before this session"
	case store.SkipOutOfTime:
		return "the query search was stopped after its 2 s budget: search fewer or rarer words, or one session"
	}
	return readProblem(k.Err)
}

// readProblem says why a session database could not be read (the kind of its
// store.ReadError), in words the model can pass on.
func readProblem(err error) string {
	re := store.AsReadError(err)
	if re == nil {
		return err.Error()
	}
	switch re.Kind {
	case store.ReadNewerSchema:
		return "its database was written by a newer smarter-compact (newer schema); " + re.Hint
	case store.ReadNoSchema:
		return "its database holds nothing yet"
	case store.ReadMissing:
		return "its database no longer exists (deleted by retention?)"
	case store.ReadLocked:
		return "its database is locked by another process; " + re.Hint
	}
	return err.Error()
}

func describeSkipped(skipped []skippedSession) string {
	parts := make([]string, len(skipped))
	for i, k := range skipped {
		parts[i] = fmt.Sprintf("session %s: %s", k.SessionID, k.Reason)
	}
	return strings.Join(parts, "; ")
}
