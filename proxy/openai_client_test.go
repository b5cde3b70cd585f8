package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// Client simulators for the OpenAI formats, the Chat Completions and Responses
// counterparts of ccClient (research/clients.md): each keeps the whole history the way the
// real client does, sends it through the proxy's HTTP server on every request, reads the
// streamed answer back into history items, and answers tool calls with scripted output.

// newSimRig is newRig with every upstream family pointed at one strict fake: "anthropic"
// and "openai" at its root, "codex" at its /backend-api/codex path (the Codex backend's
// base URL shape). opts.Reply nil means simReply.
func newSimRig(t testing.TB, s Settings, opts fakeupstream.Options) *rig {
	t.Helper()
	if opts.Reply == nil {
		opts.Reply = simReply
	}
	fake := fakeupstream.Start(t, opts)
	s.Upstreams = simUpstreams(fake)
	return rigAround(t, s, fake)
}

func simUpstreams(fake *fakeupstream.Server) map[string]string {
	return map[string]string{"anthropic": fake.URL, "openai": fake.URL, "codex": fake.URL + "/backend-api/codex"}
}

// The proxy routes the simulators use (proxy.go routeFor).
const (
	routeCodexResponses    = "/codex/responses"                     // family codex
	routeOpenCodeResponses = "/opencode/openai/v1/responses"        // family openai
	routeOpenCodeChat      = "/opencode/openai/v1/chat/completions" // family openai
	routeBareResponses     = "/v1/responses"                        // family openai, agent from the headers
	routeBareChat          = "/v1/chat/completions"                 // family openai, agent from the headers
)

// simReply answers like a model in an agent loop, in every format: Anthropic requests go
// to scriptedReply; Chat and Responses get a reasoning block first when the request asks
// for reasoning (Responses "reasoning", Chat "reasoning_effort"), then a tool call while
// the last user text says "use tools" and the tool outputs that end the request do not say
// FINAL, else "Done with: <last user text>". In the user text, "parallel" asks for two
// calls at once, "interleaved" for reasoning before each call (Responses: two reasoning
// items in one response), "mcp" (Codex) for a namespaced MCP call as well, "explain" for
// a message before the calls, and "tersely" for reasoning without a summary.
func simReply(req *fakeupstream.Request) fakeupstream.Reply {
	if req.Format == fakeupstream.FormatAnthropic {
		return scriptedReply(req)
	}
	n := len(req.Items)
	last := req.LastUserText()
	var blocks []fakeupstream.Block
	reasoning := req.Params["reasoning"] != nil || req.Params["reasoning_effort"] != nil
	think := func(k int) {
		switch {
		case !reasoning:
		case strings.Contains(last, "tersely"):
			// no summary: a Responses reasoning item with an empty summary, nothing in Chat
			blocks = append(blocks, fakeupstream.RedactedThinking())
		default:
			blocks = append(blocks, fakeupstream.Thinking(fmt.Sprintf("Thinking about item %d, part %d: %.40s", n, k, last)))
		}
	}
	think(0)
	wantsTools := strings.Contains(last, "use tools")
	if req.EndsWithToolResults() {
		if strings.Contains(strings.Join(simTrailingOutputs(req), "\n"), "FINAL") {
			wantsTools = false
		}
	} else if len(req.Items) == 0 || simStr(req.Items[len(req.Items)-1], "role") != "user" {
		wantsTools = false
	}
	if !wantsTools {
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text("Done with: "+last))}
	}
	call := func(k int) fakeupstream.Block {
		if slices.Contains(req.ToolNames(), "exec_command") {
			return fakeupstream.ToolUse("exec_command", map[string]any{"cmd": fmt.Sprintf("sed -n 1,200p src/file_%d_%d.go", n, k), "yield_time_ms": 1000})
		}
		return fakeupstream.ToolUse("bash", map[string]any{"command": fmt.Sprintf("cat src/file_%d_%d.go", n, k), "description": "Read the file"})
	}
	if strings.Contains(last, "explain") {
		// a message before the call in the same response (Chat: content next to tool_calls)
		blocks = append(blocks, fakeupstream.Text(fmt.Sprintf("Let me look at file %d first.", n)))
	}
	blocks = append(blocks, call(0))
	if strings.Contains(last, "parallel") {
		if strings.Contains(last, "interleaved") && req.Format == fakeupstream.FormatResponses {
			think(1)
		}
		blocks = append(blocks, call(1))
	}
	if strings.Contains(last, "mcp") && slices.Contains(req.ToolNames(), "mcp__ctx__fake_lookup") {
		blocks = append(blocks, fakeupstream.NamespacedToolUse("mcp__ctx", "fake_lookup", map[string]any{"query": fmt.Sprintf("item %d", n)}))
	}
	return fakeupstream.Reply{Content: blocks}
}

