package fakeupstream

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// What the two OpenAI formats share: the error envelope (api-rules §4.6), reading the body,
// the small routes (models, compact, the refused websocket), the prompt-cache simulation
// (§3.4) and the rendering of scripted tool input. Chat Completions is in chat.go, Responses
// in responses.go.

// writeOpenAIError writes the OpenAI error envelope (api-rules §4.6):
// {"error":{"message":…,"type":…,"param":…|null,"code":…|null}}.
func writeOpenAIError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(marshal(struct {
		Error openAIError `json:"error"`
	}{openAIErrorOf(e)}))
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIErrorOf(e *Error) openAIError {
	return openAIError{Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code)}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// oaInvalid is a 400 invalid_request_error with the OpenAI param and code ("" is null).
func oaInvalid(param, code, format string, args ...any) *Error {
	e := invalid(format, args...)
	e.Param, e.Code = param, code
	return e
}

// openAIBody reads, authenticates and decodes the body of a request to an OpenAI route: the
// size limit and Content-Encoding as for Anthropic (checklist §6 items 1 and 3; Codex sends
// zstd, §4.4), then the JSON object.
func (s *Server) openAIBody(r *http.Request, rec *Recorded) (map[string]any, *Error) {
	raw, err := readRaw(r, s.opts.MaxBodyBytes)
	rec.Raw = raw
	if err != nil {
		return nil, err
	}
	if err := s.authorize(r); err != nil {
		// the API's text for a wrong key (not in api-rules)
		return nil, &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error",
			Message: "Incorrect API key provided.", Code: "invalid_api_key"}
	}
	body, err := decodeBody(raw, r.Header.Get("Content-Encoding"), s.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	rec.Body = body
	doc, err := parseJSON(body)
	if err != nil {
		// the API's text for a body it cannot parse (not in api-rules); the detail is dropped
		return nil, invalid("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)")
	}
	return doc, nil
}

// isWebSocket reports whether a request asks to upgrade to a websocket (Codex's Responses
// websocket transport, §4.4).
func isWebSocket(r *http.Request) bool {
	for _, v := range strings.Split(r.Header.Get("Upgrade"), ",") {
		if strings.EqualFold(strings.TrimSpace(v), "websocket") {
			return true
		}
	}
	return false
}

// models answers GET …/models with an empty list in both the OpenAI shape ("data") and the
// Codex backend's ("models", clients.md).
func (s *Server) models(w http.ResponseWriter, rec *Recorded) *Error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(`{"object":"list","data":[],"models":[]}`))
	rec.Status = http.StatusOK
	return nil
}

// compact answers POST …/responses/compact (Codex remote compaction) with
// {"id":"cmp_fake_N","object":"response.compaction","output":[{"type":"compaction",
// "id":"cmp_item_N","encrypted_content":…}],"usage":{…}}. The body is only parsed as JSON;
// usage counts its input, instructions and tools like a Responses request, without cache.
func (s *Server) compact(w http.ResponseWriter, r *http.Request, rec *Recorded) *Error {
	rec.Format = FormatResponses
	doc, err := s.openAIBody(r, rec)
	if err != nil {
		return err
	}
	p := looseResponses(doc)
	pr := oaRender(p.instructions, p.tools, p.items)
	s.mu.Lock()
	s.nextMsg++
	n := s.nextMsg
	s.mu.Unlock()
	item := s.compactionItem(fmt.Sprintf("cmp_item_%04d", n))
	out := max(1, Tokens(len(str(item, "encrypted_content"))))
	rec.MessageID = fmt.Sprintf("cmp_fake_%04d", n)
	rec.Usage = Usage{InputTokens: Tokens(pr.total), OutputTokens: out}
	rec.Status = http.StatusOK
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", rec.RequestID)
	w.WriteHeader(http.StatusOK)
	w.Write(marshal(map[string]any{
		"id": rec.MessageID, "object": "response.compaction", "created_at": time.Now().Unix(),
		"output": []any{item}, "usage": responsesUsage(rec.Usage, 0),
	}))
	return nil
}

// compactionItem is a compaction output item with an opaque encrypted_content.
func (s *Server) compactionItem(id string) map[string]any {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("compaction\x00" + id))
	return map[string]any{"type": "compaction", "id": id,
		"encrypted_content": "fkcmp1_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
}

// The OpenAI prompt cache (api-rules §3.4): automatic and exact-prefix. The prompt renders to
// units in order: instructions (Responses), each tool, then each message or input item, each
// as compact JSON with sorted keys. Item fields that do not reach the model (id, status) are
// dropped, a string content is its one text part, and an item with a role and no type is a
// message, so a client that strips item ids or sends a string instead of one part changes
// nothing. A request's cached tokens are the tokens through the last unit of the longest
// prefix that an earlier accepted request with the same model and prompt_cache_key sent.

