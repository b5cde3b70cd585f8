package fakeupstream_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// minimal is the smallest valid request; the cases below break one rule each.
const minimal = `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`

func TestRejections(t *testing.T) {
	toolLoop := `"messages":[{"role":"user","content":"run it"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"hello"}]}]`
	cases := []struct {
		name   string
		body   string
		header http.Header // nil means headers()
		want   string      // the exact message
		prefix bool        // want is a prefix (the parser's detail follows)
	}{
		// api-rules §1.1, checklist §6 items 2 and 4
		{name: "invalid JSON", body: `{"model":`, want: "The request body is not valid JSON: ", prefix: true},
		{name: "lone high surrogate", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"cut \ud83d"}]}`,
			want: "The request body is not valid JSON: no low surrogate in string: line 1 column 90 (char 89)"},
		{name: "lone low surrogate", body: `{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"\ude00"}]}`,
			want: "The request body is not valid JSON: invalid high surrogate in string", prefix: true},
		{name: "missing model", body: `{"max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`, want: "model: Field required"},
		{name: "missing max_tokens", body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, want: "max_tokens: Field required"},
		{name: "missing messages", body: `{"model":"claude-sonnet-4-5","max_tokens":1024}`, want: "messages: Field required"},
		{name: "no messages", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[]}`,
			want: "messages: List should have at least 1 item after validation, not 0"},
		{name: "unknown top-level field", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"reasoning":{}}`,
			want: "reasoning: Extra inputs are not permitted"},
		{name: "beta field without its beta", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"context_management":{"edits":[]}}`,
			want: "context_management: Extra inputs are not permitted"},
		{name: "block_binding without its beta", body: `{"model":"claude-opus-5-5","max_tokens":1024,"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}},"messages":[{"role":"user","content":"hi"}]}`,
			want: "block_binding: Extra inputs are not permitted"},
		{name: "message-level output_config without its beta", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi","output_config":{"effort":"low"}}]}`,
			want: "messages.0.output_config: Extra inputs are not permitted"},
		{name: "unknown block field", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"hi","id":"x"}]}]}`,
			want: "messages.0.content.0.text.id: Extra inputs are not permitted"},
		{name: "cache_control on thinking", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s","cache_control":{"type":"ephemeral"}},{"type":"text","text":"a"}]},{"role":"user","content":"go on"}]}`,
			want: "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted"},
		{name: "tool_use id pattern", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"call.1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call.1","content":"x"}]}]}`,
			want: "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"},
		{name: "tool name pattern", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"tools":[{"name":"mcp.fake lookup","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`,
			want: "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"},
		{name: "413 over the size limit", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`,
			want: "Request exceeds the maximum allowed number of bytes."},
		{name: "missing anthropic-version", body: minimal, header: http.Header{"Content-Type": {"application/json"}},
			want: "anthropic-version: header is required"},

		// §1.4 tool pairing
		{name: "tool_use without tool_result", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}},{"type":"tool_use","id":"toolu_b","name":"Bash","input":{}}]},{"role":"user","content":"what happened?"}]}`,
			want: "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a, toolu_b. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{name: "text before tool_result", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"text","text":"[pointer]"},{"type":"tool_result","tool_use_id":"toolu_a","content":"x"}]}]}`,
			want: "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{name: "tool_result without tool_use", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_gone","content":"x"},{"type":"text","text":"go on"}]}]}`,
			want: "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_gone. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{name: "duplicate tool_use id", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}},{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"x"}]}]}`,
			want: "messages.1.content.1: `tool_use` ids must be unique"},
		{name: "server tool result without server_tool_use", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"done"}]},{"role":"user","content":"ok"}]}`,
			want: "messages.1.content.0: unexpected `tool_use_id` found in `web_search_tool_result` blocks: srvtoolu_1. Each `web_search_tool_result` block must have a corresponding `server_tool_use` block before it."},

		// §1.5 text
		{name: "empty text", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`,
			want: "messages: text content blocks must be non-empty"},
		{name: "whitespace text", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":" \n"}]}]}`,
			want: "messages: text content blocks must contain non-whitespace text"},
		{name: "empty text inside tool_result", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,` + strings.Replace(toolLoop, `"content":"hello"`, `"content":[{"type":"text","text":""}]`, 1) + `}`,
			want: "messages: text content blocks must be non-empty"},
		{name: "empty system text", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":""}],"messages":[{"role":"user","content":"hi"}]}`,
			want: "system: text content blocks must be non-empty"},

		// §1.3 sequence
		{name: "first message assistant", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"assistant","content":"hello"},{"role":"user","content":"hi"}]}`,
			want: `messages: first message must use the "user" role`},
		{name: "two user messages in a row", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"user","content":"again"}]}`,
			want: `messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row`},
		{name: "empty content", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[]},{"role":"user","content":"again"}]}`,
			want: "messages.1: all messages must have non-empty content except for the optional final assistant message"},
		{name: "empty string content", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":""}]}`,
			want: "messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{name: "prefill", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure,"}]}`,
			want: "This model does not support assistant message prefill. The conversation must end with a user message."},
		{name: "system message first", body: `{"model":"claude-opus-5-5","max_tokens":1024,"messages":[{"role":"system","content":"note"},{"role":"user","content":"hi"}]}`,
			want: `messages.0: a message with role "system" cannot be the first message`},
		{name: "system message before a user message", body: `{"model":"claude-opus-5-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"note"},{"role":"user","content":"again"}]}`,
			want: `messages.1: a message with role "system" must be the last message or be followed by an "assistant" message, found "user"`},
		{name: "system message between tool_use and tool_result", body: `{"model":"claude-opus-5-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}}]},{"role":"system","content":"note"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"x"}]}]}`,
			want: `messages.2: a message with role "system" must follow a "user" message (or an "assistant" message ending in server tool use), found "assistant"`},
		{name: "system message on a model without it", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"note"}]}`,
			want: "role 'system' is not supported on this model"},

		// §1.6 cache_control
		{name: "five breakpoints", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"c","cache_control":{"type":"ephemeral"}},{"type":"text","text":"d","cache_control":{"type":"ephemeral"}}]}],"cache_control":{"type":"ephemeral"}}`,
			want: "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{name: "breakpoint inside tool_result counts", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"tools":[{"name":"Bash","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{},"cache_control":{"type":"ephemeral"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}]}]}`,
			want: "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{name: "cache_control on empty text", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"","cache_control":{"type":"ephemeral"}}]}]}`,
			want: "messages.0.content.1.text: cache_control cannot be set for empty text blocks"},
		{name: "1h after 5m", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`,
			want: `messages.0.content.0.cache_control: a cache_control entry with ttl "1h" must appear before any entry with ttl "5m" (found one at system.0)`},
		{name: "cache_control bad ttl", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"10m"}}]}]}`,
			want: "messages.0.content.0.text.cache_control.ttl: Input should be '5m' or '1h'"},

		// §1.1 thinking parameters
		{name: "manual thinking on opus-5-5", body: `{"model":"claude-opus-5-5","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"hi"}]}`,
			want: `"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.`},
		{name: "disabled thinking on opus-5-5", body: `{"model":"claude-opus-5-5","max_tokens":4096,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
			want: `"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.`},
		{name: "adaptive thinking on sonnet-4-5", body: `{"model":"claude-sonnet-4-5","max_tokens":4096,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"hi"}]}`,
			want: "adaptive thinking is not supported on this model"},
		{name: "budget under 1024", body: `{"model":"claude-sonnet-4-5","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":512},"messages":[{"role":"user","content":"hi"}]}`,
			want: "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{name: "budget not under max_tokens", body: `{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"hi"}]}`,
			want: "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"},
		{name: "forced tool_choice with manual thinking", body: `{"model":"claude-sonnet-4-5","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`,
			want: "Thinking may not be enabled when tool_choice forces tool use."},

		// §1.7.1–1.7.2 thinking structure
		{name: "thinking not first", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"b"}]},{"role":"user","content":"go on"}]}`,
			want: "messages.1.content.0: If an assistant message contains any thinking blocks, the first block must be thinking or redacted_thinking. Found text."},
		{name: "thinking last", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]},{"role":"user","content":"go on"}]}`,
			want: "messages.1: The final block in an assistant message cannot be `thinking`."},
		{name: "open tool loop without thinking", body: `{"model":"claude-sonnet-4-5","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},` + toolLoop + `}`,
			want: "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"},

		// §1.7.3 signatures
		{name: "forged signature", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"RXJyb3JTaWduYXR1cmU="},{"type":"text","text":"a"}]},{"role":"user","content":"go on"}]}`,
			want: "messages.1.content.0: Invalid `signature` in `thinking` block"},
		{name: "empty signature", body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":""},{"type":"text","text":"a"}]},{"role":"user","content":"go on"}]}`,
			want: "messages.1.content.0: Invalid `signature` in `thinking` block"},
	}
	srv := fakeupstream.Start(t, fakeupstream.Options{MaxBodyBytes: 4096})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.header
			if h == nil {
				h = headers()
			}
			resp, out := post(t, srv.URL+"/v1/messages", c.body, h)
			wantStatus := http.StatusBadRequest
			if strings.HasPrefix(c.name, "413") {
				wantStatus = http.StatusRequestEntityTooLarge
			}
			if resp.StatusCode != wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, wantStatus, out)
			}
			_, msg := apiError(t, out)
			if c.prefix && !strings.HasPrefix(msg, c.want) || !c.prefix && msg != c.want {
				t.Errorf("message\n got: %s\nwant: %s", msg, c.want)
			}
		})
	}

	// Every case is recorded as a rejection, with the message answered.
	rej := srv.Rejections()
	if len(rej) != len(cases) {
		t.Fatalf("%d rejections recorded, want %d", len(rej), len(cases))
	}
	if rej[0].Error == "" || rej[0].Status != http.StatusBadRequest || string(rej[0].Raw) != cases[0].body {
		t.Errorf("first rejection recorded as %+v", rej[0])
	}
}

