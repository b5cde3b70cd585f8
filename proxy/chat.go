package proxy

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
)

// The Chat Completions adapter (api-rules §3; contract: Trim, Rows, placement). A message
// is one element of "messages":
//   - system and developer messages are pinned: never stored, kept by every trim;
//   - a user message is a real user turn;
//   - an assistant message opens a step; its tool_calls pair with the tool messages after
//     it, and LiteLLM's thinking_blocks (signed Anthropic thinking) are its signed reasoning;
//   - a tool (or legacy function) message is a tool result, compressed like any other.

// parseChatMessage splits one Chat message into the facts the trim needs and its rows.
func parseChatMessage(raw []byte) (*message, error) {
	m, mem, err := newMessage(raw)
	if err != nil {
		return nil, err
	}
	var content, toolCalls, functionCall, thinkingBlocks, reasoning []byte
	var callID, name string
	for i, f := range mem {
		switch f.key {
		case "role":
			m.role, _ = decodeName(f.val)
		case "content":
			m.contentAt, content = i, f.val
		case "tool_calls":
			toolCalls = f.val
		case "function_call":
			functionCall = f.val
		case "tool_call_id":
			callID, _ = decodeString(f.val)
		case "name":
			name, _ = decodeString(f.val)
		case "thinking_blocks":
			m.thinkingAt, thinkingBlocks = i, f.val
		case "reasoning_content":
			reasoning = f.val
		}
	}
	switch m.role {
	case "system", "developer":
		m.pinned, m.pinAlways = true, true
		return m, nil
	case "user":
		m.realUser = true
		if m.pre, err = partRows("user", content); err != nil {
			return nil, err
		}
		m.nonThinking = 1
	case "assistant":
		m.stepStart = true
		if err := chatAssistant(m, mem, content, toolCalls, functionCall, thinkingBlocks, reasoning); err != nil {
			return nil, err
		}
	case "tool", "function":
		if m.role == "function" {
			// a legacy function result names its function, not a call: it is paired with
			// the latest call of that function by numberLegacyCalls
			callID, m.legacyFn = "", name
		}
		m.toolResIDs = []string{callID}
		text, err := partsText(content)
		if err != nil {
			return nil, err
		}
		m.pre = []preRow{{role: "tool", kind: "tool_result", name: name, text: text, callID: callID, compress: "content"}}
		m.nonThinking = 1
	default:
		return nil, fmt.Errorf("message role %q", m.role)
	}
	return m, nil
}

// chatAssistant fills the rows of an assistant message in the order the Anthropic adapter
// stores the same turn: thinking, text, tool calls.
func chatAssistant(m *message, mem []member, content, toolCalls, functionCall, thinkingBlocks, reasoning []byte) error {
	thought := false
	if kindOf(thinkingBlocks) == '[' {
		elems, err := arrayElems(thinkingBlocks)
		if err != nil {
			return err
		}
		for _, e := range elems {
			if t, ok := memberString(e, "thinking"); ok && t != "" {
				m.pre = append(m.pre, preRow{role: "assistant", kind: "thinking", text: t})
				thought = true
			}
		}
		if len(elems) > 0 {
			m.thinking = true
			f := mem[m.thinkingAt]
			m.thinkingBytes = f.end - f.start + 1
		}
	}
	if !thought && kindOf(reasoning) == '"' {
		if t, _ := decodeString(reasoning); t != "" {
			m.pre = append(m.pre, preRow{role: "assistant", kind: "thinking", text: t})
		}
	}
	text, err := partRows("assistant", content)
	if err != nil {
		return err
	}
	m.pre = append(m.pre, text...)
	m.nonThinking = len(text)
	if kindOf(toolCalls) == '[' {
		calls, err := arrayElems(toolCalls)
		if err != nil {
			return err
		}
		for _, c := range calls {
			fields, err := objectMembers(c)
			if err != nil {
				return err
			}
			var id, name string
			var args []byte
			for _, f := range fields {
				switch f.key {
				case "id":
					id, _ = decodeString(f.val)
				case "function":
					name, args = functionNameArgs(f.val)
				}
			}
			in, err := argumentsText(args)
			if err != nil {
				return err
			}
			m.toolUses = append(m.toolUses, toolUse{id: id, name: name})
			m.pre = append(m.pre, preRow{role: "assistant", kind: "tool_use", name: name, text: in})
			m.nonThinking++
		}
	}
	if kindOf(functionCall) == '{' {
		// the legacy form: one call, answered by a role "function" message naming it
		name, args := functionNameArgs(functionCall)
		in, err := argumentsText(args)
		if err != nil {
			return err
		}
		m.toolUses = append(m.toolUses, toolUse{name: name})
		m.legacyFn = name
		m.pre = append(m.pre, preRow{role: "assistant", kind: "tool_use", name: name, text: in})
		m.nonThinking++
	}
	m.finalReply = len(m.toolUses) == 0
	return nil
}

