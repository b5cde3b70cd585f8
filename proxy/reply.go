package proxy

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// The assistant reply as the response carries it (issue 16, item 4). Without it a reply is
// stored only when the agent sends it back in its next request, so a session's last answer
// never reaches the store. replyAsm rebuilds, from the event stream or the JSON body, the
// conversation items the client will put in its history (an Anthropic assistant message, a
// Chat assistant message, Responses output items); the proxy turns them into rows with the
// same adapters as a request, so the next request gives them the same fingerprints.

// maxReplyBytes bounds what a reply keeps in memory; a larger reply is left to the next
// request, as before.
const maxReplyBytes = maxTapped

// replyAsm accumulates one response's reply. complete is set by the event that ends a
// finished reply (terminal); a stream that ends without one was cut.
type replyAsm struct {
	format   apiFormat
	complete bool
	failed   bool // an error event ended the stream
	over     bool // the reply outgrew maxReplyBytes
	size     int

	// Anthropic: content blocks by index. A non-stream body sets content instead.
	blocks  map[int]*replyBlock
	content json.RawMessage

	// Chat: choice 0's content, reasoning_content and tool calls by index.
	text      strings.Builder
	reasoning strings.Builder
	calls     map[int]*replyCall

	// Responses: output items by output_index, done or in progress; output is
	// response.output of response.completed (or of a JSON body).
	items  map[int]*replyItem
	output []json.RawMessage
}

type replyBlock struct {
	typ        string
	start      json.RawMessage // content_block_start's content_block
	text       strings.Builder // text or thinking
	signature  string
	input      strings.Builder // input_json_delta pieces
	name, id   string
	stopped    bool
	startValid bool
}

type replyCall struct {
	id, name string
	args     strings.Builder
}

type replyItem struct {
	typ  string
	done json.RawMessage // response.output_item.done's item
	text strings.Builder // output_text or reasoning summary deltas so far
	name string
}

func newReplyAsm(f apiFormat) *replyAsm { return &replyAsm{format: f} }

func (a *replyAsm) grow(n int) bool {
	a.size += n
	if a.size > maxReplyBytes {
		a.over = true
	}
	return !a.over
}

// event reads one SSE data payload and reports whether it ends a finished reply: the bytes
// that carry it must not reach the client before the reply is stored (durable before done).
func (a *replyAsm) event(data []byte) (terminal bool) {
	data = bytes.TrimSpace(data)
	if a.over || a.complete || len(data) == 0 || !a.grow(len(data)) {
		return false
	}
	switch a.format {
	case chatFormat:
		return a.chatEvent(data)
	case responsesFormat:
		return a.responsesEvent(data)
	}
	return a.anthropicEvent(data)
}

func (a *replyAsm) anthropicEvent(data []byte) bool {
	var ev anthropicEventFields
	if !decodeAnthropicEvent(data, &ev) {
		return false
	}
	switch ev.Type {
	case "content_block_start":
		var cb struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
			Name     string `json:"name"`
			ID       string `json:"id"`
		}
		b := &replyBlock{start: ev.ContentBlock, startValid: json.Unmarshal(ev.ContentBlock, &cb) == nil}
		b.typ, b.name, b.id = cb.Type, cb.Name, cb.ID
		b.text.WriteString(cb.Text + cb.Thinking)
		if a.blocks == nil {
			a.blocks = map[int]*replyBlock{}
		}
		a.blocks[ev.Index] = b
	case "content_block_delta":
		b := a.blocks[ev.Index]
		if b == nil {
			return false
		}
		switch ev.Delta.Type {
		case "text_delta":
			b.text.WriteString(ev.Delta.Text)
		case "thinking_delta":
			b.text.WriteString(ev.Delta.Thinking)
		case "signature_delta":
			b.signature = ev.Delta.Signature
		case "input_json_delta":
			b.input.WriteString(ev.Delta.PartialJSON)
		}
	case "content_block_stop":
		if b := a.blocks[ev.Index]; b != nil {
			b.stopped = true
		}
	case "message_stop":
		a.complete = true
		return true
	case "error":
		a.failed = true
	}
	return false
}

