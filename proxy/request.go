package proxy

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"unsafe"
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
	// msgBase holds the messages: the body, or for a string input the one item made of it;
	// msgSpans[i] is where message i lies in it (rawMsg). Offsets, not slices: a request of
	// thousands of messages costs 8 bytes for each, which the garbage collector need not scan.
	msgBase  []byte
	msgSpans []msgSpan
	// msgSums[i] is message i's span sum where the fast path computed it (zero otherwise;
	// sumAt fills it in). remember hands it to the session's known shape, which is never
	// changed once made: nothing writes to it after that.
	msgSums []spanSum
	// topSums[i] is top[i]'s value's span sum where scanTop matched it against the known
	// shape (zero otherwise).
	topSums []spanSum
	// known is the session's previous request the parse matched against (nil when none),
	// and knownMsgs counts the leading messages that repeat its messages byte for byte.
	known     *known
	knownMsgs int
	// facts are those of factsMsgs, the request's messages (readFacts); nil until read.
	facts     msgFacts
	factsMsgs []*message
	// stringInput: a Responses input sent as one string; the messages are then one
	// synthetic user message item and the view sends a list.
	stringInput bool
	// passThrough names why the request must reach the upstream untouched ("" when it
	// may be rewritten): a Codex compaction request, or a continuation by
	// previous_response_id or conversation, whose history lives upstream.
	passThrough string
}

// spanSum names a span of bytes without keeping it: its length and a 64-bit keyed hash
// (hash/maphash, its seed made once per process). Two spans of equal length and equal hash
// are taken as equal: an accidental match of different bytes has odds of about 2^-64 per
// comparison, and the seed never leaves the process, so a client cannot aim at one. One
// hash, not two: hashing is most of the fast path's own time (the profile of
// BenchmarkFastPathParse), a second seed doubled it. The zero value names no span (a
// JSON value is never empty).
//
// The span is hashed as a string (maphash.Comparable), which is one pass of the runtime's
// hash over all of it; maphash.Bytes feeds the same hash 128 bytes at a time, which for
// messages of a few hundred bytes is about three times slower.
type spanSum struct {
	n int
	h uint64
}

// sumSeed keys spanSum's hash for the life of the process.
var sumSeed = maphash.MakeSeed()

func sumOf(b []byte) spanSum {
	// the string aliases b only for the call, and nothing writes to a request body
	return spanSum{n: len(b), h: maphash.Comparable(sumSeed, unsafe.String(unsafe.SliceData(b), len(b)))}
}

// msgSpan is where a message lies in the bytes it was read from: [s, e). int32 offsets:
// parseRequest takes no body of 2 GiB or more.
type msgSpan struct{ s, e int32 }

func (sp msgSpan) len() int { return int(sp.e - sp.s) }

// msgCount returns the number of messages of the request.
func (r *request) msgCount() int { return len(r.msgSpans) }

// rawMsg returns the bytes of message i: a span of the body (of the synthetic item of a
// string input).
func (r *request) rawMsg(i int) []byte {
	sp := r.msgSpans[i]
	return r.msgBase[sp.s:sp.e]
}

// sumAt returns the span sum of message i of the request, computing it once.
func (r *request) sumAt(i int) spanSum {
	if r.msgSums == nil {
		r.msgSums = make([]spanSum, len(r.msgSpans))
	}
	if r.msgSums[i].n == 0 {
		r.msgSums[i] = sumOf(r.rawMsg(i))
	}
	return r.msgSums[i]
}

// known is what a session's previous request looked like: the span sums of its top-level
// member values and of its messages, all JSON that was already validated. A request that
// repeats them byte for byte is compared, not scanned again, so parsing costs one pass over
// the known prefix plus a scan of what is new (DESIGN.md §4, fast path). It holds no bytes
// of the request: the body is not kept once the request is answered.
type known struct {
	format apiFormat
	top    map[string]spanSum
	msgs   []spanSum
}

