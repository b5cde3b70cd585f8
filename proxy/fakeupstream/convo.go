package fakeupstream

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ConvoShape names the client whose requests a Convo builds (research/clients.md).
type ConvoShape uint8

const (
	// ClaudeCodeConvo is Claude Code's Anthropic Messages request: model, messages, a
	// system prompt of three blocks (billing header, two with cache_control), twelve tools,
	// metadata.user_id in its JSON form naming the session, max_tokens 32000, adaptive
	// thinking with display omitted, stream. The messages: the first user turn
	// (<system-reminder> block and prompt), Claude Code's mid-conversation role "system"
	// message, then per step an assistant message (empty signed thinking + a Bash tool_use)
	// and a user tool_result of about 1 KB; every tenth step a final reply (thinking + text)
	// and a new user turn as a string. The last tool_result carries the moving cache_control
	// marker.
	ClaudeCodeConvo ConvoShape = iota
	// CodexConvo is Codex CLI's Responses request: a 17 KB developer system prompt and a
	// developer skills message (both in the head), the environment context and the prompt
	// as user items, then per step a reasoning item (summary and about 1.6 KB of
	// encrypted_content), an exec_command function_call and its function_call_output in
	// Codex's report format; every tenth step reasoning, an assistant message and a new user
	// message. Then eight function tools and web_search, store false, include
	// reasoning.encrypted_content and a fixed prompt_cache_key.
	CodexConvo
	// OpenCodeConvo is OpenCode's Chat Completions request: the system prompt as the first
	// message (in the head), ten tools, the prompt, then per step an assistant message with
	// content "" and one bash tool call, and its tool message of about 1.1 KB; every tenth
	// step a final reply and a new user message.
	OpenCodeConvo
)

// Convo builds the requests of one agent conversation without a model, for the proxy's
// benchmarks, the bench and the soak. A request is Head, the Items joined by commas, then
// Tail; Add appends one step. The bytes depend only on the shape, the session id and the
// steps added, so runs that build the same conversation send the same requests.
type Convo struct {
	Shape ConvoShape
	// SID is the session id the body names: Claude Code's metadata.user_id session_id,
	// Codex's prompt_cache_key (by default the one of a recorded Codex session); OpenCode
	// names it only in a header.
	SID string
	// Head is the body up to the first conversation item, Tail the body after the last.
	Head, Tail string
	// Items are the raw conversation items: Anthropic messages, Responses input items or
	// Chat messages after the ones in Head.
	Items []string
	// Step counts the steps added.
	Step int
	rng  *rand.Rand // the Codex and OpenCode tool outputs and encrypted_content
}

// NewConvo returns the conversation's first request of shape for session sid.
func NewConvo(shape ConvoShape, sid string) *Convo {
	switch shape {
	case CodexConvo:
		c := newCodexConvo()
		if sid != "" {
			return c.WithSession(sid)
		}
		return c
	case OpenCodeConvo:
		return newOpenCodeConvo()
	}
	c := &Convo{Shape: ClaudeCodeConvo, SID: sid}
	c.Items = append(c.Items,
		`{"role":"user","content":[{"type":"text","text":"<system-reminder>\nContext.\n</system-reminder>"},{"type":"text","text":"Fix the failing tests in the parser package."}]}`,
		`{"role":"system","content":"Environment: cwd /work\nDeferred tools: WebFetch, WebSearch","output_config":{"effort":"medium"}}`)
	c.Head = `{"model":"claude-opus-5-5","messages":[`
	c.Tail = `],` + claudeCodeSystemTools() + `,` + claudeCodeMetadata(sid)
	return c
}

