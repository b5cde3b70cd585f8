package fakeupstream

import (
	"fmt"
	"strings"
)

// The semantic pass over a parsed body, in the order the checklist gives them (api-rules §6
// items 5–9): cache_control, text, sequence, tool pairing, thinking configuration and
// thinking structure. Signatures and the prefix check are in thinking.go.

func (s *Server) checkRules(p *parsed, rules ModelRules) *Error {
	for _, check := range []func(*parsed, ModelRules) *Error{
		checkCacheBreakpoints,
		checkText,
		s.checkSequence,
		checkToolPairing,
		checkThinkingConfig,
		checkThinkingStructure,
	} {
		if err := check(p, rules); err != nil {
			return err
		}
	}
	return nil
}

// breakpoint is one cache_control marker in render order: tools, system, messages.
type breakpoint struct {
	path  string
	ttl   string
	block map[string]any // the block carrying it; nil for the top-level field
}

// breakpoints lists the cache_control markers in render order (api-rules §1.8: tools →
// system → messages), the top-level automatic one last.
func (p *parsed) breakpoints() []breakpoint {
	var out []breakpoint
	add := func(path string, b map[string]any) {
		if t := cacheTTL(b); t != "" {
			out = append(out, breakpoint{path, t, b})
		}
	}
	for i, t := range p.tools {
		add(fmt.Sprintf("tools.%d", i), t)
	}
	for i, b := range p.system {
		add(fmt.Sprintf("system.%d", i), b)
	}
	for i, m := range p.msgs {
		for j, b := range m.blocks {
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			add(path, b)
			if c, ok := b["content"].([]any); ok && str(b, "type") == "tool_result" {
				for k, e := range c {
					add(fmt.Sprintf("%s.content.%d", path, k), obj(e))
				}
			}
		}
	}
	if t := cacheTTL(p.doc); t != "" {
		out = append(out, breakpoint{"cache_control", t, nil})
	}
	return out
}

// checkCacheBreakpoints enforces api-rules §1.6: at most 4 markers, none on empty text, and
// 1h entries before 5m entries. (Markers on thinking blocks fail earlier, as extra inputs.)
func checkCacheBreakpoints(p *parsed, _ ModelRules) *Error {
	bps := p.breakpoints()
	if len(bps) > 4 {
		return invalid("A maximum of 4 blocks with cache_control may be provided. Found %d.", len(bps))
	}
	seen5m := ""
	for _, bp := range bps {
		if bp.block != nil && str(bp.block, "type") == "text" && str(bp.block, "text") == "" {
			return invalid("%s.text: cache_control cannot be set for empty text blocks", bp.path)
		}
		switch {
		case bp.ttl == "5m" && seen5m == "":
			seen5m = bp.path
		case bp.ttl == "1h" && seen5m != "":
			// our text: the docs state the rule but no error text was found
			return invalid("%s.cache_control: a cache_control entry with ttl \"1h\" must appear before any entry with ttl \"5m\" (found one at %s)", bp.path, seen5m)
		}
	}
	return nil
}

