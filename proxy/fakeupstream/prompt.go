package fakeupstream

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
)

// The canonical prompt: what the fake "model" sees, used for token counts, the prompt cache
// (api-rules §1.8) and the thinking prefix check (§1.7.4).
//
// A request renders to a sequence of units in the API's render order: each non-deferred tool,
// each system block, then each content block of each message. A unit is the block as compact
// JSON with sorted keys and only the fields that reach the model: cache_control is removed
// everywhere, a string content is its one text block, tool_result content "" or absent is no
// content, is_error false is absent, and message-level fields other than role and content
// (output_config) are ignored. The first unit of each message carries its role. So key order,
// whitespace, string vs one-text-block content (the role "system" message's shape change) and
// the moving cache_control marker change nothing, while any changed text, input, dropped or
// inserted block does. Tools with defer_loading are not rendered (they are loaded on demand,
// and Claude Code adds them mid-session).

// Tokens returns the fake's token count for n bytes of canonical prompt: ceil(n/3).
func Tokens(n int) int { return (n + 2) / 3 }

// unit is one rendered block of the prompt.
type unit struct {
	path string   // "tools.0", "system.2", "messages.3.content.0"
	end  int      // bytes of the prompt through this unit
	hash [32]byte // chain hash of the prompt through this unit
	ttl  string   // cache_control ttl when the unit is a breakpoint, else ""
}

type prompt struct {
	units []unit
	total int // bytes
}

func chain(h [32]byte, b []byte) [32]byte {
	d := sha256.New()
	d.Write(h[:])
	d.Write(b)
	var out [32]byte
	d.Sum(out[:0])
	return out
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakeupstream: marshal canonical form: %v", err)) // only decoded JSON gets here
	}
	return b
}

func roleMark(role string) []byte { return []byte("\x1e" + role + "\x1f") }

func deferred(t map[string]any) bool { b, _ := t["defer_loading"].(bool); return b }

// canonTool is a tool definition without cache_control.
func canonTool(t map[string]any) []byte {
	c := make(map[string]any, len(t))
	for k, v := range t {
		if k != "cache_control" {
			c[k] = v
		}
	}
	return marshal(c)
}

// canonBlock is the part of a content block the model sees (see the comment at the top).
func canonBlock(b map[string]any) map[string]any {
	switch typ := str(b, "type"); typ {
	case "text":
		c := map[string]any{"type": typ, "text": b["text"]}
		if cit, ok := b["citations"].([]any); ok && len(cit) > 0 {
			c["citations"] = cit
		}
		return c
	case "tool_use", "server_tool_use":
		return map[string]any{"type": typ, "id": b["id"], "name": b["name"], "input": b["input"]}
	case "thinking":
		return map[string]any{"type": typ, "thinking": b["thinking"], "signature": b["signature"]}
	case "redacted_thinking":
		return map[string]any{"type": typ, "data": b["data"]}
	case "tool_result":
		c := map[string]any{"type": typ, "tool_use_id": b["tool_use_id"]}
		if content := canonContent(b["content"]); len(content) > 0 {
			c["content"] = content
		}
		if e, _ := b["is_error"].(bool); e {
			c["is_error"] = true
		}
		return c
	default:
		c := make(map[string]any, len(b))
		for k, v := range b {
			switch {
			case k == "cache_control":
			case k == "content":
				c[k] = canonContent(v)
			default:
				c[k] = v
			}
		}
		return c
	}
}

func canonContent(v any) []any {
	switch c := v.(type) {
	case string:
		if c == "" {
			return nil
		}
		return []any{map[string]any{"type": "text", "text": c}}
	case []any:
		out := make([]any, 0, len(c))
		for _, e := range c {
			if m := obj(e); m != nil {
				out = append(out, canonBlock(m))
			} else {
				out = append(out, e)
			}
		}
		return out
	}
	return nil
}

