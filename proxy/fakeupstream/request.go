package fakeupstream

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// Request is an accepted POST …/v1/messages as a Reply function sees it. Its maps and slices
// belong to the Server's record of the request: read them, do not change them.
type Request struct {
	Method string
	Path   string // path and query, e.g. "/v1/messages?beta=true"
	Header http.Header
	Raw    []byte // body as received
	Body   []byte // body after Content-Encoding decoding

	Model  string
	Stream bool
	Params map[string]any // the decoded body; numbers are json.Number
	Betas  []string       // anthropic-beta values

	System   []map[string]any // system text blocks; a string system is one text block
	Tools    []map[string]any
	Messages []Message

	ThinkingType    string // "enabled", "adaptive", "disabled", or "" without thinking
	ThinkingDisplay string // thinking.display as sent ("omitted", "summarized", …)
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

// LastUserText returns the last text block of the last user message that has one, or "".
func (r *Request) LastUserText() string {
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

// EndsWithToolResults reports whether the last message (a trailing role "system" message
// aside) is a user message holding only tool_result blocks: the open tool loop of api-rules
// §1.7.2.
func (r *Request) EndsWithToolResults() bool {
	last := len(r.Messages) - 1
	if last >= 0 && r.Messages[last].Role == "system" {
		last--
	}
	return last >= 0 && onlyToolResults(msg{role: r.Messages[last].Role, blocks: r.Messages[last].Content})
}

// ToolResults returns the tool_result blocks of the last user message.
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

// ToolNames returns the names of the tools offered, in order.
func (r *Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, str(t, "name"))
	}
	return out
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
