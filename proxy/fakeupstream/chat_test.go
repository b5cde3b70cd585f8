package fakeupstream_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// chatMinimal is the smallest valid Chat Completions request; the cases below break one rule each.
const chatMinimal = `{"model":"gpt-fake","messages":[{"role":"user","content":"hi"}]}`

// chatLoop is a tool loop as OpenCode sends it (clients.md): system, user, assistant with
// two tool_calls and content "", one tool message per call (in the other order).
func chatLoop() []any {
	return []any{
		obj{"role": "system", "content": "You are terse."},
		obj{"role": "user", "content": "run both"},
		obj{"role": "assistant", "content": "", "tool_calls": []any{
			obj{"id": "call_a", "type": "function", "function": obj{"name": "bash", "arguments": `{"command":"ls"}`}},
			obj{"id": "call_b", "type": "function", "function": obj{"name": "bash", "arguments": `{"command":"pwd"}`}},
		}},
		obj{"role": "tool", "tool_call_id": "call_b", "content": "/tmp\n"},
		obj{"role": "tool", "tool_call_id": "call_a", "content": []any{obj{"type": "text", "text": "a.txt"}}},
	}
}

func chatBody(msgs []any) obj { return obj{"model": "gpt-fake", "messages": msgs} }

// splice returns msgs with the element at i replaced by repl (none to delete it).
func splice(msgs []any, i int, repl ...any) []any {
	out := append([]any(nil), msgs[:i]...)
	out = append(out, repl...)
	return append(out, msgs[i+1:]...)
}

// Each rule of checklist item 15 and the field checks, with the exact message and param.
func TestChatRejections(t *testing.T) {
	loop := chatLoop()
	cases := []oaRejectCase{
		{name: "missing model", body: `{"messages":[{"role":"user","content":"hi"}]}`,
			message: "you must provide a model parameter", param: "<null>", code: "<null>"},
		{name: "missing messages", body: `{"model":"gpt-fake"}`,
			message: "Missing required parameter: 'messages'.", param: "messages", code: "missing_required_parameter"},
		{name: "empty messages", body: `{"model":"gpt-fake","messages":[]}`,
			message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", param: "messages", code: "empty_array"},
		{name: "unknown role", body: `{"model":"gpt-fake","messages":[{"role":"bot","content":"hi"}]}`,
			message: "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", param: "messages[0].role", code: "invalid_value"},
		{name: "tool message without tool_call_id", body: chatBody(splice(loop, 4, obj{"role": "tool", "content": "a.txt"})),
			message: "Missing required parameter: 'messages[4].tool_call_id'.", param: "messages[4].tool_call_id", code: "missing_required_parameter"},
		{name: "tool message without content", body: chatBody(splice(loop, 4, obj{"role": "tool", "tool_call_id": "call_a"})),
			message: "Missing required parameter: 'messages[4].content'.", param: "messages[4].content", code: "missing_required_parameter"},

		// §3.2 pairing
		{name: "one call unanswered, then a user message", body: chatBody(append(splice(loop, 4), obj{"role": "user", "content": "and?"})),
			message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_a",
			param:   "messages.[4].role", code: "<null>"},
		{name: "no call answered, conversation ends", body: chatBody(loop[:3]),
			message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_a, call_b",
			param:   "messages.[2].role", code: "<null>"},
		{name: "text between the calls and the results", body: chatBody(splice(loop, 3, obj{"role": "user", "content": "[pointer]"}, loop[3])),
			message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_a, call_b",
			param:   "messages.[3].role", code: "<null>"},
		{name: "tool message without tool_calls before it", body: chatBody(append(splice(loop, 2), obj{"role": "user", "content": "x"})),
			message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
			param:   "messages.[2].role", code: "<null>"},
		{name: "tool message after the run ended", body: chatBody(append(loop, obj{"role": "user", "content": "again"}, obj{"role": "tool", "tool_call_id": "call_a", "content": "x"})),
			message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
			param:   "messages.[6].role", code: "<null>"},
		{name: "tool_call_id not among the calls", body: chatBody(splice(loop, 3, obj{"role": "tool", "tool_call_id": "call_gone", "content": "x"})),
			message: "Invalid parameter: 'tool_call_id' of 'call_gone' not found in 'tool_calls' of previous message.",
			param:   "messages.[3].tool_call_id", code: "<null>"},
	}
	srv := fakeupstream.Start(t, fakeupstream.Options{})
	checkOARejects(t, srv, "/v1/chat/completions", cases)
	rej := srv.Rejections()
	if len(rej) != len(cases) {
		t.Fatalf("%d rejections recorded, want %d", len(rej), len(cases))
	}
	if r := rej[0]; r.Format != fakeupstream.FormatChat || r.Status != http.StatusBadRequest || r.ErrorType != "invalid_request_error" || r.Error != cases[0].message {
		t.Errorf("rejection recorded as %+v", r)
	}
}

// The bases of the rejection table are accepted, so each case fails on its one change.
func TestChatAccepted(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{})
	for name, body := range map[string]any{
		"minimal":           chatMinimal,
		"tool loop":         chatBody(chatLoop()),
		"loop then user":    chatBody(append(chatLoop(), obj{"role": "assistant", "content": "done"}, obj{"role": "user", "content": "thanks"})),
		"developer role":    `{"model":"gpt-fake","messages":[{"role":"developer","content":"be terse"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		"legacy function":   `{"model":"gpt-fake","messages":[{"role":"user","content":"hi"},{"role":"function","name":"f","content":"x"}]}`,
		"assistant last":    `{"model":"gpt-fake","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}]}`,
		"empty tool output": chatBody(splice(chatLoop(), 3, obj{"role": "tool", "tool_call_id": "call_b", "content": ""})),
	} {
		resp, out := post(t, srv.URL+"/v1/chat/completions", body, oaHeaders())
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d: %s", name, resp.StatusCode, out)
		}
	}
}

