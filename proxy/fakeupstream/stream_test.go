package fakeupstream_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func thinkingTurn(stream bool) obj {
	return obj{"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": stream,
		"thinking": obj{"type": "enabled", "budget_tokens": 2048},
		"tools":    []any{obj{"name": "Bash", "input_schema": obj{"type": "object"}}},
		"messages": []any{user(text("list files"))}}
}

func fullReply(*fakeupstream.Request) fakeupstream.Reply {
	return fakeupstream.Reply{Content: []fakeupstream.Block{
		fakeupstream.Thinking("I should list the files."),
		fakeupstream.Text("Listing."),
		fakeupstream.ToolUse("Bash", map[string]any{"command": "ls -la", "description": "List files"}),
	}}
}

// The stream is what api-rules §2.1 describes, checked by readStream the way the Go SDK
// reads it, plus the details a lenient reader would not notice.
func TestStreamShape(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: fullReply})
	resp, body := post(t, srv.URL+"/v1/messages", thinkingTurn(true), headers())
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !slices.Contains(resp.TransferEncoding, "chunked") {
		t.Errorf("transfer encoding %v, want chunked (Claude Code waits forever on an undelimited body)", resp.TransferEncoding)
	}
	s := readStream(t, body)

	var names []string
	for _, e := range s.events {
		n := e.name
		if d, ok := e.data["delta"].(map[string]any); ok && n == "content_block_delta" {
			n = d["type"].(string)
		}
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n) // runs of the same delta collapse
		}
	}
	want := []string{
		"message_start", "content_block_start", "ping", "thinking_delta", "signature_delta", "content_block_stop",
		"content_block_start", "text_delta", "content_block_stop",
		"content_block_start", "input_json_delta", "content_block_stop",
		"message_delta", "message_stop",
	}
	if !slices.Equal(names, want) {
		t.Errorf("events\n got %v\nwant %v", names, want)
	}
	chunks := 0
	for _, e := range s.events {
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			chunks++
		}
	}
	if chunks < 2 {
		t.Errorf("tool input in %d chunk(s); clients must join partial JSON", chunks)
	}

	if len(s.content) != 3 {
		t.Fatalf("content %v", s.content)
	}
	th, tx, tu := s.content[0].(map[string]any), s.content[1].(map[string]any), s.content[2].(map[string]any)
	if th["thinking"] != "I should list the files." || tx["text"] != "Listing." {
		t.Errorf("blocks %v %v", th, tx)
	}
	if id, _ := tu["id"].(string); !strings.HasPrefix(id, "toolu_fake_") || tu["name"] != "Bash" || describe(tu["input"]) != describe(map[string]any{"command": "ls -la", "description": "List files"}) {
		t.Errorf("tool_use %v", tu)
	}
	if s.stopReason != "tool_use" || s.start["stop_reason"] != nil || len(s.start["content"].([]any)) != 0 {
		t.Errorf("stop reason %q, message_start %v", s.stopReason, s.start)
	}
	u := s.start["usage"].(map[string]any)
	for _, k := range []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"} {
		if _, ok := u[k]; !ok {
			t.Errorf("message_start usage lacks %s: %v", k, u)
		}
	}
	if cc, ok := u["cache_creation"].(map[string]any); !ok || cc["ephemeral_5m_input_tokens"] == nil {
		t.Errorf("message_start usage lacks cache_creation: %v", u)
	}
	if m := measure(t, thinkingTurn(true)); num(u["input_tokens"]) != m.Tokens || num(s.usage["input_tokens"]) != m.Tokens {
		t.Errorf("input tokens %v / %v, want %d (no breakpoints)", u["input_tokens"], s.usage["input_tokens"], m.Tokens)
	}
}

