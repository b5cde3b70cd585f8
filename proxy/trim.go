package proxy

import (
	"bytes"
	"strings"
)

// The trim (contract: Trim). It works on the message list of one thread and decides which
// messages the view keeps. It never looks at bytes: rendering is view.go's job.

// cutPlan is a trim expressed as message indices of one request.
type cutPlan struct {
	first int // first real user turn, -1 when there is none
	cut   int // the cut turn, -1 when the request is not trimmed
	// cutEnd is the cut turn's last message: a turn sent as several user messages in a row
	// (Codex: environment context, then the prompt) is kept whole
	cutEnd int
	reply  int // the final reply kept before the cut turn, -1 when none
	gap    int // first message of the kept tail after the cut turn; cutEnd+1 (or -1) means no gap
	strip  int // assistant messages before this index lose signed thinking; -1 strips nothing
	// keepHead keeps every message before the cut turn: the cut is not a candidate (no
	// earlier turn could drop cleanly), so only the in-turn gap drops.
	keepHead bool
}

func noPlan(first int) cutPlan {
	return cutPlan{first: first, cut: -1, cutEnd: -1, reply: -1, gap: -1, strip: -1}
}

func (p cutPlan) active() bool { return p.cut >= 0 }

// kept reports whether message i is in the view. A pinned message (a mid-conversation
// role "system" message) stays exactly when the message it follows stays: the API accepts
// one only right after a user message and before an assistant message or the end
// (api-rules §1.3), and Claude Code sends one after many tool results, so one whose turn
// was dropped must go with it.
func (p cutPlan) kept(msgs []*message, i int) bool { return keptIn(p, messagePins(msgs), i) }

// pins is what kept reads of a request's messages: which are pinned, and which always stay.
// The messages themselves (messagePins) and their facts (msgFacts) both answer it.
type pins interface {
	pinned(i int) bool
	pinAlways(i int) bool
}

type messagePins []*message

func (l messagePins) pinned(i int) bool    { return l[i].pinned }
func (l messagePins) pinAlways(i int) bool { return l[i].pinAlways }

// keptIn is cutPlan.kept over the pins of the messages.
func keptIn[L pins](p cutPlan, l L, i int) bool {
	if l.pinAlways(i) {
		return true
	}
	if p.active() && l.pinned(i) {
		j := i - 1
		for j >= 0 && l.pinned(j) {
			j--
		}
		return j < 0 || keptIn(p, l, j)
	}
	switch {
	case !p.active() || i <= p.first || i >= p.cut && i <= p.cutEnd:
		return true
	case i < p.cut:
		return p.keepHead || i == p.reply
	default:
		return p.gap <= p.cutEnd+1 || i >= p.gap
	}
}

// dropped counts the non-pinned messages the plan removes.
func (p cutPlan) dropped(msgs []*message) int {
	if !p.active() {
		return 0
	}
	n := 0
	for i, m := range msgs {
		if !m.pinned && !p.kept(msgs, i) {
			n++
		}
	}
	return n
}

// firstRealUser returns the index of the last message of the first real user turn
// (contract: the first user message that is not only tool_result blocks), or -1. A turn
// sent as several user messages in a row is one turn: Codex sends its environment context
// and the prompt as two user items, and the prompt states the task the first turn keeps.
// (Anthropic user messages alternate with assistant ones, so there it is one message.)
func firstRealUser(msgs []*message) int {
	for i, m := range msgs {
		if m.role == "user" && m.realUser {
			return turnEnd(msgs, i)
		}
	}
	return -1
}

// turnEnd returns the last message of the user turn that starts at i: i and the real user
// messages right after it (pinned messages in between are skipped).
func turnEnd(msgs []*message, i int) int {
	last := i
	for j := i + 1; j < len(msgs); j++ {
		if msgs[j].pinned {
			continue
		}
		if msgs[j].role != "user" || !msgs[j].realUser {
			break
		}
		last = j
	}
	return last
}

// replyBefore returns the index of the agent message just before message i, skipping
// pinned messages, when it is a final reply that keeps content after a thinking strip.
func replyBefore(msgs []*message, i int) int {
	for j := i - 1; j >= 0; j-- {
		if msgs[j].pinned {
			continue
		}
		if m := msgs[j]; m.role == "assistant" && m.finalReply && m.nonThinking > 0 {
			return j
		}
		return -1
	}
	return -1
}

// cutCandidate reports whether a real user turn at i can be the cut: the message before it
// is a final reply (so the kept messages alternate roles: first turn, reply, cut turn),
// something between the first turn and the reply drops, and no tool_use/tool_result pair
// straddles the dropped and kept parts.
func cutCandidate(msgs []*message, first, i int) bool {
	m := msgs[i]
	if m.role != "user" || !m.realUser || i <= first {
		return false
	}
	r := replyBefore(msgs, i)
	if r < 0 {
		return false
	}
	drops := false
	for j := first + 1; j < r && !drops; j++ {
		drops = !msgs[j].pinned
	}
	if !drops {
		return false
	}
	// The kept part (the reply on) is the newest turn or so and the dropped part most of
	// the conversation: the set holds the kept part's ids, and the dropped part is looked up.
	var keepIDs map[string]bool
	for j := r; j < len(msgs); j++ {
		for _, u := range msgs[j].toolUses {
			keepIDs = setID(keepIDs, u.id)
		}
		for _, id := range msgs[j].toolResIDs {
			keepIDs = setID(keepIDs, id)
		}
	}
	if len(keepIDs) == 0 {
		return true
	}
	for j := first + 1; j < r; j++ {
		if msgs[j].pinned {
			continue
		}
		for _, u := range msgs[j].toolUses {
			if keepIDs[u.id] {
				return false
			}
		}
		for _, id := range msgs[j].toolResIDs {
			if keepIDs[id] {
				return false
			}
		}
	}
	return true
}

