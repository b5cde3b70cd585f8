//go:build e2e

package e2e_test

// Reading request bodies in the three API formats, the scripted model of the Codex and
// OpenCode tool loops, and the checks their trimmed sessions share.

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// The sessions of the Codex and OpenCode tests go through three API formats. wireBody is a
// request body in any of them, reduced to what the tests check: the messages as roles and
// parts, the system prompt, the tools offered.

const (
	formatAnthropic = "anthropic" // …/v1/messages
	formatChat      = "chat"      // …/chat/completions
	formatResponses = "responses" // …/responses
)

// wirePart is a piece of a message: kind "text", "thinking", "tool_use" (text is the input or
// the arguments as sent), "tool_result" (text is the output's text) or "other" (text is the
// type).
type wirePart struct {
	kind, text, name string
}

// wireMsg is an Anthropic or Chat message, or a Responses input item: a message keeps its
// role, a function_call is an "assistant" tool_use, a function_call_output a "tool"
// tool_result, a reasoning item an "assistant" thinking part.
type wireMsg struct {
	role  string
	parts []wirePart
}

type wireBody struct {
	format         string
	model          string
	system         []string // Anthropic system blocks (non-text blocks as "")
	instructions   string   // Responses
	promptCacheKey string   // Responses
	msgs           []wireMsg
	tools          []string // Responses namespace tools as namespace__name
	raw            string

	seq            int // the tap's number of the request as the agent sent it
	sent, received int // bytes from the agent, bytes to the model
}

// formatOf returns the format of a model call from its path, "" for other calls.
func formatOf(method, path string) string {
	p, _, _ := strings.Cut(path, "?")
	switch {
	case method != http.MethodPost:
		return ""
	case strings.HasSuffix(p, "/v1/messages"):
		return formatAnthropic
	case strings.HasSuffix(p, "/chat/completions"):
		return formatChat
	case strings.HasSuffix(p, "/responses"):
		return formatResponses
	}
	return ""
}