// remember records req as the known shape for the next request of its session: the span
// sums of its top-level values (taken from the parse where it matched them) and of the
// messages the thread cache holds.
func remember(req *request, msgs []*message, _ *known) *known {
	k := &known{format: req.format, top: make(map[string]spanSum, len(req.top))}
	list := req.format.listKey()
	for i, m := range req.top {
		if m.key == list {
			continue
		}
		if i < len(req.topSums) && req.topSums[i].n != 0 {
			k.top[m.key] = req.topSums[i]
		} else {
			k.top[m.key] = sumOf(m.val)
		}
	}
	switch {
	case req.stringInput:
		k.msgs = make([]spanSum, len(msgs))
	case len(msgs) == req.msgCount() && len(req.msgSums) == len(msgs):
		// the request's sums name the same bytes (buildMessages took or checked each
		// message's sum there; sumAt fills in any it did not): the known shape takes them
		// over, and the messages are left untouched
		k.msgs = req.msgSums
		for i, m := range msgs {
			if k.msgs[i].n == 0 {
				k.msgs[i] = m.spanSum()
			}
		}
	default:
		k.msgs = make([]spanSum, len(msgs))
		for i, m := range msgs {
			k.msgs[i] = m.spanSum()
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
	if len(body) > math.MaxInt32 {
		return nil, fmt.Errorf("request body: %d bytes, too large to rewrite", len(body))
	}
	list := f.listKey()
	top, msgs, topSums, msgSums, end, err := scanTop(body, k, list)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if skipSpace(body, end) != len(body) {
		return nil, fmt.Errorf("request body: data after the JSON value")
	}
	req := &request{format: f, body: body, top: top, messagesAt: -1, systemAt: -1, topSums: topSums, msgSums: msgSums, known: k}
	for req.knownMsgs < len(msgSums) && msgSums[req.knownMsgs].n != 0 {
		req.knownMsgs++ // scanArraySums matched these by their sums
	}
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
		item = append(item, '}')
		req.msgBase, msgs, req.stringInput = item, []msgSpan{{0, int32(len(item))}}, true
		req.msgSums, req.knownMsgs = nil, 0
	}
	if msgs == nil {
		return nil, fmt.Errorf("request body: no %s list", list)
	}
	if !req.stringInput {
		req.msgBase = body
	}
	req.msgSpans = msgs
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
		for i := range msgs {
			if t := itemType(req.rawMsg(i)); t == "compaction" || t == "compaction_trigger" {
				req.passThrough = t
				break
			}
		}
	}
	return req, nil
}

// scanTop reads the top-level object of body: its members, the spans of the elements of the
// list member (list: "messages" or "input"), and where the object ends. Values that repeat k's byte for
// byte are matched by their span sums, not scanned; topSums and msgSums hold the sums of
// the values and messages so matched (zero elsewhere, nil when k is nil).
func scanTop(body []byte, k *known, list string) (top []member, msgs []msgSpan, topSums, msgSums []spanSum, end int, err error) {
	fail := func(err error) ([]member, []msgSpan, []spanSum, []spanSum, int, error) {
		return nil, nil, nil, nil, 0, err
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return fail(fmt.Errorf("%w: want an object", errJSON))
	}
	top = make([]member, 0, 16)
	if k != nil {
		topSums = make([]spanSum, 0, 16)
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return top, nil, topSums, nil, i + 1, nil
	}
	for {
		i = skipSpace(body, i)
		if i >= len(body) || body[i] != '"' {
			return fail(fmt.Errorf("%w: want a key at %d", errJSON, i))
		}
		ks := i
		ke, err := skipString(body, i)
		if err != nil {
			return fail(err)
		}
		i = skipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return fail(fmt.Errorf("%w: want ':' at %d", errJSON, i))
		}
		key := decodeKey(body[ks:ke])
		vs := skipSpace(body, i+1)
		var ve int
		var matched spanSum
		switch {
		case key == list && (vs >= len(body) || body[vs] != '['):
			msgs, msgSums = nil, nil // the last list member must be the list
			ve, err = skipValueDepth(body, vs, 1)
		case key == list:
			var hint []spanSum
			if k != nil {
				hint = k.msgs
			}
			msgs, msgSums, ve, err = scanArraySums(body, vs, hint)
		case k != nil && repeats(body, vs, k.top[key]):
			matched = k.top[key]
			ve = vs + matched.n
		default:
			ve, err = skipValueDepth(body, vs, 1)
		}
		if err != nil {
			return fail(err)
		}
		top = append(top, member{key: key, val: body[vs:ve], vs: vs, start: ks, end: ve})
		if k != nil {
			topSums = append(topSums, matched)
		}
		i = skipSpace(body, ve)
		if i < len(body) && body[i] == ',' {
			i++
			continue
		}
		if i < len(body) && body[i] == '}' {
			return top, msgs, topSums, msgSums, i + 1, nil
		}
		return fail(fmt.Errorf("%w: want ',' or '}' at %d", errJSON, i))
	}
}

