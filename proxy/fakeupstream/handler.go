package fakeupstream

import (
	"fmt"
	"net/http"
)

// messages serves POST …/v1/messages and …/v1/messages/count_tokens: authentication, the
// body checks (size, encoding, JSON), the schema pass, the semantic rules, the thinking
// checks, then either the token count or the scripted reply with simulated cache usage.
func (s *Server) messages(w http.ResponseWriter, r *http.Request, rec *Recorded, countTokens bool) *Error {
	rec.Format = FormatAnthropic
	raw, err := readRaw(r, s.opts.MaxBodyBytes)
	rec.Raw = raw
	if err != nil {
		return err
	}
	if err := s.authorize(r); err != nil {
		return err
	}
	if r.Header.Get("Anthropic-Version") == "" {
		return invalid("anthropic-version: header is required") // our text
	}
	body, err := decodeBody(raw, r.Header.Get("Content-Encoding"), s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	rec.Body = body
	doc, err := parseJSON(body)
	if err != nil {
		return err
	}
	p, err := parseBody(doc, betas(r.Header), countTokens)
	if err != nil {
		return err
	}
	rules := s.rules(p.model)
	if err := s.checkRules(p, rules); err != nil {
		return err
	}
	s.mu.Lock()
	st, err := s.checkThinking(p, rules)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	pr := render(p, st.msgs)

	if countTokens {
		rec.Usage.InputTokens = Tokens(pr.total)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, rec.Usage.InputTokens)
		rec.Status = http.StatusOK
		return nil
	}

	req := s.request(r, rec, p)
	reply := DefaultReply
	if s.opts.Reply != nil {
		reply = s.opts.Reply
	}
	rp := reply(req)
	if err := rp.failure(p.stream); err != nil {
		return err
	}

	s.mu.Lock()
	s.nextMsg++
	msgID := fmt.Sprintf("msg_fake_%04d", s.nextMsg)
	content, err := s.emit(p, st, msgID, rp.Content)
	var usage Usage
	if err == nil {
		usage = s.cacheUsage(p.model, pr, rules.MinCacheableTokens)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	usage.OutputTokens = outputTokens(content)
	rec.MessageID, rec.Usage, rec.InputTransformations = msgID, usage, st.dropped
	rec.Status = http.StatusOK

	stop := stopReason(rp)
	m := message{
		ID: msgID, Type: "message", Role: "assistant", Model: p.model,
		StopReason: &stop, Usage: usageOf(usage, usage.OutputTokens),
		InputTransformations: st.dropped,
	}
	if p.stream {
		rec.StreamError = writeStream(w, m, content, usage, rp)
	} else {
		writeJSON(w, m, content)
	}
	return nil
}

// request builds what a Reply function sees.
func (s *Server) request(r *http.Request, rec *Recorded, p *parsed) *Request {
	req := &Request{
		Format: FormatAnthropic,
		Method: r.Method, Path: rec.Path, Header: rec.Header, Raw: rec.Raw, Body: rec.Body,
		Model: p.model, Stream: p.stream, Params: p.doc, Betas: p.betas,
		System: p.system, Tools: p.tools,
		ThinkingType: p.thinking.typ, ThinkingDisplay: p.thinking.display,
	}
	for _, m := range p.msgs {
		req.Messages = append(req.Messages, Message{Role: m.role, Content: m.blocks, StringContent: m.str})
	}
	return req
}
