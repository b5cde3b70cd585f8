package fakeupstream

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// OpenAI Responses, POST …/responses: /v1/responses and the ChatGPT Codex backend's
// /backend-api/codex/responses (api-rules §4; checklist §6 items 17–20).
//
// Checks, all 400 invalid_request_error in the OpenAI envelope with param "input" unless
// noted, in this order:
//   - model present (param "model"); input a string or a list of objects;
//   - previous_response_id names a response the fake stored (it stores a response only when
//     the request's store is not false): else "Previous response with id '<id>' not found."
//     (param "previous_response_id", code "previous_response_not_found"; §4.2). A stored
//     response's input and output come before the new input, for every check below;
//   - per input item: a message's role is user, assistant, system or developer ("Invalid
//     value: '<role>'. …", param "input[N].role", code "invalid_value"; §4.1); a reasoning
//     item has `summary` ("Input[N] missing required field `summary`", §4.1); a reasoning
//     item with an id and no encrypted_content, and an item_reference, name an item of a
//     stored response, else "Item with id '<id>' not found. Items are not persisted when
//     store is set to false." when the request has store false (§4.2) and "Item with id
//     '<id>' not found." otherwise (our text); the encrypted_content of a reasoning item the
//     fake issued is the one it issued ("The encrypted content for item <id> could not be
//     verified.", our text);
//   - pairing (§4.2, checklist item 17): every function_call, custom_tool_call and
//     local_shell_call has an output item with its call_id later on ("No tool output found
//     for function call <call_id>." / "… custom tool call …" / "… local shell call …"), and
//     every *_call_output of those three has its call earlier ("No tool call found for
//     function call output with call_id <call_id>." and the analogues);
//   - reasoning linkage (§4.2, checklist item 18): an item whose id the fake issued after a
//     reasoning item rs_X of the same response needs an item rs_X earlier ("Item '<id>' of
//     type '<type>' was provided without its required 'reasoning' item: '<rs_X>'."); a
//     reasoning item needs a following item, and for a reasoning item the fake issued that
//     following item must be one that followed it in its response, matched by id or, for an
//     item without id, by type (and call_id or assistant role) ("Item '<rs id>' of type
//     'reasoning' was provided without its required following item."). A reasoning item
//     without id counts as the one its encrypted_content was issued for.
//
// Item types the fake does not know pass; a `compaction` item is opaque. A request with an
// input item of type compaction_trigger is answered with exactly one compaction output item.

// respParsed is a Responses body that passed parseResponses.
type respParsed struct {
	doc          map[string]any
	model        string
	stream       bool
	store        bool // default true
	include      []string
	instructions string
	items        []map[string]any // input as items
	tools        []map[string]any
	cacheKey     string // prompt_cache_key
	prevID       string // previous_response_id
}

// responseRoles are the message roles of §4.1.
var responseRoles = set("user", "assistant", "system", "developer")

// callOutputs maps each call item type to its output item type, callNames to its name in
// the pairing errors (§4.2).
var (
	callOutputs = map[string]string{
		"function_call":    "function_call_output",
		"custom_tool_call": "custom_tool_call_output",
		"local_shell_call": "local_shell_call_output",
	}
	callNames = map[string]string{
		"function_call":    "function call",
		"custom_tool_call": "custom tool call",
		"local_shell_call": "local shell call",
	}
)

// parseResponses checks the types of the fields the fake reads (texts not in api-rules).
func parseResponses(doc map[string]any) (*respParsed, *Error) {
	v, ok := doc["model"]
	if !ok || v == nil {
		return nil, missingParam("model")
	}
	if m, ok := v.(string); !ok || m == "" {
		return nil, wrongType("model", "a string", v)
	}
	switch in := doc["input"].(type) {
	case nil, string:
	case []any:
		for i, e := range in {
			if obj(e) == nil {
				return nil, wrongType(fmt.Sprintf("input[%d]", i), "an object", e)
			}
		}
	default:
		return nil, wrongType("input", "a string or an array of input items", in)
	}
	if err := checkOptionalTypes(doc); err != nil {
		return nil, err
	}
	p := looseResponses(doc)
	var err *Error
	if p.stream, err = optBool(doc, "stream", "stream", false); err != nil {
		return nil, err
	}
	if p.store, err = optBool(doc, "store", "store", true); err != nil {
		return nil, err
	}
	if p.tools, err = objectList(doc, "tools"); err != nil {
		return nil, err
	}
	return p, nil
}

// checkOptionalTypes checks instructions, previous_response_id and include when present.
func checkOptionalTypes(doc map[string]any) *Error {
	if v, ok := doc["instructions"]; ok && v != nil {
		if _, ok := v.(string); !ok {
			return wrongType("instructions", "a string", v)
		}
	}
	if v, ok := doc["previous_response_id"]; ok && v != nil {
		if _, ok := v.(string); !ok {
			return wrongType("previous_response_id", "a string", v)
		}
	}
	if v, ok := doc["include"]; ok && v != nil {
		if _, ok := v.([]any); !ok {
			return wrongType("include", "an array", v)
		}
	}
	return nil
}