// setID adds id to set, making the set on first use.
func setID(set map[string]bool, id string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	set[id] = true
	return set
}

// chooseCut returns the last real user turn after prev (the existing cut, -1 for none)
// that is a cut candidate; else the existing cut; else the last real user turn. candidate
// reports that the turn returned passed cutCandidate; false says only that it was not
// checked, or is prev or the first turn.
func chooseCut(msgs []*message, first, prev int) (cut int, candidate bool) {
	lo := first
	if prev > lo {
		lo = prev
	}
	for i := len(msgs) - 1; i > lo; i-- {
		if cutCandidate(msgs, first, i) {
			return i, true
		}
	}
	if prev >= 0 {
		return prev, false
	}
	for i := len(msgs) - 1; i >= first && i >= 0; i-- {
		if msgs[i].role == "user" && msgs[i].realUser {
			// every turn after first failed cutCandidate above (prev < 0, so lo = first)
			return i, false
		}
	}
	return -1, false
}

// steps splits the cut turn's agent loop into steps (contract: in-turn gap): each starts
// at a step start (Anthropic and Chat, an assistant message; Responses, see prepareItems)
// and holds the messages after it up to the next one. A boundary that a tool call/result
// pair would straddle is not a boundary, so a step is never split.
func steps(msgs []*message, cut int) []int {
	// A pair first seen at a and again at b straddles every boundary in a+1..b: mark those
	// with a difference array, so this is one pass over the turn.
	lo := cut + 1
	if lo >= len(msgs) {
		return nil
	}
	seen := map[string]int{}
	diff := make([]int, len(msgs)+1)
	mark := func(id string, j int) {
		if a, ok := seen[id]; !ok {
			seen[id] = j
		} else if a < j {
			diff[a+1]++
			diff[j+1]--
		}
	}
	for j := lo; j < len(msgs); j++ {
		for _, u := range msgs[j].toolUses {
			mark(u.id, j)
		}
		for _, id := range msgs[j].toolResIDs {
			mark(id, j)
		}
	}
	var out []int
	open := 0
	for i := lo; i < len(msgs); i++ {
		open += diff[i]
		if msgs[i].stepStart && open == 0 {
			out = append(out, i)
		}
	}
	return out
}

// latestAssistant returns the index of the last assistant message, -1 when none.
func latestAssistant(msgs []*message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].role == "assistant" && !msgs[i].pinned {
			return i
		}
	}
	return -1
}

// latestRun returns where the latest assistant run starts (contract: the trailing run of
// assistant items ending at the last one) and its last message; -1, -1 when there is no
// assistant message. In the Anthropic format assistant messages alternate with user
// messages, so the run is one message; in Responses it is the reasoning, calls and reply
// of the latest response.
func latestRun(msgs []*message) (start, last int) {
	last = latestAssistant(msgs)
	if last < 0 {
		return -1, -1
	}
	start = last
	for start > 0 && msgs[start-1].role == "assistant" && !msgs[start-1].pinned {
		start--
	}
	return start, last
}

// planTrim chooses a new cut and gap for msgs given the existing plan. under reports
// whether a view that keeps the tail from message index t stays under the trim_to_fraction
// budget. bindsPrefix selects the strip for models that bind thinking to its prefix
// (api-rules §1.7.4): every kept assistant message loses signed thinking, the latest too.
func planTrim(msgs []*message, old cutPlan, under func(p cutPlan) bool, bindsPrefix bool) cutPlan {
	first := firstRealUser(msgs)
	if first < 0 {
		return old
	}
	p := noPlan(first)
	cut, candidate := chooseCut(msgs, first, old.cut)
	if p.cut = cut; p.cut < 0 {
		return old
	}
	if p.cut == old.cut {
		p.keepHead = old.keepHead
	} else if p.cut > first && !candidate {
		p.keepHead = true
	}
	if p.cut > first && !p.keepHead {
		p.reply = replyBefore(msgs, p.cut)
	}
	p.cutEnd = turnEnd(msgs, p.cut)
	p.gap = p.cutEnd + 1
	if st := steps(msgs, p.cutEnd); len(st) > 3 {
		tail := len(st) - 3
		for tail > 1 {
			try := p
			try.gap = st[tail-1]
			if !under(try) {
				break
			}
			tail--
		}
		p.gap = st[tail]
		if old.cut == p.cut && old.gap > p.gap {
			p.gap = old.gap // later trims of the same cut only move the gap forward
		}
	}
	if start, last := latestRun(msgs); last >= 0 {
		p.strip = start
		if bindsPrefix {
			p.strip = last + 1
		}
	}
	return p
}

// bindsThinkingToPrefix reports whether the model checks that a thinking block's earlier
// conversation is unchanged (api-rules §1.7.4: Fable 5.1 and Opus 5.5), or the request sets
// thinking.block_binding itself. Other models keep the contract's strip: guessing wrong
// there costs a fatal "Expected thinking" 400 in an open tool loop, while an unlisted model
// that does bind costs one "bound to a different conversation" 400 that Claude Code
// recovers from by resending without thinking (research/clients.md, gotchas).
func bindsThinkingToPrefix(model string, thinking []byte) bool {
	if bytes.Contains(thinking, []byte(`"block_binding"`)) {
		return true
	}
	m := strings.ToLower(model)
	return strings.Contains(m, "opus-5-5") || strings.Contains(m, "fable-5-1")
}
