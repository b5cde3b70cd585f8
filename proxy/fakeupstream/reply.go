package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"
)

// Reply is the scripted answer to one request (Options.Reply). The same Reply serves every
// format; each renders the blocks its own way:
//   - Anthropic: the blocks as content blocks (api-rules §2.1).
//   - Chat Completions (§3.3): text → the assistant message's content (texts concatenated);
//     thinking → reasoning_content (unsigned; redacted_thinking is left out); tool_use →
//     a tool_calls entry {"id":"call_fake_N" (or Block.ID),"type":"function","function":
//     {"name":…,"arguments":<JSON string of Input>}}; finish_reason "tool_calls" when there
//     are tool calls, else "stop".
//   - Responses (§4.3), one output item per block, every id unique: thinking and
//     redacted_thinking → {"type":"reasoning","id":"rs_fake_N","summary":[{"type":
//     "summary_text","text":…}],"encrypted_content":…} (summary [] without text;
//     encrypted_content only when include has "reasoning.encrypted_content": an opaque token
//     the fake verifies when it comes back); text → {"type":"message","id":"msg_fake_N",
//     "role":"assistant","status":"completed","content":[{"type":"output_text","text":…,
//     "annotations":[]}]}; tool_use → {"type":"function_call","id":"fc_fake_N","call_id":
//     "call_fake_N" (or Block.ID),"name":…,"arguments":<JSON string>,"status":"completed"}
//     plus "namespace" when Block.Namespace is set. A request with a compaction_trigger input
//     item gets one {"type":"compaction","id":"cmp_item_N","encrypted_content":…} instead
//     of Content.
type Reply struct {
	// Content lists the blocks of the assistant message, in order.
	Content []Block
	// StopReason defaults to "tool_use" when Content has a tool_use block, else "end_turn".
	// Chat maps it to finish_reason ("tool_use" → "tool_calls", "end_turn" → "stop",
	// "max_tokens" → "length", others as given); Responses ignores it.
	StopReason string
	// Error, when set, is answered as an HTTP error (Anthropic or OpenAI envelope) instead of
	// a message; the prompt cache is not written.
	Error *Error
	// StreamError, when set on a streaming request, is sent after StreamErrorAfter content
	// blocks (Responses: output items), and the stream ends there: Anthropic `event: error`
	// without message_stop (api-rules §2.1); Chat a `data: {"error":{…}}` chunk without
	// [DONE]; Responses a response.failed event whose response.error.code is Error.Code, or
	// Error.Type when Code is "" (Codex maps e.g. "context_length_exceeded", §4.3), without
	// response.completed. On a non-streaming request it is answered like Error.
	StreamError      *Error
	StreamErrorAfter int
	// Truncate ends a streaming answer after the last content block (output item) without
	// closing it: no message_delta/message_stop (Anthropic), no finish chunk, usage chunk or
	// [DONE] (Chat), no response.completed (Responses: Codex fails with "stream closed before
	// response.completed", §4.3). Ignored on a non-streaming request.
	Truncate bool
}

// failure is the error the handler answers instead of a message: Error, or StreamError on a
// non-streaming request (stream false); nil when the reply is a message.
func (rp Reply) failure(stream bool) *Error {
	if rp.Error != nil {
		return rp.Error
	}
	if rp.StreamError != nil && !stream {
		return rp.StreamError
	}
	return nil
}