// WithSession returns a clone of c for session sid, named where the client names it (SID).
// A Codex clone keeps the recorded client_metadata thread id.
func (c *Convo) WithSession(sid string) *Convo {
	d := c.Clone()
	d.SID = sid
	switch c.Shape {
	case ClaudeCodeConvo:
		d.Tail = strings.Replace(c.Tail, claudeCodeMetadata(c.SID), claudeCodeMetadata(sid), 1)
	case CodexConvo:
		d.Tail = strings.Replace(c.Tail, `"prompt_cache_key":`+strconv.Quote(c.SID), `"prompt_cache_key":`+strconv.Quote(sid), 1)
	}
	return d
}

// SystemFirst moves a Claude Code request's system prompt and tools before its messages
// (the layout the bench's overhead runs send); the members and their bytes stay the same.
// Other shapes are returned unchanged.
func (c *Convo) SystemFirst() *Convo {
	if c.Shape == ClaudeCodeConvo {
		c.Head = `{"model":"claude-opus-5-5",` + claudeCodeSystemTools() + `,"messages":[`
		c.Tail = `],` + claudeCodeMetadata(c.SID)
	}
	return c
}

// ClaudeCodeBetas is the anthropic-beta header Claude Code 2.1.332 sends in -p mode
// (research/clients.md).
const ClaudeCodeBetas = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27," +
	"per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13," +
	"advanced-tool-use-2025-11-20,effort-2025-11-24"

// ClaudeCodeHeader is the header of a Claude Code 2.1.332 request for session sid, with a
// dummy API key: JSON, anthropic-version 2023-06-01, the session id header and Claude Code's
// user agent, and betas as anthropic-beta unless it is "".
func ClaudeCodeHeader(sid, betas string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Api-Key", "dummy-key")
	h.Set("Anthropic-Version", "2023-06-01")
	if betas != "" {
		h.Set("Anthropic-Beta", betas)
	}
	h.Set("X-Claude-Code-Session-Id", sid)
	h.Set("User-Agent", "claude-cli/2.1.332 (external, sdk-cli)")
	return h
}

// claudeCodeSystemTools is the system and tools members of a Claude Code request.
func claudeCodeSystemTools() string {
	var b strings.Builder
	b.WriteString(`"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.0b8;"},{"type":"text","text":"You are a Claude agent.","cache_control":{"type":"ephemeral"}},{"type":"text","text":`)
	sys, _ := json.Marshal(strings.Repeat("You are an agent working with the user. Follow the rules. ", 120))
	b.Write(sys)
	b.WriteString(`,"cache_control":{"type":"ephemeral"}}],"tools":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"Tool%d","description":%q,"input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}`, i, strings.Repeat("Runs a thing. ", 60))
	}
	b.WriteString(`]`)
	return b.String()
}

// claudeCodeMetadata is the members after a Claude Code request's messages, naming sid.
func claudeCodeMetadata(sid string) string {
	return fmt.Sprintf(`"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"%s\"}"},"max_tokens":32000,"thinking":{"type":"adaptive","display":"omitted"},"stream":true}`, sid)
}

func newCodexConvo() *Convo {
	c := &Convo{Shape: CodexConvo, SID: codexCacheKey, rng: rand.New(rand.NewSource(1))}
	msg := func(id, role, text string) string {
		t, _ := json.Marshal(text)
		return fmt.Sprintf(`{"type":"message","id":%q,"role":%q,"content":[{"type":"input_text","text":%s}]}`, id, role, t)
	}
	var tools []string
	for i := 0; i < 8; i++ {
		tools = append(tools, fmt.Sprintf(`{"type":"function","name":"tool_%d","description":%q,"strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"Shell command to execute."},"workdir":{"type":"string"}},"required":["cmd"],"additionalProperties":false}}`, i, strings.Repeat("Runs a command in a PTY. ", 30)))
	}
	tools = append(tools, `{"type":"web_search","external_web_access":false}`)
	c.Head = `{"model":"gpt-5-codex","stream":true,"input":[` +
		msg("msg_01a2277d-bf7a-71b2-a814-afbbf2e99473", "developer", SystemPrompt("You are a coding agent running in the Codex CLI, a terminal-based coding assistant.", 17000)) + "," +
		msg("msg_01a2277d-bf7a-71b2-a814-afbbf2e99474", "developer", SystemPrompt("<skills_instructions>\n## Skills", 2800)) + ","
	c.Tail = `],"tools":[` + strings.Join(tools, ",") + `],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"` + codexCacheKey + `","client_metadata":{"thread_id":"01a2277d-bece-7921-8dbe-29b4e1d3bc80","turn_id":"01a2277d-bf17-7143-9296-125df103b578"}}`
	c.Items = append(c.Items,
		msg("msg_01a2277d-bf7a-71b2-a814-afc5175b2097", "user", "<environment_context>\n  <cwd>/work/parser</cwd>\n  <shell>bash</shell>\n  <current_date>2026-11-29</current_date>\n  <timezone>Etc/UTC</timezone>\n"+strings.Repeat("  <entry access=\"read\"><path>/work/parser/.git</path></entry>\n", 12)+"</environment_context>"),
		msg("msg_01a2277d-bf8d-7a32-a36d-745171c29402", "user", "Fix the failing tests in the parser package."))
	return c
}

