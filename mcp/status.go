package mcp

import (
	"context"
	"fmt"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/store"
)

func statusTool() mcpgo.Tool {
	opts := []mcpgo.ToolOption{
		mcpgo.WithDescription(fmt.Sprintf(`Summarize what smarter-compact did across all sessions over the last hours (default %d): trims, estimated tokensSaved, messagesDropped, failOpens (requests sent untrimmed) with the newest five lastErrors, the latest writer versions, and the prompt cache from usage events: requests, withCacheCounts, token sums, hitRatio = cache read / (read + creation + uncached input), cache creation on requests that made a new cut (newCut) vs the rest (other), breakpoints and breakpointLayouts.
tools counts the recall tools' own calls in the window by tool name (calls, hits, empty, errors): whether smart_compact_search is used after trims.
checkout_proxy_version and proxy_stale are null in this build; note says why.`, store.StatusDefaultHours)),
		mcpgo.WithNumber("hours", mcpgo.Description(fmt.Sprintf("Window in hours, an integer from %d to %d; default %d.",
			store.StatusMinHours, store.StatusMaxHours, store.StatusDefaultHours))),
	}
	return mcpgo.NewTool(ToolStatus, append(opts, readOnlyHints("Smart compaction status")...)...)
}

// statusResponse is context_status's answer: the `status` summary plus the recall tools'
// calls in the window, by tool name (calls, hits, empty, errors).
type statusResponse struct {
	store.Status
	Tools map[string]store.ToolCount `json:"tools,omitempty"`
}

func (s *Server) status(ctx context.Context, req mcpgo.CallToolRequest, rec *callRecord) (*mcpgo.CallToolResult, error) {
	a, err := newArgs(ToolStatus, req.GetArguments(), "hours")
	if err != nil {
		return nil, err
	}
	hours, err := a.integer("hours", store.StatusDefaultHours, store.StatusMinHours, store.StatusMaxHours)
	if err != nil {
		return nil, err
	}
	st, err := s.root.Status(ctx, s.now(), hours)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, toolErrorf("could not read the session store: %v", err)
	}
	rec.Sessions = intp(st.Sessions)
	// The recall tools' own calls in the same window, from tool-calls.jsonl (issue 17): a
	// log that cannot be read leaves the counts out, the status still answers.
	out := statusResponse{Status: st}
	if calls, _, err := s.root.ToolCalls(); err == nil {
		since := s.now().Add(-time.Duration(hours) * time.Hour)
		in := calls[:0]
		for _, c := range calls {
			if !c.At.Before(since) {
				in = append(in, c)
			}
		}
		out.Tools = store.ToolCounts(in)
	} else {
		s.log.Warn("context_status: reading tool-calls.jsonl failed", "err", err)
	}
	return jsonResult(out)
}