// repeats reports whether body holds at vs the complete value that v sums: the bytes there
// have v's sum and what follows is a delimiter, not more of a longer value.
func repeats(body []byte, vs int, v spanSum) bool {
	if v.n == 0 || v.n > len(body)-vs {
		return false
	}
	j := skipSpace(body, vs+v.n)
	if j >= len(body) || !(body[j] == ',' || body[j] == '}' || body[j] == ']') {
		return false
	}
	return sumOf(body[vs:vs+v.n]) == v
}

// scanArray reads the array at body[vs] and returns its elements and end.
// (The list of a request's messages is read by scanArraySums, as spans.)
func scanArray(body []byte, vs int) ([][]byte, int, error) {
	out := make([][]byte, 0, 4)
	end, err := scanElements(body, vs, nil, func(s, e int, _ spanSum) { out = append(out, body[s:e]) })
	if err != nil {
		return nil, 0, err
	}
	return out, end, nil
}

// scanArraySums is scanArray where leading elements that repeat hint's spans (in order)
// are matched by their sums instead of scanned, and the elements are returned as their
// spans of body (which is shorter than 2 GiB); sums holds the matched elements' sums (zero
// after the first difference; nil without a hint).
func scanArraySums(body []byte, vs int, hint []spanSum) (out []msgSpan, sums []spanSum, end int, err error) {
	out = make([]msgSpan, 0, len(hint)+4)
	if hint != nil {
		sums = make([]spanSum, 0, len(hint)+4)
	}
	end, err = scanElements(body, vs, hint, func(s, e int, matched spanSum) {
		out = append(out, msgSpan{int32(s), int32(e)})
		if sums != nil {
			sums = append(sums, matched)
		}
	})
	if err != nil {
		return nil, nil, 0, err
	}
	return out, sums, end, nil
}

// scanElements walks the array at body[vs] and returns where it ends. visit gets each
// element in order: its span [s, e) of body and, while the leading elements repeat hint's
// spans, the sum it was matched by instead of scanned (repeats; zero from the first
// difference on). A malformed array is an errJSON error.
func scanElements(body []byte, vs int, hint []spanSum, visit func(s, e int, matched spanSum)) (int, error) {
	i := skipSpace(body, vs+1)
	if i < len(body) && body[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		s := skipSpace(body, i)
		var e int
		var matched spanSum
		if n < len(hint) && repeats(body, s, hint[n]) {
			matched = hint[n]
			e = s + matched.n
		} else {
			var err error
			if e, err = skipValueDepth(body, s, 2); err != nil {
				return 0, err
			}
			hint = nil // past the first difference nothing is assumed
		}
		visit(s, e, matched)
		i = skipSpace(body, e)
		if i < len(body) && body[i] == ',' {
			i++
			continue
		}
		if i < len(body) && body[i] == ']' {
			return i + 1, nil
		}
		return 0, fmt.Errorf("%w: want ',' or ']' at %d", errJSON, i)
	}
}
