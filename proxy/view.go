package proxy

import (
	"bytes"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
)

// renderContent returns message m with its content rebuilt: pointer (when not "") as a
// leading text block, compressed tool results in place, and thinking blocks left out when
// strip is set. Every other byte of the message is copied as it came. It returns nil when
// the message would be left with no content.
func renderContent(m *message, pointer string, strip bool) []byte {
	l := jsonList{b: append(make([]byte, 0, len(m.raw)+len(pointer)+64), '[')}
	add := l.add
	// The pointer leads the turn, after any tool_result blocks, which must come first in a
	// user message (api-rules §1.4).
	lead := leadingResults(m)
	if pointer != "" && lead == 0 {
		add(textBlockJSON(pointer))
	}
	for bi := range m.blocks {
		b := &m.blocks[bi]
		if pointer != "" && lead > 0 && bi == lead {
			add(textBlockJSON(pointer))
		}
		if strip && (b.typ == "thinking" || b.typ == "redacted_thinking") {
			continue
		}
		switch {
		case m.stringContent:
			if pointer == "" {
				return m.raw // nothing to change in a string content
			}
			add(append(append([]byte(`{"type":"text","text":`), m.blockRaw(b)...), '}'))
		case b.rendered != nil:
			add(b.rendered)
		default:
			add(m.blockRaw(b))
		}
	}
	if pointer != "" && lead > 0 && lead == len(m.blocks) {
		add(textBlockJSON(pointer))
	}
	if l.n == 0 {
		return nil
	}
	content := append(l.b, ']')
	return spliceObject(make([]byte, 0, len(m.raw)+len(content)), m.raw, m.fields(), map[int][]byte{m.contentAt: content})
}

// leadingResults counts the tool_result blocks that open m's content.
func leadingResults(m *message) int {
	lead := 0
	for lead < len(m.blocks) && m.blocks[lead].typ == "tool_result" && !m.stringContent {
		lead++
	}
	return lead
}

func textBlockJSON(text string) []byte {
	b := make([]byte, 0, len(text)+32)
	b = append(b, `{"type":"text","text":`...)
	b = store.AppendJSONString(b, text)
	return append(b, '}')
}

// view is what one request sends upstream.
type view struct {
	out   *segments
	chars int // estimate characters: system, tools and kept messages, without the standing instruction
}

// stripped reports whether message i loses its signed reasoning under plan (contract:
// Trim, signed reasoning per format).
func stripped(msgs []*message, plan cutPlan, i int) bool {
	return plan.strip >= 0 && i < plan.strip && msgs[i].role == "assistant" && msgs[i].thinking
}

// messageView returns the bytes message i goes out as under plan (nil: left out).
func messageView(f apiFormat, msgs []*message, plan cutPlan, block string, i int) []byte {
	m := msgs[i]
	if !plan.kept(msgs, i) {
		return nil
	}
	pointer := ""
	if plan.active() && i == plan.cut {
		pointer = block
	}
	strip := stripped(msgs, plan, i)
	dropID := false
	if f == responsesFormat && m.idAt >= 0 {
		// an item whose reasoning item is not in the view loses its id (api-rules §4.2)
		if r := linkedReasoning(msgs, i); r >= 0 && (!plan.kept(msgs, r) || stripped(msgs, plan, r)) {
			dropID = true
		}
	}
	if pointer == "" && !strip && !dropID {
		if m.rendered != nil {
			return m.rendered
		}
		return m.raw
	}
	switch f {
	case chatFormat:
		return renderChatMessage(m, pointer, strip)
	case responsesFormat:
		return renderResponsesItem(m, pointer, strip, dropID)
	}
	return renderContent(m, pointer, strip)
}

// viewChars estimates the characters of the view under plan without rendering it.
func viewChars(req *request, msgs []*message, plan cutPlan, block string) int {
	n := len(req.system) + len(req.tools)
	f := req.factsFor(msgs)
	for i := range f {
		if !f.kept(&plan, i) {
			continue
		}
		n += f.chars(msgs, i, int(f[i].view))
		if f.stripped(plan, i) {
			n -= msgs[i].thinkingBytes
		}
		if plan.active() && i == plan.cut {
			n += len(block) + 32
		}
	}
	return n
}

