package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// telemetryFile is the append-only log of tool calls next to sessions/ (contract: Location,
// Events): one JSON line per call with counts and the ids of the sessions it read (so
// `smarter-compact stats` can tell calls after a trim), never a query, pattern, statement
// or blob id.
const telemetryFile = "tool-calls.jsonl"

// callRecord is one tool-calls.jsonl line. Each tool sets its own counts; the others stay out
// of the line.
type callRecord struct {
	At    string `json:"at"`
	Tool  string `json:"tool"`
	Error bool   `json:"error,omitempty"` // the call returned isError or failed
	// SessionIDs are the sessions the call read (search, sql), once resolved.
	SessionIDs []string `json:"session_ids,omitempty"`

	// smart_compact_search
	Mode         string `json:"mode,omitempty"`
	Hits         *int   `json:"hits,omitempty"`
	TotalMatches *int   `json:"total_matches,omitempty"`
	LineMatches  *int   `json:"line_matches,omitempty"`
	Sessions     *int   `json:"sessions,omitempty"`
	TimedOut     bool   `json:"timed_out,omitempty"`
	// smart_compact_sql
	Rows      *int `json:"rows,omitempty"`
	Truncated bool `json:"truncated,omitempty"`
	// smart_compact_get
	Chars      int `json:"chars,omitempty"`
	TotalChars int `json:"total_chars,omitempty"`
}

func intp(n int) *int { return &n }

// toolCall is the body of one tool: it answers req and fills rec with its counts.
type toolCall func(ctx context.Context, req mcpgo.CallToolRequest, rec *callRecord) (*mcpgo.CallToolResult, error)

// recorded is the handler of the tool named tool whose body is call: call gets a context
// carrying the request's input responses (withInput, for callWorkspace) and a callRecord of
// tool to fill, and finish turns its error into the answer and appends the record.
func (s *Server) recorded(tool string, call toolCall) func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		rec := callRecord{Tool: tool}
		res, err := call(withInput(ctx, req), req, &rec)
		return s.finish(rec, res, err)
	}
}

// finish turns a handler's outcome into the MCP answer and appends the call to
// tool-calls.jsonl: an toolError becomes an isError result the model can act on; any other
// error is a server fault and goes back as a JSON-RPC error.
func (s *Server) finish(rec callRecord, res *mcpgo.CallToolResult, err error) (*mcpgo.CallToolResult, error) {
	var ae toolError
	switch {
	case errors.Is(err, errNeedRoots):
		return rootsRequest(), nil // the call comes again with the roots: recorded then
	case errors.As(err, &ae):
		res, err = mcpgo.NewToolResultError(ae.msg), nil
		rec.Error = true
	case errors.Is(err, context.Canceled):
		// the client hung up: not a server fault
		s.log.Debug("mcp tool call cancelled", "tool", rec.Tool)
		rec.Error = true
	case err != nil:
		s.log.Error("mcp tool failed", "tool", rec.Tool, "err", err)
		rec.Error = true
	}
	s.appendCall(rec)
	return res, err
}

// appendCall writes rec as one line, best effort: a failure is logged and the call goes on.
func (s *Server) appendCall(rec callRecord) {
	rec.At = s.now().UTC().Format("2006-01-02T15:04:05Z")
	line, err := json.Marshal(rec)
	if err != nil {
		s.log.Warn("tool-calls.jsonl: encode", "err", err)
		return
	}
	line = append(line, '\n')
	s.telemetryMu.Lock()
	defer s.telemetryMu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.root.Dir(), telemetryFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		s.log.Warn("tool-calls.jsonl: open", "err", err)
		return
	}
	_, werr := f.Write(line) // one write per line, so appends from several processes do not interleave
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		s.log.Warn("tool-calls.jsonl: write", "err", werr)
	}
}