// codexCacheKey is the prompt_cache_key of a recorded Codex session (its thread id).
const codexCacheKey = "01a2277d-bece-7921-8dbe-29b4e1d3bc80"

func newOpenCodeConvo() *Convo {
	c := &Convo{Shape: OpenCodeConvo, rng: rand.New(rand.NewSource(1))}
	sys, _ := json.Marshal(SystemPrompt("You are opencode, an interactive CLI tool that helps users with software engineering tasks.", 9700))
	var tools []string
	for i := 0; i < 10; i++ {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"tool_%d","description":%q,"parameters":{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"}},"required":["command","description"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}}}`, i, strings.Repeat("Executes a given bash command. ", 25)))
	}
	c.Head = `{"model":"fake-model","max_tokens":8192,"messages":[{"role":"system","content":` + string(sys) + `},`
	c.Tail = `],"tools":[` + strings.Join(tools, ",") + `],"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}`
	c.Items = append(c.Items, `{"role":"user","content":"Fix the failing tests in the parser package."}`)
	return c
}

// SystemPrompt is a system prompt of about n bytes that starts with head: numbered rules.
func SystemPrompt(head string, n int) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "\n- Rule %d: keep edits minimal, run the tests, and explain what changed.", i)
	}
	return b.String()
}

// Add appends one tool step, or every tenth step a final reply and a new user turn.
func (c *Convo) Add() {
	c.Step++
	switch c.Shape {
	case CodexConvo:
		c.addCodex()
	case OpenCodeConvo:
		c.addOpenCode()
	default:
		c.addClaudeCode()
	}
}

func (c *Convo) addClaudeCode() {
	s := c.Step
	if s%10 == 0 {
		c.Items = append(c.Items,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig%d"},{"type":"text","text":"Step %d is done; the parser now handles case %d."}]}`, s, s, s),
			fmt.Sprintf(`{"role":"user","content":"Good. Now handle case %d as well."}`, s))
		return
	}
	out := strings.Repeat(fmt.Sprintf("parser_test.go:%d: ok value=%d\n", s, s*7), 30)
	outJSON, _ := json.Marshal(out)
	c.Items = append(c.Items,
		fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig%d"},{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":"go test ./parser -run Case%d","description":"Run the test"}}]}`, s, s, s),
		fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":%s,"is_error":false}]}`, s, outJSON))
}

