package proxy

import (
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// Shorthand message builders for trim tests: u text, a reply, at tool call, ur result,
// urt result plus text, sys mid-conversation system message.
func u(text string) string { return fmt.Sprintf(`{"role":"user","content":%q}`, text) }
func a(text string) string {
	return fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":%q}]}`, text)
}
func at(id string) string {
	return fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"ls"}}]}`, id)
}
func ur(id string) string {
	return fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"out %s"}]}`, id, id)
}
func urt(id, text string) string {
	return fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"out"},{"type":"text","text":%q}]}`, id, text)
}
func sys(text string) string { return fmt.Sprintf(`{"role":"system","content":%q}`, text) }

func buildMsgs(t testing.TB, raws ...string) []*message {
	t.Helper()
	p := &Proxy{}
	p.settings.Store(&Settings{CharsPerToken: 2.5})
	names := map[string]string{}
	prev := ""
	var out []*message
	for _, r := range raws {
		m, err := parseMessage([]byte(r))
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		for _, u := range m.toolUses {
			names[u.id] = u.name
		}
		if err := p.rowsFor(m, prev, names); err != nil {
			t.Fatal(err)
		}
		prev = m.endFP
		out = append(out, m)
	}
	return out
}

func keptSet(msgs []*message, p cutPlan) string {
	var b strings.Builder
	for i := range msgs {
		if p.kept(msgs, i) {
			fmt.Fprintf(&b, "%d ", i)
		}
	}
	return strings.TrimSpace(b.String())
}

func TestPlanTrim(t *testing.T) {
	always := func(cutPlan) bool { return false } // never room for more than 3 steps
	tests := []struct {
		name    string
		msgs    []string
		old     cutPlan
		binds   bool
		cut     int
		kept    string
		dropped int
		strip   int
	}{
		{"plain turns: cut at the last user turn, reply kept",
			[]string{u("task"), a("r1"), u("q2"), a("r2"), u("q3"), a("r3"), u("q4")}, cutPlan{cut: -1},
			false, 6, "0 5 6", 4, 5},
		{"mid-conversation system message is pinned",
			[]string{u("task"), sys("env"), a("r1"), u("q2"), a("r2"), u("q3")}, cutPlan{cut: -1},
			false, 5, "0 1 4 5", 2, 4},
		{"first turn in flight: gap only, never the step after the cut turn",
			[]string{u("task"), at("t1"), ur("t1"), at("t2"), ur("t2"), at("t3"), ur("t3"), at("t4"), ur("t4"), at("t5"), ur("t5")}, cutPlan{cut: -1},
			false, 0, "0 5 6 7 8 9 10", 4, 9},
		{"binding model strips the latest assistant too",
			[]string{u("task"), a("r1"), u("q2"), at("t1"), ur("t1")}, cutPlan{cut: -1},
			true, 2, "0 1 2 3 4", 0, 4},
		{"no clean cut: a mixed result turn keeps its head and its pair",
			[]string{u("task"), a("r1"), u("q2"), at("t1"), urt("t1", "stop"), at("t2"), ur("t2")}, cutPlan{cut: -1},
			false, 4, "0 1 2 3 4 5 6", 0, 5},
		{"a turn whose reply called tools is not a cut: the earlier clean turn is",
			[]string{u("task"), a("r1"), u("q2"), a("r2"), u("q3"), at("t1"), urt("t1", "more"), at("t2"), ur("t2")}, cutPlan{cut: -1},
			false, 4, "0 3 4 5 6 7 8", 2, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs := buildMsgs(t, tc.msgs...)
			old := tc.old
			old.first, old.reply, old.gap, old.strip = firstRealUser(msgs), -1, -1, -1
			p := planTrim(msgs, old, always, tc.binds)
			if p.cut != tc.cut {
				t.Fatalf("cut %d, want %d (plan %+v)", p.cut, tc.cut, p)
			}
			if got := keptSet(msgs, p); got != tc.kept {
				t.Errorf("kept %q, want %q (plan %+v)", got, tc.kept, p)
			}
			if got := p.dropped(msgs); got != tc.dropped {
				t.Errorf("dropped %d, want %d", got, tc.dropped)
			}
			if p.strip != tc.strip {
				t.Errorf("strip %d, want %d", p.strip, tc.strip)
			}
			assertPairs(t, msgs, p)
		})
	}
}

// assertPairs fails when a kept tool_use has its result dropped or the other way round.
func assertPairs(t *testing.T, msgs []*message, p cutPlan) {
	t.Helper()
	keptUse, keptRes := map[string]bool{}, map[string]bool{}
	for i, m := range msgs {
		if !p.kept(msgs, i) {
			continue
		}
		for _, u := range m.toolUses {
			keptUse[u.id] = true
		}
		for _, id := range m.toolResIDs {
			keptRes[id] = true
		}
	}
	for id := range keptUse {
		if !keptRes[id] && id != lastOpenCall(msgs) {
			t.Errorf("tool_use %s kept without its result", id)
		}
	}
	for id := range keptRes {
		if !keptUse[id] {
			t.Errorf("tool_result %s kept without its tool_use", id)
		}
	}
}

func lastOpenCall(msgs []*message) string {
	if len(msgs) == 0 {
		return ""
	}
	last := msgs[len(msgs)-1]
	if last.role == "assistant" && len(last.toolUses) > 0 {
		return last.toolUses[0].id
	}
	return ""
}

func TestPlanTrimGapGrowsUnderBudgetAndOnlyMovesForward(t *testing.T) {
	raws := []string{u("task")}
	for i := 1; i <= 8; i++ {
		id := fmt.Sprintf("t%d", i)
		raws = append(raws, at(id), ur(id))
	}
	msgs := buildMsgs(t, raws...)
	roomy := func(p cutPlan) bool { return p.gap >= 7 } // room for the tail from message 7 on
	p := planTrim(msgs, noPlan(0), roomy, false)
	if p.gap != 7 {
		t.Fatalf("gap starts at %d, want 7 (older steps kept while under budget)", p.gap)
	}
	// a later trim of the same cut with less room may only move the gap forward
	p2 := planTrim(msgs, p, func(cutPlan) bool { return true }, false)
	if p2.gap < p.gap {
		t.Fatalf("gap moved back from %d to %d", p.gap, p2.gap)
	}
	if p2.gap == 1 {
		t.Fatal("the step right after the cut turn must never be kept in the tail")
	}
}

// R2. FIXED during the review by commit 90d4630 ("pinned system messages follow their
// turn"): fails on eb055c9, passes on 90d4630; kept as a regression test.
// Claude Code's mid-conversation role "system" message (messages[1]: environment,
// deferred tool names, agent types, skills) is dropped by the in-turn gap when the first
// turn is still in flight (cut == first real user turn). plan.kept treats every message
// after the cut as tail, pinned or not. anthropic.go documents pinned messages as "never
// dropped", and the preserved-thinking guidance to proxies (api-rules §1.7.4) says "Leave a
// role: "system" message where the caller put it". Losing it mid-task also loses the list
// of deferred tools the model can load through ToolSearch.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewPinnedSystemMessageSurvivesAFirstTurnGapTrim(t *testing.T) {
	r := newRig(t, testSettings(2500), fakeupstream.Options{})
	c := r.client(t, "pinned", "claude-mythos-5-1")
	c.userTurn("one long task, use tools", output(25, 12))
	reqs := r.accepted(t)
	trimmed := false
	for i, rec := range reqs {
		body := string(rec.Body)
		if !strings.Contains(body, "[smarter-compact: continuing session pinned;") {
			continue
		}
		trimmed = true
		if !strings.Contains(body, "Environment: cwd /work") {
			t.Fatalf("request %d (trimmed) dropped the role \"system\" message the client put at messages[1]", i)
		}
	}
	if !trimmed {
		t.Fatal("the first turn was never trimmed: the test tests nothing")
	}
}

// A later turn sent as two user items (Codex: <environment_context> then the prompt) is one
// cut turn: the in-turn gap once dropped the prompt and kept only the environment item,
// which carried the pointer.
//
// Regression test from the review of the OpenAI adapters.
func TestCutTurnOfTwoUserItemsKeepsItsPrompt(t *testing.T) {
	dev := `{"type":"message","role":"developer","content":[{"type":"input_text","text":"sys"}]}`
	items := []string{dev, regUser("<environment_context>a</environment_context>"), regUser("task one"), regAsst("done one"), regUser("task mid"), regAsst("done mid"),
		regUser("<environment_context>b</environment_context>"), regUser("TASK TWO: fix the bug")}
	for n := 1; n <= 6; n++ {
		items = append(items, regStep(n))
	}
	body := []byte(`{"model":"gpt-5.4","input":[` + strings.Join(items, ",") + `]}`)
	e := newAdEnv(t, testSettings(1_000_000))
	res := e.send(t, adCodex, adHeader("two"), body, true)
	if res.trimmed != 2 {
		t.Fatalf("trimmed = %d", res.trimmed)
	}
	if !strings.Contains(string(res.body()), "TASK TWO: fix the bug") {
		t.Fatalf("the cut turn's prompt is not in the view:\n%s", respIDs(t, res.body()))
	}
}

// A trim the threshold asks for must shrink the request: dropping two short messages while
// adding a pointer of about 1 KB made it bigger (seen by a new user with a small threshold:
// tokens_before=11430 tokens_after=11577). A forced trim still happens.
//
// Regression test from the review of the OpenAI adapters.
func TestThresholdTrimThatWouldGrowTheRequestIsSkipped(t *testing.T) {
	body := []byte(`{"model":"gpt-5.4","messages":[{"role":"system","content":"sys"},` +
		`{"role":"user","content":"task"},{"role":"assistant","content":"r1"},` +
		`{"role":"user","content":"q2"},{"role":"assistant","content":"r2"},{"role":"user","content":"q3"}]}`)
	h := http.Header{}
	h.Set("X-Session-Id", "grow")
	p := benchProxy(t, 1) // every request is over the threshold
	res, _, err := p.rewriteAs(target{chatFormat, "openai"}, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if res.trimmed != 0 || strings.Contains(string(res.body()), "[smarter-compact: continuing session") {
		t.Fatalf("a trim that drops 2 short messages and adds the pointer was made (trimmed=%d)", res.trimmed)
	}

	forced := benchProxy(t, 1)
	if err := forced.root.SetForce("grow"); err != nil {
		t.Fatal(err)
	}
	res, _, err = forced.rewriteAs(target{chatFormat, "openai"}, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if res.trimmed != 2 {
		t.Fatalf("a forced trim was skipped (trimmed=%d)", res.trimmed)
	}
}

func TestForceFlagTrimsBelowTheThresholdAndIsDeleted(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "forced", "claude-opus-5-5")
	c.userTurn("one, use tools", output(3, 1))
	c.userTurn("two", output(1, 0))
	must(t, r.root.SetForce("forced"))
	c.userTurn("three", output(1, 0))
	reqs := r.accepted(t)
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "[smarter-compact: continuing session forced; ") {
		t.Fatal("the forced request carries no pointer")
	}
	if r.root.Force("forced") {
		t.Fatal("the .force flag was not deleted")
	}
	var trims int
	must(t, sessionDB(t, r, "forced").QueryRow(`SELECT count(*) FROM events WHERE kind='trim'`).Scan(&trims))
	if trims != 1 {
		t.Fatalf("%d trim events, want 1", trims)
	}
}

// pairingConvo is one seed's generated conversation in an OpenAI format, ready to send one
// round trip at a time.
type pairingConvo struct {
	tg    target
	sends []int              // the sizes of the requests, in order
	body  func(n int) []byte // the request of the first n messages or items
	label func(n int) string // names that request in a failure
}

// Random agent conversations in the Chat and Responses formats, one round trip at a time
// with low thresholds and random forced trims, one case a format:
//   - chat: no view ever separates a call from its result, in either direction.
//   - responses (Codex-shaped, OpenAI and Claude models, the openai and codex families, with
//     and without instructions): every view pairs calls and outputs both ways, never ends on
//     or orphans a reasoning item, and drops the id of an item whose reasoning is gone.
//
// TestChatPairingNeverSplit (chat_test.go) and TestResponsesPairingAndLinkage
// (responses_test.go) are its cases chat and responses; each case draws from its seed's
// generator in the order its test did, so the conversations are the same.
func TestOpenAIPairing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sid        string // session id format, of the seed
		gen        func(seed int64, rng *rand.Rand) pairingConvo
		invariants func(t testing.TB, label string, orig, body []byte)
	}{
		{"chat", "chat-pairs-%d", func(seed int64, rng *rand.Rand) pairingConvo {
			g := &chatGen{rng: rng}
			for n := 0; n < 3+rng.Intn(4); n++ {
				g.turn(n)
			}
			system := seed%2 == 0
			return pairingConvo{adChat, g.sends,
				func(n int) []byte { return g.body(n, system) },
				func(n int) string { return fmt.Sprintf("seed %d, %d messages", seed, n) }}
		}, chatInvariants},
		{"responses", "resp-pairs-%d", func(seed int64, rng *rand.Rand) pairingConvo {
			g := &respGen{rng: rng}
			for k := 0; k < 3+rng.Intn(4); k++ {
				g.turn(k)
			}
			model := []string{"gpt-5.4", "claude-sonnet-4-5", "gpt-5.3-codex", "claude-opus-5-5"}[seed%4]
			tg := []target{adResponses, adCodex}[rng.Intn(2)]
			instr := ""
			if rng.Intn(2) == 0 {
				instr = `"instructions":"You are Codex.",`
			}
			return pairingConvo{tg, g.sends,
				func(n int) []byte {
					return []byte(`{"model":"` + model + `",` + instr + `"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"perm"}]},` +
						strings.Join(g.items[:n], ",") + `],"store":false,"stream":true}`)
				},
				func(n int) string { return fmt.Sprintf("seed %d (%s), %d items", seed, model, n) }}
		}, respInvariants},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trims := 0
			for seed := int64(1); seed <= 7; seed++ {
				rng := rand.New(rand.NewSource(seed))
				c := tc.gen(seed, rng)
				e := newAdEnv(t, testSettings(300+rng.Intn(3000)))
				sid := fmt.Sprintf(tc.sid, seed)
				for _, n := range c.sends {
					orig := c.body(n)
					res := e.send(t, c.tg, adHeader(sid), orig, rng.Intn(5) == 0)
					if res.trimmed == 2 {
						trims++
					}
					tc.invariants(t, c.label(n), orig, res.body())
				}
				if strings.Contains(e.logs.String(), "fail-open") {
					t.Fatalf("seed %d: fail-open: %s", seed, e.logs.String())
				}
			}
			if trims < 8 {
				t.Fatalf("only %d trims: the conversations do not exercise the cut", trims)
			}
		})
	}
}
