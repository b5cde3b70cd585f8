package proxy

import (
	"bytes"
	"fmt"
	"strings"
)

// request is one model-API request split into byte spans: an Anthropic Messages body
// (api-rules §1.1), a Chat Completions body (§3) or a Responses body (§4). Nothing in it is
// re-encoded; rendering splices these spans.
type request struct {
	format   apiFormat
	body     []byte
	top      []member
	model    string
	stream   bool
	system   []byte // Anthropic "system", Responses "instructions"; nil when absent
	tools    []byte
	metadata []byte
	thinking []byte
	// promptCacheKey is the top-level prompt_cache_key string, if any.
	promptCacheKey string
	messagesAt     int // index into top of the message list ("messages", Responses "input")
	systemAt       int // index into top of system / instructions, -1 when absent
	rawMsgs        [][]byte
	// stringInput: a Responses input sent as one string; rawMsgs then holds one synthetic
	// user message item and the view sends a list.
	stringInput bool
	// passThrough names why the request must reach the upstream untouched ("" when it
	// may be rewritten): a Codex compaction request, or a continuation by
	// previous_response_id or conversation, whose history lives upstream.
	passThrough string
}

// known is what a session's previous request looked like: its top-level member values and
// its messages, all JSON that was already validated. A request that repeats them byte for
// byte is compared, not scanned again, so parsing costs one memory comparison of the known
// prefix plus a scan of what is new (DESIGN.md §4, fast path).
type known struct {
	format apiFormat
	top    map[string][]byte
	msgs   [][]byte
}

// remember records req as the known shape for the next request of its session. Top-level
// values are copied (the body is not kept); the messages are those the thread cache holds.
// prev (may be nil) lends its copies of values that did not change.
func remember(req *request, msgs []*message, prev *known) *known {
	k := &known{format: req.format, top: make(map[string][]byte, len(req.top)), msgs: make([][]byte, len(msgs))}
	if prev != nil && prev.format != req.format {
		prev = nil
	}
	list := req.format.listKey()
	for _, m := range req.top {
		if m.key == list {
			continue
		}
		if prev != nil && bytes.Equal(prev.top[m.key], m.val) {
			k.top[m.key] = prev.top[m.key]
		} else {
			k.top[m.key] = bytes.Clone(m.val)
		}
	}
	if !req.stringInput {
		for i, m := range msgs {
			k.msgs[i] = m.raw
		}
	}
	return k
}

// parseAnthropic splits an Anthropic Messages body into spans; k (may be nil) is the
// session's previous request.
func parseAnthropic(body []byte, k *known) (*request, error) {
	return parseRequest(anthropicFormat, body, k)
}

