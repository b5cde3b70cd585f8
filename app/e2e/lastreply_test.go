//go:build e2e

package e2e_test

import (
	"bufio"
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

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// lastReplyText is the only answer of the session: no later request carries it back.
const lastReplyText = "The value you asked for is LASTREPLY-ZEBRA-9914."

// TestE2EClaudeCodeLastReplyIsSearchable runs one real `claude -p` turn through the real
// serve against the fake, and, the moment claude has exited, asks the real `smarter-compact
// mcp` (stdio, as an agent runs it) for the answer with smart_compact_search: the session's
// last reply is stored from the response stream (issue 16, item 4), not only when a next
// request would have carried it.
func TestE2EClaudeCodeLastReplyIsSearchable(t *testing.T) {
	claude := findCLI(t, envClaude, "claude", "@anthropic-ai/claude-code@"+claudeVersion)
	bin := buildBinary(t)
	work := filepath.Join(t.TempDir(), "work")
	home := filepath.Join(t.TempDir(), "home")
	makeDirs(t, work, home)
	reply := func(req *fakeupstream.Request) fakeupstream.Reply {
		var blocks []fakeupstream.Block
		if req.ThinkingEnabled() {
			blocks = append(blocks, fakeupstream.Thinking("Answering the question."))
		}
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
	cmd := exec.CommandContext(ctx, bin, "mcp")
	cmd.Dir = cwd
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "SMARTER_COMPACT_STATE_DIR="+stateDir, "HOME="+home)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "smart_compact_search", "arguments": args}})
	for _, req := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		string(call),
	} {
		if _, err := io.WriteString(stdin, req+"\n"); err != nil {
			t.Fatal(err)
		}
	}
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