// trailingOutputs returns the texts of the tool outputs that end an OpenAI request.
func simTrailingOutputs(req *fakeupstream.Request) []string {
	var out []string
	for i := len(req.Items) - 1; i >= 0; i-- {
		it := req.Items[i]
		switch {
		case req.Format == fakeupstream.FormatChat && simStr(it, "role") == "tool":
			out = append(out, simText(it["content"]))
		case req.Format == fakeupstream.FormatResponses && strings.HasSuffix(simStr(it, "type"), "_call_output"):
			out = append(out, simText(it["output"]))
		default:
			return out
		}
	}
	return out
}

// simText is a string content, or its text parts joined by newlines.
func simText(v any) string { return strings.Join(simTexts(v), "\n") }

// simTexts returns the texts of a decoded content: a string as the one text, or the "text"
// of each part of a list; nil for anything else.
func simTexts(v any) []string {
	switch c := v.(type) {
	case string:
		return []string{c}
	case []any:
		var out []string
		for _, e := range c {
			if p, ok := e.(map[string]any); ok {
				if s, ok := p["text"].(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}
	return nil
}

func simStr(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// rawJSON marshals v or fails the test.
func simJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// simBody writes a JSON object from key/value pairs in order (the clients' field order);
// a nil value leaves the key out, a json.RawMessage goes in as it is.
func simBody(t testing.TB, kv ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(simJSON(t, kv[i].(string)))
		b.WriteByte(':')
		if raw, ok := kv[i+1].(json.RawMessage); ok {
			b.Write(raw)
		} else {
			b.Write(simJSON(t, kv[i+1]))
		}
		n++
	}
	b.WriteByte('}')
	return b.Bytes()
}

// rawList joins raw items into a JSON array.
func simList(items []json.RawMessage) json.RawMessage {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// simPrompt is a system prompt of about n bytes (fakeupstream.SystemPrompt).
func simPrompt(head string, n int) string { return fakeupstream.SystemPrompt(head, n) }

// simPost sends one request and returns the response; a non-200 is read into the returned
// string and the body closed.
func simPost(t testing.TB, client *http.Client, url string, body []byte, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Sprintf("status %d: %s", resp.StatusCode, b)
	}
	return resp, ""
}

// sseScanner reads SSE lines of any length.
func simScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	return sc
}

// ---------------------------------------------------------------------------------------
// Chat Completions: OpenCode with an OpenAI-compatible provider (clients.md, opencode run
// 03): the system prompt as the first role "system" message, the user prompt as a string,
// assistant messages with content ("" when it only calls tools) and tool_calls, one role
// "tool" message per call, stream with stream_options.include_usage, the session in
// x-session-id.

type chatSim struct {
	t     testing.TB
	url   string // proxy URL of the chat/completions endpoint
	sid   string
	model string
	http  *http.Client

	system string
	// developer, when not "", is a second pinned message after the system prompt.
	developer string
	tools     []any
	// reasoning sends reasoning_effort, so the fake answers with reasoning_content;
	// keepReasoning keeps that reasoning_content on the assistant message in the history
	// (clients that round-trip it), else it is dropped as OpenCode's provider does.
	reasoning, keepReasoning bool
	// firstTurn shapes the first user turn: 1 one string message, 2 two user messages
	// (context, then the prompt), 3 one message of two text parts.
	firstTurn int
	// thinkingBlocks keeps LiteLLM's signed thinking_blocks next to reasoning_content, as
	// clients of a Claude model behind LiteLLM do (contract: signed reasoning, Chat).
	thinkingBlocks bool
	// nullContent sends a tool-calling assistant message's content as null (OpenAI SDK
	// clients) instead of "" (OpenCode); partsOutput sends tool results as a list of text
	// parts.
	nullContent, partsOutput bool
	// extraUser, when not "", is one more user message before the next user turn's prompt.
	extraUser string
	// noSession sends no session header, so the proxy names the session by its
	// fingerprint (contract: Session id, fp-…); an empty system sends no system message.
	noSession bool

	msgs  []json.RawMessage
	sent  [][]byte
	turns int // user turns started
	// pinned and toolsRaw are the rendered system messages and tools.
	pinned   []json.RawMessage
	toolsRaw json.RawMessage
	// firstTexts are the texts of the first user turn, one list per message.
	firstTexts [][]string

	simFailure
}

func newChatSim(t testing.TB, url, sid, model string) *chatSim {
	return &chatSim{
		t: t, url: url, sid: sid, model: model, http: &http.Client{}, firstTurn: 1,
		system: simPrompt("You are opencode, an interactive CLI tool that helps users with software engineering tasks.", 9000),
		tools: []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a shell command",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}, "description": map[string]any{"type": "string"}}, "required": []any{"command", "description"}}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "read", "description": "Read a file",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"filePath": map[string]any{"type": "string"}}, "required": []any{"filePath"}}}},
		},
	}
}

// body renders the next request as OpenCode does.
func (c *chatSim) body() []byte {
	if c.pinned == nil { // the system prompt and tools never change: rendered once
		c.pinned = []json.RawMessage{}
		if c.system != "" {
			c.pinned = append(c.pinned, simJSON(c.t, map[string]any{"role": "system", "content": c.system}))
		}
		if c.developer != "" {
			c.pinned = append(c.pinned, simJSON(c.t, map[string]any{"role": "developer", "content": c.developer}))
		}
		c.toolsRaw = simJSON(c.t, c.tools)
	}
	msgs := make([]json.RawMessage, 0, len(c.msgs)+2)
	msgs = append(append(msgs, c.pinned...), c.msgs...)
	var effort any
	if c.reasoning {
		effort = "medium"
	}
	return simBody(c.t, "model", c.model, "max_tokens", 8192, "messages", simList(msgs), "tools", c.toolsRaw,
		"tool_choice", "auto", "reasoning_effort", effort, "stream", true, "stream_options", map[string]any{"include_usage": true})
}

func (c *chatSim) header() http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer dummy-key")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "opencode/1.18.33 ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.14")
	if !c.noSession {
		h.Set("X-Session-Affinity", c.sid)
		h.Set("X-Session-Id", c.sid)
	}
	return h
}