func parseWire(format string, body []byte) (*wireBody, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s body: %w", format, err)
	}
	b := &wireBody{format: format, raw: string(body)}
	b.model, _ = doc["model"].(string)
	switch format {
	case formatAnthropic:
		if s, ok := doc["system"].(string); ok {
			b.system = []string{s}
		}
		for _, blk := range wireList(doc["system"]) {
			text, _ := blk["text"].(string)
			b.system = append(b.system, text)
		}
		for _, m := range wireList(doc["messages"]) {
			msg := wireMsg{role: wireStr(m, "role")}
			if s, ok := m["content"].(string); ok {
				msg.parts = append(msg.parts, wirePart{kind: "text", text: s})
			}
			for _, blk := range wireList(m["content"]) {
				switch typ := wireStr(blk, "type"); typ {
				case "text":
					msg.parts = append(msg.parts, wirePart{kind: "text", text: wireStr(blk, "text")})
				case "thinking", "redacted_thinking":
					msg.parts = append(msg.parts, wirePart{kind: "thinking", text: wireStr(blk, "thinking")})
				case "tool_use":
					in, _ := json.Marshal(blk["input"])
					msg.parts = append(msg.parts, wirePart{kind: "tool_use", text: string(in), name: wireStr(blk, "name")})
				case "tool_result":
					msg.parts = append(msg.parts, wirePart{kind: "tool_result", text: wireText(blk["content"])})
				default:
					msg.parts = append(msg.parts, wirePart{kind: "other", text: typ})
				}
			}
			b.msgs = append(b.msgs, msg)
		}
		for _, tl := range wireList(doc["tools"]) {
			b.tools = append(b.tools, wireStr(tl, "name"))
		}
	case formatChat:
		for _, m := range wireList(doc["messages"]) {
			msg := wireMsg{role: wireStr(m, "role")}
			kind := "text"
			if msg.role == "tool" {
				kind = "tool_result"
			}
			if m["content"] != nil {
				msg.parts = append(msg.parts, wirePart{kind: kind, text: wireText(m["content"])})
			}
			if r := wireStr(m, "reasoning_content"); r != "" {
				msg.parts = append(msg.parts, wirePart{kind: "thinking", text: r})
			}
			for _, c := range wireList(m["tool_calls"]) {
				fn, _ := c["function"].(map[string]any)
				msg.parts = append(msg.parts, wirePart{kind: "tool_use", text: wireStr(fn, "arguments"), name: wireStr(fn, "name")})
			}
			b.msgs = append(b.msgs, msg)
		}
		for _, tl := range wireList(doc["tools"]) {
			if fn, ok := tl["function"].(map[string]any); ok {
				b.tools = append(b.tools, wireStr(fn, "name"))
			} else {
				b.tools = append(b.tools, wireStr(tl, "name"))
			}
		}
	case formatResponses:
		b.instructions, _ = doc["instructions"].(string)
		b.promptCacheKey, _ = doc["prompt_cache_key"].(string)
		if s, ok := doc["input"].(string); ok {
			b.msgs = append(b.msgs, wireMsg{role: "user", parts: []wirePart{{kind: "text", text: s}}})
		}
		for _, it := range wireList(doc["input"]) {
			switch typ := wireStr(it, "type"); {
			case typ == "message" || typ == "" && wireStr(it, "role") != "":
				msg := wireMsg{role: wireStr(it, "role")}
				if s, ok := it["content"].(string); ok {
					msg.parts = append(msg.parts, wirePart{kind: "text", text: s})
				}
				for _, c := range wireList(it["content"]) {
					switch ct := wireStr(c, "type"); ct {
					case "input_text", "output_text", "text":
						msg.parts = append(msg.parts, wirePart{kind: "text", text: wireStr(c, "text")})
					default:
						msg.parts = append(msg.parts, wirePart{kind: "other", text: ct})
					}
				}
				b.msgs = append(b.msgs, msg)
			case typ == "function_call" || typ == "custom_tool_call":
				name := wireStr(it, "name")
				if ns := wireStr(it, "namespace"); ns != "" {
					name = ns + "__" + name
				}
				args := wireStr(it, "arguments")
				if typ == "custom_tool_call" {
					args = wireStr(it, "input")
				}
				b.msgs = append(b.msgs, wireMsg{role: "assistant", parts: []wirePart{{kind: "tool_use", text: args, name: name}}})
			case typ == "function_call_output" || typ == "custom_tool_call_output":
				b.msgs = append(b.msgs, wireMsg{role: "tool", parts: []wirePart{{kind: "tool_result", text: wireText(it["output"])}}})
			case typ == "reasoning":
				var sum []string
				for _, s := range wireList(it["summary"]) {
					sum = append(sum, wireStr(s, "text"))
				}
				b.msgs = append(b.msgs, wireMsg{role: "assistant", parts: []wirePart{{kind: "thinking", text: strings.Join(sum, "\n")}}})
			default:
				b.msgs = append(b.msgs, wireMsg{parts: []wirePart{{kind: "other", text: typ}}})
			}
		}
		for _, tl := range wireList(doc["tools"]) {
			if wireStr(tl, "type") == "namespace" {
				for _, sub := range wireList(tl["tools"]) {
					b.tools = append(b.tools, wireStr(tl, "name")+"__"+wireStr(sub, "name"))
				}
				continue
			}
			b.tools = append(b.tools, wireStr(tl, "name"))
		}
	default:
		return nil, fmt.Errorf("unknown format %q", format)
	}
	return b, nil
}

