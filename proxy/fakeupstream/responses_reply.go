package fakeupstream

import (
	"fmt"
	"net/http"
)

// respItem is an output item the fake emits.
type respItem struct {
	typ       string // "reasoning", "message", "function_call" or "compaction"
	id        string
	callID    string
	name      string
	namespace string
	text      string // reasoning summary or message text
	arguments string
	enc       string // encrypted_content
}

// full is the item as response.output_item.done and the response's output carry it:
//
//	{"type":"reasoning","id":"rs_fake_N","summary":[{"type":"summary_text","text":…}],"encrypted_content"?:…}
//	{"type":"message","id":"msg_fake_N","role":"assistant","status":"completed","content":[{"type":"output_text","text":…,"annotations":[]}]}
//	{"type":"function_call","id":"fc_fake_N","call_id":"call_fake_N","name":…,"arguments":<JSON string>,"status":"completed","namespace"?:…}
//	{"type":"compaction","id":"cmp_item_N","encrypted_content":…}
func (o respItem) full() map[string]any {
	switch o.typ {
	case "reasoning":
		m := map[string]any{"type": o.typ, "id": o.id, "summary": o.summary()}
		if o.enc != "" {
			m["encrypted_content"] = o.enc
		}
		return m
	case "message":
		return map[string]any{"type": o.typ, "id": o.id, "role": "assistant", "status": "completed",
			"content": []any{o.textPart()}}
	case "function_call":
		m := map[string]any{"type": o.typ, "id": o.id, "call_id": o.callID, "name": o.name,
			"arguments": o.arguments, "status": "completed"}
		if o.namespace != "" {
			m["namespace"] = o.namespace
		}
		return m
	default:
		return map[string]any{"type": o.typ, "id": o.id, "encrypted_content": o.enc}
	}
}

// added is the item as response.output_item.added carries it: in progress, without content.
func (o respItem) added() map[string]any {
	m := o.full()
	switch o.typ {
	case "reasoning":
		m["summary"] = []any{}
		delete(m, "encrypted_content")
	case "message":
		m["status"], m["content"] = "in_progress", []any{}
	case "function_call":
		m["status"], m["arguments"] = "in_progress", ""
	}
	return m
}

func (o respItem) summary() []any {
	if o.text == "" {
		return []any{}
	}
	return []any{map[string]any{"type": "summary_text", "text": o.text}}
}

func (o respItem) textPart() map[string]any {
	return map[string]any{"type": "output_text", "text": o.text, "annotations": []any{}}
}

// emitResponses turns the scripted blocks into output items with fresh ids, issues the
// encrypted_content of reasoning items (only when include asks for it), and records which
// items follow which reasoning item. A compacting request gets one compaction item instead.
// The caller holds s.mu.
func (s *Server) emitResponses(p *respParsed, blocks []Block) ([]respItem, *Error) {
	if p.compacting() {
		s.nextMsg++
		c := s.compactionItem(fmt.Sprintf("cmp_item_%04d", s.nextMsg))
		return []respItem{{typ: "compaction", id: str(c, "id"), enc: str(c, "encrypted_content")}}, nil
	}
	var out []respItem
	lastRS := ""
	for _, b := range blocks {
		s.nextMsg++
		n := s.nextMsg
		var o respItem
		switch b.Type {
		case "thinking", "redacted_thinking":
			o = respItem{typ: "reasoning", id: fmt.Sprintf("rs_fake_%04d", n)}
			if b.Type == "thinking" {
				o.text = b.Text
			}
			if p.wantsEncrypted() {
				o.enc = s.reasoningToken(o.id)
			}
			s.reasoning[o.id] = true
			lastRS = o.id
		case "text":
			o = respItem{typ: "message", id: fmt.Sprintf("msg_fake_%04d", n), text: b.Text}
		case "tool_use":
			args, err := toolArguments(b.Input)
			if err != nil {
				return nil, err
			}
			o = respItem{typ: "function_call", id: fmt.Sprintf("fc_fake_%04d", n), callID: b.ID,
				name: b.Name, namespace: b.Namespace, arguments: args}
			if o.callID == "" {
				o.callID = fmt.Sprintf("call_fake_%04d", n)
			}
		default:
			return nil, badBlock(b.Type)
		}
		if lastRS != "" && o.typ != "reasoning" {
			s.linked[o.id] = lastRS
			s.followers[lastRS] = append(s.followers[lastRS], follower{o.id, o.typ, o.callID})
		}
		out = append(out, o)
	}
	return out, nil
}

// respOutputTokens is the fake's output count (Tokens of the texts, names, arguments and
// compaction content, at least 1) and the reasoning part of it.
func respOutputTokens(items []respItem) (output, reasoning int) {
	n, r := 0, 0
	for _, o := range items {
		n += len(o.text) + len(o.name) + len(o.namespace) + len(o.arguments)
		if o.typ == "reasoning" {
			r += len(o.text)
		} else if o.typ == "compaction" {
			n += len(o.enc)
		}
	}
	return max(1, Tokens(n)), Tokens(r)
}