// checkText enforces api-rules §1.5: no empty or whitespace-only text blocks in system or
// messages (including text inside tool_result content).
func checkText(p *parsed, _ ModelRules) *Error {
	for _, b := range p.system {
		if err := textRule("system", b); err != nil {
			return err
		}
	}
	for _, m := range p.msgs {
		for _, b := range m.blocks {
			if err := textRule("messages", b); err != nil {
				return err
			}
			if c, ok := b["content"].([]any); ok && str(b, "type") == "tool_result" {
				for _, e := range c {
					if err := textRule("messages", obj(e)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func textRule(where string, b map[string]any) *Error {
	if str(b, "type") != "text" {
		return nil
	}
	t := str(b, "text")
	if t == "" {
		return invalid("%s: text content blocks must be non-empty", where)
	}
	if strings.TrimSpace(t) == "" {
		return invalid("%s: text content blocks must contain non-whitespace text", where)
	}
	return nil
}

// checkSequence enforces api-rules §1.3: first message user and alternation (unless
// Lenient), role "system" placement, non-empty content, and no prefill.
func (s *Server) checkSequence(p *parsed, rules ModelRules) *Error {
	msgs := p.msgs
	if err := checkSystemRole(msgs, rules); err != nil {
		return err
	}
	if !s.opts.Lenient {
		if err := checkAlternation(msgs); err != nil {
			return err
		}
	}
	last := len(msgs) - 1
	for i, m := range msgs {
		if len(m.blocks) == 0 && !(i == last && m.role == "assistant") {
			return invalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
	}
	if rules.RejectPrefill && !p.countTokens && msgs[last].role == "assistant" {
		return invalid("This model does not support assistant message prefill. The conversation must end with a user message.")
	}
	return nil
}

// checkSystemRole checks where a role "system" message may stand and what it may hold (§1.3).
func checkSystemRole(msgs []msg, rules ModelRules) *Error {
	for i, m := range msgs {
		if m.role != "system" {
			continue
		}
		if !rules.AllowSystemRole {
			return invalid("role 'system' is not supported on this model")
		}
		// The placement texts are ours; the rule is from the claude-api skill (§1.3).
		if i == 0 {
			return invalid("messages.0: a message with role \"system\" cannot be the first message")
		}
		if prev := msgs[i-1]; prev.role != "user" && !(prev.role == "assistant" && endsWithServerToolUse(prev)) {
			return invalid("messages.%d: a message with role \"system\" must follow a \"user\" message (or an \"assistant\" message ending in server tool use), found %q", i, prev.role)
		}
		if i+1 < len(msgs) && msgs[i+1].role != "assistant" {
			return invalid("messages.%d: a message with role \"system\" must be the last message or be followed by an \"assistant\" message, found %q", i, msgs[i+1].role)
		}
		for j, b := range m.blocks {
			if str(b, "type") != "text" {
				return invalid("messages.%d.content.%d: a message with role \"system\" can only contain text blocks", i, j)
			}
		}
	}
	return nil
}

// checkAlternation: the first message is user and the roles alternate, role "system"
// messages aside (§1.3).
func checkAlternation(msgs []msg) *Error {
	if msgs[0].role != "user" {
		return invalid(`messages: first message must use the "user" role`)
	}
	prev := ""
	for _, m := range msgs {
		if m.role == "system" {
			continue // transparent for alternation
		}
		if m.role == prev {
			return invalid(`messages: roles must alternate between "user" and "assistant", but found multiple %q roles in a row`, m.role)
		}
		prev = m.role
	}
	return nil
}

func endsWithServerToolUse(m msg) bool {
	return len(m.blocks) > 0 && str(m.blocks[len(m.blocks)-1], "type") == "server_tool_use"
}

// checkToolPairing enforces api-rules §1.4: every tool_use is answered by a tool_result at
// the start of the next message, every tool_result answers a tool_use of the previous
// message, tool_use ids are unique, and server tool results follow their server_tool_use in
// the same message.
func checkToolPairing(p *parsed, _ ModelRules) *Error {
	if err := checkToolBlockPlacement(p.msgs); err != nil {
		return err
	}
	if err := checkToolUsesAnswered(p.msgs); err != nil {
		return err
	}
	return checkToolResultsAnswer(p.msgs)
}

// checkToolBlockPlacement: tool blocks in messages of the right role, unique tool_use ids,
// server tool results after their server_tool_use in the same message.
func checkToolBlockPlacement(msgs []msg) *Error {
	seen := map[string]bool{}
	for i, m := range msgs {
		serverIDs := map[string]bool{}
		for j, b := range m.blocks {
			typ := str(b, "type")
			switch {
			case typ == "tool_use" && m.role != "assistant",
				typ == "server_tool_use" && m.role != "assistant",
				typ == "tool_result" && m.role != "user":
				return invalid("messages.%d.content.%d: `%s` blocks are not allowed in `%s` messages", i, j, typ, m.role) // our text
			case typ == "tool_use":
				id := str(b, "id")
				if seen[id] {
					return invalid("messages.%d.content.%d: `tool_use` ids must be unique", i, j) // not in api-rules
				}
				seen[id] = true
			case typ == "server_tool_use":
				serverIDs[str(b, "id")] = true
			case typ != "tool_result" && strings.HasSuffix(typ, "_tool_result"):
				if id := str(b, "tool_use_id"); !serverIDs[id] {
					return invalid("messages.%d.content.%d: unexpected `tool_use_id` found in `%s` blocks: %s. Each `%s` block must have a corresponding `server_tool_use` block before it.", i, j, typ, id, typ)
				}
			}
		}
	}
	return nil
}

// checkToolUsesAnswered: every tool_use is answered at the start of the next message.
func checkToolUsesAnswered(msgs []msg) *Error {
	for i, m := range msgs {
		if m.role != "assistant" {
			continue
		}
		var ids []string
		for _, b := range m.blocks {
			if str(b, "type") == "tool_use" {
				ids = append(ids, str(b, "id"))
			}
		}
		if len(ids) == 0 {
			continue
		}
		answered := map[string]bool{}
		at := i // the message the error points at: the next one when it exists (api-rules §1.4)
		if i+1 < len(msgs) {
			at = i + 1
			if next := msgs[i+1]; next.role == "user" {
				for _, b := range next.blocks { // only the leading run counts
					if str(b, "type") != "tool_result" {
						break
					}
					answered[str(b, "tool_use_id")] = true
				}
			}
		}
		var missing []string
		for _, id := range ids {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", at, strings.Join(missing, ", "))
		}
	}
	return nil
}

// checkToolResultsAnswer: every tool_result answers a tool_use of the previous message.
func checkToolResultsAnswer(msgs []msg) *Error {
	for i, m := range msgs {
		for j, b := range m.blocks {
			if str(b, "type") != "tool_result" {
				continue
			}
			id := str(b, "tool_use_id")
			ok := false
			if i > 0 && msgs[i-1].role == "assistant" {
				for _, u := range msgs[i-1].blocks {
					if str(u, "type") == "tool_use" && str(u, "id") == id {
						ok = true
					}
				}
			}
			if !ok {
				return invalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id)
			}
		}
	}
	return nil
}

// checkThinkingConfig enforces the thinking parameters of api-rules §1.1: per-model support
// of each type, budget_tokens ≥ 1024 and < max_tokens (unless interleaved thinking), and no
// forced tool_choice with manual thinking.
func checkThinkingConfig(p *parsed, rules ModelRules) *Error {
	const useAdaptive = `Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.`
	switch t := p.thinking; {
	case t.typ == "enabled" && rules.RejectManualThinking:
		return invalid(`"thinking.type.enabled" is not supported for this model. ` + useAdaptive)
	case t.typ == "adaptive" && rules.RejectAdaptiveThinking:
		return invalid("adaptive thinking is not supported on this model")
	case t.typ == "disabled" && rules.RejectDisabledThinking:
		return invalid(`"thinking.type.disabled" is not supported for this model. ` + useAdaptive)
	case t.typ == "enabled" && t.budget < 1024:
		return invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024") // not in api-rules
	case t.typ == "enabled" && !p.countTokens && t.budget >= p.maxTokens && !p.hasBeta(betaInterleaved):
		return invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size") // not in api-rules
	case t.typ == "enabled" && (str(p.toolChoice, "type") == "any" || str(p.toolChoice, "type") == "tool"):
		return invalid("Thinking may not be enabled when tool_choice forces tool use.") // not in api-rules
	}
	return nil
}

// checkThinkingStructure enforces api-rules §1.7.1–1.7.2: thinking only in assistant
// messages, first when present, never last; no thinking in a final assistant message when
// thinking is off; and, when the model requires it, thinking first in the assistant message
// of the open tool loop.
func checkThinkingStructure(p *parsed, rules ModelRules) *Error {
	msgs := p.msgs
	for i, m := range msgs {
		has := false
		for j, b := range m.blocks {
			if isThinking(b) {
				if m.role != "assistant" {
					return invalid("messages.%d.content.%d: `%s` blocks are only allowed in `assistant` messages", i, j, str(b, "type")) // our text
				}
				has = true
			}
		}
		if !has {
			continue
		}
		if first := m.blocks[0]; !isThinking(first) {
			return invalid("messages.%d.content.0: If an assistant message contains any thinking blocks, the first block must be thinking or redacted_thinking. Found %s.", i, str(first, "type"))
		}
		if lastB := m.blocks[len(m.blocks)-1]; isThinking(lastB) {
			return invalid("messages.%d: The final block in an assistant message cannot be `%s`.", i, str(lastB, "type"))
		}
	}
	last := len(msgs) - 1
	if !p.thinking.on() && msgs[last].role == "assistant" {
		for j, b := range msgs[last].blocks {
			if isThinking(b) {
				return invalid("messages.%d.content.%d: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.", last, j)
			}
		}
	}
	if loop := openLoop(msgs); p.thinking.on() && rules.RequireThinkingFirstInOpenLoop && loop >= 0 {
		if a := msgs[loop]; !isThinking(a.blocks[0]) {
			return invalid("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", loop, str(a.blocks[0], "type"))
		}
	}
	return nil
}

// openLoop returns the index of the assistant message of the open tool loop: the request's
// last message (a trailing role "system" message aside) is a user message holding only
// tool_result blocks, and the message before it is that assistant message. -1 without one.
func openLoop(msgs []msg) int {
	last := len(msgs) - 1
	if last >= 0 && msgs[last].role == "system" {
		last--
	}
	if last < 1 || !onlyToolResults(msgs[last]) || msgs[last-1].role != "assistant" || len(msgs[last-1].blocks) == 0 {
		return -1
	}
	return last - 1
}