// render renders a request to its canonical prompt. msgs are the messages the model gets
// (after any drop_block). Changing tool_choice or the thinking parameters changes the hash
// of every message unit without adding bytes, as the cache invalidation tiers say (§1.8).
func render(p *parsed, msgs []msg) prompt {
	var pr prompt
	h := sha256.Sum256([]byte("fakeupstream prompt v1"))
	add := func(path string, b []byte, ttl string) {
		pr.total += len(b)
		h = chain(h, b)
		pr.units = append(pr.units, unit{path: path, end: pr.total, hash: h, ttl: ttl})
	}
	for i, t := range p.tools {
		if !deferred(t) {
			add(fmt.Sprintf("tools.%d", i), append(roleMark("tool"), canonTool(t)...), cacheTTL(t))
		}
	}
	for i, b := range p.system {
		add(fmt.Sprintf("system.%d", i), append(roleMark("top-system"), marshal(canonBlock(b))...), cacheTTL(b))
	}
	h = chain(h, []byte("\x1econtext\x1f"+string(marshal(p.toolChoice))+p.thinking.typ+strconv.FormatInt(p.thinking.budget, 10)))
	for i, m := range msgs {
		for j, b := range m.blocks {
			var u []byte
			if j == 0 {
				u = roleMark(m.role)
			}
			ttl := cacheTTL(b)
			if c, ok := b["content"].([]any); ok && ttl == "" && str(b, "type") == "tool_result" {
				for _, e := range c {
					if t := cacheTTL(obj(e)); t != "" {
						ttl = t
					}
				}
			}
			add(fmt.Sprintf("messages.%d.content.%d", i, j), append(u, marshal(canonBlock(b))...), ttl)
		}
	}
	if t := cacheTTL(p.doc); t != "" && len(pr.units) > 0 && pr.units[len(pr.units)-1].ttl == "" {
		pr.units[len(pr.units)-1].ttl = t // automatic caching: the last block (§1.6)
	}
	return pr
}

// Usage is what the fake reports in usage (api-rules §7): InputTokens +
// CacheCreationInputTokens + CacheReadInputTokens is the prompt size in Tokens.
type Usage struct {
	InputTokens              int
	CacheCreationInputTokens int // = CacheCreation5m + CacheCreation1h
	CacheReadInputTokens     int
	CacheCreation5m          int
	CacheCreation1h          int
	OutputTokens             int
}

// cacheLookback is how many blocks before a breakpoint the cache checks for a hit (§1.8).
const cacheLookback = 20

// cacheUsage looks the prompt up in the model's cache, stores its breakpoints, and returns
// the input side of usage (api-rules §1.8, checklist §6 item 13). The longest stored prefix
// ending at a breakpoint or at one of the 20 blocks before one is read; every breakpoint after
// it is written (when at least min tokens long); the rest is uncached input. TTLs are not
// timed. The caller holds s.mu.
func (s *Server) cacheUsage(model string, pr prompt, min int) Usage {
	store := s.cache[model]
	if store == nil {
		store = map[[32]byte]struct{}{}
		s.cache[model] = store
	}
	hit := -1
	for k, u := range pr.units {
		if u.ttl == "" {
			continue
		}
		for q := k; q >= 0 && q >= k-cacheLookback; q-- {
			if _, ok := store[pr.units[q].hash]; ok {
				hit = max(hit, q)
				break
			}
		}
	}
	var u Usage
	if hit >= 0 {
		u.CacheReadInputTokens = Tokens(pr.units[hit].end)
	}
	done := u.CacheReadInputTokens
	for k, unit := range pr.units {
		if unit.ttl == "" || k <= hit || Tokens(unit.end) < min {
			continue
		}
		seg := Tokens(unit.end) - done
		done = Tokens(unit.end)
		if unit.ttl == "1h" {
			u.CacheCreation1h += seg
		} else {
			u.CacheCreation5m += seg
		}
		store[unit.hash] = struct{}{}
	}
	u.CacheCreationInputTokens = u.CacheCreation5m + u.CacheCreation1h
	u.InputTokens = Tokens(pr.total) - done
	return u
}