func chatReply(req *fakeupstream.Request) fakeupstream.Reply {
	return fakeupstream.Reply{Content: []fakeupstream.Block{
		fakeupstream.Thinking("I should list the files."),
		fakeupstream.Text("Listing."),
		fakeupstream.ToolUse("bash", map[string]any{"command": "ls -la", "description": "List files"}),
		fakeupstream.ToolUse("bash", map[string]any{"command": "pwd"}),
	}}
}

// The stream is what api-rules §3.3 describes (checklist item 16), with usage only on the
// last chunk before [DONE] when include_usage is set.
func TestChatStream(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: chatReply, OpenAIMinCacheTokens: -1})
	body := obj{"model": "gpt-fake", "stream": true, "stream_options": obj{"include_usage": true},
		"messages": []any{obj{"role": "user", "content": "list files"}}}
	resp, out := post(t, srv.URL+"/v1/chat/completions", body, oaHeaders())
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !slices.Contains(resp.TransferEncoding, "chunked") {
		t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	s := readChatStream(t, out, true)
	if !s.done || s.role != "assistant" || s.content != "Listing." || s.reasoning != "I should list the files." || s.finish != "tool_calls" {
		t.Errorf("stream: done %v role %q content %q reasoning %q finish %q", s.done, s.role, s.content, s.reasoning, s.finish)
	}
	if len(s.calls) != 2 || s.argPieces < 4 {
		t.Fatalf("tool calls %v in %d argument pieces", s.calls, s.argPieces)
	}
	f := s.calls[0]["function"].(map[string]any)
	var args map[string]any
	if err := json.Unmarshal([]byte(f["arguments"].(string)), &args); err != nil || args["command"] != "ls -la" || f["name"] != "bash" {
		t.Errorf("first call %v: %v", s.calls[0], err)
	}
	if id := s.calls[0]["id"].(string); !strings.HasPrefix(id, "call_fake_") || id == s.calls[1]["id"] {
		t.Errorf("call ids %v %v", s.calls[0]["id"], s.calls[1]["id"])
	}
	rec := srv.Requests()[0]
	if s.usage == nil {
		t.Fatal("no usage chunk")
	}
	if usageNum(s.usage, "prompt_tokens") != rec.Usage.InputTokens+rec.Usage.CacheReadInputTokens ||
		usageNum(s.usage, "completion_tokens") != rec.Usage.OutputTokens || rec.Usage.OutputTokens < 1 ||
		usageNum(s.usage, "total_tokens") != usageNum(s.usage, "prompt_tokens")+usageNum(s.usage, "completion_tokens") ||
		usageNum(s.usage, "prompt_tokens_details.cached_tokens") != 0 {
		t.Errorf("usage %v, recorded %+v", s.usage, rec.Usage)
	}
	if rec.Format != fakeupstream.FormatChat || !strings.HasPrefix(rec.MessageID, "chatcmpl-fake") || rec.Status != http.StatusOK {
		t.Errorf("recorded %+v", rec)
	}

	// Without include_usage no chunk carries usage.
	delete(body, "stream_options")
	s = readChatStream(t, oaAccept(t, srv, "/v1/chat/completions", body), false)
	if !s.done || s.usage != nil || s.finish != "tool_calls" {
		t.Errorf("stream without usage: done %v usage %v finish %q", s.done, s.usage, s.finish)
	}
}

