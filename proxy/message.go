package proxy

import "github.com/smarter-compact/smarter-compact/store"

// block is one content block of a message: its span as byte offsets into the message
// (message.blockRaw), so that a cached message keeps no bytes of the body it came in.
type block struct {
	off, end  int32
	typ       string
	toolUseID string // tool_result: the tool_use it answers; tool_use: its own id
	// rendered replaces raw in the view (a compressed tool result), nil when unchanged.
	rendered []byte
}

// newMessage returns a message over the object raw, with no content, id or thinking member
// found yet, and raw's members for the format's parse function to read (parseMessage,
// parseChatMessage, parseResponsesItem).
func newMessage(raw []byte) (*message, []member, error) {
	mem, err := objectMembers(raw)
	if err != nil {
		return nil, nil, err
	}
	return &message{raw: raw, contentAt: -1, idAt: -1, thinkingAt: -1}, mem, nil
}

// message is one entry of the messages list, with what the trim needs to know about it.
//
// raw is the message's span of the body of the request being handled, and nothing the
// message keeps points into it: blocks and members are byte offsets, texts and ids are
// decoded copies. A message the thread cache reuses gets the span of the new body
// (attach), and every message lets go of the body once its request is answered (detach),
// so between requests a session holds no request bytes at all; sum names the bytes.
type message struct {
	raw  []byte
	sum  spanSum
	role string
	// contentAt indexes "content" in the message's members (fields), -1 when absent.
	contentAt int
	blocks    []block

	rows    []row
	prevFP  string // chain value before this message
	endFP   string // chain value after this message
	firstFP string // fingerprint of the first row ("" when the message has no rows)

	toolUses   []toolUse
	toolResIDs []string
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

	// key names the message in the trim state: the fingerprint of its first row, or, for
	// a message without rows, a hash of the chain before it and of its bytes.
	key string
	// pre holds the rows of a Chat message or Responses item from parse time until rowsFor
	// chains them (nil after). nil for Anthropic messages, whose rows come from blocks.
	pre []preRow
	// Responses items: the item type, the member index of "id" (-1 when absent), whether
	// it is a reasoning item (reasoning), and whether the model produced it (modelOutput:
	// reasoning, an assistant message, a call), which is what a reasoning item's linkage
	// covers (api-rules §4.2).
	itemType string
	idAt     int
	// thinkingAt is the member index of a Chat message's thinking_blocks, -1 when absent.
	thinkingAt int
	// legacyFn names the function of a Chat legacy function_call or role "function"
	// result ("" otherwise); numberLegacyCalls pairs them.
	legacyFn string

	// The flags sit together, so the struct has no padding between them.

	// pinned messages (Anthropic's mid-conversation role "system") stay in place, are never
	// stored and never dropped by a cut before them.
	pinned bool
	// stringContent is true when content is a JSON string (one implicit text block).
	stringContent bool
	// textGone: the rows' text was freed after the store took them (storeRows).
	textGone bool
	// handed says how storeRows last gave the rows to the store (handedAt, handedKept,
	// handedStrip bits; 0: never). A message handed with the flags it has now writes
	// nothing, so storeRows leaves it out (its job, or a failed one's dropped cache, covers it).
	handed     uint8
	realUser   bool // user message that is not only tool_result blocks
	finalReply bool // assistant message with no tool calls
	thinking   bool // has thinking or redacted_thinking blocks
	// pinAlways marks a pinned Chat or Responses system/developer message: every trim keeps
	// it (contract: Trim, pinned messages). An Anthropic role "system" message instead
	// stays exactly when the message before it stays.
	pinAlways bool
	// stepStart: the message opens a step of an agent loop (contract: in-turn gap).
	stepStart   bool
	reasoning   bool
	modelOutput bool
	// encrypted: a Responses reasoning item carries a non-empty encrypted_content.
	encrypted bool
}

// spanSum returns the sum of the message's bytes (computed from raw for a message built
// without one).
func (m *message) spanSum() spanSum {
	if m.sum.n == 0 && m.raw != nil {
		m.sum = sumOf(m.raw)
	}
	return m.sum
}

// attach gives a reused message the span of the current body (raw, which repeats the
// bytes it was parsed from); detach lets go of it.
func (m *message) attach(raw []byte) { m.raw = raw }
func (m *message) detach()           { m.raw = nil }

// blockRaw returns the bytes of block b of m (m attached).
func (m *message) blockRaw(b *block) []byte { return m.raw[b.off:b.end] }

// fields returns the members of the message object (m attached). The message was
// validated when it was parsed, so the scan cannot fail.
func (m *message) fields() []member {
	mem, _ := objectMembers(m.raw)
	return mem
}

// memberVal returns the value of member i of the message (m attached).
func (m *message) memberVal(i int) []byte { return m.fields()[i].val }

// offsetIn returns where inner starts inside outer; inner must be a plain (two-index)
// sub-slice of outer, as every span the scanner returns is: both end at the same place
// in memory, so the difference of their capacities is the offset.
func offsetIn(outer, inner []byte) int { return cap(outer) - cap(inner) }

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
	// exact is the text as the agent sent it when it is not valid UTF-8 (decodeText), else "";
	// messages.text stores it, while text (store.ValidText of it) is fingerprinted,
	// compressed and forwarded. docs/decisions.md "Invalid UTF-8 in row texts".
	exact string
}

// newRow is a row of text as decoded by decodeText: text valid UTF-8, exact kept when the
// two differ.
func newRow(role, kind, name, text string) row {
	r := row{role: role, kind: kind, name: name, text: store.ValidText(text)}
	if r.text != text {
		r.exact = text
	}
	return r
}

// storedText is what messages.text holds for r: the text as received.
func (r *row) storedText() string {
	if r.exact != "" {
		return r.exact
	}
	return r.text
}
