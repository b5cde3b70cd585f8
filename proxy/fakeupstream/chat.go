package fakeupstream

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// OpenAI Chat Completions, POST …/chat/completions (api-rules §3; checklist §6 items 15
// and 16). The checks: model and a non-empty messages list, message roles, tool messages
// with content and tool_call_id, and the tool_calls pairing of §3.2, all 400
// invalid_request_error in the OpenAI envelope. The answer is one chat.completion, or a
// stream of chat.completion.chunk objects ending in `data: [DONE]`.

// chatRoles are the message roles of §3.1.
var chatRoles = set("developer", "system", "user", "assistant", "tool", "function")

// chatParsed is a Chat Completions body that passed parseChat.
type chatParsed struct {
	doc          map[string]any
	model        string
	stream       bool
	includeUsage bool // stream_options.include_usage
	msgs         []map[string]any
	tools        []map[string]any
	cacheKey     string // prompt_cache_key
}

// jsonType names a decoded JSON value's type the way the API's type errors do.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return "a number"
	}
}

// missingParam is the API's error for an absent required field (not in api-rules).
func missingParam(param string) *Error {
	return oaInvalid(param, "missing_required_parameter", "Missing required parameter: '%s'.", param)
}

// wrongType is the API's error for a field of the wrong type (not in api-rules).
func wrongType(param, want string, got any) *Error {
	return oaInvalid(param, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", param, want, jsonType(got))
}

// optBool reads the optional boolean m[key] (absent or null is def); param names it in errors.
func optBool(m map[string]any, key, param string, def bool) (bool, *Error) {
	switch v := m[key].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	default:
		return false, wrongType(param, "a boolean", v)
	}
}

// objectList reads an optional list of objects (absent or null is empty).
func objectList(doc map[string]any, key string) ([]map[string]any, *Error) {
	v, ok := doc[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, wrongType(key, "an array", v)
	}
	out := make([]map[string]any, 0, len(list))
	for i, e := range list {
		m := obj(e)
		if m == nil {
			return nil, wrongType(fmt.Sprintf("%s[%d]", key, i), "an object", e)
		}
		out = append(out, m)
	}
	return out, nil
}

// parseChat checks the fields the fake reads: model, messages (roles; a tool message's
// tool_call_id and content), stream, stream_options, tools and prompt_cache_key. The texts
// follow the API's (not in api-rules).
func parseChat(doc map[string]any) (*chatParsed, *Error) {
	p := &chatParsed{doc: doc, model: str(doc, "model")}
	if p.model == "" {
		return nil, oaInvalid("", "", "you must provide a model parameter")
	}
	v, ok := doc["messages"]
	if !ok || v == nil {
		return nil, missingParam("messages")
	}
	list, ok := v.([]any)
	if !ok {
		return nil, wrongType("messages", "an array", v)
	}
	if len(list) == 0 {
		return nil, oaInvalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, e := range list {
		m := obj(e)
		if m == nil {
			return nil, wrongType(fmt.Sprintf("messages[%d]", i), "an object", e)
		}
		role, ok := m["role"]
		if !ok || role == nil {
			return nil, missingParam(fmt.Sprintf("messages[%d].role", i))
		}
		if r, _ := role.(string); !chatRoles[r] {
			return nil, oaInvalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				"Invalid value: '%v'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", role)
		}
		if str(m, "role") == "tool" {
			if str(m, "tool_call_id") == "" {
				return nil, missingParam(fmt.Sprintf("messages[%d].tool_call_id", i))
			}
			if m["content"] == nil {
				return nil, missingParam(fmt.Sprintf("messages[%d].content", i))
			}
		}
		p.msgs = append(p.msgs, m)
	}
	var err *Error
	if p.stream, err = optBool(doc, "stream", "stream", false); err != nil {
		return nil, err
	}
	if so, ok := doc["stream_options"]; ok && so != nil {
		m := obj(so)
		if m == nil {
			return nil, wrongType("stream_options", "an object", so)
		}
		if p.includeUsage, err = optBool(m, "include_usage", "stream_options.include_usage", false); err != nil {
			return nil, err
		}
	}
	if p.tools, err = objectList(doc, "tools"); err != nil {
		return nil, err
	}
	p.cacheKey = str(doc, "prompt_cache_key")
	return p, nil
}