func TestChatJSON(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: chatReply})
	var c struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role             string `json:"role"`
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	if err := json.Unmarshal(oaAccept(t, srv, "/v1/chat/completions", chatMinimal), &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if c.Object != "chat.completion" || m.Role != "assistant" || m.Content != "Listing." || m.ReasoningContent != "I should list the files." ||
		len(m.ToolCalls) != 2 || m.ToolCalls[1].Function.Arguments != `{"command":"pwd"}` || c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("completion %+v", c)
	}
	if usageNum(c.Usage, "prompt_tokens") != srv.Requests()[0].Usage.InputTokens {
		t.Errorf("usage %v", c.Usage)
	}
}

// Injected errors: Reply.Error as an HTTP error in the OpenAI envelope, StreamError as an
// error chunk without [DONE], Truncate as a stream that just stops.
func TestChatInjectedErrors(t *testing.T) {
	var reply fakeupstream.Reply
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(*fakeupstream.Request) fakeupstream.Reply { return reply }})
	stream := obj{"model": "gpt-fake", "stream": true, "stream_options": obj{"include_usage": true},
		"messages": []any{obj{"role": "user", "content": "hi"}}}

	reply = fakeupstream.Reply{Error: &fakeupstream.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Message: "slow down", Code: "rate_limit_exceeded"}}
	resp, out := post(t, srv.URL+"/v1/chat/completions", stream, oaHeaders())
	if e := openAIError(t, out); resp.StatusCode != http.StatusTooManyRequests || e != (oaErr{"slow down", "rate_limit_error", "<null>", "rate_limit_exceeded"}) {
		t.Errorf("Reply.Error: %d %+v", resp.StatusCode, e)
	}

	reply = fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("partial"), fakeupstream.Text("never")},
		StreamError: &fakeupstream.Error{Status: 500, Type: "server_error", Message: "boom"}, StreamErrorAfter: 1}
	s := readChatStream(t, oaAccept(t, srv, "/v1/chat/completions", stream), true)
	if s.done || s.err == nil || s.err["message"] != "boom" || s.err["type"] != "server_error" || s.content != "partial" || s.finish != "" {
		t.Errorf("StreamError: %+v", s)
	}
	if r := srv.Requests()[1]; r.StreamError != "boom" {
		t.Errorf("recorded stream error %q", r.StreamError)
	}

	reply = fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("cut here")}, Truncate: true}
	s = readChatStream(t, oaAccept(t, srv, "/v1/chat/completions", stream), true)
	if s.done || s.err != nil || s.usage != nil || s.finish != "" || s.content != "cut here" {
		t.Errorf("Truncate: %+v", s)
	}
}

// Reply.Truncate also cuts an Anthropic stream: the blocks, then nothing.
func TestAnthropicTruncate(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(*fakeupstream.Request) fakeupstream.Reply {
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("cut")}, Truncate: true}
	}})
	resp, out := post(t, srv.URL+"/v1/messages", obj{"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": true,
		"messages": []any{user(text("hi"))}}, headers())
	body := string(out)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "event: content_block_stop") ||
		strings.Contains(body, "message_delta") || strings.Contains(body, "message_stop") {
		t.Errorf("truncated stream %d:\n%s", resp.StatusCode, body)
	}
}
