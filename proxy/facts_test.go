package proxy

import (
	"math/rand/v2"
	"testing"
)

// TestFactsAgreeWithMessages: the passes that read a request's facts (msgFacts) keep,
// strip and count exactly what the messages say, for every plan over lists with pinned
// messages (Anthropic role "system", which stay with the message before them, and the
// always-kept Chat/Responses ones), thinking, compressed renderings and binary payloads.
func TestFactsAgreeWithMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(12)
		msgs := make([]*message, n)
		for i := range msgs {
			m := &message{raw: make([]byte, 10+rng.IntN(90)), idAt: -1, role: "user"}
			switch rng.IntN(6) {
			case 0:
				m.pinned = true
			case 1:
				m.pinned, m.pinAlways = true, true
			case 2, 3:
				m.role = "assistant"
				m.thinking = rng.IntN(2) == 0
				m.thinkingBytes = rng.IntN(10)
			}
			if rng.IntN(4) == 0 {
				m.rendered = make([]byte, 5+rng.IntN(20))
			}
			m.binaryAdjust = rng.IntN(5)
			m.markers = rng.IntN(3)
			msgs[i] = m
		}
		f := factsOf(msgs)
		req := &request{}
		for range 20 {
			pick := func() int { return rng.IntN(n+2) - 1 }
			plan := cutPlan{first: pick(), cut: pick(), cutEnd: pick(), reply: pick(), gap: pick(), strip: pick(), keepHead: rng.IntN(2) == 0}
			want := len(req.system) + len(req.tools)
			for i, m := range msgs {
				if f.kept(&plan, i) != plan.kept(msgs, i) {
					t.Fatalf("round %d, plan %+v: message %d kept %v by its facts, %v by the messages", round, plan, i, f.kept(&plan, i), plan.kept(msgs, i))
				}
				if f.stripped(plan, i) != stripped(msgs, plan, i) {
					t.Fatalf("round %d, plan %+v: message %d stripped %v by its facts, %v by the messages", round, plan, i, f.stripped(plan, i), stripped(msgs, plan, i))
				}
				if !plan.kept(msgs, i) {
					continue
				}
				raw := m.raw
				if m.rendered != nil {
					raw = m.rendered
				}
				want += len(raw) - m.binaryAdjust + 1
				if stripped(msgs, plan, i) {
					want -= m.thinkingBytes
				}
				if plan.active() && i == plan.cut {
					want += len("block") + 32
				}
			}
			if got := viewChars(req, msgs, plan, "block"); got != want {
				t.Fatalf("round %d, plan %+v: viewChars %d, the messages say %d", round, plan, got, want)
			}
		}
		var cost int64
		for _, m := range msgs {
			cost += int64(len(m.raw))*3/2 + int64(len(m.rendered))
		}
		if got := f.cacheCost(); got != cost {
			t.Fatalf("round %d: cacheCost %d by the facts, %d by the messages", round, got, cost)
		}
	}
}