// Block is one content block of a scripted reply.
type Block struct {
	Type  string // "thinking", "redacted_thinking", "text" or "tool_use"
	Text  string // the text, or the thinking text (Responses: the reasoning summary)
	ID    string // tool_use id; "" means toolu_fake_<n> (OpenAI formats: the call id, "" means call_fake_<n>)
	Name  string // tool_use name
	Input any    // tool_use input, marshalled to a JSON object; nil means {}
	// Namespace is the Responses function_call `namespace` (Codex sends MCP tools as a
	// namespace tool, e.g. "mcp__ctx", and expects calls to name it; clients.md). Ignored by
	// the other formats.
	Namespace string
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// Thinking returns a thinking block. When the request asks for display "omitted" the text
// is not sent, as the API does (api-rules §1.7.3).
func Thinking(s string) Block { return Block{Type: "thinking", Text: s} }

// RedactedThinking returns a redacted_thinking block.
func RedactedThinking() Block { return Block{Type: "redacted_thinking"} }

// ToolUse returns a tool_use block with a fresh id.
func ToolUse(name string, input any) Block { return Block{Type: "tool_use", Name: name, Input: input} }

// NamespacedToolUse returns a tool_use block that a Responses answer renders as a
// function_call with `namespace` (Codex MCP tools: namespace "mcp__ctx", name "fake_lookup").
func NamespacedToolUse(namespace, name string, input any) Block {
	return Block{Type: "tool_use", Name: name, Input: input, Namespace: namespace}
}

// DefaultReply answers with a thinking block when the request turns thinking on ("enabled"
// or "adaptive"), then the text "ok".
func DefaultReply(req *Request) Reply {
	return Reply{Content: append(ThinkingFirst(req, "The user wants a short answer."), Text("ok"))}
}

// ThinkingFirst is how a reply to req starts: a thinking block of text when the request
// turns thinking on, else nothing. A script appends its answer to it.
func ThinkingFirst(req *Request, text string) []Block {
	if req.ThinkingEnabled() {
		return []Block{Thinking(text)}
	}
	return nil
}

// out is an emitted block in its final form.
type out struct {
	typ       string
	text      string
	signature string
	data      string
	id, name  string
	input     json.RawMessage
}

// full is the block as it appears in a non-streaming message and as the client sends it back.
func (o out) full() any {
	switch o.typ {
	case "thinking":
		return struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{o.typ, o.text, o.signature}
	case "redacted_thinking":
		return struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{o.typ, o.data}
	case "tool_use":
		return struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{o.typ, o.id, o.name, o.input}
	default:
		return struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{o.typ, o.text}
	}
}

// start is the block as content_block_start carries it (api-rules §2.1): full with the
// text, thinking and signature empty and a tool call's input {}; redacted thinking whole.
func (o out) start() any {
	switch o.typ {
	case "redacted_thinking":
		return o.full()
	case "tool_use":
		return out{typ: o.typ, id: o.id, name: o.name, input: json.RawMessage("{}")}.full()
	default:
		return out{typ: o.typ}.full()
	}
}

// emit turns the scripted blocks into the response content: ids for tool_use, signatures
// for thinking, and a record of each thinking block with what it is bound to. The caller
// holds s.mu.
func (s *Server) emit(p *parsed, st thinkingState, msgID string, blocks []Block) ([]out, *Error) {
	bd := bindingOf(p, st.msgs)
	h := bd.end
	preds := slices.Clone(st.kept)
	marked := false
	var res []out
	for pos, b := range blocks {
		o := out{typ: b.Type}
		switch b.Type {
		case "thinking", "redacted_thinking":
			s.nextSig++
			serial := s.nextSig
			if b.Type == "thinking" {
				o.text = b.Text
				if p.thinking.display == "omitted" {
					o.text = ""
				}
				o.signature = s.sign("thinking", serial, o.text)
			} else {
				o.data = s.sign("redacted_thinking", serial, "")
			}
			s.signed[serial] = &signedBlock{
				serial: serial, typ: b.Type, messageID: msgID, pos: pos,
				tools: bd.tools, system: bd.system, messages: h, preds: slices.Clone(preds),
			}
			s.responses[msgID] = append(s.responses[msgID], serial)
			preds = append(preds, serial)
		case "text":
			o.text = b.Text
		case "tool_use":
			o.id, o.name = b.ID, b.Name
			if o.id == "" {
				s.nextTool++
				o.id = fmt.Sprintf("toolu_fake_%04d", s.nextTool)
			}
			in := b.Input
			if in == nil {
				in = struct{}{}
			}
			raw, err := json.Marshal(in)
			if err != nil {
				return nil, &Error{Status: http.StatusInternalServerError, Type: "api_error", Message: fmt.Sprintf("fakeupstream: marshal scripted tool input: %v", err)}
			}
			var buf bytes.Buffer
			json.Compact(&buf, raw)
			o.input = buf.Bytes()
		default:
			return nil, &Error{Status: http.StatusInternalServerError, Type: "api_error", Message: fmt.Sprintf("fakeupstream: scripted block type %q is not one of thinking, redacted_thinking, text, tool_use", b.Type)}
		}
		if o.typ == "text" || o.typ == "tool_use" {
			h = chain(h, bindingUnit("assistant", &marked, o.canon()))
		}
		res = append(res, o)
	}
	return res, nil
}

// canon is the block decoded the way a request carries it back, for the prefix chain.
func (o out) canon() map[string]any {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(marshal(o.full())))
	d.UseNumber()
	d.Decode(&m)
	return m
}

// outputTokens is the fake's output count: Tokens of the content's canonical bytes, at least 1.
func outputTokens(content []out) int {
	n := 0
	for _, o := range content {
		n += len(marshal(canonBlock(o.canon())))
	}
	return max(1, Tokens(n))
}