// chatReply is an assistant answer rebuilt from the chunks.
type chatReply struct {
	content, reasoning string
	calls              []chatCall
	finish             string
	usage              bool // the include_usage chunk arrived
}

type chatCall struct{ id, name, arguments string }

// send posts the next request and appends the assistant message. It returns "" or the
// failure.
func (c *chatSim) send() (chatReply, string) {
	c.t.Helper()
	body := c.body()
	c.sent = append(c.sent, body)
	resp, fail := simPost(c.t, c.http, c.url, body, c.header())
	if fail != "" {
		return chatReply{}, fail
	}
	defer resp.Body.Close()
	r := readChatSSE(c.t, resp.Body)
	msg := map[string]any{"role": "assistant", "content": r.content}
	if c.nullContent && r.content == "" && len(r.calls) > 0 {
		msg["content"] = nil
	}
	if c.keepReasoning && r.reasoning != "" {
		msg["reasoning_content"] = r.reasoning
		if c.thinkingBlocks {
			msg["thinking_blocks"] = []any{map[string]any{"type": "thinking", "thinking": r.reasoning,
				"signature": fmt.Sprintf("litellm-sig-%d-%d", len(c.sent), len(r.reasoning))}}
		}
	}
	if len(r.calls) > 0 {
		calls := make([]any, len(r.calls))
		for i, tc := range r.calls {
			calls[i] = map[string]any{"id": tc.id, "type": "function", "function": map[string]any{"name": tc.name, "arguments": tc.arguments}}
		}
		msg["tool_calls"] = calls
	}
	c.msgs = append(c.msgs, simJSON(c.t, msg))
	return r, ""
}

