package mcp

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rootsInputID names the roots/list input request a call without session_id makes over HTTP.
const rootsInputID = "workspace_roots"

// errNeedRoots: the call must ask the client for its roots first; finish turns it into an
// input-required result (multi round-trip requests; mcp-go performs roots/list itself for
// clients of older protocol versions and calls the handler again with the answer).
var errNeedRoots = errors.New("the client's roots are needed")

type inputKey struct{}

// withInput carries a call's input responses to callWorkspace.
func withInput(ctx context.Context, req mcpgo.CallToolRequest) context.Context {
	return context.WithValue(ctx, inputKey{}, req.Params.InputResponses)
}

// callWorkspace is the directory whose sessions a call without session_id (or with an id
// that has no database) reads: the server's Workspace (stdio: the agent launched us in it),
// or with WorkspaceFromRoots (HTTP: the service's own working directory says nothing about
// the caller) the first file:// root of the client's MCP roots. It returns errNeedRoots while
// the client, which declared roots, has not given them yet, and "" when there are none: the
// call must then name its session.
func (s *Server) callWorkspace(ctx context.Context) (string, error) {
	if !s.fromRoots {
		return s.workspace, nil
	}
	in, _ := ctx.Value(inputKey{}).(mcpgo.InputResponses)
	if res := server.RootsResponse(in, rootsInputID); res != nil {
		for _, r := range res.Roots {
			u, err := url.Parse(r.URI)
			if err != nil || u.Scheme != "file" || u.Path == "" {
				continue
			}
			return filepath.Clean(filepath.FromSlash(u.Path)), nil
		}
		return "", nil
	}
	if sc, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok && sc.GetClientCapabilities().Roots != nil {
		return "", errNeedRoots
	}
	return "", nil
}

// rootsRequest is the result that asks the client for its roots.
func rootsRequest() *mcpgo.CallToolResult {
	return server.NewInputRequestBuilder("").Roots(rootsInputID).ToolResult()
}
