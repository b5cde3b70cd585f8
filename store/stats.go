package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ToolCallsFile is the append-only log of recall tool calls next to sessions/ (contract:
// Location, tool-calls.jsonl): one JSON line per call, written by the MCP server.
const ToolCallsFile = "tool-calls.jsonl"

// ToolCall is the part of one tool-calls.jsonl line that stats read. Hits is what the
// call returned: search hits, sql rows, get pages (1 when it returned text). SessionIDs
// are the sessions the call read; absent in lines written before they were recorded and
// for calls that read no session (smart_compact_get, context_status).
type ToolCall struct {
	At         time.Time
	Tool       string
	Error      bool
	Hits       int
	SessionIDs []string
}

type toolCallLine struct {
	At         string   `json:"at"`
	Tool       string   `json:"tool"`
	Error      bool     `json:"error"`
	Hits       *int     `json:"hits"`
	Rows       *int     `json:"rows"`
	Chars      int      `json:"chars"`
	SessionIDs []string `json:"session_ids"`
}

// ToolCalls reads tool-calls.jsonl, oldest first, and counts the lines it could not read
// (best-effort telemetry: a torn last line is skipped, not an error). A missing file is
// no calls. The error is for a file that exists and cannot be read.
func (r *Root) ToolCalls() (calls []ToolCall, bad int, err error) {
	f, err := os.Open(filepath.Join(r.dir, ToolCallsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", ToolCallsFile, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var l toolCallLine
		if json.Unmarshal([]byte(line), &l) != nil || l.Tool == "" {
			bad++
			continue
		}
		at, err := time.Parse(timeLayout, l.At)
		if err != nil {
			bad++
			continue
		}
		c := ToolCall{At: at, Tool: l.Tool, Error: l.Error, SessionIDs: l.SessionIDs}
		switch {
		case l.Hits != nil:
			c.Hits = *l.Hits
		case l.Rows != nil:
			c.Hits = *l.Rows
		case l.Chars > 0:
			c.Hits = 1
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		return calls, bad, fmt.Errorf("read %s: %w", ToolCallsFile, err)
	}
	return calls, bad, nil
}

// ToolCount is how often one recall tool was called and what it returned.
type ToolCount struct {
	Calls  int `json:"calls"`
	Hits   int `json:"hits"`   // search hits, sql rows, get pages
	Empty  int `json:"empty"`  // calls that returned nothing and did not fail
	Errors int `json:"errors"` // calls that failed or returned isError
}

// ToolCounts sums calls by tool name.
func ToolCounts(calls []ToolCall) map[string]ToolCount {
	out := map[string]ToolCount{}
	for _, c := range calls {
		n := out[c.Tool]
		n.Calls++
		n.Hits += c.Hits
		switch {
		case c.Error:
			n.Errors++
		case c.Hits == 0:
			n.Empty++
		}
		out[c.Tool] = n
	}
	return out
}

// Stats is `smarter-compact stats` (contract: context stats): whether agents use the
// recall tools, per session and overall, with the store's inventory.
type Stats struct {
	// Tools counts calls by tool name ("smart_compact_search": 2), Hits what they returned.
	Tools map[string]int `json:"tools"`
	Hits  map[string]int `json:"hits"`
	// Calls is every call; AfterTrim those reading a session at or after its first trim.
	Calls     int `json:"calls"`
	AfterTrim int `json:"calls_after_trim"`
	Errors    int `json:"errors"`
	// TrimmedSessions have at least one trim; Searched of them the agent called
	// smart_compact_search or smart_compact_sql on at or after the first trim. SearchedShare
	// is Searched / TrimmedSessions (null without trimmed sessions).
	TrimmedSessions int      `json:"trimmed_sessions"`
	Searched        int      `json:"trimmed_sessions_searched"`
	SearchedShare   *float64 `json:"searched_share"`
	Messages        Messages `json:"messages"`
	Blobs           Blobs    `json:"blobs"`
	// BadLines counts tool-calls.jsonl lines that could not be read.
	BadLines int            `json:"bad_lines,omitempty"`
	Sessions []SessionStats `json:"sessions"`
}

// Messages is a message inventory: rows stored, still in context, trimmed out.
type Messages struct {
	Total     int64 `json:"total"`
	InContext int64 `json:"in_context"`
	Trimmed   int64 `json:"trimmed"`
}

// Blobs is the blob inventory: files in blobs/ and their bytes overall; per session the
// distinct blobs its rows name.
type Blobs struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes,omitempty"`
}

// SessionStats is one session's part of Stats, for sessions with a database.
type SessionStats struct {
	SessionID string         `json:"session_id"`
	Agent     string         `json:"agent,omitempty"`
	Trims     int64          `json:"trims"`
	FirstTrim string         `json:"first_trim_at,omitempty"` // ISO 8601 UTC; "" without trims
	Tools     map[string]int `json:"tools"`
	Hits      map[string]int `json:"hits"`
	AfterTrim int            `json:"calls_after_trim"`
	Searched  bool           `json:"searched_after_trim"`
	Messages  Messages       `json:"messages"`
	Blobs     Blobs          `json:"blobs"`
	Problem   string         `json:"problem,omitempty"`
}

// recallSearchTools are the calls that count as "the agent searched" after a trim.
var recallSearchTools = []string{"smart_compact_search", "smart_compact_sql"}

// Stats reads tool-calls.jsonl, every session database (read-only) and blobs/. Sessions
// are listed newest activity first, as Sessions lists them. A database that cannot be read
// is listed with Problem set. The error is for an unreadable sessions/ folder or
// tool-calls.jsonl, or a cancelled ctx.
func (r *Root) Stats(ctx context.Context) (Stats, error) {
	calls, bad, err := r.ToolCalls()
	if err != nil {
		return Stats{}, err
	}
	infos, err := r.Sessions(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Tools: map[string]int{}, Hits: map[string]int{}, BadLines: bad, Sessions: []SessionStats{}}
	for tool, n := range ToolCounts(calls) {
		st.Tools[tool], st.Hits[tool] = n.Calls, n.Hits
		st.Errors += n.Errors
	}
	st.Calls = len(calls)
	firstTrim := map[string]time.Time{}
	for _, in := range infos {
		s := SessionStats{SessionID: in.SessionID, Agent: in.Agent, Trims: in.Trims, Problem: in.Problem,
			Tools: map[string]int{}, Hits: map[string]int{},
			Messages: Messages{Total: in.Rows, InContext: in.InContext, Trimmed: in.Trimmed}}
		if in.Problem == "" {
			ft, blobs, err := r.sessionStatsOf(ctx, in.SessionID)
			if err != nil {
				if ctx.Err() != nil {
					return Stats{}, ctx.Err()
				}
				s.Problem = statusProblem(readError(r.sessionFile(in.SessionID, ".db"), err))
			}
			s.Blobs.Count = blobs
			if !ft.IsZero() {
				firstTrim[in.SessionID] = ft
				s.FirstTrim = formatTime(ft)
			}
		}
		for _, c := range calls {
			if !slices.Contains(c.SessionIDs, s.SessionID) {
				continue
			}
			s.Tools[c.Tool]++
			s.Hits[c.Tool] += c.Hits
			if ft, ok := firstTrim[s.SessionID]; ok && !c.At.Before(ft) {
				s.AfterTrim++
				if slices.Contains(recallSearchTools, c.Tool) {
					s.Searched = true
				}
			}
		}
		if s.Trims > 0 {
			st.TrimmedSessions++
			if s.Searched {
				st.Searched++
			}
		}
		st.Messages.Total += s.Messages.Total
		st.Messages.InContext += s.Messages.InContext
		st.Messages.Trimmed += s.Messages.Trimmed
		st.Sessions = append(st.Sessions, s)
	}
	for _, c := range calls {
		for _, sid := range c.SessionIDs {
			if ft, ok := firstTrim[sid]; ok && !c.At.Before(ft) {
				st.AfterTrim++
				break
			}
		}
	}
	if st.TrimmedSessions > 0 {
		share := float64(st.Searched) / float64(st.TrimmedSessions)
		st.SearchedShare = &share
	}
	st.Blobs, err = r.blobInventory()
	return st, err
}

// sessionStatsOf reads a session's first trim time (zero without one) and the distinct
// blobs its rows name.
func (r *Root) sessionStatsOf(ctx context.Context, sid string) (time.Time, int, error) {
	rd, err := r.OpenReader(sid)
	if errors.Is(err, ErrNoSchema) {
		return time.Time{}, 0, nil
	}
	if err != nil {
		return time.Time{}, 0, err
	}
	defer rd.Close()
	db, err := rd.pool()
	if err != nil {
		return time.Time{}, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusDBTimeout)
	defer cancel()
	var blobs int
	if err := db.QueryRowContext(ctx, "SELECT count(DISTINCT blob_id) FROM messages WHERE blob_id IS NOT NULL").Scan(&blobs); err != nil {
		return time.Time{}, 0, err
	}
	if rd.SchemaVersion() < 2 {
		return time.Time{}, blobs, nil // no events table
	}
	var first *string
	if err := db.QueryRowContext(ctx, "SELECT min(at) FROM events WHERE kind = 'trim'").Scan(&first); err != nil {
		return time.Time{}, blobs, err
	}
	if first == nil {
		return time.Time{}, blobs, nil
	}
	t, err := time.Parse(timeLayout, *first)
	return t, blobs, err
}

// blobInventory counts blobs/*.txt and their bytes.
func (r *Root) blobInventory() (Blobs, error) {
	ents, err := os.ReadDir(filepath.Join(r.dir, "blobs"))
	if errors.Is(err, fs.ErrNotExist) {
		return Blobs{}, nil
	}
	if err != nil {
		return Blobs{}, fmt.Errorf("read blobs: %w", err)
	}
	var b Blobs
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".txt") || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil {
			b.Count++
			b.Bytes += fi.Size()
		}
	}
	return b, nil
}

// recallToolOrder is the display order of the recall tools in `stats` and on the dashboard.
var recallToolOrder = []string{"smart_compact_search", "smart_compact_sql", "smart_compact_get", "context_status"}

// ToolNames returns the keys of counts (tool name → calls, Stats.Tools) in display order:
// the recall tools as the contract lists them, then any other name, sorted.
func ToolNames(counts map[string]int) []string {
	var out, rest []string
	for _, t := range recallToolOrder {
		if _, ok := counts[t]; ok {
			out = append(out, t)
		}
	}
	for t := range counts {
		if !slices.Contains(recallToolOrder, t) {
			rest = append(rest, t)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// ToolHitUnit names what a tool's hits count (ToolCall.Hits): "rows" for smart_compact_sql,
// "pages" for smart_compact_get, else "hits".
func ToolHitUnit(tool string) string {
	switch tool {
	case "smart_compact_sql":
		return "rows"
	case "smart_compact_get":
		return "pages"
	}
	return "hits"
}
