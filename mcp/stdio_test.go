package mcp

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
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// TestStdioInProcess drives ServeStdio over pipes with mcp-go's client, then closes the
// client's side: ServeStdio must return nil at EOF. (mcp-go keeps one stdio session per
// process, so this is the only in-process stdio test.)
func TestStdioInProcess(t *testing.T) {
	r := newRig(t)
	id, err := r.writer.WriteBlob("stdio blob")
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := r.srv.ServeStdio(t.Context(), serverIn, serverOut)
		_ = serverOut.Close()
		done <- err
	}()
	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	checkToolList(t, c)
	var page map[string]any
	callJSON(t, c, ToolGet, map[string]any{"id": id}, &page)
	if page["text"] != "stdio blob" {
		t.Errorf("page %v", page)
	}
	if msg := callError(t, c, ToolGet, map[string]any{"id": "ffffffffffffffff"}); !strings.Contains(msg, "no blob with id") {
		t.Errorf("error %q", msg)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio at EOF: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after its input closed")
	}
}

// buildBinary builds the smarter-compact command into a temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skips building the smarter-compact binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "smarter-compact")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(goTool, "build", "-tags", "sqlite_fts5", "-o", bin, "github.com/smarter-compact/smarter-compact")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryStdio runs the built `smarter-compact mcp` as an agent would: over raw pipes,
// every stdout line must be a JSON-RPC message (peers.md item 27: any other line breaks the
// client), and the process must exit 0 when stdin closes; then through mcp-go's stdio client.
func TestBinaryStdio(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	r := newRig(t)
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
		callJSON(t, c, ToolGet, map[string]any{"id": blob}, &page)
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
