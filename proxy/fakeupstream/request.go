package fakeupstream

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// The request formats (Request.Format, Recorded.Format).
const (
	FormatAnthropic = "anthropic" // POST …/v1/messages
	FormatChat      = "chat"      // POST …/chat/completions
	FormatResponses = "responses" // POST …/responses
)

// Request is an accepted request as a Reply function sees it: POST …/v1/messages, …/chat/
// completions or …/responses. Its maps and slices belong to the Server's record of the
// request: read them, do not change them.
type Request struct {
	Format string // FormatAnthropic, FormatChat or FormatResponses
	Method string
	Path   string // path and query, e.g. "/v1/messages?beta=true"
	Header http.Header
	Raw    []byte // body as received
	Body   []byte // body after Content-Encoding decoding

	Model  string
	Stream bool
	Params map[string]any // the decoded body; numbers are json.Number
	Betas  []string       // anthropic-beta values

	System   []map[string]any // Anthropic: system text blocks; a string system is one text block
	Tools    []map[string]any // the tools list as sent, every format
	Messages []Message        // Anthropic only

	// Items is the conversation of the OpenAI formats. Chat: the messages list. Responses:
	// the input items as sent (not those of previous_response_id); a string input is one
	// {"type":"message","role":"user","content":[{"type":"input_text","text":…}]}.
	Items []map[string]any
	// Instructions is the Responses `instructions`, "" when absent.
	Instructions string

	ThinkingType    string // Anthropic: "enabled", "adaptive", "disabled", or "" without thinking
	ThinkingDisplay string // Anthropic: thinking.display as sent ("omitted", "summarized", …)
}

// Message is one entry of messages.
type Message struct {
	Role          string
	Content       []map[string]any // content blocks; a string content is one text block
	StringContent bool             // content was sent as a string
}

// ThinkingEnabled reports whether thinking is "enabled" or "adaptive".
func (r *Request) ThinkingEnabled() bool {
	return r.ThinkingType == "enabled" || r.ThinkingType == "adaptive"
}

// HasBeta reports whether the anthropic-beta header carries name.
func (r *Request) HasBeta(name string) bool { return slices.Contains(r.Betas, name) }

// LastUserText returns the text of the last user message that has text, or "": its last
// text block (Anthropic), its string content or last text part (Chat), its string content
// or last input_text part (Responses message items).
func (r *Request) LastUserText() string {
	switch r.Format {
	case FormatChat, FormatResponses:
		part := "text"
		if r.Format == FormatResponses {
			part = "input_text"
		}
		for i := len(r.Items) - 1; i >= 0; i-- {
			it := r.Items[i]
			if str(it, "role") != "user" || (r.Format == FormatResponses && itemType(it) != "message") {
				continue
			}
			if t := lastPartText(it["content"], part); t != "" {
				return t
			}
		}
		return ""
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		for j := len(m.Content) - 1; j >= 0; j-- {
			if str(m.Content[j], "type") == "text" {
				return str(m.Content[j], "text")
			}
		}
	}
	return ""
}

// lastPartText returns a string content, or the text of the last part of type typ.
func lastPartText(content any, typ string) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		for j := len(c) - 1; j >= 0; j-- {
			if p := obj(c[j]); str(p, "type") == typ {
				return str(p, "text")
			}
		}
	}
	return ""
}

// EndsWithToolResults reports whether the request ends in tool results: Anthropic, the last
// message (a trailing role "system" message aside) is a user message holding only
// tool_result blocks (the open tool loop of api-rules §1.7.2); Chat, the last message has
// role "tool"; Responses, the last input item's type ends in "_call_output".
func (r *Request) EndsWithToolResults() bool {
	switch r.Format {
	case FormatChat:
		return len(r.Items) > 0 && str(r.Items[len(r.Items)-1], "role") == "tool"
	case FormatResponses:
		return len(r.Items) > 0 && strings.HasSuffix(itemType(r.Items[len(r.Items)-1]), "_call_output")
	}
	last := len(r.Messages) - 1
	if last >= 0 && r.Messages[last].Role == "system" {
		last--
	}
	return last >= 0 && onlyToolResults(msg{role: r.Messages[last].Role, blocks: r.Messages[last].Content})
}

