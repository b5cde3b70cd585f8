package mcp

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// rootsHandler answers roots/list with one file:// root.
type rootsHandler struct{ dir string }

func (h rootsHandler) ListRoots(context.Context, mcpgo.ListRootsRequest) (*mcpgo.ListRootsResult, error) {
	u := url.URL{Scheme: "file", Path: h.dir}
	return &mcpgo.ListRootsResult{Roots: []mcpgo.Root{{URI: u.String(), Name: "repo"}}}, nil
}

// TestHTTPWorkspaceFromRoots: over /mcp (WorkspaceFromRoots) the service's own working
// directory is no workspace. A call without session_id reads the sessions under the client's
// MCP root, and without roots it is an error that asks for the session_id. Before, it read the
// sessions under serve's cwd (likely $HOME: every project).
func TestHTTPWorkspaceFromRoots(t *testing.T) {
	t.Parallel()
	r := resolutionRig(t)
	srv := New(storetest.OpenRootAt(t, r.dir), Options{Workspace: r.workspace, WorkspaceFromRoots: true,
		Now: func() time.Time { return fixedNow }, Version: "test"})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	t.Run("no roots", func(t *testing.T) {
		t.Parallel()
		c := httpClient(t, srv)
		wantResolutionError(t, c, nil, "names no workspace")
		// a named session still reads
		if text, isErr := call(t, c, ToolSQL, map[string]any{"session_id": "C", "sql": "SELECT 1 AS one"}); isErr || !strings.Contains(text, `"one"`) {
			t.Errorf("session C: %q (error %v)", text, isErr)
		}
	})
	t.Run("client roots", func(t *testing.T) {
		t.Parallel()
		tr, err := transport.NewStreamableHTTP(ts.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithRootsHandler(rootsHandler{r.repo}))
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		initialize(t, c)
		text, isErr := call(t, c, ToolSQL, map[string]any{"sql": "SELECT 1 AS one"})
		if isErr || !strings.Contains(text, `"sessions_searched"`) && !strings.Contains(text, `"B"`) {
			t.Fatalf("sql without session_id under the client's root: %q (error %v)", text, isErr)
		}
		text, isErr = call(t, c, ToolSearch, map[string]any{"query": "hello"})
		if isErr || !strings.Contains(text, `"sessions_searched":["B","A"]`) {
			t.Fatalf("search without session_id under the client's root: %q (error %v), want sessions B, A", text, isErr)
		}
	})
}
