package proxy

import (
	"bytes"
	"fmt"
	"strings"
)

// parseAnthropic splits an Anthropic Messages body into spans; k (may be nil) is the
// session's previous request.
func parseAnthropic(body []byte, k *known) (*request, error) {
	return parseRequest(anthropicFormat, body, k)
}

// parseMessage splits one message object into blocks and the facts the trim needs. It
// does not build rows (that needs the chain and the tool names).
func parseMessage(raw []byte) (*message, error) {
	m, mem, err := newMessage(raw)
	if err != nil {
		return nil, err
	}
	for i, f := range mem {
		switch f.key {
		case "role":
			m.role, _ = decodeName(f.val)
		case "content":
			m.contentAt = i
		}
	}
	switch m.role {
	case "user", "assistant":
	case "system":
		m.pinned = true
		m.markers = countMarkers(raw) // its content is not parsed into blocks
		return m, nil
	default:
		return nil, fmt.Errorf("message role %q", m.role)
	}
	if m.contentAt < 0 {
		return nil, fmt.Errorf("message without content")
	}
	content := mem[m.contentAt].val
	switch kindOf(content) {
	case '"':
		m.stringContent = true
		off := offsetIn(raw, content)
		m.blocks = []block{{off: int32(off), end: int32(off + len(content)), typ: "text"}}
		m.nonThinking = 1
	case '[':
		elems, err := arrayElems(content)
		if err != nil {
			return nil, err
		}
		m.blocks = make([]block, 0, len(elems))
		for _, e := range elems {
			b, err := parseBlock(e, offsetIn(raw, e), m)
			if err != nil {
				return nil, err
			}
			m.blocks = append(m.blocks, b)
		}
	default:
		return nil, fmt.Errorf("message content: want a string or a list")
	}
	if m.role == "user" {
		m.realUser = len(m.toolResIDs) < len(m.blocks)
	} else {
		m.finalReply = len(m.toolUses) == 0
		m.stepStart = true
	}
	return m, nil
}

// parseBlock parses the block raw, which starts at offset off in m.
func parseBlock(raw []byte, off int, m *message) (block, error) {
	b := block{off: int32(off), end: int32(off + len(raw))}
	if kindOf(raw) != '{' {
		return b, fmt.Errorf("content block: want an object")
	}
	fields, err := objectMembers(raw)
	if err != nil {
		return b, err
	}
	var id, name string
	for _, f := range fields {
		switch f.key {
		case "type":
			b.typ, _ = decodeName(f.val)
		case "id":
			id, _ = decodeString(f.val)
		case "name":
			name, _ = decodeName(f.val)
		case "tool_use_id":
			b.toolUseID, _ = decodeString(f.val)
		case "cache_control":
			m.markers++
		case "content":
			// markers and binary payloads inside a tool_result count for its message
			if kindOf(f.val) == '[' && (bytes.Contains(f.val, []byte(`"cache_control"`)) || bytes.Contains(f.val, []byte(`"base64"`))) {
				if elems, err := arrayElems(f.val); err == nil {
					for _, e := range elems {
						if fs, err := objectMembers(e); err == nil {
							for _, ff := range fs {
								switch {
								case ff.key == "cache_control":
									m.markers++
								case ff.key == "source" && bytes.Contains(ff.val, []byte(`"base64"`)):
									m.binaryAdjust += len(ff.val) - 6400
								}
							}
						}
					}
				}
			}
		case "source":
			if bytes.Contains(f.val, []byte(`"base64"`)) {
				m.binaryAdjust += len(f.val) - 6400
			}
		}
	}
	switch b.typ {
	case "tool_use", "server_tool_use", "mcp_tool_use":
		b.toolUseID = id
		if b.typ == "tool_use" {
			m.toolUses = append(m.toolUses, toolUse{id: id, name: name})
		}
		m.nonThinking++
	case "tool_result":
		m.toolResIDs = append(m.toolResIDs, b.toolUseID)
		m.nonThinking++
	case "thinking", "redacted_thinking":
		m.thinking = true
		m.thinkingBytes += len(raw) + 1
	default:
		m.nonThinking++
	}
	return b, nil
}

// blockRow returns the stored row fields of a block (contract: Rows): role, kind, name,
// text, and whether the block yields a row at all. names finds the tool a tool_result answers.
func blockRow(m *message, b *block, names func(id string) string) (role, kind, name, text string, ok bool, err error) {
	raw := m.blockRaw(b)
	if m.stringContent {
		s, err := decodeText(raw)
		return m.role, "text", "", s, true, err
	}
	fields, err := objectMembers(raw)
	if err != nil {
		return "", "", "", "", false, err
	}
	get := func(key string) []byte {
		for _, f := range fields {
			if f.key == key {
				return f.val
			}
		}
		return nil
	}
	str := func(key string, decode func([]byte) (string, error)) string {
		v := get(key)
		if kindOf(v) != '"' {
			return ""
		}
		s, _ := decode(v)
		return s
	}
	switch b.typ {
	case "text":
		return m.role, "text", "", str("text", decodeText), true, nil
	case "thinking":
		// Thinking rows carry the summary text only, never signatures; an omitted
		// (empty) thinking block stores nothing.
		t := str("thinking", decodeText)
		return "assistant", "thinking", "", t, t != "", nil
	case "redacted_thinking":
		return "", "", "", "", false, nil
	case "tool_use", "server_tool_use", "mcp_tool_use":
		in := get("input")
		text := "{}"
		if in != nil {
			if text, err = compactJSON(in); err != nil {
				return "", "", "", "", false, err
			}
		}
		return "assistant", "tool_use", str("name", decodeName), text, true, nil
	case "tool_result":
		text, err := toolResultText(get("content"))
		return "tool", "tool_result", names(b.toolUseID), text, true, err
	case "image", "document":
		return m.role, "text", "", "[" + b.typ + "]", true, nil
	}
	if strings.HasSuffix(b.typ, "_tool_result") {
		text, err := compactJSON(raw)
		return "tool", "tool_result", "", text, true, err
	}
	text, err = compactJSON(raw)
	return m.role, "text", "", text, true, err
}

// toolResultText is the plain text of a tool_result's content: the string itself, or its
// text blocks joined by newlines, with "[image]"-style placeholders for binary blocks and
// compact JSON for anything else.
func toolResultText(content []byte) (string, error) { return contentText(content, blockKind) }

// blockKind maps an Anthropic content block type to "text", the placeholder of an image or
// document, or "" for anything else (contentText).
func blockKind(typ string) string {
	switch typ {
	case "text":
		return "text"
	case "image", "document":
		return "[" + typ + "]"
	}
	return ""
}

// textBlock returns a block's type and, for a text block, its text.
func textBlock(raw []byte) (text, typ string, err error) {
	fields, err := objectMembers(raw)
	if err != nil {
		return "", "", err
	}
	for _, f := range fields {
		switch f.key {
		case "type":
			typ, _ = decodeName(f.val)
		case "text":
			text, _ = decodeText(f.val)
		}
	}
	return text, typ, nil
}