// oaRender renders an OpenAI prompt: instructions ("" for none), tools, items.
func oaRender(instructions string, tools, items []map[string]any) prompt {
	var pr prompt
	h := sha256.Sum256([]byte("fakeupstream openai prompt v1"))
	add := func(path string, b []byte) {
		pr.total += len(b)
		h = chain(h, b)
		pr.units = append(pr.units, unit{path: path, end: pr.total, hash: h})
	}
	if instructions != "" {
		add("instructions", append(roleMark("instructions"), marshal(instructions)...))
	}
	for i, t := range tools {
		add(fmt.Sprintf("tools.%d", i), append(roleMark("tool"), marshal(t)...))
	}
	for i, it := range items {
		add(fmt.Sprintf("items.%d", i), append(roleMark("item"), marshal(canonItem(it))...))
	}
	return pr
}

// canonItem is the part of a message or item the model sees (see above).
func canonItem(it map[string]any) map[string]any {
	c := make(map[string]any, len(it))
	for k, v := range it {
		if k != "id" && k != "status" {
			c[k] = v
		}
	}
	if _, ok := c["type"]; !ok {
		if _, ok := c["role"]; ok {
			c["type"] = "message"
		}
	}
	if s, ok := c["content"].(string); ok {
		if s == "" {
			delete(c, "content")
		} else {
			c["content"] = []any{map[string]any{"type": textPartType(c), "text": s}}
		}
	}
	return c
}

// textPartType is the type of a text part of a message: "text" in Chat, "input_text" or
// "output_text" (assistant) in Responses.
func textPartType(m map[string]any) string {
	switch {
	case str(m, "type") != "message":
		return "text"
	case str(m, "role") == "assistant":
		return "output_text"
	default:
		return "input_text"
	}
}

// openAIMinCache is the effective Options.OpenAIMinCacheTokens.
func (s *Server) openAIMinCache() int {
	switch n := s.opts.OpenAIMinCacheTokens; {
	case n == 0:
		return 1024
	case n < 0:
		return 0
	default:
		return n
	}
}

// openAICacheUsage looks the prompt up in the cache of its model and prompt_cache_key, stores
// every prefix of it, and returns the input side of usage: CacheReadInputTokens is the
// cached prefix (0 when it is shorter than the minimum), InputTokens the rest. The caller
// holds s.mu.
func (s *Server) openAICacheUsage(model, key string, pr prompt) Usage {
	ck := model + "\x00" + key
	store := s.oaCache[ck]
	if store == nil {
		store = map[[32]byte]struct{}{}
		s.oaCache[ck] = store
	}
	cached := 0
	for k := len(pr.units) - 1; k >= 0; k-- {
		if _, ok := store[pr.units[k].hash]; ok {
			if t := Tokens(pr.units[k].end); t >= s.openAIMinCache() {
				cached = t
			}
			break
		}
	}
	for _, u := range pr.units {
		store[u.hash] = struct{}{}
	}
	return Usage{InputTokens: Tokens(pr.total) - cached, CacheReadInputTokens: cached}
}

// script calls Options.Reply, or DefaultReply.
func (s *Server) script(req *Request) Reply {
	if s.opts.Reply != nil {
		return s.opts.Reply(req)
	}
	return DefaultReply(req)
}

// toolArguments is a scripted tool input as the JSON string of a call's arguments.
func toolArguments(in any) (string, *Error) {
	if in == nil {
		in = struct{}{}
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return "", &Error{Status: http.StatusInternalServerError, Type: "api_error", Message: fmt.Sprintf("fakeupstream: marshal scripted tool input: %v", err)}
	}
	var buf bytes.Buffer
	json.Compact(&buf, raw)
	return buf.String(), nil
}

// badBlock is the error for a scripted block of an unknown type.
func badBlock(typ string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: "api_error", Message: fmt.Sprintf("fakeupstream: scripted block type %q is not one of thinking, redacted_thinking, text, tool_use", typ)}
}

// sse writes one SSE frame per call and flushes it, so the body is chunked.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter, requestID string) sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("x-request-id", requestID)
	w.WriteHeader(http.StatusOK)
	return sse{w, http.NewResponseController(w)}
}

// data writes `data: <json>` (Chat Completions); a []byte is written as is.
func (e sse) data(v any) {
	b, ok := v.([]byte)
	if !ok {
		b = marshal(v)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	e.rc.Flush()
}

// event writes `event: <name>` and `data: <json>` (Responses).
func (e sse) event(name string, v any) {
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, marshal(v))
	e.rc.Flush()
}

// writeOpenAIJSON answers a non-streaming request.
func writeOpenAIJSON(w http.ResponseWriter, requestID string, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", requestID)
	w.WriteHeader(http.StatusOK)
	w.Write(marshal(v))
}