// respUsage is the usage of api-rules §4.3 and §7: input_tokens includes the cached tokens.
type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func responsesUsage(u Usage, reasoning int) respUsage {
	var r respUsage
	r.InputTokens = u.InputTokens + u.CacheReadInputTokens
	r.InputTokensDetails.CachedTokens = u.CacheReadInputTokens
	r.OutputTokens = u.OutputTokens
	r.OutputTokensDetails.ReasoningTokens = reasoning
	r.TotalTokens = r.InputTokens + r.OutputTokens
	return r
}

// response is one Responses answer in the making.
type response struct {
	id, model    string
	created      int64
	instructions string
	prevID       string
	store        bool
	items        []respItem
	usage        respUsage
}

// object is the response object with status and the first n items as output; usage only
// when completed, error only when failed.
func (r response) object(status string, n int, fail *Error) map[string]any {
	output := make([]any, 0, n)
	for _, o := range r.items[:n] {
		output = append(output, o.full())
	}
	m := map[string]any{
		"id": r.id, "object": "response", "created_at": r.created, "status": status, "model": r.model,
		"output": output, "usage": nil, "error": nil, "incomplete_details": nil,
		"instructions": nullable(r.instructions), "previous_response_id": nullable(r.prevID),
		"tools": []any{}, "parallel_tool_calls": true, "store": r.store, "service_tier": "default",
	}
	if status == "completed" {
		m["usage"] = r.usage
	}
	if fail != nil {
		code := fail.Code
		if code == "" {
			code = fail.Type
		}
		m["error"] = map[string]any{"code": code, "message": fail.Message}
	}
	return m
}

// writeResponsesStream answers a streaming request (api-rules §4.3, checklist item 20; the
// shapes Codex and OpenCode accepted, clients.md): named events equal to the data's type,
// each with a sequence_number: response.created and response.in_progress (status
// in_progress, no output); per item response.output_item.added, its deltas in more than one
// chunk — reasoning: reasoning_summary_part.added, reasoning_summary_text.delta/done,
// reasoning_summary_part.done; message: content_part.added, output_text.delta/done,
// content_part.done; function_call: function_call_arguments.delta/done — and
// response.output_item.done with the whole item; then response.completed with the output
// and usage. Reply.StreamError sends response.failed instead, Reply.Truncate nothing.
func writeResponsesStream(w http.ResponseWriter, requestID string, r response, rp Reply) (streamErr string) {
	e := startSSE(w, requestID)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		e.event(typ, fields)
	}
	type ev = map[string]any
	fail := func(done int) string {
		send("response.failed", ev{"response": r.object("failed", done, rp.StreamError)})
		return rp.StreamError.Message
	}

	send("response.created", ev{"response": r.object("in_progress", 0, nil)})
	send("response.in_progress", ev{"response": r.object("in_progress", 0, nil)})
	for i, o := range r.items {
		if rp.StreamError != nil && i == rp.StreamErrorAfter {
			return fail(i)
		}
		at := ev{"item_id": o.id, "output_index": i}
		with := func(extra ev) ev {
			m := ev{}
			for k, v := range at {
				m[k] = v
			}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		send("response.output_item.added", ev{"output_index": i, "item": o.added()})
		switch o.typ {
		case "reasoning":
			if o.text == "" {
				break
			}
			part := func(text string) ev { return ev{"type": "summary_text", "text": text} }
			send("response.reasoning_summary_part.added", with(ev{"summary_index": 0, "part": part("")}))
			for _, c := range chunks(o.text) {
				send("response.reasoning_summary_text.delta", with(ev{"summary_index": 0, "delta": c}))
			}
			send("response.reasoning_summary_text.done", with(ev{"summary_index": 0, "text": o.text}))
			send("response.reasoning_summary_part.done", with(ev{"summary_index": 0, "part": part(o.text)}))
		case "message":
			empty := o
			empty.text = ""
			send("response.content_part.added", with(ev{"content_index": 0, "part": empty.textPart()}))
			for _, c := range chunks(o.text) {
				send("response.output_text.delta", with(ev{"content_index": 0, "delta": c}))
			}
			send("response.output_text.done", with(ev{"content_index": 0, "text": o.text}))
			send("response.content_part.done", with(ev{"content_index": 0, "part": o.textPart()}))
		case "function_call":
			for _, c := range chunks(o.arguments) {
				send("response.function_call_arguments.delta", with(ev{"delta": c}))
			}
			send("response.function_call_arguments.done", with(ev{"arguments": o.arguments}))
		}
		send("response.output_item.done", ev{"output_index": i, "item": o.full()})
	}
	if rp.StreamError != nil {
		return fail(len(r.items))
	}
	if rp.Truncate {
		return ""
	}
	send("response.completed", ev{"response": r.object("completed", len(r.items), nil)})
	return ""
}