// looseResponses extracts what the fake reads without checking types.
func looseResponses(doc map[string]any) *respParsed {
	p := &respParsed{doc: doc, model: str(doc, "model"), store: true,
		instructions: str(doc, "instructions"), cacheKey: str(doc, "prompt_cache_key"),
		prevID: str(doc, "previous_response_id")}
	p.stream, _ = doc["stream"].(bool)
	if b, ok := doc["store"].(bool); ok {
		p.store = b
	}
	switch in := doc["input"].(type) {
	case string:
		p.items = []map[string]any{{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": in}}}}
	case []any:
		p.items = objects(in)
	}
	inc, _ := doc["include"].([]any)
	for _, e := range inc {
		if s, ok := e.(string); ok {
			p.include = append(p.include, s)
		}
	}
	p.tools = objects(doc["tools"])
	return p
}

// wantsEncrypted reports whether include asks for reasoning.encrypted_content (§4.1).
func (p *respParsed) wantsEncrypted() bool {
	return slices.Contains(p.include, "reasoning.encrypted_content")
}

// compacting reports whether the input holds a compaction_trigger item.
func (p *respParsed) compacting() bool {
	return slices.ContainsFunc(p.items, func(it map[string]any) bool { return itemType(it) == "compaction_trigger" })
}

// follower is an item the fake emitted after a reasoning item in the same response.
type follower struct {
	id, typ, callID string
}

// reasoningToken is the encrypted_content the fake issues for reasoning item id: it names
// the id and carries an HMAC over it, so the fake can tell which item it belongs to and
// whether it was changed.
func (s *Server) reasoningToken(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("reasoning\x00" + id))
	return "fkrs1_" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// tokenID returns the item id a token in the fake's format names, or "".
func tokenID(token string) string {
	rest, ok := strings.CutPrefix(token, "fkrs1_")
	if !ok {
		return ""
	}
	enc, _, _ := strings.Cut(rest, ".")
	id, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return ""
	}
	return string(id)
}

// reasoningID is the id a reasoning item stands for: its id, or the id its encrypted_content
// was issued for.
func reasoningID(it map[string]any) string {
	if id := str(it, "id"); id != "" {
		return id
	}
	return tokenID(str(it, "encrypted_content"))
}

// callID is the call id of a call or output item (a local_shell_call_output without
// call_id names its call in id, as the SDK type does).
func callID(it map[string]any) string {
	if id := str(it, "call_id"); id != "" {
		return id
	}
	if itemType(it) == "local_shell_call_output" {
		return str(it, "id")
	}
	return ""
}

// checkResponses runs the checks listed at the top and returns the context the model gets:
// the stored items of previous_response_id, then the input with item references resolved.
// The caller holds s.mu.
func (s *Server) checkResponses(p *respParsed) ([]map[string]any, *Error) {
	var ctx []map[string]any
	if p.prevID != "" {
		prev, ok := s.stored[p.prevID]
		if !ok {
			return nil, &Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
				Message: fmt.Sprintf("Previous response with id '%s' not found.", p.prevID),
				Param:   "previous_response_id", Code: "previous_response_not_found"}
		}
		ctx = slices.Clone(prev)
	}
	base := len(ctx)
	notFound := func(id string) *Error {
		if !p.store {
			return oaInvalid("input", "", "Item with id '%s' not found. Items are not persisted when store is set to false.", id)
		}
		return oaInvalid("input", "", "Item with id '%s' not found.", id)
	}
	for i, it := range p.items {
		switch itemType(it) {
		case "message":
			role, ok := it["role"]
			if !ok || role == nil {
				return nil, missingParam(fmt.Sprintf("input[%d].role", i))
			}
			if !responseRoles[str(it, "role")] {
				return nil, oaInvalid(fmt.Sprintf("input[%d].role", i), "invalid_value",
					"Invalid value: '%v'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role)
			}
		case "reasoning":
			if _, ok := it["summary"]; !ok {
				return nil, oaInvalid("input", "", "Input[%d] missing required field `summary`", i)
			}
			id, enc := str(it, "id"), str(it, "encrypted_content")
			switch {
			case enc != "":
				if err := s.verifyReasoning(id, enc); err != nil {
					return nil, err
				}
			case id != "" && s.items[id] == nil:
				return nil, notFound(id)
			}
		case "item_reference":
			ref := s.items[str(it, "id")]
			if ref == nil {
				return nil, notFound(str(it, "id"))
			}
			it = ref
		}
		ctx = append(ctx, it)
	}
	if err := checkCallPairing(ctx); err != nil {
		return nil, err
	}
	if err := s.checkReasoningLinks(ctx, base); err != nil {
		return nil, err
	}
	return ctx, nil
}

// verifyReasoning checks the encrypted_content of a reasoning item against the one the fake
// issued for its id (or, without an id, for the id the token names). Tokens for ids the
// fake did not issue pass. The caller holds s.mu.
func (s *Server) verifyReasoning(id, enc string) *Error {
	if id == "" {
		id = tokenID(enc)
	}
	if !s.reasoning[id] || hmac.Equal([]byte(enc), []byte(s.reasoningToken(id))) {
		return nil
	}
	return oaInvalid("input", "", "The encrypted content for item %s could not be verified.", id)
}

// checkCallPairing enforces the call/output pairing of §4.2 over the whole context.
func checkCallPairing(ctx []map[string]any) *Error {
	outputs := map[string]string{} // output type → call type
	for c, o := range callOutputs {
		outputs[o] = c
	}
	for i, it := range ctx {
		typ := itemType(it)
		if out, ok := callOutputs[typ]; ok {
			id := callID(it)
			if !slices.ContainsFunc(ctx[i+1:], func(o map[string]any) bool { return itemType(o) == out && callID(o) == id }) {
				return oaInvalid("input", "", "No tool output found for %s %s.", callNames[typ], id)
			}
		}
		if call, ok := outputs[typ]; ok {
			id := callID(it)
			if !slices.ContainsFunc(ctx[:i], func(c map[string]any) bool { return itemType(c) == call && callID(c) == id }) {
				return oaInvalid("input", "", "No tool call found for %s output with call_id %s.", callNames[call], id)
			}
		}
	}
	return nil
}

// checkReasoningLinks enforces the reasoning linkage of §4.2 (see the top of the file);
// following items are checked for the input's reasoning items (ctx[base:]). The caller
// holds s.mu.
func (s *Server) checkReasoningLinks(ctx []map[string]any, base int) *Error {
	seen := map[string]bool{}
	for k, it := range ctx {
		typ := itemType(it)
		if typ != "reasoning" {
			if rs, ok := s.linked[str(it, "id")]; ok && !seen[rs] {
				return oaInvalid("input", "", "Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'.", str(it, "id"), typ, rs)
			}
			continue
		}
		rid := reasoningID(it)
		seen[rid] = true
		if k < base {
			continue
		}
		if k == len(ctx)-1 || !s.follows(rid, ctx[k+1]) {
			return oaInvalid("input", "", "Item '%s' of type 'reasoning' was provided without its required following item.", rid)
		}
	}
	return nil
}

// follows reports whether next may follow reasoning item rid: any item but a reasoning
// item, and for a reasoning item the fake issued with items after it, one of those.
func (s *Server) follows(rid string, next map[string]any) bool {
	typ := itemType(next)
	if typ == "reasoning" {
		return false
	}
	fs := s.followers[rid]
	if len(fs) == 0 {
		return true
	}
	for _, f := range fs {
		switch id := str(next, "id"); {
		case id != "":
			if id == f.id {
				return true
			}
		case typ == f.typ && (f.callID == "" || callID(next) == f.callID) && (typ != "message" || str(next, "role") == "assistant"):
			return true
		}
	}
	return false
}

// responsesAPI serves POST …/responses.
func (s *Server) responsesAPI(w http.ResponseWriter, r *http.Request, rec *Recorded) *Error {
	rec.Format = FormatResponses
	doc, err := s.openAIBody(r, rec)
	if err != nil {
		return err
	}
	p, err := parseResponses(doc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	ctx, err := s.checkResponses(p)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	rp := s.script(&Request{
		Format: FormatResponses, Method: r.Method, Path: rec.Path, Header: rec.Header, Raw: rec.Raw, Body: rec.Body,
		Model: p.model, Stream: p.stream, Params: doc, Tools: p.tools, Items: p.items, Instructions: p.instructions,
	})
	if err := rp.failure(p.stream); err != nil {
		return err
	}

	s.mu.Lock()
	var usage Usage
	s.nextMsg++
	id := fmt.Sprintf("resp_fake_%04d", s.nextMsg)
	items, err := s.emitResponses(p, rp.Content)
	if err == nil {
		usage = s.openAICacheUsage(p.model, p.cacheKey, oaRender(p.instructions, p.tools, ctx))
		if p.store && rp.StreamError == nil {
			s.store(id, ctx, items)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var reasoning int
	usage.OutputTokens, reasoning = respOutputTokens(items)
	rec.MessageID, rec.Usage, rec.Status = id, usage, http.StatusOK

	resp := response{id: id, model: p.model, created: time.Now().Unix(), instructions: p.instructions,
		prevID: p.prevID, store: p.store, items: items, usage: responsesUsage(usage, reasoning)}
	if p.stream {
		rec.StreamError = writeResponsesStream(w, rec.RequestID, resp, rp)
	} else {
		writeOpenAIJSON(w, rec.RequestID, resp.object("completed", len(items), nil))
	}
	return nil
}

// store keeps a response for previous_response_id and its items for item_reference and
// id-only reasoning items. The caller holds s.mu.
func (s *Server) store(id string, ctx []map[string]any, items []respItem) {
	all := slices.Clone(ctx)
	for _, o := range items {
		all = append(all, o.full())
	}
	s.stored[id] = all
	for _, it := range all {
		if iid := str(it, "id"); iid != "" {
			s.items[iid] = it
		}
	}
}
