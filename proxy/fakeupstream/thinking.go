package fakeupstream

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"
)

// Thinking signatures (api-rules §1.7.3, checklist §6 item 10) and the prefix check
// (§1.7.4, item 11).
//
// Each thinking block the fake emits gets a serial number and a signature: base64 of the
// serial and an HMAC over the block type, the serial and the thinking text. A
// redacted_thinking block's data is the same token over an empty text. The Server keeps, per
// serial, the response (message id) and position it was emitted at and what it was bound to:
// the hashes of tools and system, the chain hash of the messages' non-thinking blocks before
// it, and the serials of the thinking blocks the model had in context before it (those of
// the request, after any drop, and the earlier ones of the same response).

// signedBlock is what the fake remembers about one emitted thinking or redacted_thinking block.
type signedBlock struct {
	serial        uint64
	typ           string
	messageID     string
	pos           int
	tools, system [32]byte
	messages      [32]byte
	preds         []uint64
}

func (s *Server) mac(typ string, serial uint64, text string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(typ))
	m.Write([]byte{0})
	m.Write(binary.BigEndian.AppendUint64(nil, serial))
	m.Write([]byte(text))
	return m.Sum(nil)
}

func (s *Server) sign(typ string, serial uint64, text string) string {
	return base64.StdEncoding.EncodeToString(append(binary.BigEndian.AppendUint64(nil, serial), s.mac(typ, serial, text)...))
}

// verify returns the record of a thinking or redacted_thinking block from the request, or
// nil when its signature (data) is empty, unknown, or does not match the block's text. The
// caller holds s.mu.
func (s *Server) verify(b map[string]any) *signedBlock {
	typ := str(b, "type")
	token, text := str(b, "signature"), str(b, "thinking")
	if typ == "redacted_thinking" {
		token, text = str(b, "data"), ""
	}
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil || len(raw) != 8+sha256.Size {
		return nil
	}
	serial := binary.BigEndian.Uint64(raw[:8])
	rec := s.signed[serial]
	if rec == nil || rec.typ != typ || !hmac.Equal(raw[8:], s.mac(typ, serial, text)) {
		return nil
	}
	return rec
}

// InputTransformation reports a change the API made to the request before the model saw it:
// with thinking.block_binding.prefix_mismatch_behavior "drop_block", each thinking block
// dropped because its prefix changed (api-rules §1.7.4). The docs name the list and the
// reason; the other field names are ours.
type InputTransformation struct {
	Type         string `json:"type"`   // "thinking_block_dropped"
	Reason       string `json:"reason"` // "prefix_binding_mismatch"
	MessageIndex int    `json:"message_index"`
	ContentIndex int    `json:"content_index"`
}

// thinkingState is the outcome of checkThinking.
type thinkingState struct {
	msgs    []msg    // the messages the model gets (thinking blocks dropped by drop_block removed)
	kept    []uint64 // serials of the thinking blocks in msgs, in order
	dropped []InputTransformation
}

type thinkingRef struct {
	msg, block int
	rec        *signedBlock
}

// checkThinking checks every thinking block's signature, that the latest assistant message's
// thinking blocks are exactly those the fake emitted in that response, and on models that
// bind thinking to the prefix, each block's prefix. The caller holds s.mu.
func (s *Server) checkThinking(p *parsed, rules ModelRules) (thinkingState, *Error) {
	var refs []thinkingRef
	for i, m := range p.msgs {
		for j, b := range m.blocks {
			if !isThinking(b) {
				continue
			}
			rec := s.verify(b)
			if rec == nil {
				return thinkingState{}, invalid("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
			refs = append(refs, thinkingRef{i, j, rec})
		}
	}
	if err := s.checkLatest(p.msgs, refs); err != nil {
		return thinkingState{}, err
	}

	st := thinkingState{msgs: p.msgs}
	drop := map[[2]int]bool{}
	if rules.BindsThinkingToPrefix {
		if err := checkBinding(p, refs, &st, drop); err != nil {
			return thinkingState{}, err
		}
	} else {
		for _, r := range refs {
			st.kept = append(st.kept, r.rec.serial)
		}
	}
	if len(drop) > 0 {
		st.msgs = make([]msg, len(p.msgs))
		for i, m := range p.msgs {
			st.msgs[i] = msg{role: m.role, str: m.str}
			for j, b := range m.blocks {
				if !drop[[2]int{i, j}] {
					st.msgs[i].blocks = append(st.msgs[i].blocks, b)
				}
			}
		}
	}
	return st, nil
}

// checkBinding checks each thinking block's prefix on a model that binds thinking to it
// (§1.7.4): a mismatch is an error, or with drop_block drops the block and every thinking
// block after it, recorded in st and drop.
func checkBinding(p *parsed, refs []thinkingRef, st *thinkingState, drop map[[2]int]bool) *Error {
	bd := bindingOf(p, p.msgs)
	dropping := false
	var kept []uint64
	for _, r := range refs {
		reason := ""
		switch {
		case dropping:
		case bd.tools != r.rec.tools:
			reason = "The `tools` differ from the ones this block was created with." // our text
		case bd.system != r.rec.system:
			reason = "The `system` prompt differs from the one this block was created with."
		case bd.before[[2]int{r.msg, r.block}] != r.rec.messages:
			reason = "An earlier message differs from the one this block was created with." // our text
		case !isSuffix(kept, r.rec.preds):
			reason = "A thinking block before this one was removed, moved or put back." // our text
		}
		if reason == "" && !dropping {
			kept = append(kept, r.rec.serial)
			continue
		}
		if p.thinking.binding != "drop_block" {
			text := "messages.%d.content.%d: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\"."
			if !p.hasBeta(BetaBlockBinding) {
				text += " That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header."
			}
			return invalid(text+" %s", r.msg, r.block, reason)
		}
		// drop_block: this block and every thinking block after it (§1.7.4)
		dropping = true
		drop[[2]int{r.msg, r.block}] = true
		st.dropped = append(st.dropped, InputTransformation{
			Type: "thinking_block_dropped", Reason: "prefix_binding_mismatch",
			MessageIndex: r.msg, ContentIndex: r.block,
		})
	}
	st.kept = kept
	return nil
}

// checkLatest enforces "`thinking` or `redacted_thinking` blocks in the latest assistant
// message cannot be modified" (api-rules §1.7.3): when the latest assistant message carries
// thinking blocks, they must be every thinking block of one response, in the order emitted.
// A latest assistant message with no thinking at all passes (removing all thinking is valid).
func (s *Server) checkLatest(msgs []msg, refs []thinkingRef) *Error {
	latest := -1
	for i, m := range msgs {
		if m.role == "assistant" {
			latest = i
		}
	}
	var present []thinkingRef
	for _, r := range refs {
		if r.msg == latest {
			present = append(present, r)
		}
	}
	if len(present) == 0 {
		return nil
	}
	id := present[0].rec.messageID
	emitted := s.responses[id]
	for k := 0; k < max(len(present), len(emitted)); k++ {
		if k < len(present) && k < len(emitted) && present[k].rec.messageID == id && present[k].rec.serial == emitted[k] {
			continue
		}
		at := present[min(k, len(present)-1)].block
		return invalid("messages.%d.content.%d: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response.", latest, at)
	}
	return nil
}

// isSuffix reports whether now is a suffix of then: thinking blocks may be removed from the
// start of the history, not from the middle, and never put back (§1.7.4).
func isSuffix(now, then []uint64) bool {
	return len(now) <= len(then) && slices.Equal(now, then[len(then)-len(now):])
}
