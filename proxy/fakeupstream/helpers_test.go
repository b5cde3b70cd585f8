package fakeupstream_test

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

// headers returns the headers a client sends; extra are "Name: value" lines.
func headers(extra ...string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Anthropic-Version", "2023-06-01")
	h.Set("X-Api-Key", "dummy-key")
	return withLines(h, extra)
}

// withLines sets each "Name: value" line of extra on h and returns h.
func withLines(h http.Header, extra []string) http.Header {
	for _, e := range extra {
		k, v, _ := strings.Cut(e, ":")
		h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h
}

func ccHeaders(extra ...string) http.Header {
	return headers(append([]string{"Anthropic-Beta: " + fakeupstream.ClaudeCodeBetas}, extra...)...)
}

// post sends body (bytes, string, or a value to marshal) and returns the response and its body.
func post(t *testing.T, url string, body any, h http.Header) (*http.Response, []byte) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	return do(t, req)
}

// do sends req with the default client and returns the response and its whole body.
func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// apiError decodes an error envelope and checks its shape (api-rules §1.9).
func apiError(t *testing.T, body []byte) (typ, message string) {
	t.Helper()
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	if env.Type != "error" || !strings.HasPrefix(env.RequestID, "req_") {
		t.Fatalf("not an Anthropic error envelope: %s", body)
	}
	return env.Error.Type, env.Error.Message
}

// event is one SSE event as received.
type event struct {
	name string
	data map[string]any
}

// streamed is a streamed message accumulated the way the Go SDK does it (api-rules §2.1).
type streamed struct {
	events     []event
	start      map[string]any // message_start.message
	content    []any          // final content blocks, as a client sends them back
	stopReason string
	usage      map[string]any // message_delta.usage
	err        map[string]any // an error event's error object
}

// readStream parses an Anthropic event stream and fails the test where a client would: an
// event name that differs from the data's type, a block index that is not the next slot, a
// delta or stop for a block that is not open, a thinking block closed without a signature,
// data after message_stop.
func readStream(t *testing.T, body []byte) streamed {
	t.Helper()
	var s streamed
	var partial strings.Builder
	open := -1
	stopped := false
	eachNamedEvent(t, body, "message_stop", func(name string, d map[string]any) bool {
		s.events = append(s.events, event{name, d})
		idx := -1
		if f, ok := d["index"].(float64); ok {
			idx = int(f)
		}
		switch name {
		case "message_start":
			if len(s.events) != 1 {
				t.Fatalf("message_start is event %d", len(s.events))
			}
			s.start = d["message"].(map[string]any)
		case "content_block_start":
			if open != -1 || idx != len(s.content) {
				t.Fatalf("content_block_start index %d, want %d (open %d)", idx, len(s.content), open)
			}
			open = idx
			s.content = append(s.content, d["content_block"])
			partial.Reset()
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for index %d, open %d", idx, open)
			}
			b := s.content[idx].(map[string]any)
			delta := d["delta"].(map[string]any)
			switch delta["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + delta["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + delta["thinking"].(string)
			case "signature_delta":
				b["signature"] = delta["signature"]
			case "input_json_delta":
				partial.WriteString(delta["partial_json"].(string))
			default:
				t.Fatalf("unknown delta %v", delta["type"])
			}
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for index %d, open %d", idx, open)
			}
			b := s.content[idx].(map[string]any)
			switch b["type"] {
			case "thinking":
				if b["signature"] == "" {
					t.Fatalf("thinking block %d closed without signature_delta", idx)
				}
			case "tool_use":
				var in map[string]any
				if err := json.Unmarshal([]byte(partial.String()), &in); err != nil {
					t.Fatalf("tool_use %d input %q: %v", idx, partial.String(), err)
				}
				b["input"] = in
			}
			open = -1
		case "message_delta":
			s.stopReason, _ = d["delta"].(map[string]any)["stop_reason"].(string)
			s.usage = d["usage"].(map[string]any)
		case "message_stop":
			stopped = true
		case "error":
			s.err = d["error"].(map[string]any)
		case "ping":
		default:
			t.Fatalf("unexpected event %q", name)
		}
		return stopped
	})
	if !stopped && s.err == nil {
		t.Fatalf("stream ended without message_stop")
	}
	return s
}

// eachNamedEvent reads an event stream of "event: " and "data: " lines (api-rules §2.1 and
// §6) and calls each with every event's name and JSON data. It fails the test where a client
// would: data that is not JSON, an event name that differs from the data's type, a line of
// another kind, or an event after each has returned true ("event after <afterEnd>").
func eachNamedEvent(t *testing.T, body []byte, afterEnd string, each func(name string, d map[string]any) (ended bool)) {
	t.Helper()
	var name string
	ended := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if ended {
				t.Fatalf("event after %s: %s", afterEnd, line)
			}
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data is not JSON: %v: %s", err, line)
			}
			if d["type"] != name {
				t.Fatalf("event name %q but data type %v", name, d["type"])
			}
			ended = each(name, d)
		case line == "":
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
}

