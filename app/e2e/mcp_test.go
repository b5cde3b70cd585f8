//go:build e2e

package e2e_test

// `smarter-compact mcp` as an agent runs it: the real binary's stdio MCP server, over a
// context store the test seeds through the store package (as the proxy would have written
// it), and over the store of a live Claude Code session the moment its last reply is in.

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
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/mcp/mcptest"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
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
		var stderr bytes.Buffer
		cmd, stdin, stdout := startMCPStdio(ctx, t, bin, r.workspace, env, &stderr)
		requests := []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"purity","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"smart_compact_get","arguments":{"id":%q}}}`, blob),
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"smart_compact_search","arguments":{"query":"0x3f2a"}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"smart_compact_get","arguments":{"id":"nothex"}}}`,
		}
		writeLines(t, stdin, requests...)
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
		if mcptest.ReaderMissing() == "" {
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
		mcptest.Initialize(t, c)
		mcptest.CheckToolList(t, c, []string{mcp.ToolStatus, mcp.ToolGet, mcp.ToolSearch, mcp.ToolSQL}, mcp.ToolSearch, mcp.ToolSQL)
		var page map[string]any
		mcptest.CallJSON(t, c, mcp.ToolGet, map[string]any{"id": blob}, &page)
		if page["text"] != "binary blob" {
			t.Errorf("page %v", page)
		}
	})

	// Both runs appended to the same tool-calls.jsonl.
	if n := len(mcptest.Telemetry(t, r.dir)); n < 4 {
		t.Errorf("tool-calls.jsonl has %d lines, want at least 4", n)
	}
}

// startMCPStdio starts `bin mcp` in dir with env added to the test's environment and stderr
// going to stderr, and returns it with its stdin and stdout pipes; ctx ends it.
func startMCPStdio(ctx context.Context, t *testing.T, bin, dir string, env []string, stderr io.Writer) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "mcp")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
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
	return cmd, stdin, stdout
}

// writeLines writes each line and a newline to w (JSON-RPC over stdio: one message a line).
func writeLines(t *testing.T, w io.Writer, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			t.Fatal(err)
		}
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
	r := &storeRig{}
	r.dir, r.repo, r.workspace = mcptest.Workspace(t)
	r.writer = storetest.OpenRootAt(t, r.dir)
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

// A live Claude Code session searched through the binary.

// lastReplyText is the only answer of the session: no later request carries it back.
const lastReplyText = "The value you asked for is LASTREPLY-ZEBRA-9914."

// TestE2EClaudeCodeLastReplyIsSearchable runs one real `claude -p` turn through the real
// serve against the fake, and, the moment claude has exited, asks the real `smarter-compact
// mcp` (stdio, as an agent runs it) for the answer with smart_compact_search: the session's
// last reply is stored from the response stream (issue 16, item 4), not only when a next
// request would have carried it.
func TestE2EClaudeCodeLastReplyIsSearchable(t *testing.T) {
	claude := claudeCLI.find(t)
	bin := buildBinary(t)
	work, home := agentDirs(t)
	reply := func(req *fakeupstream.Request) fakeupstream.Reply {
		blocks := fakeupstream.ThinkingFirst(req, "Answering the question.")
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text(lastReplyText))}
	}
	fake, srv, tp := startRig(t, bin, reply, func(fakeURL string) []string {
		return []string{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC=" + fakeURL}
	})
	run := runAgent(t, 3*time.Minute, claude, work, claudeEnv(home, tp.URL), "-p", "What is the value? Answer in one line.")
	if run.err != nil || !strings.Contains(run.stdout, "LASTREPLY-ZEBRA-9914") {
		t.Fatalf("claude did not print the fake's answer:\n%s\n%s", run, diagnose(fake, srv))
	}
	recs := acceptedRequests(t, fake, srv)
	sid := ""
	for _, r := range recs {
		if s, ok := store.SanitizeSID(r.Header.Get("X-Claude-Code-Session-Id")); ok && strings.HasPrefix(r.Path, "/v1/messages") {
			sid = s
		}
	}
	if sid == "" {
		t.Fatalf("no Messages request named its session:\n%s", diagnose(fake, srv))
	}
	// serve is still running: nothing has closed or settled the session database
	got := mcpSearch(t, bin, srv.stateDir, work, map[string]any{"session_id": sid, "query": "LASTREPLY-ZEBRA-9914", "role": "all"})
	if !strings.Contains(got, "LASTREPLY-ZEBRA-9914") || !strings.Contains(got, `"role":"assistant"`) {
		t.Fatalf("smart_compact_search right after the session did not find its last reply:\n%s\nserve log:\n%s", got, srv.log)
	}
	t.Logf("session %s: smart_compact_search found the last reply: %.300s", sid, got)
}

// mcpSearch runs `smarter-compact mcp` over stdio with the state directory stateDir, calls
// smart_compact_search once with args and returns the result's text.
func mcpSearch(t *testing.T, bin, stateDir, cwd string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	home := t.TempDir()
	var stderr syncBuffer
	cmd, stdin, stdout := startMCPStdio(ctx, t, bin, cwd, []string{"SMARTER_COMPACT_STATE_DIR=" + stateDir, "HOME=" + home}, &stderr)
	call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "smart_compact_search", "arguments": args}})
	writeLines(t, stdin,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		string(call),
	)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	result := ""
	for sc.Scan() {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.ID == 2 {
			result = fmt.Sprintf("%s%s", msg.Result, msg.Error)
			break
		}
	}
	stdin.Close()
	_ = cmd.Wait()
	if result == "" {
		t.Fatalf("smarter-compact mcp gave no answer to the search; stderr: %s", stderr.String())
	}
	// the tool's text is JSON inside the result's content
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if json.Unmarshal([]byte(result), &res) == nil && len(res.Content) > 0 {
		return res.Content[0].Text
	}
	return result
}
