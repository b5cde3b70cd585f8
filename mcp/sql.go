package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/store"
)

// sqlTimeout interrupts a statement (contract: SQL step 3).
const sqlTimeout = 2 * time.Second

func sqlTool() mcpgo.Tool {
	opts := []mcpgo.ToolOption{
		mcpgo.WithDescription(`Run one read-only SELECT (or WITH … SELECT) on this session's database, for counts, groupings and joins. At most 200 rows; 2 s limit.
Tables: messages(seq, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at), lines(id, message_seq, line_no, role, text) with one row per line of messages.text, messages_fts and lines_fts (FTS5 over text), events.
role is user, assistant or tool; kind is text, tool_use, tool_result or thinking. Count the original data once: the same text also appears in your own tool_use inputs and replies, and again in the output of every later tool call that re-read or grepped it (that output is a tool_result too). Best, restrict to the tool_result that read the data (find its seq with smart_compact_search: ... WHERE l.message_seq = <seq>); otherwise count each line at its first appearance in tool output. LIKE ignores case; GLOB matches case as grep does. E.g.
SELECT count(*) FROM (SELECT l.message_seq AS seq, min(l.message_seq) OVER (PARTITION BY l.text) AS first FROM lines l JOIN messages m ON m.seq = l.message_seq WHERE m.role = 'tool' AND m.kind = 'tool_result' AND l.text GLOB '*ERROR*') WHERE seq = first
session_id: the id the [smarter-compact: …] pointer gave; omit it to use this workspace's newest session. sql: the statement.
Returns columns, rows, truncated and session_id.`),
		mcpgo.WithString("sql", mcpgo.Required(), mcpgo.Description("One SELECT or WITH … SELECT statement; no PRAGMA, ATTACH or writes.")),
		mcpgo.WithString("session_id", mcpgo.Description("Session id from the [smarter-compact: …] pointer; omit for this workspace's newest session.")),
	}
	return mcpgo.NewTool(ToolSQL, append(opts, readOnlyHints("Query the session database with SQL")...)...)
}

// sqlResponse is the smart_compact_sql answer (contract: SQL).
type sqlResponse struct {
	SessionID     string   `json:"session_id"`
	Columns       []string `json:"columns"`
	Rows          [][]any  `json:"rows"`
	Truncated     bool     `json:"truncated"`
	SessionIDNote string   `json:"session_id_note,omitempty"`
}

func (s *Server) sql(ctx context.Context, req mcpgo.CallToolRequest, rec *callRecord) (*mcpgo.CallToolResult, error) {
	a, err := newArgs(ToolSQL, req.GetArguments(), "sql", "session_id")
	if err != nil {
		return nil, err
	}
	stmt, ok, err := a.str("sql")
	if err != nil {
		return nil, err
	}
	if !ok || strings.TrimSpace(stmt) == "" {
		return nil, toolErrorf("sql is required: one SELECT or WITH … SELECT statement")
	}
	sid, given, err := a.str("session_id")
	if err != nil {
		return nil, err
	}
	res, err := s.resolve(ctx, sid, given)
	if err != nil {
		return nil, err
	}
	if err := store.CheckSelect(stmt); err != nil {
		return nil, toolErrorf("sql refused: %v", err)
	}
	newest := res.sids[0]
	rec.SessionIDs = []string{newest}
	note := res.note
	if len(res.sids) > 1 {
		more := fmt.Sprintf("ran on the newest of %d matching sessions, %s; the others are %s (pass one as session_id to query it)",
			len(res.sids), newest, strings.Join(res.sids[1:], ", "))
		note = strings.TrimPrefix(note+"; "+more, "; ")
	}
	rd, err := s.root.OpenReader(newest)
	if err != nil {
		return nil, toolErrorf("could not read session %s: %s", newest, readProblem(err))
	}
	defer rd.Close()
	q, err := rd.Query(ctx, stmt, sqlTimeout)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, toolErrorf("sql failed on session %s: %v", newest, err)
	}
	out := sqlResponse{SessionID: newest, Columns: q.Columns, Rows: q.Rows, Truncated: q.Truncated, SessionIDNote: note}
	if out.Columns == nil {
		out.Columns = []string{}
	}
	if out.Rows == nil {
		out.Rows = [][]any{}
	}
	rec.Rows, rec.Truncated, rec.Sessions = intp(len(out.Rows)), out.Truncated, intp(1)
	return jsonResult(out)
}