// parseRequest splits a request body of format f into spans; k (may be nil) is the
// session's previous request. The error names what is wrong; the caller forwards the
// body unchanged.
func parseRequest(f apiFormat, body []byte, k *known) (*request, error) {
	if k != nil && k.format != f {
		k = nil
	}
	list := f.listKey()
	top, msgs, end, err := scanTop(body, k, list)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if skipSpace(body, end) != len(body) {
		return nil, fmt.Errorf("request body: data after the JSON value")
	}
	req := &request{format: f, body: body, top: top, messagesAt: -1, systemAt: -1}
	for i, m := range top {
		switch m.key {
		case "model":
			if kindOf(m.val) == '"' {
				req.model, _ = decodeString(m.val)
			}
		case "stream":
			req.stream = string(m.val) == "true"
		case "tools":
			req.tools = m.val
		case "metadata":
			req.metadata = m.val
		case "thinking":
			req.thinking = m.val
		case "prompt_cache_key":
			if kindOf(m.val) == '"' {
				req.promptCacheKey, _ = decodeString(m.val)
			}
		case "previous_response_id", "conversation":
			// the history lives upstream and input holds only the new items: nothing to
			// trim, and anything added would stay in the stored conversation
			if f == responsesFormat && kindOf(m.val) != 'n' {
				req.passThrough = m.key
			}
		case list:
			req.messagesAt = i
		}
		if (f == anthropicFormat && m.key == "system") || (f == responsesFormat && m.key == "instructions") {
			req.system, req.systemAt = m.val, i
		}
	}
	if req.messagesAt < 0 {
		return nil, fmt.Errorf("request body: no %s list", list)
	}
	if msgs == nil && f == responsesFormat && kindOf(top[req.messagesAt].val) == '"' {
		// a string input is one user message (api-rules §4.1)
		item := make([]byte, 0, len(top[req.messagesAt].val)+40)
		item = append(item, `{"type":"message","role":"user","content":`...)
		item = append(item, bytes.TrimSpace(top[req.messagesAt].val)...)
		msgs, req.stringInput = [][]byte{append(item, '}')}, true
	}
	if msgs == nil {
		return nil, fmt.Errorf("request body: no %s list", list)
	}
	req.rawMsgs = msgs
	if req.system != nil {
		switch kindOf(req.system) {
		case '"':
		case '[':
			if f == responsesFormat {
				return nil, fmt.Errorf("instructions: want a string")
			}
		case 'n': // null: as if absent
			req.system = nil
		default:
			return nil, fmt.Errorf("system: want a string or a list of blocks")
		}
	}
	if f == responsesFormat && req.passThrough == "" && bytes.Contains(body, []byte(`"compaction`)) {
		for _, raw := range msgs {
			if t := itemType(raw); t == "compaction" || t == "compaction_trigger" {
				req.passThrough = t
				break
			}
		}
	}
	return req, nil
}

// scanTop reads the top-level object of body: its members, the elements of the list member
// (list: "messages" or "input"), and where the object ends. Values that repeat k's byte for
// byte are matched, not scanned.
func scanTop(body []byte, k *known, list string) (top []member, msgs [][]byte, end int, err error) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, nil, 0, fmt.Errorf("%w: want an object", errJSON)
	}
	top = make([]member, 0, 16)
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return top, nil, i + 1, nil
	}
	for {
		i = skipSpace(body, i)
		if i >= len(body) || body[i] != '"' {
			return nil, nil, 0, fmt.Errorf("%w: want a key at %d", errJSON, i)
		}
		ks := i
		ke, err := skipString(body, i)
		if err != nil {
			return nil, nil, 0, err
		}
		i = skipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return nil, nil, 0, fmt.Errorf("%w: want ':' at %d", errJSON, i)
		}
		key := decodeKey(body[ks:ke])
		vs := skipSpace(body, i+1)
		var ve int
		switch {
		case key == list && (vs >= len(body) || body[vs] != '['):
			msgs = nil // the last list member must be the list
			ve, err = skipValueDepth(body, vs, 1)
		case key == list:
			var hint [][]byte
			if k != nil {
				hint = k.msgs
			}
			msgs, ve, err = scanArray(body, vs, hint)
		case k != nil && repeats(body, vs, k.top[key]):
			ve = vs + len(k.top[key])
		default:
			ve, err = skipValueDepth(body, vs, 1)
		}
		if err != nil {
			return nil, nil, 0, err
		}
		top = append(top, member{key: key, val: body[vs:ve], vs: vs, start: ks, end: ve})
		i = skipSpace(body, ve)
		if i < len(body) && body[i] == ',' {
			i++
			continue
		}
		if i < len(body) && body[i] == '}' {
			return top, msgs, i + 1, nil
		}
		return nil, nil, 0, fmt.Errorf("%w: want ',' or '}' at %d", errJSON, i)
	}
}

// repeats reports whether body holds the complete value v at vs: the bytes match and what
// follows is a delimiter, not more of a longer value.
func repeats(body []byte, vs int, v []byte) bool {
	if len(v) == 0 || !bytes.HasPrefix(body[vs:], v) {
		return false
	}
	j := skipSpace(body, vs+len(v))
	return j < len(body) && (body[j] == ',' || body[j] == '}' || body[j] == ']')
}