// The minimal base of the table is itself accepted, so each case fails on its one change.
func TestMinimalAccepted(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{})
	out := accept(t, srv, "/v1/messages", minimal, headers())
	var m struct {
		ID      string           `json:"id"`
		Type    string           `json:"type"`
		Content []map[string]any `json:"content"`
		Stop    string           `json:"stop_reason"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.ID != "msg_fake_0001" || len(m.Content) != 1 || m.Content[0]["text"] != "ok" || m.Stop != "end_turn" {
		t.Errorf("non-streaming reply %s", out)
	}
}

func TestLenientSequence(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Lenient: true})
	for _, body := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"assistant","content":"hello"},{"role":"user","content":"hi"}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"},{"role":"user","content":"again"}]}`,
	} {
		if resp, out := post(t, srv.URL+"/v1/messages", body, headers()); resp.StatusCode != http.StatusOK {
			t.Errorf("lenient server answered %d: %s", resp.StatusCode, out)
		}
	}
}

// With thinking off, a final assistant message may not hold thinking (§1.7.2); the rule is
// reachable only on a model that allows prefill.
func TestThinkingDisabledFinalAssistant(t *testing.T) {
	rules := fakeupstream.DefaultRules("claude-sonnet-4-5")
	rules.RejectPrefill = false
	srv := fakeupstream.Start(t, fakeupstream.Options{Models: map[string]fakeupstream.ModelRules{"claude-sonnet-4-5": rules}})
	first := turn(t, srv, obj{"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": true,
		"thinking": obj{"type": "enabled", "budget_tokens": 2048}, "messages": []any{user(text("hi"))}}, headers())
	msg := reject(t, srv, obj{"model": "claude-sonnet-4-5", "max_tokens": 4096,
		"messages": []any{user(text("hi")), asAssistant(first)}}, headers())
	want := "messages.1.content.0: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request."
	if msg != want {
		t.Errorf("got %s\nwant %s", msg, want)
	}
}