func TestNonStreamingMessage(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: fullReply})
	body := accept(t, srv, "/v1/messages", thinkingTurn(false), headers())
	var m struct {
		ID      string           `json:"id"`
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
		Stop    string           `json:"stop_reason"`
		Usage   map[string]any   `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Role != "assistant" || m.Stop != "tool_use" || len(m.Content) != 3 || m.Content[0]["signature"] == "" || num(m.Usage["output_tokens"]) < 1 {
		t.Errorf("message %s", body)
	}
	if in, ok := m.Content[2]["input"].(map[string]any); !ok || in["command"] != "ls -la" {
		t.Errorf("tool_use input %v", m.Content[2]["input"])
	}

	// The answer goes back as history: accepted, and its signature holds.
	id := m.Content[2]["id"].(string)
	next := thinkingTurn(false)
	next["messages"] = []any{user(text("list files")), obj{"role": "assistant", "content": m.Content}, user(toolResult(id, "a.txt"))}
	if resp, out := post(t, srv.URL+"/v1/messages", next, headers()); resp.StatusCode != http.StatusOK {
		t.Errorf("history with the fake's own answer: %d %s", resp.StatusCode, out)
	}
}

func TestInjectedErrors(t *testing.T) {
	t.Run("mid-stream overloaded", func(t *testing.T) {
		srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(*fakeupstream.Request) fakeupstream.Reply {
			return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("partial"), fakeupstream.Text("never")},
				StreamError: fakeupstream.Overloaded(), StreamErrorAfter: 1}
		}})
		resp, body := post(t, srv.URL+"/v1/messages", strings.Replace(minimal, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), headers())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		s := readStream(t, body)
		if s.err["type"] != "overloaded_error" || s.err["message"] != "Overloaded" || len(s.content) != 1 {
			t.Errorf("error %v after %d blocks", s.err, len(s.content))
		}
		if last := s.events[len(s.events)-1]; last.name != "error" {
			t.Errorf("stream ends with %q, want the error event", last.name)
		}
		if got := srv.Requests()[0].StreamError; got != "Overloaded" {
			t.Errorf("recorded stream error %q", got)
		}
	})
	t.Run("HTTP status", func(t *testing.T) {
		srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(*fakeupstream.Request) fakeupstream.Reply {
			return fakeupstream.Reply{Error: &fakeupstream.Error{Status: 429, Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit"}}
		}})
		resp, body := post(t, srv.URL+"/v1/messages", minimal, headers())
		if typ, msg := apiError(t, body); resp.StatusCode != 429 || typ != "rate_limit_error" || !strings.HasPrefix(msg, "Number of request tokens") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
		if rej := srv.Rejections(); len(rej) != 1 || rej[0].Status != 429 || rej[0].ErrorType != "rate_limit_error" {
			t.Errorf("rejections %+v", rej)
		}
	})
}

func TestCountTokens(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{})
	body := `{"model":"claude-sonnet-4-5","system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`
	resp, out := post(t, srv.URL+"/v1/messages/count_tokens", body, headers())
	var got struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(out, &got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if m := measure(t, json.RawMessage(body)); got.InputTokens != m.Tokens || got.InputTokens == 0 {
		t.Errorf("input_tokens %d, want %d", got.InputTokens, m.Tokens)
	}
	// The count endpoint has no max_tokens.
	resp, out = post(t, srv.URL+"/v1/messages/count_tokens", minimal, headers())
	if _, msg := apiError(t, out); resp.StatusCode != http.StatusBadRequest || msg != "max_tokens: Extra inputs are not permitted" {
		t.Errorf("%d %s", resp.StatusCode, out)
	}
}

// Scripted replies see the parsed request.
func TestRequestAccessors(t *testing.T) {
	requests := make(chan *fakeupstream.Request, 2)
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(r *fakeupstream.Request) fakeupstream.Reply {
		requests <- r
		return scripted(r)
	}})
	first := turn(t, srv, ccBody("claude-opus-5-5"), ccHeaders())
	seen := <-requests
	if seen.LastUserText() != "run echo hello" || seen.EndsWithToolResults() || !seen.ThinkingEnabled() ||
		seen.ThinkingDisplay != "omitted" || !seen.HasBeta("context-management-2025-06-27") ||
		!slices.Equal(seen.ToolNames(), []string{"Bash", "Read", "DeferredToolPlaceholder"}) ||
		seen.Messages[1].Role != "system" || seen.Messages[1].StringContent {
		t.Errorf("first request seen as %+v", seen)
	}
	turn(t, srv, ccBody("claude-opus-5-5", asAssistant(first), user(toolResult(toolUseID(t, first), "hello"))), ccHeaders())
	seen = <-requests
	if !seen.EndsWithToolResults() || len(seen.ToolResults()) != 1 || !seen.Messages[1].StringContent || seen.Path != "/v1/messages?beta=true" {
		t.Errorf("second request seen as %+v", seen)
	}
}