// functionNameArgs reads a Chat function object ({"name", "arguments"}, in tool_calls or
// the legacy function_call): the name, and the raw arguments value (nil when absent).
func functionNameArgs(raw []byte) (name string, args []byte) {
	fm, err := objectMembers(raw)
	if err != nil {
		return "", nil
	}
	for _, g := range fm {
		switch g.key {
		case "name":
			if kindOf(g.val) == '"' {
				name, _ = decodeString(g.val)
			}
		case "arguments":
			args = g.val
		}
	}
	return name, args
}

// numberLegacyCalls gives legacy function calls and results pair ids: the n-th call of a
// function and the results after it (until its next call) share "function_call:<name>#n".
// They carry only the function's name, and one id per name would tie calls of different
// turns together, so no cut could ever separate them.
func numberLegacyCalls(msgs []*message) {
	var count map[string]int
	for _, m := range msgs {
		if m.legacyFn == "" {
			continue
		}
		if count == nil {
			count = map[string]int{}
		}
		if m.role == "assistant" {
			count[m.legacyFn]++
			m.toolUses[len(m.toolUses)-1].id = fmt.Sprintf("function_call:%s#%d", m.legacyFn, count[m.legacyFn])
		} else {
			m.toolResIDs[0] = fmt.Sprintf("function_call:%s#%d", m.legacyFn, count[m.legacyFn])
		}
	}
}

// renderChatMessage returns a Chat message with the pointer as a leading text part of its
// content and, when strip is set, without thinking_blocks. nil means the message is left
// with nothing to send.
func renderChatMessage(m *message, pointer string, strip bool) []byte {
	base := m.raw
	if m.rendered != nil {
		base = m.rendered
	}
	if pointer != "" && m.contentAt >= 0 {
		mem := m.fields()
		content := prependPart(mem[m.contentAt].val, "text", textPartJSON("text", pointer))
		return spliceObject(make([]byte, 0, len(m.raw)+len(content)), m.raw, mem, map[int][]byte{m.contentAt: content})
	}
	if strip && m.thinkingAt >= 0 {
		if m.nonThinking == 0 {
			return nil
		}
		return removeMembers(m.raw, m.fields(), map[int]bool{m.thinkingAt: true})
	}
	return base
}

// chatInstruction is the standing instruction as one Chat system message (contract:
// placement, Chat).
func chatInstruction() []byte {
	b := []byte(`{"role":"system","content":`)
	b = store.AppendJSONString(b, StandingInstruction)
	return append(b, '}')
}

// hasInstruction reports whether any pinned message already carries the standing
// instruction, so it is not added twice.
func hasInstruction(msgs []*message) bool {
	for _, m := range msgs {
		if !m.pinned || m.contentAt < 0 || !bytes.Contains(m.raw, []byte("Context management: to fit your context window")) {
			continue
		}
		if t, err := partsText(m.memberVal(m.contentAt)); err == nil && strings.Contains(t, StandingInstruction) {
			return true
		}
	}
	return false
}