func (a *replyAsm) chatEvent(data []byte) bool {
	if string(data) == "[DONE]" {
		return false // the finish chunk came first
	}
	var ev struct {
		Choices []struct {
			Index        int         `json:"index"`
			Delta        chatMessage `json:"delta"`
			FinishReason *string     `json:"finish_reason"`
		} `json:"choices"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	if len(ev.Error) > 0 && string(ev.Error) != "null" {
		a.failed = true
		return false
	}
	for _, c := range ev.Choices {
		if c.Index != 0 {
			continue
		}
		a.chatMessage(c.Delta, true)
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.complete = true
			return true
		}
	}
	return false
}

// chatMessage is what the assembler reads of a Chat Completions message (a JSON body's
// choices[].message) or of a stream chunk's choices[].delta.
type chatMessage struct {
	Content   *string `json:"content"`
	Reasoning string  `json:"reasoning_content"`
	ToolCalls []struct {
		Index    int    `json:"index"` // stream deltas only: the call the piece belongs to
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// chatMessage adds m to the reply. A stream delta's tool-call pieces join the call of their
// index (a piece with an id or a name sets it); a whole message's calls are
// numbered in order.
func (a *replyAsm) chatMessage(m chatMessage, delta bool) {
	if m.Content != nil {
		a.text.WriteString(*m.Content)
	}
	a.reasoning.WriteString(m.Reasoning)
	for i, tc := range m.ToolCalls {
		if a.calls == nil {
			a.calls = map[int]*replyCall{}
		}
		if delta {
			i = tc.Index
		}
		call := a.calls[i]
		if call == nil || !delta {
			call = &replyCall{}
			a.calls[i] = call
		}
		if tc.ID != "" {
			call.id = tc.ID
		}
		if tc.Function.Name != "" {
			call.name = tc.Function.Name
		}
		call.args.WriteString(tc.Function.Arguments)
	}
}

func (a *replyAsm) responsesEvent(data []byte) bool {
	var ev struct {
		Type        string          `json:"type"`
		OutputIndex int             `json:"output_index"`
		Item        json.RawMessage `json:"item"`
		Delta       string          `json:"delta"`
		Response    struct {
			Output []json.RawMessage `json:"output"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	item := func() *replyItem {
		if a.items == nil {
			a.items = map[int]*replyItem{}
		}
		it := a.items[ev.OutputIndex]
		if it == nil {
			it = &replyItem{}
			a.items[ev.OutputIndex] = it
		}
		return it
	}
	switch ev.Type {
	case "response.output_item.added":
		var head struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(ev.Item, &head)
		it := item()
		it.typ, it.name = head.Type, head.Name
	case "response.output_text.delta", "response.reasoning_summary_text.delta":
		item().text.WriteString(ev.Delta)
	case "response.output_item.done":
		item().done = ev.Item
	case "response.completed", "response.incomplete":
		a.output = ev.Response.Output
		a.complete = true
		return true
	case "response.failed", "error":
		a.failed = true
	}
	return false
}

// whole reads a non-stream JSON body (or a compressed one, decoded): the reply is complete
// when the body parses and carries one.
func (a *replyAsm) whole(body []byte) {
	switch a.format {
	case chatFormat:
		var b struct {
			Choices []struct {
				Index   int         `json:"index"`
				Message chatMessage `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(body, &b) != nil {
			return
		}
		for _, c := range b.Choices {
			if c.Index != 0 {
				continue
			}
			a.chatMessage(c.Message, false)
			a.complete = true
		}
	case responsesFormat:
		var b struct {
			Output []json.RawMessage `json:"output"`
		}
		if json.Unmarshal(body, &b) == nil && b.Output != nil {
			a.output, a.complete = b.Output, true
		}
	default:
		var b struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(body, &b) == nil && len(b.Content) > 0 && b.Content[0] == '[' {
			a.content, a.complete = b.Content, true
		}
	}
}

// conversationItems returns the reply as the client will send it back: the wire form of
// each conversation item, in order. A cut reply (not complete) keeps only what cannot pair:
// text and thinking that arrived, never a tool call, whose names come back in dropped.
// keepReasoning (Chat) says the client sends reasoning_content back.
func (a *replyAsm) conversationItems(keepReasoning bool) (items [][]byte, dropped []string) {
	if a.over {
		return nil, nil
	}
	switch a.format {
	case chatFormat:
		return a.chatItems(keepReasoning)
	case responsesFormat:
		return a.responsesItems()
	}
	return a.anthropicItems()
}

func (a *replyAsm) anthropicItems() ([][]byte, []string) {
	if a.content != nil {
		return [][]byte{assistantMessage(a.content)}, nil
	}
	var blocks []json.RawMessage
	var dropped []string
	for _, i := range slices.Sorted(maps.Keys(a.blocks)) {
		b := a.blocks[i]
		var raw []byte
		var err error
		switch b.typ {
		case "text":
			raw, err = json.Marshal(struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{"text", b.text.String()})
		case "thinking":
			raw, err = json.Marshal(struct {
				Type      string `json:"type"`
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
			}{"thinking", b.text.String(), b.signature})
		case "tool_use", "server_tool_use", "mcp_tool_use":
			in := b.input.String()
			if !a.complete || !b.stopped || (in != "" && !json.Valid([]byte(in))) {
				dropped = append(dropped, b.name)
				continue
			}
			if in == "" {
				in = "{}"
			}
			raw, err = json.Marshal(struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			}{b.typ, b.id, b.name, json.RawMessage(in)})
		default: // redacted thinking, server tool results: complete in content_block_start
			if !b.startValid || (!a.complete && strings.HasSuffix(b.typ, "_tool_result")) {
				continue
			}
			raw = b.start
		}
		if err != nil {
			continue
		}
		blocks = append(blocks, raw)
	}
	if len(blocks) == 0 {
		return nil, dropped
	}
	content, err := json.Marshal(blocks)
	if err != nil {
		return nil, dropped
	}
	return [][]byte{assistantMessage(content)}, dropped
}

func assistantMessage(content []byte) []byte {
	out := append([]byte(`{"role":"assistant","content":`), content...)
	return append(out, '}')
}

// chatItems is the assistant message as the client keeps it: content and tool_calls, and
// reasoning_content only when keepReasoning. OpenCode's provider does not send reasoning
// back, and a thinking row the next request lacks would fork the chain; a client that does
// is known by the assistant messages of its request.
func (a *replyAsm) chatItems(keepReasoning bool) ([][]byte, []string) {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	msg := struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		Reasoning string  `json:"reasoning_content,omitempty"`
		ToolCalls []call  `json:"tool_calls,omitempty"`
	}{Role: "assistant"}
	if keepReasoning {
		msg.Reasoning = a.reasoning.String()
	}
	text := a.text.String()
	if text != "" {
		msg.Content = &text
	}
	var dropped []string
	for _, i := range slices.Sorted(maps.Keys(a.calls)) {
		c := a.calls[i]
		if !a.complete {
			dropped = append(dropped, c.name)
			continue
		}
		msg.ToolCalls = append(msg.ToolCalls, call{ID: c.id, Type: "function", Function: fn{c.name, c.args.String()}})
	}
	if msg.Content == nil && len(msg.ToolCalls) == 0 && msg.Reasoning == "" {
		return nil, dropped
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return nil, dropped
	}
	return [][]byte{raw}, dropped
}

func (a *replyAsm) responsesItems() ([][]byte, []string) {
	if a.complete && len(a.output) > 0 {
		out := make([][]byte, len(a.output))
		for i, it := range a.output {
			out[i] = it
		}
		return out, nil
	}
	var out [][]byte
	var dropped []string
	for _, i := range slices.Sorted(maps.Keys(a.items)) {
		it := a.items[i]
		isCall := strings.HasSuffix(it.typ, "_call")
		switch {
		case isCall && !a.complete:
			dropped = append(dropped, it.name)
		case it.done != nil:
			out = append(out, it.done)
		case it.typ == "message" && it.text.Len() > 0:
			raw, _ := json.Marshal(map[string]any{"type": "message", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": it.text.String()}}})
			out = append(out, raw)
		case it.typ == "reasoning" && it.text.Len() > 0:
			raw, _ := json.Marshal(map[string]any{"type": "reasoning",
				"summary": []any{map[string]any{"type": "summary_text", "text": it.text.String()}}})
			out = append(out, raw)
		}
	}
	return out, dropped
}

// cutReplyMarker is the text row that ends a reply whose stream was cut (issue 16, item 4):
// what arrived is stored before it, and tool calls that started are named but not stored,
// so no tool_use row waits for a tool_result that never comes.
func cutReplyMarker(dropped []string) string {
	s := "[smarter-compact: reply cut off: the response stream ended before the reply was complete"
	if len(dropped) > 0 {
		s += "; tool calls not stored: " + strings.Join(dropped, ", ")
	}
	return s + "]"
}