// scanArray reads the array at body[vs] and returns its elements and end; leading elements
// that repeat hint byte for byte (in order) are matched instead of scanned.
func scanArray(body []byte, vs int, hint [][]byte) ([][]byte, int, error) {
	out := make([][]byte, 0, len(hint)+4)
	i := skipSpace(body, vs+1)
	if i < len(body) && body[i] == ']' {
		return out, i + 1, nil
	}
	for n := 0; ; n++ {
		s := skipSpace(body, i)
		var e int
		if n < len(hint) && repeats(body, s, hint[n]) {
			e = s + len(hint[n])
		} else {
			var err error
			if e, err = skipValueDepth(body, s, 2); err != nil {
				return nil, 0, err
			}
			hint = nil // past the first difference nothing is assumed
		}
		out = append(out, body[s:e])
		i = skipSpace(body, e)
		if i < len(body) && body[i] == ',' {
			i++
			continue
		}
		if i < len(body) && body[i] == ']' {
			return out, i + 1, nil
		}
		return nil, 0, fmt.Errorf("%w: want ',' or ']' at %d", errJSON, i)
	}
}

// block is one content block of a message.
type block struct {
	raw       []byte
	typ       string
	toolUseID string // tool_result: the tool_use it answers; tool_use: its own id
	// rendered replaces raw in the view (a compressed tool result), nil when unchanged.
	rendered []byte
}

// message is one entry of the messages list, with what the trim needs to know about it.
type message struct {
	raw  []byte
	role string
	// pinned messages (Anthropic's mid-conversation role "system") stay in place, are never
	// stored and never dropped by a cut before them.
	pinned bool
	// members of the message object; contentAt indexes "content".
	members   []member
	contentAt int
	// stringContent is true when content is a JSON string (one implicit text block).
	stringContent bool
	blocks        []block

	rows []row
	// textGone: the rows' text was freed after the store took them (storeRows).
	textGone bool
	prevFP   string // chain value before this message
	endFP    string // chain value after this message
	firstFP  string // fingerprint of the first row ("" when the message has no rows)

	realUser   bool // user message that is not only tool_result blocks
	finalReply bool // assistant message with no tool calls
	toolUses   []toolUse
	toolResIDs []string
	thinking   bool // has thinking or redacted_thinking blocks
	// thinkingBytes is what a strip takes out of the message (blocks and their commas).
	thinkingBytes int
	// nonThinking counts blocks that survive a thinking strip.
	nonThinking int
	// binaryAdjust is subtracted from len(raw) for the estimate: base64 payloads count
	// 6400 characters each (seed 001: token estimate).
	binaryAdjust int
	// markers counts cache_control markers in the message (breakpoints, contract: Events).
	markers int
	// rendered is the message as the view sends it when it differs from raw (compressed
	// results); nil means raw.
	rendered []byte

	// pinAlways marks a pinned Chat or Responses system/developer message: every trim keeps
	// it (contract: Trim, pinned messages). An Anthropic role "system" message instead
	// stays exactly when the message before it stays.
	pinAlways bool
	// stepStart: the message opens a step of an agent loop (contract: in-turn gap).
	stepStart bool
	// key names the message in the trim state: the fingerprint of its first row, or, for
	// a message without rows, a hash of the chain before it and of its bytes.
	key string
	// pre holds the rows of a Chat message or Responses item, computed at parse time;
	// rowsFor chains them. nil for Anthropic messages, whose rows come from blocks.
	pre []preRow
	// Responses items: the item type, the member index of "id" (-1 when absent), whether
	// it is a reasoning item, and whether the model produced it (reasoning, an assistant
	// message, a call), which is what a reasoning item's linkage covers (api-rules §4.2).
	itemType    string
	idAt        int
	reasoning   bool
	modelOutput bool
	// thinkingAt is the member index of a Chat message's thinking_blocks, -1 when absent.
	thinkingAt int
	// legacyFn names the function of a Chat legacy function_call or role "function"
	// result ("" otherwise); numberLegacyCalls pairs them.
	legacyFn string
}