// PromptSize is a request's canonical prompt size in tokens and the size through each cache
// breakpoint, in render order.
type PromptSize struct {
	Tokens      int
	Breakpoints []BreakpointSize
}

// BreakpointSize is the prompt size through one cache_control breakpoint.
type BreakpointSize struct {
	Path   string // "system.2", "messages.3.content.0"; the automatic breakpoint is on the last block
	TTL    string // "5m" or "1h"
	Tokens int
}

// Measure returns the prompt size the fake would count for a decoded request body, so a test
// can compute expected usage: a request that repeats an earlier accepted request's prefix
// through one of its breakpoints reads that breakpoint's Tokens from the cache (same model,
// tools, system, tool_choice and thinking). Measure does not validate the body.
func Measure(body []byte) (PromptSize, error) {
	doc, perr := parseJSON(body)
	if perr != nil {
		return PromptSize{}, perr
	}
	p := looseParse(doc)
	pr := render(p, p.msgs)
	out := PromptSize{Tokens: Tokens(pr.total)}
	for _, u := range pr.units {
		if u.ttl != "" {
			out.Breakpoints = append(out.Breakpoints, BreakpointSize{Path: u.path, TTL: u.ttl, Tokens: Tokens(u.end)})
		}
	}
	return out, nil
}

// looseParse extracts what render needs without the schema pass.
func looseParse(doc map[string]any) *parsed {
	p := &parsed{doc: doc}
	switch s := doc["system"].(type) {
	case string:
		if s != "" {
			p.system = []map[string]any{{"type": "text", "text": s}}
		}
	case []any:
		p.system = objects(s)
	}
	p.tools = objects(doc["tools"])
	p.toolChoice = obj(doc["tool_choice"])
	if t := obj(doc["thinking"]); t != nil {
		p.thinking.typ = str(t, "type")
		p.thinking.budget, _ = num(t, "budget_tokens")
	}
	msgs, _ := doc["messages"].([]any)
	for _, e := range msgs {
		m := obj(e)
		if m == nil {
			continue
		}
		out := msg{role: str(m, "role")}
		switch c := m["content"].(type) {
		case string:
			out.str = true
			if c != "" {
				out.blocks = []map[string]any{{"type": "text", "text": c}}
			}
		case []any:
			out.blocks = objects(c)
		}
		p.msgs = append(p.msgs, out)
	}
	return p
}

// binding is the thinking prefix state of a request (api-rules §1.7.4): hashes of tools and
// system, and the chain hash over the messages' non-thinking units before each thinking block.
type binding struct {
	tools, system [32]byte
	before        map[[2]int][32]byte // (message, block) of a thinking block → messages hash before it
	end           [32]byte            // messages hash after the last message
}

func bindingOf(p *parsed, msgs []msg) binding {
	bd := binding{before: map[[2]int][32]byte{}}
	var th, sh [32]byte
	for _, t := range p.tools {
		if !deferred(t) {
			th = chain(th, canonTool(t))
		}
	}
	for _, b := range p.system {
		sh = chain(sh, marshal(canonBlock(b)))
	}
	bd.tools, bd.system = th, sh
	var h [32]byte
	for i, m := range msgs {
		marked := false
		for j, b := range m.blocks {
			if isThinking(b) {
				bd.before[[2]int{i, j}] = h
				continue
			}
			h = chain(h, bindingUnit(m.role, &marked, b))
		}
	}
	bd.end = h
	return bd
}

// bindingUnit renders a non-thinking block for the prefix chain; the first of a message
// carries the role.
func bindingUnit(role string, marked *bool, b map[string]any) []byte {
	var u []byte
	if !*marked {
		u = roleMark(role)
		*marked = true
	}
	return append(u, marshal(canonBlock(b))...)
}
