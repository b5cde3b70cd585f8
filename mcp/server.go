package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/embedding"
)

// Tool names (seed 001 "Tools agents use"; the wire names match OpenMem).
const (
	ToolSearch = "smart_compact_search"
	ToolSQL    = "smart_compact_sql"
	ToolGet    = "smart_compact_get"
	ToolStatus = "context_status"
)

// Options configure a Server.
type Options struct {
	// Workspace is the directory the agent works in (the server's cwd for stdio). Sessions
	// registered with a cwd under its git root (the nearest ancestor holding .git, else
	// Workspace itself) are "the workspace's sessions" (contract: Which session a call reads).
	Workspace string
	// WorkspaceFromRoots takes the workspace of each call from the client's MCP roots
	// instead of Workspace (the HTTP transport of serve, whose own working directory is
	// likely $HOME): a call without session_id and without roots is an error.
	WorkspaceFromRoots bool
	// Now is the clock for tool-calls.jsonl; nil means time.Now.
	Now func() time.Time
	// Log receives transport errors and telemetry failures; nil discards them. It must not
	// write to the stdio output.
	Log *slog.Logger
	// Version is reported as the server version in the MCP handshake.
	Version string
	// Embedding embeds queries for hybrid search (contract: Search); nil keeps every search
	// lexical.
	Embedding *embedding.Client
	// EmbeddingModel is [context_store] embedding_model, "" when vectors are off: the model a
	// hybrid search prefers, and whether responses report vector progress.
	EmbeddingModel string
	// EmbeddingTimeout bounds one query embedding; 0 means 30 s.
	EmbeddingTimeout time.Duration
}

// Server is the MCP server over one context root. It is safe for concurrent use; the stdio
// and HTTP transports may share it.
type Server struct {
	root      *store.Root
	workspace string
	fromRoots bool
	now       func() time.Time
	log       *slog.Logger
	mcp       *server.MCPServer

	embed        *embedding.Client
	embedModel   string
	embedTimeout time.Duration
	queryBudget  time.Duration // searchSessions; queryBudget unless a test shortens it

	httpOnce sync.Once
	http     http.Handler

	telemetryMu sync.Mutex // serializes appends to tool-calls.jsonl
}

// New builds the server and its tools over root, which must stay open while the server runs.
// It reads root only; it writes nothing but tool-calls.jsonl.
func New(root *store.Root, opts Options) *Server {
	s := &Server{root: root, workspace: opts.Workspace, fromRoots: opts.WorkspaceFromRoots, now: opts.Now, log: opts.Log,
		embed: opts.Embedding, embedModel: opts.EmbeddingModel, embedTimeout: opts.EmbeddingTimeout}
	s.queryBudget = queryBudget
	if s.embedTimeout <= 0 {
		s.embedTimeout = embedding.DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s.mcp = server.NewMCPServer("smarter-compact", version,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions("Recall for this coding session: every message is stored, including turns trimmed out of your context. "+
			"When a [smarter-compact: …] pointer or your own memory says something was said or read earlier, look it up with "+
			ToolSearch+", count or join with "+ToolSQL+", and read a compressed tool result in full with "+ToolGet+"."),
	)
	s.mcp.AddTool(searchTool(), s.recorded(ToolSearch, s.search))
	s.mcp.AddTool(sqlTool(), s.recorded(ToolSQL, s.sql))
	s.mcp.AddTool(getTool(), s.recorded(ToolGet, s.get))
	s.mcp.AddTool(statusTool(), s.recorded(ToolStatus, s.status))
	return s
}

// Handler returns the streamable HTTP transport (mount it at /mcp). mcp-go's DNS-rebinding
// protection stays on: a request on a loopback socket with a foreign Host is refused.
func (s *Server) Handler() http.Handler {
	s.httpOnce.Do(func() {
		s.http = server.NewStreamableHTTPServer(s.mcp, server.WithStreamableHTTPLogger(s.log))
	})
	return s.http
}

// ServeStdio serves JSON-RPC lines from in to out until in ends (nil) or ctx is cancelled.
// Only JSON-RPC is written to out; transport errors go to Options.Log.
//
// mcp-go keeps one stdio session per process, so run at most one ServeStdio at a time.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ss := server.NewStdioServer(s.mcp)
	ss.SetErrorLogger(log.New(slogWriter{s.log}, "", 0))
	err := ss.Listen(ctx, in, out)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// slogWriter turns mcp-go's log.Logger lines into warnings on the slog logger.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn("mcp stdio: " + string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// jsonResult is a tool result whose text is v as JSON, with <, > and & kept as they are so
// excerpts read naturally.
func jsonResult(v any) (*mcpgo.CallToolResult, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return mcpgo.NewToolResultText(string(bytes.TrimRight(buf.Bytes(), "\n"))), nil
}

// readOnlyHints sets all four annotation hints: mcp-go's defaults would advertise a
// destructive, open-world tool (research/go-spikes.md §2).
func readOnlyHints(title string) []mcpgo.ToolOption {
	return []mcpgo.ToolOption{
		mcpgo.WithTitleAnnotation(title),
		mcpgo.WithReadOnlyHintAnnotation(true),
		mcpgo.WithDestructiveHintAnnotation(false),
		mcpgo.WithIdempotentHintAnnotation(true),
		mcpgo.WithOpenWorldHintAnnotation(false),
	}
}
