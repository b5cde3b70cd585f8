package proxy

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
)

// The Responses adapter, for the OpenAI API and the ChatGPT Codex backend (api-rules §4;
// contract: Trim, Rows, placement). A message is one item of "input":
//   - system and developer message items are pinned (Codex sends its system prompt as a
//     developer item and no instructions);
//   - a user message item is a real user turn; an assistant message item is a reply;
//   - calls (function_call, custom_tool_call, local_shell_call, …) pair with their
//     *_output items by call_id, in both directions;
//   - a reasoning item links the items the model produced after it in the same response
//     (their fc_/msg_ ids): when the view leaves the reasoning out, those ids are removed.

// parseResponsesItem splits one input item into the facts the trim needs and its rows.
// Unknown item types are kept as they are and stored as compact JSON text rows.
func parseResponsesItem(raw []byte) (*message, error) {
	m, mem, err := newMessage(raw)
	if err != nil {
		return nil, err
	}
	var content, summary, args, input, action, output []byte
	var callID, name, namespace string
	hasRole := false
	for i, f := range mem {
		switch f.key {
		case "type":
			m.itemType, _ = decodeName(f.val)
		case "role":
			m.role, _ = decodeName(f.val)
			hasRole = true
		case "content":
			m.contentAt, content = i, f.val
		case "id":
			m.idAt = i
		case "call_id":
			callID, _ = decodeString(f.val)
		case "name":
			name, _ = decodeString(f.val)
		case "namespace":
			namespace, _ = decodeString(f.val)
		case "summary":
			summary = f.val
		case "arguments":
			args = f.val
		case "input":
			input = f.val
		case "action":
			action = f.val
		case "output":
			output = f.val
		case "encrypted_content":
			m.encrypted = kindOf(f.val) == '"' && len(f.val) > 2
		}
	}
	if m.itemType == "" && hasRole {
		m.itemType = "message" // EasyInputMessage: type is optional
	}
	switch t := m.itemType; {
	case t == "message":
		switch m.role {
		case "system", "developer":
			m.pinned, m.pinAlways = true, true
			return m, nil
		case "user":
			m.realUser = true
		case "assistant":
			m.finalReply, m.modelOutput = true, true
		default:
			return nil, fmt.Errorf("input message role %q", m.role)
		}
		if m.pre, err = partRows(m.role, content); err != nil {
			return nil, err
		}
		m.nonThinking = 1
	case t == "reasoning":
		m.role, m.reasoning, m.modelOutput = "assistant", true, true
		if text := summaryText(summary); text != "" {
			m.pre = []preRow{{role: "assistant", kind: "thinking", text: text}}
		}
		m.thinkingBytes = len(raw) + 1
	case strings.HasSuffix(t, "_call_output"):
		m.role = "tool"
		if callID == "" && m.idAt >= 0 {
			// local_shell_call_output names its call in "id" (openai-python's shape)
			callID, _ = decodeString(mem[m.idAt].val)
		}
		m.toolResIDs = []string{callID}
		text, err := partsText(output)
		if err != nil {
			return nil, err
		}
		m.pre = []preRow{{role: "tool", kind: "tool_result", text: text, callID: callID, compress: "output"}}
		m.nonThinking = 1
	case strings.HasSuffix(t, "_call"):
		m.role, m.modelOutput = "assistant", true
		m.nonThinking = 1
		if callID == "" {
			// a server-side tool (web_search_call, …): nothing to pair, stored as it came
			c, err := compactJSON(raw)
			if err != nil {
				return nil, err
			}
			m.pre = []preRow{{role: "assistant", kind: "text", text: c}}
			return m, nil
		}
		if namespace != "" {
			name = namespace + "__" + name
		} else if name == "" {
			name = strings.TrimSuffix(t, "_call")
		}
		var text string
		switch {
		case args != nil:
			text, err = argumentsText(args)
		case kindOf(input) == '"':
			text, err = decodeString(input)
		case input != nil:
			text, err = compactJSON(input)
		case action != nil:
			text, err = compactJSON(action)
		default:
			text, err = compactJSON(raw)
		}
		if err != nil {
			return nil, err
		}
		m.toolUses = []toolUse{{id: callID, name: name}}
		m.pre = []preRow{{role: "assistant", kind: "tool_use", name: name, text: text}}
	default:
		// item_reference, compaction, and types this adapter does not know: kept in place
		m.role = "assistant"
		c, err := compactJSON(raw)
		if err != nil {
			return nil, err
		}
		m.pre = []preRow{{role: "assistant", kind: "text", text: c}}
		m.nonThinking = 1
	}
	return m, nil
}