// render splices the view: kept messages as they came (or as rendered), the standing
// instruction placed per format (contract: placement), every other top-level member
// untouched. family is the upstream ("codex" leaves Responses instructions alone).
func render(req *request, msgs []*message, plan cutPlan, block string, instruction bool, family string) view {
	// The view is spans of the client's body with the inserted bytes between them
	// (segments): nothing of the body is copied on the way out.
	out := newSegments(req.body)
	chars := len(req.system) + len(req.tools)
	repl := map[int][][]byte{}
	addSystem := false
	// insertAt is where a Chat or Responses standing instruction message goes: after the
	// leading pinned messages; -1 when it goes elsewhere or nowhere.
	insertAt := -1
	if instruction {
		switch req.format {
		case anthropicFormat:
			if req.systemAt >= 0 {
				if sys := withInstruction(req.system); sys != nil {
					repl[req.systemAt] = sys
				}
			} else {
				addSystem = true
			}
		case chatFormat:
			if !hasInstruction(msgs) {
				insertAt = leadingPinned(msgs)
			}
		case responsesFormat:
			switch {
			case hasInstruction(msgs) || bytes.Contains(req.system, []byte("Context management: to fit your context window")) &&
				strings.Contains(systemText(req.system), StandingInstruction):
			case kindOf(req.system) == '"' && family != "codex":
				repl[req.systemAt] = appendToInstructions(req.system)
			default:
				// No instructions, or the Codex backend, which accepts only the
				// instructions it knows (openai/codex#3202, #3376): one developer message
				// after the leading system/developer items, which Codex uses for its
				// system prompt. That is the same fixed prefix position as Chat's, before
				// anything a trim edits, so the prompt cache keeps hitting.
				insertAt = leadingPinned(msgs)
			}
		}
	}
	list := func(w *segments) {
		w.str("[")
		l := segList{w: w}
		add := l.add
		// lastEnd is where the element written last ends in the body when it is the
		// previous message's bytes as sent, -1 otherwise. A message sent as it came that
		// starts one byte after it follows it in the client's list with only the comma
		// between (scanArraySums: elements are separated by a comma and whitespace), so the
		// open span grows over both without reading the separator.
		lastEnd := -1
		f, own := req.factsFor(msgs), req.ownsFacts(msgs)
		for i := range msgs {
			if i == insertAt {
				add(instructionItem(req.format))
				lastEnd = -1
			}
			var b []byte
			switch {
			case !f.kept(&plan, i):
			case !own || f[i].flags&(factRendered|factIDAt) != 0 || plan.active() && i == plan.cut || f.stripped(plan, i):
				b = messageView(req.format, msgs, plan, block, i)
			default:
				// kept as it came: msgs[i].raw is req.rawMsg(i) (buildMessages), and the
				// message itself need not be visited
				b = req.rawMsg(i)
			}
			if b == nil {
				lastEnd = -1
				continue
			}
			chars += f.chars(msgs, i, len(b))
			if sp := req.msgSpans[i]; own && !req.stringInput && len(b) == sp.len() && len(b) > 0 && &b[0] == &req.body[sp.s] {
				// the message's bytes as sent, at sp in the body
				if int(sp.s) == lastEnd+1 && lastEnd >= 0 && w.grow(lastEnd, int(sp.e)) {
					l.n++
				} else {
					add(b)
				}
				lastEnd = int(sp.e)
				continue
			}
			add(b)
			lastEnd = -1
		}
		if insertAt == len(msgs) {
			add(instructionItem(req.format))
		}
		w.str("]")
	}
	var before []byte
	if addSystem {
		before = systemMemberJSON // an absent system becomes [block], before the closing brace
	}
	spliceObjectSegs(out, req.body, req.top, repl, req.messagesAt, list, before)
	return view{out: out.done(), chars: chars}
}

// leadingPinned returns the index after the pinned messages the list starts with.
func leadingPinned(msgs []*message) int {
	i := 0
	for i < len(msgs) && msgs[i].pinAlways {
		i++
	}
	return i
}

// The standing instruction as a Chat message and as a Responses item, built once.
var (
	chatInstructionJSON      = chatInstruction()
	responsesInstructionJSON = responsesInstruction()
	// instructionBlockJSON is the standing instruction as one Anthropic text block.
	instructionBlockJSON = textBlockJSON(StandingInstruction)
	// systemMemberJSON is the system member an Anthropic body without one gets.
	systemMemberJSON = append(append([]byte(`,"system":[`), instructionBlockJSON...), ']')
)

func instructionItem(f apiFormat) []byte {
	if f == responsesFormat {
		return responsesInstructionJSON
	}
	return chatInstructionJSON
}

// withInstruction returns the system value with the standing instruction appended as one
// text block (contract: placement, Anthropic), as pieces to write in order (the first
// usually a span of system itself), or nil when it already contains it.
func withInstruction(system []byte) [][]byte {
	if bytes.Contains(system, []byte("Context management: to fit your context window")) &&
		strings.Contains(systemText(system), StandingInstruction) {
		return nil
	}
	si := instructionBlockJSON
	switch kindOf(system) {
	case 0, 'n':
		return [][]byte{[]byte("["), si, []byte("]")}
	case '"':
		if strings.TrimSpace(systemText(system)) == "" {
			// an empty string becomes no block at all: the API rejects empty text blocks
			return [][]byte{[]byte("["), si, []byte("]")}
		}
		return [][]byte{[]byte(`[{"type":"text","text":`), bytes.TrimSpace(system), []byte(`},`), si, []byte("]")}
	case '[':
		t := bytes.TrimSpace(system)
		inner := bytes.TrimSpace(t[1 : len(t)-1])
		sep := []byte{}
		if len(inner) > 0 {
			sep = []byte(",")
		}
		return [][]byte{t[:len(t)-1], sep, si, []byte("]")}
	}
	return nil
}
