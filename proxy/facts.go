package proxy

// msgFact is what the passes over a whole request read of one of its messages: the
// estimate (viewChars, wholeChars), the render, the store hand-off (storeRows), the
// breakpoint count and the cache's cost. msgFacts holds them for a request in one array,
// read from the messages in one pass (factsOf), so that a history of thousands of messages
// is walked once per request rather than once per pass, each visit a cache miss on a
// message struct. What is rarely set (a binary payload's adjustment, markers) is a flag
// here, and a pass that meets the flag reads the message.
//
// Lengths fit in int32: a body the proxy rewrites is at most maxBody (64 MiB) long.
type msgFact struct {
	raw    int32 // len(raw)
	view   int32 // what the message goes out as when unchanged: len(rendered), else len(raw)
	flags  uint8
	handed uint8 // message.handed, kept up to date by storeRows
}

// The bits of msgFact.flags.
const (
	factPinned    uint8 = 1 << iota
	factPinAlways       // message.pinAlways
	// factStrippable: an assistant message with thinking, which a strip changes (stripped)
	factStrippable
	factRendered // message.rendered is not nil
	factIDAt     // a Responses item with an id, which the view may drop (messageView)
	factRows     // the message has rows
	factBinary   // message.binaryAdjust is not 0
	factMarkers  // message.markers is not 0
)

// msgFacts holds the facts of a request's messages, index for index.
type msgFacts []msgFact

// factsOf reads the facts of msgs.
func factsOf(msgs []*message) msgFacts {
	f := make(msgFacts, len(msgs))
	for i, m := range msgs {
		x := &f[i]
		x.raw = int32(len(m.raw))
		x.view = x.raw
		if m.rendered != nil {
			x.view = int32(len(m.rendered))
			x.flags |= factRendered
		}
		x.handed = m.handed
		if m.pinned {
			x.flags |= factPinned
		}
		if m.pinAlways {
			x.flags |= factPinAlways
		}
		if m.thinking && m.role == "assistant" {
			x.flags |= factStrippable
		}
		if m.idAt >= 0 {
			x.flags |= factIDAt
		}
		if len(m.rows) > 0 {
			x.flags |= factRows
		}
		if m.binaryAdjust != 0 {
			x.flags |= factBinary
		}
		if m.markers != 0 {
			x.flags |= factMarkers
		}
	}
	return f
}

// factsFor returns the facts of msgs: those rewriteFor read once for the request when
// msgs are its messages, else read now.
func (r *request) factsFor(msgs []*message) msgFacts {
	if r.ownsFacts(msgs) {
		return r.facts
	}
	return factsOf(msgs)
}

// ownsFacts reports whether msgs are the messages readFacts read for the request, which
// buildMessages made from its list: msgs[i].raw is r.rawMsg(i).
func (r *request) ownsFacts(msgs []*message) bool {
	return len(r.facts) == len(msgs) && len(msgs) > 0 && &r.factsMsgs[0] == &msgs[0]
}

// readFacts reads the facts of the request's messages msgs once, for the passes that follow
// (factsFor). Nothing may change the messages' facts after it but storeRows, which keeps
// them up to date.
func (r *request) readFacts(msgs []*message) {
	r.facts, r.factsMsgs = factsOf(msgs), msgs
}

// kept is cutPlan.kept over the facts; without a cut every message is kept.
func (f msgFacts) kept(p *cutPlan, i int) bool {
	return p.cut < 0 || f[i].flags&factPinAlways != 0 || f.keptCut(p, i)
}

// keptCut is kept under a cut. Not inlined, so that kept is: the passes call it for every
// message, nearly always without a cut.
//
//go:noinline
func (f msgFacts) keptCut(p *cutPlan, i int) bool { return keptIn(*p, f, i) }

// chars is what message i adds to the estimate (viewChars) when it goes out as n bytes.
func (f msgFacts) chars(msgs []*message, i, n int) int {
	if f[i].flags&factBinary != 0 {
		n -= msgs[i].binaryAdjust
	}
	return n + 1
}

// cacheCost is session.cacheCost of the messages.
func (f msgFacts) cacheCost() int64 {
	var n int64
	for i := range f {
		n += int64(f[i].raw) * 3 / 2 // message.sum.n is len(raw) (buildMessages)
		if f[i].flags&factRendered != 0 {
			n += int64(f[i].view)
		}
	}
	return n
}

func (f msgFacts) pinned(i int) bool    { return f[i].flags&factPinned != 0 }
func (f msgFacts) pinAlways(i int) bool { return f[i].flags&factPinAlways != 0 }

// stripped is the package's stripped over the facts.
func (f msgFacts) stripped(plan cutPlan, i int) bool {
	return plan.strip >= 0 && i < plan.strip && f[i].flags&factStrippable != 0
}