func (c *Convo) addOpenCode() {
	s := c.Step
	if s%10 == 0 {
		c.Items = append(c.Items,
			fmt.Sprintf(`{"role":"assistant","content":%s}`, quote(fmt.Sprintf("Step %d is done; the parser now handles case %d.", s, s))),
			fmt.Sprintf(`{"role":"user","content":%s}`, quote(fmt.Sprintf("Good. Now handle case %d as well.", s))))
		return
	}
	args := quote(fmt.Sprintf(`{"command":"go test ./parser -run Case%d","description":"Run the test"}`, s))
	c.Items = append(c.Items,
		fmt.Sprintf(`{"role":"assistant","content":"","tool_calls":[{"id":"call_%04d","type":"function","function":{"name":"bash","arguments":%s}}]}`, s, args),
		fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%04d","content":%s}`, s, quote(c.output(1100))))
}

func (c *Convo) addCodex() {
	s := c.Step
	enc := make([]byte, 1200)
	c.rng.Read(enc)
	reasoning := fmt.Sprintf(`{"type":"reasoning","id":"rs_%04d","summary":[{"type":"summary_text","text":%s}],"encrypted_content":%q}`,
		s, quote(fmt.Sprintf("**Checking case %d**\n\nThe parser fails on case %d; I'll run its test and read the output before editing.", s, s)), "gAAAAA"+base64.StdEncoding.EncodeToString(enc))
	if s%10 == 0 {
		c.Items = append(c.Items, reasoning,
			fmt.Sprintf(`{"type":"message","id":"msg_%04d","role":"assistant","status":"completed","content":[{"type":"output_text","text":%s,"annotations":[]}]}`, s, quote(fmt.Sprintf("Step %d is done; the parser now handles case %d.", s, s))),
			fmt.Sprintf(`{"type":"message","id":"msg_u%04d","role":"user","content":[{"type":"input_text","text":%s}]}`, s, quote(fmt.Sprintf("Good. Now handle case %d as well.", s))))
		return
	}
	args := quote(fmt.Sprintf(`{"cmd":"go test ./parser -run Case%d","workdir":"/work/parser","yield_time_ms":10000}`, s))
	report := fmt.Sprintf("Chunk ID: %04x\nWall time: 0.4000 seconds\nProcess exited with code 0\nOriginal token count: 280\nOutput:\n%s", s, c.output(750))
	c.Items = append(c.Items, reasoning,
		fmt.Sprintf(`{"type":"function_call","id":"fc_%04d","call_id":"call_%04d","name":"exec_command","arguments":%s,"status":"completed"}`, s, s, args),
		fmt.Sprintf(`{"type":"function_call_output","id":"fco_%04d","call_id":"call_%04d","output":%s}`, s, s, quote(report)))
}

func quote(v string) string { b, _ := json.Marshal(v); return string(b) }

// output is a realistic tool output of about n bytes.
func (c *Convo) output(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "parser_test.go:%d: case %d ok value=%d\n", c.Step*100+i, c.Step, c.rng.Intn(1e6))
	}
	return b.String()
}

// Body renders the request. A Claude Code request's last tool_result carries the moving
// cache_control marker.
func (c *Convo) Body() []byte {
	n := len(c.Head) + len(c.Tail) + 64
	for _, it := range c.Items {
		n += len(it) + 1
	}
	// Grow's capacity is the allocation's size, as a benchmark that counts cap expects
	b := slices.Grow([]byte(nil), n)
	b = append(b, c.Head...)
	for i, it := range c.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if c.Shape == ClaudeCodeConvo && i == len(c.Items)-1 && strings.HasSuffix(it, `"is_error":false}]}`) {
			b = append(b, strings.TrimSuffix(it, `}]}`)...)
			b = append(b, `,"cache_control":{"type":"ephemeral"}}]}`...)
			continue
		}
		b = append(b, it...)
	}
	return append(b, c.Tail...)
}

// Size is the length of Body in bytes, without rendering it (the marker aside).
func (c *Convo) Size() int {
	n := len(c.Head) + len(c.Tail)
	for _, it := range c.Items {
		n += len(it) + 1
	}
	return n
}

// Clone returns a copy whose items can grow apart from c's (the same session; a Codex or
// OpenCode clone draws from the same random source as c).
func (c *Convo) Clone() *Convo {
	d := *c
	d.Items = append([]string(nil), c.Items...)
	return &d
}