// readChatSSE accumulates chat.completion.chunk events (api-rules §3.3): a role chunk,
// content and reasoning_content deltas, tool_calls entries by index (id and name first,
// then argument pieces), a finish chunk, the usage chunk, [DONE].
func readChatSSE(t testing.TB, r io.Reader) chatReply {
	t.Helper()
	var out chatReply
	var content, reasoning strings.Builder
	var calls []*chatCall
	done := false
	sc := simScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Role             string  `json:"role"`
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
			Error json.RawMessage  `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("bad chat chunk %q: %v", data, err)
		}
		if ch.Error != nil {
			t.Fatalf("chat stream error: %s", data)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", ch.Object)
		}
		if ch.Usage != nil && string(*ch.Usage) != "null" {
			out.usage = true
		}
		for _, choice := range ch.Choices {
			d := choice.Delta
			if d.Content != nil {
				content.WriteString(*d.Content)
			}
			if d.ReasoningContent != nil {
				reasoning.WriteString(*d.ReasoningContent)
			}
			for _, tc := range d.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, &chatCall{})
				}
				cc := calls[tc.Index]
				if tc.ID != "" {
					cc.id = tc.ID
				}
				if tc.Function.Name != "" {
					cc.name = tc.Function.Name
				}
				cc.arguments += tc.Function.Arguments
			}
			if choice.FinishReason != nil {
				out.finish = *choice.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the chat stream: %v", err)
	}
	if !done {
		t.Fatal("chat stream ended without [DONE]")
	}
	out.content, out.reasoning = content.String(), reasoning.String()
	for _, cc := range calls {
		if cc.id == "" || cc.name == "" || !json.Valid([]byte(cc.arguments)) {
			t.Fatalf("incomplete tool call in the stream: %+v", *cc)
		}
		out.calls = append(out.calls, *cc)
	}
	return out
}

// userTurn adds a user turn and runs the agent loop until the model answers without tool
// calls, answering each call with output(step).
func (c *chatSim) userTurn(text string, output func(step int) string) {
	c.t.Helper()
	if c.turns == 0 {
		ctx := fmt.Sprintf("<context>\nWorking directory: /work/%s\nPlatform: linux\n</context>", c.sid)
		switch c.firstTurn {
		case 2:
			c.msgs = append(c.msgs, simJSON(c.t, map[string]any{"role": "user", "content": ctx}), simJSON(c.t, map[string]any{"role": "user", "content": text}))
			c.firstTexts = [][]string{{ctx}, {text}}
		case 3:
			c.msgs = append(c.msgs, simJSON(c.t, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": ctx}, map[string]any{"type": "text", "text": text}}}))
			c.firstTexts = [][]string{{ctx, text}}
		default:
			c.msgs = append(c.msgs, simJSON(c.t, map[string]any{"role": "user", "content": text}))
			c.firstTexts = [][]string{{text}}
		}
	} else {
		if c.extraUser != "" {
			c.msgs = append(c.msgs, simJSON(c.t, map[string]any{"role": "user", "content": c.extraUser}))
			c.extraUser = ""
		}
		c.msgs = append(c.msgs, simJSON(c.t, map[string]any{"role": "user", "content": text}))
	}
	c.turns++
	for step := 0; ; step++ {
		r, fail := c.send()
		if fail != "" {
			c.failTurn(c.t, fmt.Sprintf("request %d: %s", len(c.sent), fail))
			return
		}
		if !r.usage {
			c.t.Fatalf("request %d: no usage chunk although include_usage was set", len(c.sent))
		}
		if len(r.calls) == 0 {
			if r.finish != "stop" {
				c.t.Fatalf("request %d: finish_reason %q without tool calls", len(c.sent), r.finish)
			}
			return
		}
		if r.finish != "tool_calls" {
			c.t.Fatalf("request %d: finish_reason %q with tool calls", len(c.sent), r.finish)
		}
		for _, tc := range r.calls {
			var content any = output(step)
			if c.partsOutput {
				content = []any{map[string]any{"type": "text", "text": content}}
			}
			c.msgs = append(c.msgs, simJSON(c.t, map[string]any{"role": "tool", "tool_call_id": tc.id, "content": content}))
		}
	}
}

// ---------------------------------------------------------------------------------------
// Responses: Codex CLI (clients.md, codex runs 02 and 07) and OpenCode with the OpenAI
// provider (opencode run 04).
//
// Codex: no instructions; input[0] a developer message with the system prompt, input[1] a
// developer message with the skills, input[2] a user message with the environment
// context, input[3] the prompt, all with msg_ ids; the model's output items appended as
// the stream's response.output_item.done carried them (reasoning with id and
// encrypted_content, function_call with fc_ id and call_id, assistant message items), then
// one function_call_output (with an fco_ id) per call; store false, include
// reasoning.encrypted_content, prompt_cache_key = thread id, the thread id also in the
// session-id and thread-id headers; zstd bodies on the Codex backend.
//
// OpenCode: a developer message with a string content (no type, no id), user messages
// without type, reasoning items with id, encrypted_content and summary, function calls and
// assistant messages without ids (store false), outputs without ids; prompt_cache_key =
// session id, also in x-session-id and session-id.

type respStyle int

const (
	codexStyle respStyle = iota
	opencodeStyle
)

type respSim struct {
	t     testing.TB
	url   string // proxy URL of the responses endpoint
	sid   string
	model string
	style respStyle
	http  *http.Client

	system string // the developer system prompt (input[0])
	skills string // Codex input[1]; "" leaves it out
	// instructions, when not "", is sent as the instructions member.
	instructions string
	tools        []any
	reasoning    bool // sends "reasoning", so the fake answers with reasoning items
	zstd         bool // Content-Encoding: zstd, as Codex does on the ChatGPT backend
	// extraFirst adds user items before the prompt in the first turn (besides Codex's
	// environment context), for multi-item first turns.
	extraFirst int
	// partsOutput sends tool outputs as a list of input_text parts; stringReply keeps an
	// assistant message's content as a string (OpenCode style only).
	partsOutput, stringReply bool
	// nextDeveloper and nextUser, when not "", go before the next user turn's prompt: a
	// developer message (Codex sends one when the turn context changes) and one more user
	// item (an environment context update).
	nextDeveloper, nextUser string

	items []json.RawMessage
	sent  [][]byte
	turns int
	ids   int
	// pinned and toolsRaw are the rendered developer items and tools.
	pinned   []json.RawMessage
	toolsRaw json.RawMessage
	// firstTexts are the texts of the first user turn, one list per item.
	firstTexts [][]string

	simFailure
}

func newRespSim(t testing.TB, url, sid, model string, style respStyle) *respSim {
	c := &respSim{t: t, url: url, sid: sid, model: model, style: style, http: &http.Client{}, reasoning: true}
	fn := func(name, desc string, props ...string) map[string]any {
		p := map[string]any{}
		for _, k := range props {
			p[k] = map[string]any{"type": "string"}
		}
		return map[string]any{"type": "function", "name": name, "description": desc, "strict": false,
			"parameters": map[string]any{"type": "object", "properties": p, "required": []any{props[0]}, "additionalProperties": false}}
	}
	if style == codexStyle {
		c.system = simPrompt("You are a coding agent running in the Codex CLI, a terminal-based coding assistant.", 17000)
		c.skills = simPrompt("<skills_instructions>\n## Skills\nA skill is a set of local instructions to follow that is stored in a `SKILL.md` file.", 2800) + "\n</skills_instructions>"
		c.tools = []any{
			fn("exec_command", "Runs a command in a PTY, returning output or a session ID for ongoing interaction.", "cmd", "workdir"),
			fn("write_stdin", "Writes characters to an existing unified exec session.", "session_id", "chars"),
			map[string]any{"type": "namespace", "name": "mcp__ctx", "description": "MCP server ctx", "tools": []any{fn("fake_lookup", "Look a value up", "query")}},
			map[string]any{"type": "web_search", "external_web_access": false},
		}
	} else {
		c.system = simPrompt("You are OpenCode, the best coding agent on the planet.", 8600)
		c.tools = []any{
			fn("bash", "Run a shell command", "command", "description"),
			fn("read", "Read a file", "filePath"),
			fn("apply_patch", "Apply a patch", "patchText"),
		}
	}
	return c
}

func (c *respSim) id(prefix string) string {
	c.ids++
	return fmt.Sprintf("%s_%s%04d", prefix, strings.ReplaceAll(c.sid, "-", ""), c.ids)
}

// userItem is a user message item in the client's shape.
func (c *respSim) userItem(text string) json.RawMessage {
	part := []any{map[string]any{"type": "input_text", "text": text}}
	if c.style == codexStyle {
		return simBody(c.t, "type", "message", "id", c.id("msg"), "role", "user", "content", part)
	}
	return simBody(c.t, "role", "user", "content", part)
}

// body renders the next request as the client does.
func (c *respSim) body() []byte {
	if c.pinned == nil { // the system prompt and tools never change: rendered once
		if c.style == codexStyle {
			c.pinned = []json.RawMessage{simBody(c.t, "type", "message", "id", "msg_system_prompt", "role", "developer",
				"content", []any{map[string]any{"type": "input_text", "text": c.system}})}
			if c.skills != "" {
				c.pinned = append(c.pinned, simBody(c.t, "type", "message", "id", "msg_skills", "role", "developer",
					"content", []any{map[string]any{"type": "input_text", "text": c.skills}}))
			}
		} else {
			c.pinned = []json.RawMessage{simBody(c.t, "role", "developer", "content", c.system)}
		}
		c.toolsRaw = simJSON(c.t, c.tools)
	}
	input := make([]json.RawMessage, 0, len(c.items)+2)
	input = append(append(input, c.pinned...), c.items...)
	var reasoning any
	if c.style == codexStyle {
		if c.reasoning {
			reasoning = map[string]any{"summary": "auto"}
		}
		var instr any
		if c.instructions != "" {
			instr = c.instructions
		}
		meta := map[string]any{"thread_id": c.sid, "session_id": c.sid, "turn_id": fmt.Sprintf("turn-%d", c.turns),
			"x-codex-window-id": c.sid + ":0"}
		return simBody(c.t, "model", c.model, "instructions", instr, "stream", true, "input", simList(input), "tools", c.toolsRaw,
			"tool_choice", "auto", "parallel_tool_calls", true, "reasoning", reasoning, "store", false,
			"include", []any{"reasoning.encrypted_content"}, "prompt_cache_key", c.sid, "client_metadata", meta)
	}
	if c.reasoning {
		reasoning = map[string]any{"effort": "medium", "summary": "auto"}
	}
	var instr any
	if c.instructions != "" {
		instr = c.instructions
	}
	return simBody(c.t, "model", c.model, "instructions", instr, "input", simList(input), "store", false,
		"include", []any{"reasoning.encrypted_content"}, "prompt_cache_key", c.sid, "reasoning", reasoning,
		"tools", c.toolsRaw, "tool_choice", "auto", "stream", true)
}

func (c *respSim) header() http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer dummy-key")
	h.Set("Content-Type", "application/json")
	if c.style == codexStyle {
		h.Set("Accept", "text/event-stream")
		h.Set("Originator", "codex_exec")
		h.Set("User-Agent", "codex_exec/0.171.0 (Debian 12.0.0; x86_64) dumb (codex_exec; 0.171.0)")
		h.Set("Session-Id", c.sid)
		h.Set("Thread-Id", c.sid)
		h.Set("X-Client-Request-Id", c.sid)
		h.Set("X-Codex-Window-Id", c.sid+":0")
		h.Set("X-Codex-Beta-Features", "remote_compaction_v2")
		if c.zstd {
			h.Set("Content-Encoding", "zstd")
		}
		return h
	}
	h.Set("User-Agent", "opencode/1.18.33 (linux 6.18.44; x64) ai-sdk/provider-utils/4.0.40 runtime/bun/1.3.14")
	h.Set("Originator", "opencode")
	h.Set("Session-Id", c.sid)
	h.Set("X-Session-Affinity", c.sid)
	h.Set("X-Session-Id", c.sid)
	return h
}

// respOutput is one output item of a response: its bytes as output_item.done carried them
// and what the client reads from it.
type respOutput struct {
	raw                 json.RawMessage
	typ, id, callID     string
	name, namespace     string
	text, summary, args string
	encrypted           string
	hasEncrypted        bool
}

// send posts the next request and appends the output items to the history. It returns
// the items and "" or the failure.
func (c *respSim) send() ([]respOutput, string) {
	c.t.Helper()
	body := c.body()
	c.sent = append(c.sent, body)
	wire := body
	if c.zstd && c.style == codexStyle {
		wire = zstdEncoder.EncodeAll(body, nil)
	}
	resp, fail := simPost(c.t, c.http, c.url, wire, c.header())
	if fail != "" {
		return nil, fail
	}
	defer resp.Body.Close()
	out := readResponsesSSE(c.t, resp.Body)
	for _, o := range out {
		c.items = append(c.items, c.keep(o))
	}
	return out, ""
}

// keep is an output item as the client puts it in its history: Codex keeps the item as
// it came; OpenCode (store false) drops the ids of calls and messages and the status.
func (c *respSim) keep(o respOutput) json.RawMessage {
	if c.style == codexStyle {
		return o.raw
	}
	switch o.typ {
	case "reasoning":
		var summary []any
		if o.summary != "" {
			summary = []any{map[string]any{"type": "summary_text", "text": o.summary}}
		} else {
			summary = []any{}
		}
		var enc any
		if o.hasEncrypted {
			enc = o.encrypted
		}
		return simBody(c.t, "type", "reasoning", "id", o.id, "encrypted_content", enc, "summary", summary)
	case "function_call":
		name := o.name
		if o.namespace != "" {
			name = o.namespace + "__" + o.name // OpenCode offers MCP tools flat
		}
		return simBody(c.t, "type", "function_call", "call_id", o.callID, "name", name, "arguments", o.args)
	case "message":
		if c.stringReply {
			return simBody(c.t, "role", "assistant", "content", o.text)
		}
		return simBody(c.t, "role", "assistant", "content", []any{map[string]any{"type": "output_text", "text": o.text}})
	}
	return o.raw
}

// readResponsesSSE reads a Responses event stream (api-rules §4.3) the way Codex does:
// by each data's type. It rebuilds every output item from output_item.added and the
// deltas, checks the rebuilt text, summary and arguments against output_item.done, and
// returns the done items in output order. The stream must end with response.completed.
func readResponsesSSE(t testing.TB, r io.Reader) []respOutput {
	t.Helper()
	type building struct {
		added               json.RawMessage
		text, summary, args strings.Builder
		done                bool
	}
	var items []*building
	var out []respOutput
	completed := false
	event := ""
	sc := simScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type        string          `json:"type"`
			OutputIndex int             `json:"output_index"`
			Item        json.RawMessage `json:"item"`
			Delta       string          `json:"delta"`
			Response    struct {
				Status string            `json:"status"`
				Output []json.RawMessage `json:"output"`
				Usage  json.RawMessage   `json:"usage"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("bad Responses event %q: %v", data, err)
		}
		if event != "" && event != ev.Type {
			t.Fatalf("event line %q carries data of type %q", event, ev.Type)
		}
		at := func() *building {
			if ev.OutputIndex < 0 || ev.OutputIndex >= len(items) {
				t.Fatalf("%s for output_index %d before its output_item.added", ev.Type, ev.OutputIndex)
			}
			return items[ev.OutputIndex]
		}
		switch ev.Type {
		case "response.created", "response.in_progress":
			if ev.Response.Status != "in_progress" {
				t.Fatalf("%s with status %q", ev.Type, ev.Response.Status)
			}
		case "response.output_item.added":
			if ev.OutputIndex != len(items) {
				t.Fatalf("output_item.added for index %d, want %d", ev.OutputIndex, len(items))
			}
			items = append(items, &building{added: ev.Item})
		case "response.output_text.delta":
			at().text.WriteString(ev.Delta)
		case "response.reasoning_summary_text.delta":
			at().summary.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			at().args.WriteString(ev.Delta)
		case "response.output_item.done":
			b := at()
			if b.done {
				t.Fatalf("output item %d done twice", ev.OutputIndex)
			}
			b.done = true
			o := parseRespOutput(t, ev.Item)
			switch {
			case o.typ == "message" && o.text != b.text.String():
				t.Fatalf("message text %q, deltas %q", o.text, b.text.String())
			case o.typ == "reasoning" && o.summary != b.summary.String():
				t.Fatalf("reasoning summary %q, deltas %q", o.summary, b.summary.String())
			case o.typ == "function_call" && o.args != b.args.String():
				t.Fatalf("arguments %q, deltas %q", o.args, b.args.String())
			}
			if added := parseRespOutput(t, b.added); added.typ != o.typ || added.id != o.id {
				t.Fatalf("output item %d added as %s %s, done as %s %s", ev.OutputIndex, added.typ, added.id, o.typ, o.id)
			}
			out = append(out, o)
		case "response.completed":
			completed = true
			if len(ev.Response.Output) != len(out) {
				t.Fatalf("response.completed lists %d items, the stream %d", len(ev.Response.Output), len(out))
			}
			if len(ev.Response.Usage) == 0 || string(ev.Response.Usage) == "null" {
				t.Fatal("response.completed without usage")
			}
		case "response.failed", "error":
			t.Fatalf("Responses stream failed: %s", data)
		}
		event = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the Responses stream: %v", err)
	}
	if !completed {
		t.Fatal("stream closed before response.completed")
	}
	return out
}

