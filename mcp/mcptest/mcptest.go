// Package mcptest holds the MCP client helpers the tests of mcp and the end-to-end tests
// share: a workspace inside a git checkout for the server's cwd (and a context root's path
// beside it), initialize a client, call a tool and read its one text item (as JSON), check
// the tool list's hints and examples, and read the tool-calls.jsonl telemetry. It imports store
// only (ReaderMissing); the product never imports it.
package mcptest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/store"
)

// Workspace makes, in a new temp dir, the folders of an agent working inside a git checkout,
// and names a context root beside them (not created): repo is <tmp>/repo (with a .git
// folder), workspace its subfolder sub/dir, the MCP server's cwd, and dir <tmp>/context.
func Workspace(t testing.TB) (dir, repo, workspace string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "context")
	repo = filepath.Join(base, "repo")
	workspace = filepath.Join(repo, "sub", "dir")
	for _, d := range []string{filepath.Join(repo, ".git"), workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir, repo, workspace
}

// Initialize sends the MCP initialize request as client "smarter-compact-test" version 1; an
// error fails the test.
func Initialize(t *testing.T, c *client.Client) {
	t.Helper()
	req := mcpgo.InitializeRequest{}
	req.Params.ClientInfo = mcpgo.Implementation{Name: "smarter-compact-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
}

// Call runs one tool and returns its text and isError; a JSON-RPC error, or an answer that is
// not exactly one text item, fails the test.
func Call(t *testing.T, c *client.Client, tool string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(mcpgo.TextContent)
		if !ok {
			t.Fatalf("%s: content %T, want text", tool, c)
		}
		texts = append(texts, tc.Text)
	}
	if len(texts) != 1 {
		t.Fatalf("%s: %d content items, want 1", tool, len(texts))
	}
	return texts[0], res.IsError
}

// CallJSON runs a tool that must succeed and decodes its JSON answer into v.
func CallJSON(t *testing.T, c *client.Client, tool string, args map[string]any, v any) {
	t.Helper()
	text, isErr := Call(t, c, tool, args)
	if isErr {
		t.Fatalf("%s %v: isError: %s", tool, args, text)
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		t.Fatalf("%s: answer is not JSON: %v\n%s", tool, err, text)
	}
}

// CheckToolList asserts that the server lists exactly the tools want (sorted), each with a
// description and all four hints set to a read-only, closed-world tool (mcp-go's defaults
// would say destructive and open-world), and that the descriptions of search and sql
// (searchTool, sqlTool) carry their examples.
func CheckToolList(t *testing.T, c *client.Client, want []string, searchTool, sqlTool string) {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		a := tool.Annotations
		if a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint ||
			a.IdempotentHint == nil || !*a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s annotations %+v: want readOnly, not destructive, idempotent, closed-world, all set", tool.Name, a)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	for _, tool := range res.Tools {
		switch tool.Name {
		case searchTool:
			if !strings.Contains(tool.Description, `"pattern": "KEY-7 = 0x[0-9a-f]+"`) {
				t.Errorf("search description lacks the exact-value pattern example")
			}
		case sqlTool:
			if !strings.Contains(tool.Description, "m.role = 'tool' AND m.kind = 'tool_result'") {
				t.Errorf("sql description lacks the count-the-original-once example")
			}
		}
	}
}

// ReaderMissing returns why the store's read side cannot run ("" when it can).
func ReaderMissing() (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint("store.CheckSelect panicked: ", r)
		}
	}()
	_ = store.CheckSelect("SELECT 1")
	return ""
}

// Telemetry reads the context root dir's tool-calls.jsonl as decoded lines.
func Telemetry(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "tool-calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("tool-calls.jsonl line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}