// accept posts body to path with headers h, requires a 200, and returns the body (oaAccept
// posts with the OpenAI headers).
func accept(t *testing.T, srv *fakeupstream.Server, path string, body any, h http.Header) []byte {
	t.Helper()
	resp, out := post(t, srv.URL+path, body, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	return out
}

// turn sends a streaming request, requires 200, and returns the accumulated message.
func turn(t *testing.T, srv *fakeupstream.Server, body any, h http.Header) streamed {
	t.Helper()
	return readStream(t, accept(t, srv, "/v1/messages?beta=true", body, h))
}

// reject sends a request, requires a 400, and returns the error message.
func reject(t *testing.T, srv *fakeupstream.Server, body any, h http.Header) string {
	t.Helper()
	resp, out := post(t, srv.URL+"/v1/messages?beta=true", body, h)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, out)
	}
	typ, msg := apiError(t, out)
	if typ != "invalid_request_error" {
		t.Fatalf("error type %q", typ)
	}
	return msg
}

type obj = map[string]any

func text(s string) obj { return obj{"type": "text", "text": s} }

func cached(b obj) obj {
	c := obj{}
	for k, v := range b {
		c[k] = v
	}
	c["cache_control"] = obj{"type": "ephemeral"}
	return c
}

func user(blocks ...any) obj      { return obj{"role": "user", "content": blocks} }
func assistant(blocks ...any) obj { return obj{"role": "assistant", "content": blocks} }

func toolResult(id, content string) obj {
	return obj{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": false}
}

// ccSystemPrompt is a stand-in for Claude Code's ~7 KB main prompt.
var ccSystemPrompt = strings.Repeat("You are an interactive agent that helps users with software engineering tasks. ", 40)

// ccBody builds a request shaped like Claude Code 2.1.332's (clients.md): system = billing
// header, agent line and main prompt with cache_control on [1] and [2]; tools with a deferred
// placeholder; messages[0] the user prompt as two text blocks; messages[1] the role "system"
// message with output_config — a one-block list with cache_control while it is the last
// message, a plain string afterwards; then rest, with cache_control moved to the last block
// of the last message.
func ccBody(model string, rest ...obj) obj {
	env := "# Environment\nYou have been invoked in the following environment:\n - Primary working directory: /tmp/work\n - Platform: linux"
	sysMsg := obj{"role": "system", "content": env, "output_config": obj{"effort": "medium"}}
	if len(rest) == 0 {
		sysMsg["content"] = []any{cached(text(env))}
	}
	msgs := []any{
		user(text("<system-reminder>Attribute commits to the user.</system-reminder>"), text("run echo hello")),
		sysMsg,
	}
	for i, m := range rest {
		if i == len(rest)-1 {
			blocks := m["content"].([]any)
			last := len(blocks) - 1
			c := append([]any(nil), blocks...)
			c[last] = cached(blocks[last].(obj))
			m = obj{"role": m["role"], "content": c}
		}
		msgs = append(msgs, m)
	}
	return obj{
		"model":    model,
		"messages": msgs,
		"system": []any{
			text("x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;"),
			cached(text("You are a Claude agent, built on Anthropic's Claude Agent SDK.")),
			cached(text(ccSystemPrompt)),
		},
		"tools": []any{
			obj{"name": "Bash", "description": "Run a shell command.", "input_schema": obj{"type": "object", "properties": obj{"command": obj{"type": "string"}}, "required": []any{"command"}}},
			obj{"name": "Read", "description": "Read a file.", "input_schema": obj{"type": "object", "properties": obj{"file_path": obj{"type": "string"}}}},
			obj{"name": "DeferredToolPlaceholder", "description": "Never call this tool.", "input_schema": obj{"type": "object", "properties": obj{}}, "defer_loading": true},
		},
		"metadata":           obj{"user_id": `{"device_id":"` + strings.Repeat("ab", 32) + `","account_uuid":"","session_id":"c1e306e1-5ecd-4f33-8cb6-591b3cf8ee6c"}`},
		"max_tokens":         128000,
		"thinking":           obj{"type": "adaptive", "display": "omitted"},
		"context_management": obj{"edits": []any{obj{"type": "clear_thinking_20251015", "keep": "all"}}},
		"output_config":      obj{"effort": "medium"},
		"stream":             true,
	}
}

// scripted replies with a Bash tool call until the conversation holds a tool result, then
// with text; thinking first when the request turns it on.
func scripted(req *fakeupstream.Request) fakeupstream.Reply {
	c := fakeupstream.ThinkingFirst(req, "Let me run it.")
	if req.EndsWithToolResults() {
		return fakeupstream.Reply{Content: append(c, fakeupstream.Text("It printed hello."))}
	}
	return fakeupstream.Reply{Content: append(c,
		fakeupstream.Text("I'll run a tool."),
		fakeupstream.ToolUse("Bash", map[string]any{"command": "echo hello", "description": "Print hello"}),
	)}
}

// asAssistant turns a streamed message into the assistant message a client sends back.
func asAssistant(s streamed) obj { return obj{"role": "assistant", "content": s.content} }

// toolUseID returns the id of the first tool_use block of a streamed message.
func toolUseID(t *testing.T, s streamed) string {
	t.Helper()
	for _, b := range s.content {
		if m := b.(map[string]any); m["type"] == "tool_use" {
			return m["id"].(string)
		}
	}
	t.Fatalf("no tool_use in %v", s.content)
	return ""
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func describe(v any) string { return fmt.Sprintf("%v", v) }