// ToolResults returns the tool_result blocks of the last user message (Anthropic only; see
// ToolResultTexts for every format).
func (r *Request) ToolResults() []map[string]any {
	last := len(r.Messages) - 1
	for last >= 0 && r.Messages[last].Role != "user" {
		last--
	}
	if last < 0 {
		return nil
	}
	var out []map[string]any
	for _, b := range r.Messages[last].Content {
		if str(b, "type") == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// ToolNames returns the names of the tools offered, in order. Anthropic: tools[].name.
// Chat: tools[].function.name. Responses: tools[].name of function and custom tools, and
// each tool of a {"type":"namespace","name":NS,"tools":[…]} as NS+"__"+name (Codex sends MCP
// tools as namespace "mcp__ctx", so its tool "fake_lookup" is "mcp__ctx__fake_lookup").
// Chat and Responses skip tools without a name (web_search, …).
func (r *Request) ToolNames() []string {
	var out []string
	add := func(name string) {
		if name != "" {
			out = append(out, name)
		}
	}
	for _, t := range r.Tools {
		switch r.Format {
		case FormatChat:
			add(str(obj(t["function"]), "name"))
		case FormatResponses:
			if str(t, "type") != "namespace" {
				add(str(t, "name"))
				continue
			}
			inner, _ := t["tools"].([]any)
			for _, e := range inner {
				if n := str(obj(e), "name"); n != "" {
					add(str(t, "name") + "__" + n)
				}
			}
		default:
			out = append(out, str(t, "name"))
		}
	}
	return out
}

// ToolResultTexts returns the text of every tool result of the conversation, in order:
// Anthropic tool_result content (a string, or its text blocks joined by "\n"); Chat role
// "tool" message content (a string, or its text parts joined by "\n"); Responses
// *_call_output output (a string, or the text of its parts joined by "\n").
func (r *Request) ToolResultTexts() []string {
	var out []string
	switch r.Format {
	case FormatChat:
		for _, m := range r.Items {
			if str(m, "role") == "tool" {
				out = append(out, joinedText(m["content"]))
			}
		}
	case FormatResponses:
		for _, it := range r.Items {
			if strings.HasSuffix(itemType(it), "_call_output") {
				out = append(out, joinedText(it["output"]))
			}
		}
	default:
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if str(b, "type") == "tool_result" {
					out = append(out, joinedText(b["content"]))
				}
			}
		}
	}
	return out
}

// joinedText returns a string content, or the text of its parts joined by "\n" (parts of
// type text, input_text or output_text).
func joinedText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var texts []string
		for _, e := range c {
			switch p := obj(e); str(p, "type") {
			case "text", "input_text", "output_text":
				texts = append(texts, str(p, "text"))
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// itemType is a Responses input item's type; an item with a role and no type is a message
// (the SDK's EasyInputMessage, as OpenCode sends them).
func itemType(it map[string]any) string {
	if t := str(it, "type"); t != "" {
		return t
	}
	if _, ok := it["role"]; ok {
		return "message"
	}
	return ""
}

// msg is a message after parsing: content normalized to blocks.
type msg struct {
	role   string
	blocks []map[string]any
	str    bool
}

func onlyToolResults(m msg) bool {
	if m.role != "user" || len(m.blocks) == 0 {
		return false
	}
	for _, b := range m.blocks {
		if str(b, "type") != "tool_result" {
			return false
		}
	}
	return true
}

func isThinking(b map[string]any) bool {
	t := str(b, "type")
	return t == "thinking" || t == "redacted_thinking"
}

// str returns m[key] if it is a string.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// num returns m[key] as an integer if it is one.
func num(m map[string]any, key string) (int64, bool) {
	n, ok := m[key].(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// objects returns the objects among the elements of the JSON list v, in order, skipping the
// other elements; nil when v is not a list or holds no object.
func objects(v any) []map[string]any {
	l, _ := v.([]any)
	var out []map[string]any
	for _, e := range l {
		if m := obj(e); m != nil {
			out = append(out, m)
		}
	}
	return out
}