func wireStr(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// wireList returns v's elements that are objects; nil when v is not an array.
func wireList(v any) []map[string]any {
	arr, _ := v.([]any)
	var out []map[string]any
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// wireText is the text of a content value: a string, or its text parts joined by newlines.
func wireText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var texts []string
	for _, p := range wireList(v) {
		if t, ok := p["text"].(string); ok {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n")
}

// offers reports whether the request offers a tool named name.
func (b *wireBody) offers(name string) bool { return slices.Contains(b.tools, name) }

// instructionRole reports whether a message of this role is part of the system prompt.
func instructionRole(role string) bool { return role == "system" || role == "developer" }

// endsWithToolResults reports whether the last message (instruction messages aside) holds
// only tool results: the model is in the middle of a tool loop.
func (b *wireBody) endsWithToolResults() bool {
	for i := len(b.msgs) - 1; i >= 0; i-- {
		m := b.msgs[i]
		if instructionRole(m.role) {
			continue
		}
		if len(m.parts) == 0 {
			return false
		}
		for _, p := range m.parts {
			if p.kind != "tool_result" {
				return false
			}
		}
		return true
	}
	return false
}

// lastToolOutput returns the text of the last tool result.
func (b *wireBody) lastToolOutput() string {
	for _, m := range slices.Backward(b.msgs) {
		for _, p := range slices.Backward(m.parts) {
			if p.kind == "tool_result" {
				return p.text
			}
		}
	}
	return ""
}

// lastUserTexts returns the text parts of the last user message that has any.
func (b *wireBody) lastUserTexts() []string {
	for _, m := range slices.Backward(b.msgs) {
		if m.role != "user" {
			continue
		}
		var out []string
		for _, p := range m.parts {
			if p.kind == "text" {
				out = append(out, p.text)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// standingInstruction checks that the request carries the standing instruction once, where
// the proxy places it for the format: the last system block (Anthropic), or a system
// (Chat) or developer (Responses) message right after the leading instruction messages.
func (b *wireBody) standingInstruction() error {
	si := proxy.StandingInstruction
	if b.format == formatAnthropic {
		n := 0
		for _, s := range b.system {
			if s == si {
				n++
			}
		}
		switch {
		case n != 1:
			return fmt.Errorf("system carries the standing instruction %d times, want 1 (%d system blocks)", n, len(b.system))
		case b.system[len(b.system)-1] != si:
			return fmt.Errorf("the standing instruction is not the last of the %d system blocks", len(b.system))
		}
		return nil
	}
	if strings.Contains(b.instructions, si) {
		return errors.New("the standing instruction is in instructions, want a developer message item")
	}
	role := "system"
	if b.format == formatResponses {
		role = "developer"
	}
	at := -1
	for i, m := range b.msgs {
		if instructionRole(m.role) && len(m.parts) == 1 && m.parts[0].text == si {
			if at >= 0 {
				return fmt.Errorf("the standing instruction is in messages %d and %d, want it once", at, i)
			}
			at = i
		}
	}
	if at < 0 {
		n := strings.Count(b.raw, jsonQuoteInner(si))
		return fmt.Errorf("no %s message holds the standing instruction alone (the body holds its text %d times)", role, n)
	}
	if r := b.msgs[at].role; r != role {
		return fmt.Errorf("the standing instruction is a %s message, want %s", r, role)
	}
	for i := range at {
		if !instructionRole(b.msgs[i].role) {
			return fmt.Errorf("the standing instruction is message %d, after a %s message (%d): want it right after the leading system/developer messages", at, b.msgs[i].role, i)
		}
	}
	if at+1 < len(b.msgs) && instructionRole(b.msgs[at+1].role) {
		return fmt.Errorf("the standing instruction is message %d, before another %s message: want it after all the leading ones", at, b.msgs[at+1].role)
	}
	return nil
}

func jsonQuoteInner(s string) string {
	q, _ := json.Marshal(s)
	return string(q[1 : len(q)-1])
}

// pointer returns the pointer for sid in the user messages (a text part starting with its
// head; in a Chat string content the prompt may follow it), the dropped count it states, and
// how many parts start with it.
func (b *wireBody) pointer(sid string) (text string, dropped, count int) {
	head := "[smarter-compact: continuing session " + sid + "; "
	for _, m := range b.msgs {
		if m.role != "user" {
			continue
		}
		for _, p := range m.parts {
			if p.kind != "text" || !strings.HasPrefix(p.text, head) {
				continue
			}
			count++
			n, _, _ := strings.Cut(strings.TrimPrefix(p.text, head), " ")
			dropped, _ = strconv.Atoi(n)
			text = p.text
		}
	}
	return text, dropped, count
}

// pointerWith reports whether the pointer for sid is in the user message holding prompt.
func (b *wireBody) pointerWith(sid, prompt string) bool {
	head := "[smarter-compact: continuing session " + sid + "; "
	for _, m := range b.msgs {
		ptr, txt := false, false
		for _, p := range m.parts {
			ptr = ptr || p.kind == "text" && strings.HasPrefix(p.text, head)
			txt = txt || p.kind == "text" && strings.Contains(p.text, prompt)
		}
		if m.role == "user" && ptr && txt {
			return true
		}
	}
	return false
}

// toolScript is the fake model's side of a Codex or OpenCode session: the turns of e2eTurns,
// each step a call of the agent's shell tool that prints the step's data file (script.file),
// then finalText. It reads its position from the request alone, so a trimmed history does
// not confuse it: after tool results, the step after the one whose marker the last output
// shows; after a prompt, step 1 of the turn it names. A request that does not offer the tool
// (OpenCode's title request) gets a title.
type toolScript struct {
	files script
	tool  string
	input func(path string) any // the tool's input for printing a file
	// thinking starts every reply with a thinking block (Responses: a reasoning item, which
	// Codex sends back with the calls that follow it). Anthropic requests that turn thinking
	// on get one regardless.
	thinking bool
}

var stepOut = regexp.MustCompile(`E2E-OUT t=(\d+) s=(\d+)`)

const titleText = "E2E data files"

func (sc *toolScript) reply(req *fakeupstream.Request) fakeupstream.Reply {
	text := func(blocks []fakeupstream.Block, s string) fakeupstream.Reply {
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text(s))}
	}
	b, err := parseWire(formatOf(req.Method, req.Path), req.Body)
	if err != nil {
		return text(nil, "E2E fake: "+err.Error())
	}
	var blocks []fakeupstream.Block
	if sc.thinking || req.ThinkingEnabled() {
		blocks = append(blocks, fakeupstream.Thinking(fmt.Sprintf("Planning the next step after %d messages.", len(b.msgs))))
	}
	if !b.offers(sc.tool) {
		return text(blocks, titleText)
	}
	turn, step := sc.position(b)
	switch {
	case turn < 1 || turn > len(e2eTurns):
		return text(blocks, "E2E fake: this request is not part of the script.")
	case step > e2eTurns[turn-1].steps:
		return text(blocks, finalText(turn, e2eTurns[turn-1].steps))
	}
	blocks = append(blocks, fakeupstream.Text(fmt.Sprintf("Reading file %d of batch %d.", step, turn)))
	return fakeupstream.Reply{Content: append(blocks, fakeupstream.ToolUse(sc.tool, sc.input(sc.files.file(turn, step))))}
}

// position returns the turn and the step the next reply makes, (0, 0) when it cannot tell.
func (sc *toolScript) position(b *wireBody) (turn, step int) {
	if b.endsWithToolResults() {
		m := stepOut.FindStringSubmatch(b.lastToolOutput())
		if m == nil {
			return 0, 0
		}
		turn, _ = strconv.Atoi(m[1])
		step, _ = strconv.Atoi(m[2])
		return turn, step + 1
	}
	for _, text := range slices.Backward(b.lastUserTexts()) {
		if m := turnMarker.FindStringSubmatch(text); m != nil {
			turn, _ = strconv.Atoi(m[1])
			return turn, 1
		}
	}
	return 0, 0
}

// trimSession is a finished Codex or OpenCode session of e2eTurns through serve, for
// checkTrimmedSession.
type trimSession struct {
	agent  string // "Codex", "OpenCode", for messages
	format string // of every model call
	model  string // of the agent's requests (not OpenCode's title request)
	sid    string // the CLI's session id, which the proxy must use
	// sidOf returns the session id a model call carries (a header, or prompt_cache_key).
	sidOf  func(r fakeupstream.Recorded, b *wireBody) string
	trimAt int
	sc     *toolScript
	fake   *fakeupstream.Server
	srv    *serveProc // stopped: its databases are closed
	tp     *tap
	out    *outside
	runs   []agentRun
	took   time.Duration
}

// checkTrimmedSession checks what reached the model and what the session database holds:
// every request accepted; each model call on the CLI's session, with the standing
// instruction in its place; no pointer before the first trim and exactly one, sticky, on every
// agent request from then on; a prompt row per turn, a tool_use and a tool_result row per
// step, in context exactly when the last request carries them; trim and usage events and no
// fail-open.
func checkTrimmedSession(t *testing.T, s trimSession) {
	t.Helper()
	recs := s.fake.Requests()
	if rej := s.fake.Rejections(); len(rej) > 0 {
		var b strings.Builder
		for _, r := range rej {
			fmt.Fprintf(&b, "\n%s %s -> %d %s: %s", r.Method, r.Path, r.Status, r.ErrorType, r.Error)
		}
		t.Fatalf("the fake upstream rejected %d of %d requests:%s\n%s", len(rej), len(recs), b.String(), diagnose(s.fake, s.srv))
	}
	sent := s.tp.requests()
	if len(recs) != len(sent) {
		t.Errorf("%s sent %d requests, the upstream received %d", s.agent, len(sent), len(recs))
	}
	var calls, agentCalls []*wireBody // every model call; those offering the tool
	var other []string
	for i, r := range recs {
		f := formatOf(r.Method, r.Path)
		if f == "" {
			other = append(other, r.Method+" "+r.Path)
			continue
		}
		if f != s.format {
			t.Errorf("request %d: %s %s is a %s call, want %s", i+1, r.Method, r.Path, f, s.format)
			continue
		}
		b, err := parseWire(f, r.Body)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if got := s.sidOf(r, b); got != s.sid {
			t.Errorf("request %d: session id %q, want %s's own %q", i+1, got, s.agent, s.sid)
		}
		if seq, _ := strconv.Atoi(r.Header.Get(seqHeader)); seq >= 1 && seq <= len(sent) {
			b.seq, b.sent = seq, len(sent[seq-1].body)
		} else {
			t.Errorf("request %d: %s header %q does not name a request the tap recorded", i+1, seqHeader, r.Header.Get(seqHeader))
		}
		b.received = len(r.Body)
		calls = append(calls, b)
		if b.offers(s.sc.tool) {
			agentCalls = append(agentCalls, b)
			if b.model != s.model {
				t.Errorf("request %d: model %q, want %q", i+1, b.model, s.model)
			}
		}
	}
	if len(other) > 0 {
		t.Logf("requests other than model calls: %q", other)
	}
	if len(agentCalls) == 0 {
		t.Fatalf("no model call offered the %s tool\n%s", s.sc.tool, diagnose(s.fake, s.srv))
	}

	// The standing instruction on every model call; the pointer on every agent request from
	// the first trim on.
	var siErrs []string
	for i, b := range calls {
		if err := b.standingInstruction(); err != nil {
			siErrs = append(siErrs, fmt.Sprintf("model call %d (%d bytes): %v", i+1, b.received, err))
		}
	}
	if n := len(siErrs); n > 0 {
		if n > 3 {
			siErrs = append(siErrs[:3], fmt.Sprintf("and %d more", n-3))
		}
		t.Errorf("%d of %d model calls lack the standing instruction in its place:\n%s", n, len(calls), strings.Join(siErrs, "\n"))
	}
	firstTrim, lastDropped, n := -1, 0, 0
	for i, b := range calls {
		ptr, dropped, count := b.pointer(s.sid)
		if !b.offers(s.sc.tool) {
			if ptr != "" {
				t.Errorf("model call %d (no %s tool: a title request) carries a pointer", i+1, s.sc.tool)
			}
			continue
		}
		n++
		if ptr == "" {
			if firstTrim >= 0 {
				t.Errorf("agent request %d: no pointer for session %s, but agent request %d was trimmed", n, s.sid, firstTrim)
			}
			continue
		}
		if firstTrim < 0 {
			firstTrim = n
		}
		if want := proxy.PointerText(s.sid, dropped); !strings.HasPrefix(ptr, want) {
			t.Errorf("agent request %d: the pointer differs from proxy.PointerText(%q, %d):\n%s", n, s.sid, dropped, ptr)
		}
		if count != 1 {
			t.Errorf("agent request %d: %d pointers, want 1", n, count)
		}
		if dropped < 1 || dropped < lastDropped {
			t.Errorf("agent request %d: the pointer says %d messages dropped, after %d before: the cut is sticky", n, dropped, lastDropped)
		}
		lastDropped = dropped
	}
	last := agentCalls[len(agentCalls)-1]
	big := agentCalls[0]
	for _, b := range agentCalls {
		if b.sent > big.sent {
			big = b
		}
	}
	switch {
	case firstTrim < 0:
		t.Errorf("no request carries a pointer for session %s: the session was never trimmed at CONTEXT_TRIM_AT_TOKENS=%d (largest agent request %d bytes from %s, %d upstream)",
			s.sid, s.trimAt, big.sent, s.agent, big.received)
	case firstTrim == 1:
		t.Errorf("the first agent request was trimmed: CONTEXT_TRIM_AT_TOKENS=%d is below %s's first request (%d bytes); raise it", s.trimAt, s.agent, agentCalls[0].sent)
	case last.received >= last.sent:
		t.Errorf("last request: %d bytes upstream, %d from %s: trimming should have made it smaller", last.received, last.sent, s.agent)
	}
	if firstTrim > 0 {
		for i, turn := range slices.Backward(e2eTurns) {
			if last.pointerWith(s.sid, turn.prompt) {
				t.Logf("last request: the pointer is in turn %d's prompt message", i+1)
				break
			}
		}
	}

	// The session database: a row for every prompt, tool call and tool output; what the last
	// request carries is in context, the rest is not.
	sid, ok := store.SanitizeSID(s.sid)
	if !ok {
		t.Fatalf("%s's session id %q is not usable as a database name", s.agent, s.sid)
	}
	db := openSessionDB(t, s.srv.stateDir, sid)
	rows, outRows := countTrimmedRows(t, db)
	// Each tool call was stored once: from the response, with the row the agent's next
	// request gives it (every call of the script reads its own file).
	if n := queryInt(t, db, `SELECT count(*) FROM (SELECT text FROM messages WHERE kind = 'tool_use' GROUP BY text HAVING count(*) > 1)`); n > 0 {
		t.Errorf("%d tool calls are stored more than once", n)
	}
	inCtx := func(q string, args ...any) (n int, inContext bool, names []string) {
		r, err := db.Query(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer r.Close()
		for r.Next() {
			var in int
			var name sql.NullString
			if err := r.Scan(&in, &name); err != nil {
				t.Fatal(err)
			}
			n++
			inContext = in == 1
			names = append(names, name.String)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return n, inContext, names
	}
	// The agent's thread is the one of its tool calls; OpenCode's title request, which quotes
	// the first prompt, has its own.
	var thread string
	if err := db.QueryRow(`SELECT thread FROM messages WHERE kind = 'tool_use' ORDER BY seq LIMIT 1`).Scan(&thread); err != nil {
		t.Errorf("no tool_use row: %v", err)
	}
	for i, turn := range e2eTurns {
		n, in, _ := inCtx(`SELECT in_context, name FROM messages WHERE role = 'user' AND kind = 'text' AND text = ? AND thread = ?`, turn.prompt, thread)
		if n != 1 {
			t.Errorf("turn %d: %d user text rows of the agent's thread hold the prompt, want 1", i+1, n)
		} else if want := strings.Contains(last.raw, turn.prompt); in != want {
			t.Errorf("turn %d: the prompt's row has in_context = %v, but the last request carries it: %v", i+1, in, want)
		}
		for st := 1; st <= turn.steps; st++ {
			// The step's call is one assistant tool_use row naming the file it reads, its output
			// one tool tool_result row holding its marker; each is in context when the last
			// request carries it.
			path, mark := s.sc.files.file(i+1, st), stepMarker(i+1, st)
			for _, c := range []struct{ role, kind, needle, holds, part string }{
				{"assistant", "tool_use", path, "name " + path, "call"},
				{"tool", "tool_result", mark, fmt.Sprintf("hold %q", mark), "output"},
			} {
				n, in, names := inCtx(`SELECT in_context, name FROM messages WHERE role = ? AND kind = ? AND instr(text, ?) > 0`, c.role, c.kind, c.needle)
				switch {
				case n != 1:
					t.Errorf("turn %d step %d: %d %s %s rows %s, want 1", i+1, st, n, c.role, c.kind, c.holds)
				case names[0] != s.sc.tool:
					t.Errorf("turn %d step %d: %s row named %q, want %q", i+1, st, c.kind, names[0], s.sc.tool)
				case in != strings.Contains(last.raw, c.needle):
					t.Errorf("turn %d step %d: the %s row has in_context = %v, but the last request carries the %s: %v", i+1, st, c.kind, in, c.part, !in)
				}
			}
		}
	}

	// Events: trims, a usage event per model call, no fail-open.
	trims := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'trim'`)
	usages := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'usage'`)
	failOpens := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'fail_open'`)
	if trims == 0 {
		t.Error("no trim event")
	}
	if usages != len(calls) {
		t.Errorf("%d usage events for %d model calls", usages, len(calls))
	}
	if failOpens != 0 {
		t.Errorf("%d fail_open events:\n%s", failOpens, s.srv.log)
	}

	// What we measured.
	sentMsgs := -1
	if last.seq > 0 {
		if w, err := parseWire(s.format, sent[last.seq-1].body); err == nil {
			sentMsgs = len(w.msgs)
		}
	}
	t.Logf("%s session %s, model %s: %d runs in %s (%s); %d model calls (%d agent requests), first trimmed agent request #%d",
		s.agent, s.sid, s.model, len(s.runs), s.took.Round(time.Millisecond), runTimes(s.runs), len(calls), len(agentCalls), firstTrim)
	t.Logf("first agent request: %d bytes from %s, %d upstream; largest: %d -> %d; last: %d -> %d bytes, %d -> %d messages/items (CONTEXT_TRIM_AT_TOKENS=%d)",
		agentCalls[0].sent, s.agent, agentCalls[0].received, big.sent, big.received, last.sent, last.received, sentMsgs, len(last.msgs), s.trimAt)
	t.Logf("session db: %d rows, %d out of context; %d trim events, %d usage events", rows, outRows, trims, usages)
	t.Logf("requests: %s", s.tp.timeline())
	if tries := s.out.attempts(); len(tries) > 0 {
		t.Logf("outside calls %s tried (refused): %q", s.agent, tries)
	}
	tr, err := db.Query(`SELECT tokens_before, tokens_after, dropped FROM events WHERE kind = 'trim' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for tr.Next() {
		var before, after, dropped sql.NullInt64
		if err := tr.Scan(&before, &after, &dropped); err != nil {
			t.Fatal(err)
		}
		t.Logf("trim: estimate %d -> %d tokens, %d messages dropped", before.Int64, after.Int64, dropped.Int64)
	}
}
