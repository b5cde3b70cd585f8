package proxy

import (
	"bytes"
	"fmt"
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