// summaryText joins the summary_text parts of a reasoning item's summary with newlines.
func summaryText(summary []byte) string {
	if kindOf(summary) != '[' {
		return ""
	}
	elems, err := arrayElems(summary)
	if err != nil {
		return ""
	}
	parts := make([]string, 0, len(elems))
	for _, e := range elems {
		if t, ok := memberString(e, "text"); ok && t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// prepareItems sets what depends on an item's neighbours or on the request: step starts
// (contract: a step is a reasoning item, or a call or reply not preceded by reasoning or a
// call, and what follows it) and which reasoning items are signed. A reasoning item is
// signed Anthropic thinking (contract: Responses, LiteLLM's encoding) when it carries
// encrypted_content and the model is a Claude model: LiteLLM bridges Claude behind the
// Responses API, and OpenAI's own encrypted reasoning is not tied to the earlier messages,
// so it is kept.
func prepareItems(msgs []*message, model string) {
	claude := strings.Contains(strings.ToLower(model), "claude")
	for i, m := range msgs {
		call := func(x *message) bool { return x.modelOutput && !x.reasoning && x.itemType != "message" }
		switch {
		case m.reasoning:
			m.stepStart = true
			m.thinking = claude && hasEncrypted(m)
		case m.modelOutput:
			m.stepStart = i == 0 || !(msgs[i-1].reasoning || call(msgs[i-1]))
		}
	}
}

// hasEncrypted reports whether the item carries a non-empty encrypted_content (found
// when it was parsed).
func hasEncrypted(m *message) bool { return m.encrypted }

// linkedReasoning returns the index of the reasoning item that item i was produced after
// in the same response (the nearest reasoning item before it with only model output in
// between), or -1.
func linkedReasoning(msgs []*message, i int) int {
	if !msgs[i].modelOutput || msgs[i].reasoning {
		return -1
	}
	for j := i - 1; j >= 0; j-- {
		switch {
		case msgs[j].reasoning:
			return j
		case !msgs[j].modelOutput:
			return -1
		}
	}
	return -1
}

// renderResponsesItem returns an item with the pointer as a leading input_text part of a
// user message's content, and without its id when dropID is set (its reasoning item is
// not in the view, api-rules §4.2). nil means the item is left out (stripped reasoning).
func renderResponsesItem(m *message, pointer string, strip, dropID bool) []byte {
	if strip && m.reasoning {
		return nil
	}
	base, mem := m.raw, []member(nil)
	if m.rendered == nil && (pointer != "" || dropID) {
		mem = m.fields()
	}
	if m.rendered != nil {
		base = m.rendered
		var err error
		if mem, err = objectMembers(base); err != nil {
			return base
		}
	}
	if pointer != "" && m.contentAt >= 0 {
		content := prependPart(mem[m.contentAt].val, "input_text", textPartJSON("input_text", pointer))
		base = spliceObject(make([]byte, 0, len(base)+len(content)), base, mem, map[int][]byte{m.contentAt: content})
		if dropID {
			mem, _ = objectMembers(base)
		}
	}
	if dropID && m.idAt >= 0 && m.idAt < len(mem) && mem[m.idAt].key == "id" {
		return removeMembers(base, mem, map[int]bool{m.idAt: true})
	}
	return base
}

// responsesInstruction is the standing instruction as one developer message item.
func responsesInstruction() []byte {
	b := []byte(`{"type":"message","role":"developer","content":[`)
	b = append(b, textPartJSON("input_text", StandingInstruction)...)
	return append(b, "]}"...)
}

// appendToInstructions returns the instructions string value with a blank line and the
// standing instruction appended (contract: placement, Responses), as pieces to write in
// order: the raw string without its closing quote (a span of the client's bytes, which stay
// as they came) and the escaped addition with the quote; an empty string becomes the
// instruction alone.
func appendToInstructions(raw []byte) [][]byte {
	t := bytes.TrimSpace(raw)
	inner := t[1 : len(t)-1]
	add := StandingInstruction
	if len(inner) > 0 {
		add = "\n\n" + add
	}
	enc := store.AppendJSONString(nil, add)
	return [][]byte{t[:len(t)-1], enc[1:]}
}