func parseRespOutput(t testing.TB, raw json.RawMessage) respOutput {
	t.Helper()
	var it struct {
		Type      string  `json:"type"`
		ID        string  `json:"id"`
		CallID    string  `json:"call_id"`
		Name      string  `json:"name"`
		Namespace string  `json:"namespace"`
		Arguments string  `json:"arguments"`
		Encrypted *string `json:"encrypted_content"`
		Summary   []struct {
			Text string `json:"text"`
		} `json:"summary"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &it); err != nil {
		t.Fatalf("output item %s: %v", raw, err)
	}
	o := respOutput{raw: raw, typ: it.Type, id: it.ID, callID: it.CallID, name: it.Name, namespace: it.Namespace, args: it.Arguments}
	if it.Encrypted != nil {
		o.encrypted, o.hasEncrypted = *it.Encrypted, true
	}
	var sum []string
	for _, s := range it.Summary {
		sum = append(sum, s.Text)
	}
	o.summary = strings.Join(sum, "")
	for _, p := range it.Content {
		if p.Type == "output_text" {
			o.text += p.Text
		}
	}
	return o
}

// callOutput is a tool output item in the client's shape: Codex wraps the command output
// in its exec_command report and gives the item an fco_ id.
func (c *respSim) callOutput(callID, out string) json.RawMessage {
	if c.style == codexStyle {
		report := fmt.Sprintf("Chunk ID: %s\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: %d\nOutput:\n%s",
			callID[len(callID)-4:], len(out)/4, out)
		return simBody(c.t, "type", "function_call_output", "id", c.id("fco"), "call_id", callID, "output", report)
	}
	if c.partsOutput {
		return simBody(c.t, "type", "function_call_output", "call_id", callID, "output", []any{map[string]any{"type": "input_text", "text": out}})
	}
	return simBody(c.t, "type", "function_call_output", "call_id", callID, "output", out)
}

// userTurn adds a user turn and runs the agent loop until a response has no function
// calls, answering each call with output(step).
func (c *respSim) userTurn(text string, output func(step int) string) {
	c.t.Helper()
	if c.turns == 0 {
		c.firstTexts = nil
		if c.style == codexStyle {
			env := fmt.Sprintf("<environment_context>\n  <cwd>/work/%s</cwd>\n  <shell>bash</shell>\n  <current_date>2026-11-29</current_date>\n</environment_context>", c.sid)
			c.items = append(c.items, c.userItem(env))
			c.firstTexts = append(c.firstTexts, []string{env})
		}
		for k := 0; k < c.extraFirst; k++ {
			extra := fmt.Sprintf("Attached file notes %d of %s:\n%s", k, c.sid, strings.Repeat("note line\n", 5+k))
			c.items = append(c.items, c.userItem(extra))
			c.firstTexts = append(c.firstTexts, []string{extra})
		}
		c.firstTexts = append(c.firstTexts, []string{text})
	} else {
		if c.nextDeveloper != "" {
			dev := []any{map[string]any{"type": "input_text", "text": c.nextDeveloper}}
			if c.style == codexStyle {
				c.items = append(c.items, simBody(c.t, "type", "message", "id", c.id("msg"), "role", "developer", "content", dev))
			} else {
				c.items = append(c.items, simBody(c.t, "role", "developer", "content", dev))
			}
			c.nextDeveloper = ""
		}
		if c.nextUser != "" {
			c.items = append(c.items, c.userItem(c.nextUser))
			c.nextUser = ""
		}
	}
	c.items = append(c.items, c.userItem(text))
	c.turns++
	for step := 0; ; step++ {
		out, fail := c.send()
		if fail != "" {
			c.failTurn(c.t, fmt.Sprintf("request %d: %s", len(c.sent), fail))
			return
		}
		calls := 0
		for _, o := range out {
			if o.typ == "function_call" {
				c.items = append(c.items, c.callOutput(o.callID, output(step)))
				calls++
			}
		}
		if calls == 0 {
			return
		}
	}
}

// ---------------------------------------------------------------------------------------

// TestSimulatorsTrimThroughTheStrictFake runs each simulator for a few long turns at a low
// threshold: every request reaches the fake and is accepted, and the session trims.
func TestSimulatorsTrimThroughTheStrictFake(t *testing.T) {
	type run func(r *rig, sid string) (sent int)
	cases := map[string]run{
		"chat": func(r *rig, sid string) int {
			c := newChatSim(t, r.srv.URL+routeOpenCodeChat, sid, "gpt-4.1")
			c.reasoning, c.keepReasoning = true, true
			for turn := 0; turn < 5; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools, parallel", turn), output(40, 3))
			}
			return len(c.sent)
		},
		"codex": func(r *rig, sid string) int {
			c := newRespSim(t, r.srv.URL+routeCodexResponses, sid, "gpt-5-codex", codexStyle)
			c.zstd = true
			for turn := 0; turn < 5; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools, parallel interleaved mcp", turn), output(40, 3))
			}
			return len(c.sent)
		},
		"opencode-responses": func(r *rig, sid string) int {
			c := newRespSim(t, r.srv.URL+routeOpenCodeResponses, sid, "gpt-5.3-codex", opencodeStyle)
			for turn := 0; turn < 5; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools, parallel", turn), output(40, 3))
			}
			return len(c.sent)
		},
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			r := newSimRig(t, testSettings(8000), fakeupstream.Options{})
			sid := "sim-" + name
			sent := fn(r, sid)
			reqs := r.accepted(t)
			if len(reqs) != sent {
				t.Fatalf("fake saw %d requests, client sent %d", len(reqs), sent)
			}
			pointer := "[smarter-compact: continuing session " + sid + ";"
			if !bytes.Contains(reqs[len(reqs)-1].Body, []byte(pointer)) {
				t.Fatal("the last request carries no pointer: the session never trimmed")
			}
			if strings.Contains(r.logs.String(), "fail-open") {
				t.Fatalf("fail-open: %s", r.logs.String())
			}
		})
	}
}

// TestSimulatorsShareOneProxy runs Claude Code, OpenCode (Chat and Responses) and two Codex
// sessions at once through one proxy and one fake, as a proxy serving several agents does:
// each session trims on its own, nothing is rejected, and no session's pointer or rows
// reach another.
func TestSimulatorsShareOneProxy(t *testing.T) {
	r := newSimRig(t, testSettings(6000), fakeupstream.Options{})
	sids := []string{"share-cc", "share-chat", "ses_shareopencode", "019a0000-0000-7000-8000-00000000000a", "019a0000-0000-7000-8000-00000000000b"}
	t.Run("group", func(t *testing.T) {
		t.Run("claude-code", func(t *testing.T) {
			t.Parallel()
			c := r.client(t, sids[0], "claude-mythos-5-1")
			for turn := 0; turn < 5; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools", turn), output(40, 3))
			}
		})
		t.Run("chat", func(t *testing.T) {
			t.Parallel()
			c := newChatSim(t, r.srv.URL+routeBareChat, sids[1], "gpt-4.1")
			for turn := 0; turn < 5; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools", turn), output(40, 3))
			}
		})
		t.Run("opencode-responses", func(t *testing.T) {
			t.Parallel()
			c := newRespSim(t, r.srv.URL+routeOpenCodeResponses, sids[2], "gpt-5.3-codex", opencodeStyle)
			for turn := 0; turn < 5; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools", turn), output(40, 3))
			}
		})
		for _, sid := range sids[3:] {
			t.Run("codex-"+sid[len(sid)-1:], func(t *testing.T) {
				t.Parallel()
				// the same system prompt and first turn in both: only the thread id differs
				c := newRespSim(t, r.srv.URL+routeCodexResponses, sid, "gpt-5-codex", codexStyle)
				c.zstd = true
				for turn := 0; turn < 5; turn++ {
					c.userTurn(fmt.Sprintf("turn %d: use tools, parallel", turn), output(40, 3))
				}
			})
		}
	})
	reqs := r.accepted(t)
	last := map[string][]byte{}
	for _, rec := range reqs {
		var sid string // every simulator names its session in a header
		for _, h := range []string{"X-Claude-Code-Session-Id", "X-Session-Id", "Session-Id"} {
			if v := rec.Header.Get(h); v != "" {
				sid = v
				break
			}
		}
		if sid == "" {
			t.Fatalf("request %s names no session", rec.RequestID)
		}
		last[sid] = rec.Body
		for _, other := range sids {
			if other != sid && bytes.Contains(rec.Body, []byte("continuing session "+other+";")) {
				t.Fatalf("a request of %s carries the pointer of %s", sid, other)
			}
		}
	}
	for _, sid := range sids {
		if !bytes.Contains(last[sid], []byte("[smarter-compact: continuing session "+sid+";")) {
			t.Errorf("session %s: the last request carries no pointer", sid)
		}
		db := sessionDB(t, r, sid)
		var threads, rows int
		must(t, db.QueryRow(`SELECT count(DISTINCT thread), count(*) FROM messages`).Scan(&threads, &rows))
		if threads != 1 || rows == 0 {
			t.Errorf("session %s: %d rows in %d threads", sid, rows, threads)
		}
	}
	if strings.Contains(r.logs.String(), "fail-open") {
		t.Fatalf("fail-open: %s", r.logs.String())
	}
}