func TestContentEncoding(t *testing.T) {
	var gz, br bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(minimal))
	zw.Close()
	bw := brotli.NewWriter(&br)
	bw.Write([]byte(minimal))
	bw.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zs := enc.EncodeAll([]byte(minimal), nil)
	enc.Close()

	srv := fakeupstream.Start(t, fakeupstream.Options{})
	for _, c := range []struct {
		enc  string
		body []byte
	}{{"gzip", gz.Bytes()}, {"br", br.Bytes()}, {"zstd", zs}} {
		resp, out := post(t, srv.URL+"/v1/messages", c.body, headers("Content-Encoding: "+c.enc))
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d: %s", c.enc, resp.StatusCode, out)
		}
	}
	for _, r := range srv.Requests() {
		if string(r.Body) != minimal || bytes.Equal(r.Raw, r.Body) {
			t.Errorf("%s recorded raw %d bytes, decoded %q", r.Header.Get("Content-Encoding"), len(r.Raw), r.Body)
		}
	}

	// A body that does not match its Content-Encoding is refused, not read as JSON.
	resp, out := post(t, srv.URL+"/v1/messages", minimal, headers("Content-Encoding: zstd"))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("undecodable body: status %d: %s", resp.StatusCode, out)
	}
	if _, msg := apiError(t, out); !strings.HasPrefix(msg, "The request body could not be decoded with Content-Encoding zstd") {
		t.Errorf("undecodable body: %s", msg)
	}
}

func TestRoutesAndAuth(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{APIKey: "dummy-key"})
	resp, out := post(t, srv.URL+"/v1/complete", minimal, headers())
	if typ, _ := apiError(t, out); resp.StatusCode != http.StatusNotFound || typ != "not_found_error" {
		t.Errorf("unknown path: %d %s", resp.StatusCode, out)
	}
	resp, out = post(t, srv.URL+"/v1/messages", minimal, headers("X-Api-Key: wrong"))
	if typ, _ := apiError(t, out); resp.StatusCode != http.StatusUnauthorized || typ != "authentication_error" {
		t.Errorf("wrong key: %d %s", resp.StatusCode, out)
	}
	h := headers()
	h.Del("X-Api-Key")
	h.Set("Authorization", "Bearer dummy-key")
	if resp, out := post(t, srv.URL+"/claude-code/v1/messages?beta=true", minimal, h); resp.StatusCode != http.StatusOK {
		t.Errorf("bearer key under a path prefix: %d %s", resp.StatusCode, out)
	}
	if got := resp.Header.Get("Request-Id"); !strings.HasPrefix(got, "req_fake_") {
		t.Errorf("request-id header %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[2].Path != "/claude-code/v1/messages?beta=true" || reqs[2].Status != http.StatusOK || reqs[0].Status != http.StatusNotFound {
		t.Errorf("recorded %+v", reqs)
	}
}