// checkChatToolPairing enforces api-rules §3.2 (checklist item 15): the messages right
// after an assistant message with tool_calls are role "tool" messages answering each of its
// ids, and a tool message belongs to such a run and answers one of its ids. The param of the
// missing-response error is the first message after the run (the one whose role should
// have been "tool"), or the assistant message when the run ends the list (our choice; the
// issues do not show which index the API names).
func checkChatToolPairing(msgs []map[string]any) *Error {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch str(m, "role") {
		case "tool":
			return oaInvalid(fmt.Sprintf("messages.[%d].role", i), "",
				"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
		case "assistant":
			ids := toolCallIDs(m)
			if len(ids) == 0 {
				continue
			}
			answered := map[string]bool{}
			j := i + 1
			for ; j < len(msgs) && str(msgs[j], "role") == "tool"; j++ {
				id := str(msgs[j], "tool_call_id")
				if !slices.Contains(ids, id) {
					// param: ours
					return oaInvalid(fmt.Sprintf("messages.[%d].tool_call_id", j), "",
						"Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", id)
				}
				answered[id] = true
			}
			var missing []string
			for _, id := range ids {
				if !answered[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				at := j
				if at == len(msgs) {
					at = i
				}
				return oaInvalid(fmt.Sprintf("messages.[%d].role", at), "",
					"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(missing, ", "))
			}
			i = j - 1
		}
	}
	return nil
}

// toolCallIDs returns the ids of an assistant message's tool_calls.
func toolCallIDs(m map[string]any) []string {
	calls, _ := m["tool_calls"].([]any)
	var ids []string
	for _, c := range calls {
		ids = append(ids, str(obj(c), "id"))
	}
	return ids
}

// chat serves POST …/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, rec *Recorded) *Error {
	rec.Format = FormatChat
	doc, err := s.openAIBody(r, rec)
	if err != nil {
		return err
	}
	p, err := parseChat(doc)
	if err != nil {
		return err
	}
	if err := checkChatToolPairing(p.msgs); err != nil {
		return err
	}
	rp := s.script(&Request{
		Format: FormatChat, Method: r.Method, Path: rec.Path, Header: rec.Header, Raw: rec.Raw, Body: rec.Body,
		Model: p.model, Stream: p.stream, Params: doc, Tools: p.tools, Items: p.msgs,
	})
	if err := rp.failure(p.stream); err != nil {
		return err
	}

	s.mu.Lock()
	s.nextMsg++
	id := fmt.Sprintf("chatcmpl-fake%04d", s.nextMsg)
	blocks, err := s.emitChat(rp.Content)
	var usage Usage
	if err == nil {
		usage = s.openAICacheUsage(p.model, p.cacheKey, oaRender("", p.tools, p.msgs))
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var reasoning int
	usage.OutputTokens, reasoning = chatOutputTokens(blocks)
	rec.MessageID, rec.Usage, rec.Status = id, usage, http.StatusOK

	c := chatCompletion{id: id, model: p.model, created: time.Now().Unix(), blocks: blocks,
		finish: finishReason(rp), usage: chatUsageOf(usage, reasoning)}
	if p.stream {
		rec.StreamError = writeChatStream(w, rec.RequestID, c, rp, p.includeUsage)
	} else {
		writeOpenAIJSON(w, rec.RequestID, c.message())
	}
	return nil
}

// chatBlock is a scripted block in its Chat form.
type chatBlock struct {
	typ        string // "thinking", "text" or "tool_use"
	text       string
	id, name   string
	arguments  string
	toolCallIx int
}

// emitChat renders the scripted blocks: tool calls get ids "call_fake_N" unless the block
// has one; redacted_thinking has no Chat form and is left out. The caller holds s.mu.
func (s *Server) emitChat(blocks []Block) ([]chatBlock, *Error) {
	var out []chatBlock
	calls := 0
	for _, b := range blocks {
		switch b.Type {
		case "redacted_thinking":
		case "thinking", "text":
			out = append(out, chatBlock{typ: b.Type, text: b.Text})
		case "tool_use":
			args, err := toolArguments(b.Input)
			if err != nil {
				return nil, err
			}
			id := b.ID
			if id == "" {
				s.nextMsg++
				id = fmt.Sprintf("call_fake_%04d", s.nextMsg)
			}
			out = append(out, chatBlock{typ: b.Type, id: id, name: b.Name, arguments: args, toolCallIx: calls})
			calls++
		default:
			return nil, badBlock(b.Type)
		}
	}
	return out, nil
}

// chatOutputTokens is the fake's completion count (Tokens of the text, reasoning, tool names
// and arguments, at least 1) and the reasoning part of it.
func chatOutputTokens(blocks []chatBlock) (output, reasoning int) {
	n, r := 0, 0
	for _, b := range blocks {
		n += len(b.text) + len(b.name) + len(b.arguments)
		if b.typ == "thinking" {
			r += len(b.text)
		}
	}
	return max(1, Tokens(n)), Tokens(r)
}

// finishReason maps the reply's stop reason to Chat's finish_reason (api-rules §3.3).
func finishReason(rp Reply) string {
	switch r := stopReason(rp); r {
	case "tool_use":
		return "tool_calls"
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens":
		return "length"
	default:
		return r
	}
}

// chatUsage is the usage object of api-rules §3.3 and §7: prompt_tokens includes the cached
// tokens.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func chatUsageOf(u Usage, reasoning int) chatUsage {
	var c chatUsage
	c.PromptTokens = u.InputTokens + u.CacheReadInputTokens
	c.CompletionTokens = u.OutputTokens
	c.TotalTokens = c.PromptTokens + c.CompletionTokens
	c.PromptTokensDetails.CachedTokens = u.CacheReadInputTokens
	c.CompletionTokensDetails.ReasoningTokens = reasoning
	return c
}

// chatCompletion is one answer in the making.
type chatCompletion struct {
	id, model string
	created   int64
	blocks    []chatBlock
	finish    string
	usage     chatUsage
}

// message is the non-streaming answer: {"id","object":"chat.completion","created","model",
// "choices":[{"index":0,"message":{"role":"assistant","content":…|null,
// "reasoning_content"?,"tool_calls"?:[{"id","type":"function","function":{"name",
// "arguments":<JSON string>}}]},"finish_reason"}],"usage":{…}}.
func (c chatCompletion) message() map[string]any {
	var text, reasoning strings.Builder
	var calls []any
	for _, b := range c.blocks {
		switch b.typ {
		case "text":
			text.WriteString(b.text)
		case "thinking":
			reasoning.WriteString(b.text)
		case "tool_use":
			calls = append(calls, map[string]any{"id": b.id, "type": "function",
				"function": map[string]any{"name": b.name, "arguments": b.arguments}})
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if text.Len() > 0 {
		msg["content"] = text.String()
	}
	if reasoning.Len() > 0 {
		msg["reasoning_content"] = reasoning.String()
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": c.finish}},
		"usage":   c.usage,
	}
}

// writeChatStream answers a streaming request (api-rules §3.3, checklist item 16): a role
// chunk; per block its deltas in more than one chunk (reasoning_content, content, or a
// tool_calls entry with id, type and name, then its arguments in two pieces); a chunk with
// the finish_reason; with stream_options.include_usage a last chunk with "choices": [] and
// the usage (every other chunk then carries "usage": null); then `data: [DONE]`. Reply
// StreamError and Truncate end it early (see Reply).
func writeChatStream(w http.ResponseWriter, requestID string, c chatCompletion, rp Reply, includeUsage bool) (streamErr string) {
	e := startSSE(w, requestID)
	chunk := func(choices []any, usage any) map[string]any {
		m := map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model, "choices": choices}
		if includeUsage {
			m["usage"] = usage
		}
		return m
	}
	delta := func(d map[string]any, finish any) {
		e.data(chunk([]any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}, nil))
	}
	fail := func(err *Error) string {
		e.data(map[string]any{"error": openAIErrorOf(err)})
		return err.Message
	}

	delta(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, b := range c.blocks {
		if rp.StreamError != nil && i == rp.StreamErrorAfter {
			return fail(rp.StreamError)
		}
		switch b.typ {
		case "thinking":
			for _, p := range chunks(b.text) {
				delta(map[string]any{"reasoning_content": p}, nil)
			}
		case "text":
			for _, p := range chunks(b.text) {
				delta(map[string]any{"content": p}, nil)
			}
		case "tool_use":
			delta(map[string]any{"tool_calls": []any{map[string]any{"index": b.toolCallIx, "id": b.id, "type": "function",
				"function": map[string]any{"name": b.name, "arguments": ""}}}}, nil)
			for _, p := range chunks(b.arguments) {
				delta(map[string]any{"tool_calls": []any{map[string]any{"index": b.toolCallIx,
					"function": map[string]any{"arguments": p}}}}, nil)
			}
		}
	}
	if rp.StreamError != nil {
		return fail(rp.StreamError)
	}
	if rp.Truncate {
		return ""
	}
	delta(map[string]any{}, c.finish)
	if includeUsage {
		e.data(chunk([]any{}, c.usage))
	}
	e.data([]byte("[DONE]"))
	return ""
}
