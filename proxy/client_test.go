package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// ccClient plays Claude Code against the proxy (research/clients.md, Claude Code 2.1.332):
// three system blocks with cache_control on [1] and [2], a first user message of two text
// blocks, a mid-conversation role "system" message at index 1 (a one-block list with
// cache_control while it is the last message, a string afterwards), the full history on
// every request, and one moving cache_control marker on the last block of the last message.
type ccClient struct {
	t        testing.TB
	url      string // proxy URL of the messages endpoint
	sid      string
	model    string
	thinking map[string]any
	system   []any
	tools    []any
	msgs     []map[string]any
	sysAt    int // index of the role "system" message, -1 before it exists
	http     *http.Client

	sent  [][]byte // bodies sent, in order
	stops []string // stop reasons received
	simFailure
	// tokenNotes makes the client add a role "system" message after each tool result, as
	// Claude Code does for some models ("<total_tokens>N tokens left</total_tokens>").
	tokenNotes bool
}

// simFailure is what a simulated client (ccClient, chatSim, respSim) does with a request
// that failed: with tolerate set, userTurn stops and failed keeps what went wrong, for tests
// that expect a rejection; without, the test fails.
type simFailure struct {
	tolerate bool
	failed   string
}

// failTurn records msg in failed when tolerating; otherwise it fails t with msg and does not
// return. The caller's turn stops either way.
func (f *simFailure) failTurn(t testing.TB, msg string) {
	t.Helper()
	if f.tolerate {
		f.failed = msg
		return
	}
	t.Fatal(msg)
}

func newClient(t testing.TB, url, sid, model string) *ccClient {
	return &ccClient{
		t: t, url: url, sid: sid, model: model, sysAt: -1, http: &http.Client{},
		thinking: map[string]any{"type": "adaptive", "display": "omitted"},
		system: []any{
			map[string]any{"type": "text", "text": "x-anthropic-billing-header: cc_version=test; cc_entrypoint=sdk-cli;"},
			map[string]any{"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.", "cache_control": map[string]any{"type": "ephemeral"}},
			map[string]any{"type": "text", "text": "\nYou are an agent working with the user toward their goals." + strings.Repeat(" Follow the rules.", 40), "cache_control": map[string]any{"type": "ephemeral"}},
		},
		tools: []any{
			map[string]any{"name": "Bash", "description": "Run a command", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}},
			map[string]any{"name": "Read", "description": "Read a file", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}}}},
		},
	}
}

func clone(v any) any {
	b, _ := json.Marshal(v)
	var out any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&out)
	return out
}

// body renders the next request as Claude Code would.
func (c *ccClient) body() []byte {
	msgs := make([]any, len(c.msgs))
	for i, m := range c.msgs {
		cm := clone(m).(map[string]any)
		last := i == len(c.msgs)-1
		if cm["role"] == "system" {
			if last {
				cm["content"] = []any{map[string]any{"type": "text", "text": cm["content"], "cache_control": map[string]any{"type": "ephemeral"}}}
			}
		} else if last {
			switch content := cm["content"].(type) {
			case string:
				cm["content"] = []any{map[string]any{"type": "text", "text": content, "cache_control": map[string]any{"type": "ephemeral"}}}
			case []any:
				blk := content[len(content)-1].(map[string]any)
				blk["cache_control"] = map[string]any{"type": "ephemeral"}
			}
		}
		msgs[i] = cm
	}
	req := map[string]any{
		"model": c.model, "messages": msgs, "system": c.system, "tools": c.tools,
		"metadata":   map[string]any{"user_id": fmt.Sprintf(`{"device_id":"d","account_uuid":"","session_id":%q}`, c.sid)},
		"max_tokens": 32000, "thinking": c.thinking, "stream": true,
	}
	b, err := json.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// send posts the next request and appends the assistant reply. It returns the HTTP status
// and, for an error, the body.
func (c *ccClient) send() (int, string) {
	c.t.Helper()
	body := c.body()
	c.sent = append(c.sent, body)
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header = fakeupstream.ClaudeCodeHeader(c.sid, fakeupstream.ClaudeCodeBetas)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	msg, stop := readSSE(c.t, resp.Body)
	c.stops = append(c.stops, stop)
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": msg})
	return 200, ""
}

// readSSE accumulates an Anthropic event stream into the assistant content blocks.
func readSSE(t testing.TB, r io.Reader) ([]any, string) {
	t.Helper()
	var blocks []map[string]any
	var partial []string
	stop := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("bad SSE data %q: %v", data, err)
		}
		switch ev["type"] {
		case "content_block_start":
			blocks = append(blocks, ev["content_block"].(map[string]any))
			partial = append(partial, "")
		case "content_block_delta":
			i := int(ev["index"].(float64))
			d := ev["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d["text"].(string)
			case "thinking_delta":
				blocks[i]["thinking"] = blocks[i]["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				blocks[i]["signature"] = d["signature"]
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			}
		case "content_block_stop":
			i := int(ev["index"].(float64))
			if blocks[i]["type"] == "tool_use" && partial[i] != "" {
				var in any
				if err := json.Unmarshal([]byte(partial[i]), &in); err != nil {
					t.Fatalf("tool input %q: %v", partial[i], err)
				}
				blocks[i]["input"] = in
			}
		case "message_delta":
			if d, ok := ev["delta"].(map[string]any); ok {
				stop, _ = d["stop_reason"].(string)
			}
		case "error":
			t.Fatalf("stream error event: %s", data)
		}
	}
	out := make([]any, len(blocks))
	for i, b := range blocks {
		out[i] = b
	}
	return out, stop
}

// userTurn adds a user turn (the first one gets Claude Code's two blocks and the system
// message after it) and runs the agent loop until the model ends its turn, answering each
// tool call with output(step). It fails the test on any non-200.
func (c *ccClient) userTurn(text string, output func(step int) string) {
	c.t.Helper()
	if len(c.msgs) == 0 {
		c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context.\n</system-reminder>"},
			map[string]any{"type": "text", "text": text},
		}})
		if c.sysAt != -2 {
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "Environment: cwd /work\nDeferred tools: WebFetch, WebSearch", "output_config": map[string]any{"effort": "medium"}})
			c.sysAt = 1
		}
	} else {
		c.msgs = append(c.msgs, map[string]any{"role": "user", "content": text})
	}
	for step := 0; ; step++ {
		if status, body := c.send(); status != 200 {
			c.failTurn(c.t, fmt.Sprintf("request %d: status %d: %s", len(c.sent), status, body))
			return
		}
		last := c.msgs[len(c.msgs)-1]["content"].([]any)
		var results []any
		for _, b := range last {
			blk := b.(map[string]any)
			if blk["type"] == "tool_use" {
				results = append(results, map[string]any{"type": "tool_result", "tool_use_id": blk["id"], "content": output(step), "is_error": false})
			}
		}
		if len(results) == 0 {
			return
		}
		c.msgs = append(c.msgs, map[string]any{"role": "user", "content": results})
		if c.tokenNotes {
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": fmt.Sprintf("<total_tokens>%d tokens left</total_tokens>", 900000-len(c.sent)*1000)})
		}
	}
}

// noSystemMessage drops the mid-conversation system message (models that refuse it).
func (c *ccClient) noSystemMessage() *ccClient {
	c.sysAt = -2
	return c
}

// post sends a raw body and returns the status, draining the response.
func post(t testing.TB, url string, body []byte, hdr map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "dummy-key")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", "per-turn-control-2026-07-01")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
