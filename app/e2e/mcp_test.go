//go:build e2e

package e2e_test

// `smarter-compact mcp` as an agent runs it: the real binary's stdio MCP server over a
// context store the test seeds through the store package (as the proxy would have written it).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// TestBinaryStdio runs the built `smarter-compact mcp` as an agent would: over raw pipes,
// every stdout line must be a JSON-RPC message (peers.md item 27: any other line breaks the
// client), and the process must exit 0 when stdin closes; then through mcp-go's stdio client.
func TestBinaryStdio(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	r := newStoreRig(t)
	r.register(t, "S", r.workspace, 1)
	r.writeSession(t, "S", standardSession(secret)...)
	blob, err := r.writer.WriteBlob("binary blob")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := []string{"SMARTER_COMPACT_STATE_DIR=" + filepath.Dir(r.dir), "HOME=" + home, "LOCALAPPDATA=" + home}

	t.Run("stdout carries JSON-RPC only", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "mcp")
		cmd.Dir = r.workspace
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		requests := []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"purity","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"smart_compact_get","arguments":{"id":%q}}}`, blob),
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"smart_compact_search","arguments":{"query":"0x3f2a"}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"smart_compact_get","arguments":{"id":"nothex"}}}`,
		}
		for _, req := range requests {
			if _, err := io.WriteString(stdin, req+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		// Read until every request has its answer, then close stdin like an agent that quits.
		var lines []string
		answered := map[float64]map[string]any{}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for len(answered) < 5 && sc.Scan() {
			line := sc.Text()
			lines = append(lines, line)
			var msg map[string]any
			if json.Unmarshal([]byte(line), &msg) == nil {
				if id, ok := msg["id"].(float64); ok {
					answered[id] = msg
				}
			}
		}
		if err := stdin.Close(); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("smarter-compact mcp did not exit cleanly at EOF: %v\nstderr: %s", err, stderr.String())
		}
		for i, line := range lines {
			if err := checkJSONRPC(line); err != nil {
				t.Errorf("stdout line %d is not JSON-RPC (%v): %q", i+1, err, line)
			}
		}
		if len(answered) != 5 {
			t.Fatalf("answers for %d of 5 requests; stdout:\n%s\nstderr: %s", len(answered), strings.Join(lines, "\n"), stderr.String())
		}
		if got := fmt.Sprint(answered[3]["result"]); !strings.Contains(got, "binary blob") {
			t.Errorf("get answer %s", got)
		}
		if got := fmt.Sprint(answered[5]["result"]); !strings.Contains(got, "isError:true") {
			t.Errorf("bad id answer %s, want isError", got)
		}
		if readerMissing() == "" {
			if got := fmt.Sprint(answered[4]["result"]); !strings.Contains(got, `"sessions_searched":["S"]`) {
				t.Errorf("search answer %s; want session S found from the workspace", got)
			}
		}
	})

	t.Run("mcp-go stdio client", func(t *testing.T) {
		c, err := client.NewStdioMCPClientWithOptions(bin, env, []string{"mcp"},
			transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
				cmd := exec.CommandContext(ctx, command, args...)
				cmd.Env = append(os.Environ(), env...)
				cmd.Dir = r.workspace
				return cmd, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		initialize(t, c)
		checkToolList(t, c)
		var page map[string]any
		callJSON(t, c, mcp.ToolGet, map[string]any{"id": blob}, &page)
		if page["text"] != "binary blob" {
			t.Errorf("page %v", page)
		}
	})

	// Both runs appended to the same tool-calls.jsonl.
	if n := len(telemetry(t, r.dir)); n < 4 {
		t.Errorf("tool-calls.jsonl has %d lines, want at least 4", n)
	}
}

// checkJSONRPC accepts a JSON-RPC 2.0 response (id with result or error), request or
// notification (method).
func checkJSONRPC(line string) error {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &msg); err != nil {
		return err
	}
	if string(msg["jsonrpc"]) != `"2.0"` {
		return fmt.Errorf("jsonrpc is %s", msg["jsonrpc"])
	}
	_, hasID := msg["id"]
	_, hasResult := msg["result"]
	_, hasError := msg["error"]
	_, hasMethod := msg["method"]
	switch {
	case hasMethod:
		return nil
	case hasID && hasResult != hasError:
		return nil
	}
	return fmt.Errorf("neither a request, a notification nor a response")
}

// secret is the value standardSession's user says, its assistant echoes and its tool reads.
const secret = "KEY-7 = 0x3f2a"

// storeSeedTime is when seeded rows were written and sessions registered.
var storeSeedTime = time.Date(2026, 10, 29, 17, 0, 0, 0, time.UTC)

// storeRig is a context root with a writer (standing in for the proxy) and a git workspace,
// for a `smarter-compact mcp` process that opens the same directory.
type storeRig struct {
	dir       string // the context root
	writer    *store.Root
	repo      string // git root of the workspace
	workspace string // repo/sub/dir: the MCP server's cwd
}

func newStoreRig(t *testing.T) *storeRig {
	t.Helper()
	base := t.TempDir()
	r := &storeRig{dir: filepath.Join(base, "context"), repo: filepath.Join(base, "repo")}
	r.workspace = filepath.Join(r.repo, "sub", "dir")
	for _, d := range []string{filepath.Join(r.repo, ".git"), r.workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.writer, err = store.Open(r.dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.writer.Close() })
	return r
}

// register writes sessions/<sid>.json with cwd, registered at the given minute of
// storeSeedTime's hour (later minute = newer session).
func (r *storeRig) register(t *testing.T, sid, cwd string, minute int) {
	t.Helper()
	at := storeSeedTime.Add(time.Duration(minute) * time.Minute).Format("2006-01-02T15:04:05Z")
	if err := r.writer.Register(store.Registration{SessionID: sid, Agent: "claude-code", Cwd: cwd, RegisteredAt: at}); err != nil {
		t.Fatal(err)
	}
}

// writeSession stores rows as one thread of sessions/<sid>.db through the writer, at
// storeSeedTime.
func (r *storeRig) writeSession(t *testing.T, sid string, rows ...storetest.Row) {
	t.Helper()
	storetest.SyncRows(t, r.writer, sid, storeSeedTime, rows)
}

// standardSession is a small conversation with one secret value said by the user, echoed by
// the assistant and read back by a tool.
func standardSession(secret string) []storetest.Row {
	return []storetest.Row{
		{Role: "user", Kind: "text", Text: "Remember " + secret + " for later."},
		{Role: "assistant", Kind: "text", Text: "Noted: " + secret + ".", Trimmed: true},
		{Role: "assistant", Kind: "tool_use", Name: "Bash", Text: `{"command":"cat notes.txt"}`, Trimmed: true},
		{Role: "tool", Kind: "tool_result", Name: "Bash", Text: "line one\n" + secret + "\nERROR disk full\nERROR disk full again", Trimmed: true, Blob: true},
		{Role: "user", Kind: "text", Text: "What was the value?"},
	}
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	req := mcpgo.InitializeRequest{}
	req.Params.ClientInfo = mcpgo.Implementation{Name: "smarter-compact-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
}

// callJSON runs a tool that must succeed and decodes its JSON answer into v.
func callJSON(t *testing.T, c *client.Client, tool string, args map[string]any, v any) {
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
	if res.IsError {
		t.Fatalf("%s %v: isError: %s", tool, args, texts[0])
	}
	if err := json.Unmarshal([]byte(texts[0]), v); err != nil {
		t.Fatalf("%s: answer is not JSON: %v\n%s", tool, err, texts[0])
	}
}

// checkToolList checks the four tools and their annotations and examples.
func checkToolList(t *testing.T, c *client.Client) {
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
	if want := []string{mcp.ToolStatus, mcp.ToolGet, mcp.ToolSearch, mcp.ToolSQL}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	for _, tool := range res.Tools {
		switch tool.Name {
		case mcp.ToolSearch:
			if !strings.Contains(tool.Description, `"pattern": "KEY-7 = 0x[0-9a-f]+"`) {
				t.Errorf("search description lacks the exact-value pattern example")
			}
		case mcp.ToolSQL:
			if !strings.Contains(tool.Description, "m.role = 'tool' AND m.kind = 'tool_result'") {
				t.Errorf("sql description lacks the count-the-original-once example")
			}
		}
	}
}

// readerMissing returns why the store's read side cannot run ("" when it can).
func readerMissing() (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint("store.CheckSelect panicked: ", r)
		}
	}()
	_ = store.CheckSelect("SELECT 1")
	return ""
}

// telemetry reads the context root's tool-calls.jsonl as decoded lines.
func telemetry(t *testing.T, dir string) []map[string]any {
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