// preRow is one row of a Chat message or Responses item before chaining. A tool_result's
// name comes from its call id when the row is chained; compress names the member whose
// text may be compressed ("" when none).
type preRow struct {
	role, kind, name, text string
	callID, compress       string
}

type toolUse struct{ id, name string }

// row is one stored row of a message (contract: Rows).
type row struct {
	fp, role, kind, name, text, blobID string
}

// parseMessage splits one message object into blocks and the facts the trim needs. It
// does not build rows (that needs the chain and the tool names).
func parseMessage(raw []byte) (*message, error) {
	mem, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	m := &message{raw: raw, members: mem, contentAt: -1, idAt: -1, thinkingAt: -1}
	for i, f := range mem {
		switch f.key {
		case "role":
			m.role, _ = decodeString(f.val)
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
		m.blocks = []block{{raw: content, typ: "text"}}
		m.nonThinking = 1
	case '[':
		elems, err := arrayElems(content)
		if err != nil {
			return nil, err
		}
		m.blocks = make([]block, 0, len(elems))
		for _, e := range elems {
			b, err := parseBlock(e, m)
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

func parseBlock(raw []byte, m *message) (block, error) {
	b := block{raw: raw}
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
			b.typ, _ = decodeString(f.val)
		case "id":
			id, _ = decodeString(f.val)
		case "name":
			name, _ = decodeString(f.val)
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
// text, and whether the block yields a row at all. names maps tool_use ids to tool names.
func blockRow(m *message, b *block, names map[string]string) (role, kind, name, text string, ok bool, err error) {
	if m.stringContent {
		s, err := decodeString(b.raw)
		return m.role, "text", "", s, true, err
	}
	fields, err := objectMembers(b.raw)
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
	str := func(key string) string {
		v := get(key)
		if kindOf(v) != '"' {
			return ""
		}
		s, _ := decodeString(v)
		return s
	}
	switch b.typ {
	case "text":
		return m.role, "text", "", str("text"), true, nil
	case "thinking":
		// Thinking rows carry the summary text only, never signatures; an omitted
		// (empty) thinking block stores nothing.
		t := str("thinking")
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
		return "assistant", "tool_use", str("name"), text, true, nil
	case "tool_result":
		text, err := toolResultText(get("content"))
		return "tool", "tool_result", names[b.toolUseID], text, true, err
	case "image", "document":
		return m.role, "text", "", "[" + b.typ + "]", true, nil
	}
	if strings.HasSuffix(b.typ, "_tool_result") {
		text, err := compactJSON(b.raw)
		return "tool", "tool_result", "", text, true, err
	}
	text, err = compactJSON(b.raw)
	return m.role, "text", "", text, true, err
}

// toolResultText is the plain text of a tool_result's content: the string itself, or its
// text blocks joined by newlines, with "[image]"-style placeholders for binary blocks and
// compact JSON for anything else.
func toolResultText(content []byte) (string, error) {
	switch kindOf(content) {
	case 0, 'n':
		return "", nil
	case '"':
		return decodeString(content)
	case '[':
		elems, err := arrayElems(content)
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, len(elems))
		for _, e := range elems {
			t, typ, err := textBlock(e)
			if err != nil {
				return "", err
			}
			switch {
			case typ == "text":
				parts = append(parts, t)
			case typ == "image" || typ == "document":
				parts = append(parts, "["+typ+"]")
			default:
				c, err := compactJSON(e)
				if err != nil {
					return "", err
				}
				parts = append(parts, c)
			}
		}
		return strings.Join(parts, "\n"), nil
	}
	return compactJSON(content)
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
			typ, _ = decodeString(f.val)
		case "text":
			text, _ = decodeString(f.val)
		}
	}
	return text, typ, nil
}