// stopReason returns the scripted stop reason or the one the content implies.
func stopReason(r Reply) string {
	if r.StopReason != "" {
		return r.StopReason
	}
	for _, b := range r.Content {
		if b.Type == "tool_use" {
			return "tool_use"
		}
	}
	return "end_turn"
}

type cacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

type startUsage struct {
	InputTokens              int           `json:"input_tokens"`
	CacheCreationInputTokens int           `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int           `json:"cache_read_input_tokens"`
	CacheCreation            cacheCreation `json:"cache_creation"`
	OutputTokens             int           `json:"output_tokens"`
	ServiceTier              string        `json:"service_tier"`
}

type deltaUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type message struct {
	ID                   string                `json:"id"`
	Type                 string                `json:"type"`
	Role                 string                `json:"role"`
	Model                string                `json:"model"`
	Content              []any                 `json:"content"`
	StopReason           *string               `json:"stop_reason"`
	StopSequence         *string               `json:"stop_sequence"`
	Usage                startUsage            `json:"usage"`
	InputTransformations []InputTransformation `json:"input_transformations,omitempty"`
}

func usageOf(u Usage, output int) startUsage {
	return startUsage{
		InputTokens:              u.InputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreation:            cacheCreation{u.CacheCreation5m, u.CacheCreation1h},
		OutputTokens:             output,
		ServiceTier:              "standard",
	}
}

// writeJSON answers a non-streaming request with the whole message.
func writeJSON(w http.ResponseWriter, m message, content []out) {
	m.Content = make([]any, 0, len(content))
	for _, o := range content {
		m.Content = append(m.Content, o.full())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(marshal(m))
}

// writeStream answers a streaming request as the API does (api-rules §2.1): event names equal
// to the data's type; message_start with empty content and the input usage; per block a
// content_block_start, its deltas in more than one chunk, then content_block_stop, with
// contiguous indices (a thinking block ends with signature_delta; display "omitted" sends no
// thinking_delta); one ping after the first block starts; message_delta with the stop reason
// and cumulative usage; message_stop (not with Reply.Truncate). Each event is flushed, so the
// body is chunked.
func writeStream(w http.ResponseWriter, m message, content []out, usage Usage, r Reply) (streamErr string) {
	stop := stopReason(r)
	m.StopReason = nil
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data any) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, marshal(data))
		rc.Flush()
	}
	type ev = map[string]any

	m.Content = []any{}
	m.Usage.OutputTokens = 1
	send("message_start", ev{"type": "message_start", "message": m})
	if len(content) == 0 {
		send("ping", ev{"type": "ping"})
	}
	for i, o := range content {
		if r.StreamError != nil && i == r.StreamErrorAfter {
			return sendError(send, r.StreamError)
		}
		send("content_block_start", ev{"type": "content_block_start", "index": i, "content_block": o.start()})
		if i == 0 {
			send("ping", ev{"type": "ping"})
		}
		delta := func(d any) {
			send("content_block_delta", ev{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch o.typ {
		case "text":
			for _, c := range chunks(o.text) {
				delta(ev{"type": "text_delta", "text": c})
			}
		case "thinking":
			for _, c := range chunks(o.text) {
				delta(ev{"type": "thinking_delta", "thinking": c})
			}
			delta(ev{"type": "signature_delta", "signature": o.signature})
		case "tool_use":
			for _, c := range chunks(string(o.input)) {
				delta(ev{"type": "input_json_delta", "partial_json": c})
			}
		}
		send("content_block_stop", ev{"type": "content_block_stop", "index": i})
	}
	if r.StreamError != nil {
		return sendError(send, r.StreamError)
	}
	if r.Truncate {
		return ""
	}
	send("message_delta", ev{
		"type":  "message_delta",
		"delta": ev{"stop_reason": stop, "stop_sequence": nil},
		"usage": deltaUsage{usage.InputTokens, usage.CacheCreationInputTokens, usage.CacheReadInputTokens, usage.OutputTokens},
	})
	send("message_stop", ev{"type": "message_stop"})
	return ""
}

func sendError(send func(string, any), e *Error) string {
	send("error", map[string]any{"type": "error", "error": map[string]any{"type": e.Type, "message": e.Message}})
	return e.Message
}

// chunks splits s in two at a rune boundary (one chunk when s is one rune, none when empty),
// so clients must join deltas.
func chunks(s string) []string {
	if s == "" {
		return nil
	}
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}
