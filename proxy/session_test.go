package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// R11. The thread key is the fingerprint of the first ROW of the first message
// (buildMessages: thread = m.firstFP). Claude Code's first user message starts with a
// generic <system-reminder> text block (clients.md: "[system-reminder text block (commit
// attribution), the prompt text]"), the same for the main conversation and for every
// subagent or side request of the session. All of them then share one thread key: one
// threadState (cut, gap, strip, block, usage sample) and one messages.thread value. The
// contract says "a subagent or side request is its own thread" (002, messages.thread) and
// keys the trim state "per conversation thread ... by the first message's fingerprint"
// (001, token estimate). Consequence: a subagent's trim overwrites the main conversation's
// cut, the main conversation's next request no longer finds its cut and is cut again (a new
// pointer, a prompt-cache miss) — the two conversations keep re-trimming each other.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewSubagentIsItsOwnThread(t *testing.T) {
	run := func(t *testing.T, withSub bool) (threads, followUp int) {
		r := newRig(t, testSettings(3000), fakeupstream.Options{})
		main := r.client(t, "agents", "claude-mythos-5-1")
		sub := r.client(t, "agents", "claude-mythos-5-1")
		db := sessionDB(t, r, "agents")
		lastTurnTrimmed := func(since int) bool {
			var n int
			r.root.SettleAll()
			must(t, db.QueryRow(`SELECT count(*) FROM events WHERE kind = 'usage' AND id > ? AND trimmed = 2`, since).Scan(&n))
			return n > 0
		}
		maxID := func() (id int) {
			r.root.SettleAll()
			must(t, db.QueryRow(`SELECT coalesce(max(id), 0) FROM events`).Scan(&id))
			return id
		}
		main.userTurn("Main task: refactor the parser, use tools", output(20, 2))
		if withSub {
			sub.userTurn("Subagent task: list the tests, use tools", output(20, 2))
		}
		// The main conversation goes on until a turn of it makes a new cut.
		for turn := 0; ; turn++ {
			if turn == 10 {
				t.Fatal("the main conversation never trimmed")
			}
			since := maxID()
			main.userTurn(fmt.Sprintf("main turn %d, use tools", turn), output(20, 2))
			if lastTurnTrimmed(since) {
				break
			}
		}
		if withSub { // the subagent works (and trims) in the same session
			for turn := 0; turn < 3; turn++ {
				sub.userTurn(fmt.Sprintf("sub turn %d, use tools", turn), output(20, 2))
			}
		}
		// A short follow-up of the main conversation: it carries its cut, no new trim.
		main.msgs = append(main.msgs, map[string]any{"role": "user", "content": "main: short question"})
		if status, body := main.send(); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		must(t, db.QueryRow(`SELECT count(DISTINCT thread) FROM messages`).Scan(&threads))
		must(t, db.QueryRow(`SELECT trimmed FROM events WHERE kind = 'usage' ORDER BY id DESC LIMIT 1`).Scan(&followUp))
		return threads, followUp
	}
	if _, followUp := run(t, false); followUp != 1 {
		t.Fatalf("control (no subagent): the follow-up has trimmed=%d, want 1; the test is miscalibrated", followUp)
	}
	threads, followUp := run(t, true)
	if threads != 2 {
		t.Errorf("two conversations (a main one and a subagent) are stored as %d thread(s)", threads)
	}
	if followUp != 1 {
		t.Errorf("with a subagent in the session the main conversation's short follow-up has trimmed=%d, want 1 (as without the subagent): the subagent's trim replaced the main conversation's cut", followUp)
	}
}

// The thread cache is keyed by format: a message first parsed as Chat was reused for an
// Anthropic request of the same session and thread when its bytes were identical (a plain
// {"role":"user","content":"…"} is valid in both), and the Anthropic renderer, finding no
// blocks, sent the cut turn as the pointer alone.
//
// Regression test from the review of the OpenAI adapters.
func TestThreadCacheIsPerFormat(t *testing.T) {
	msgs := `[{"role":"user","content":"first task"},{"role":"assistant","content":"a1"},` +
		`{"role":"user","content":"second"},{"role":"assistant","content":"a2"},{"role":"user","content":"THIRD QUESTION"}]`
	e := newAdEnv(t, testSettings(1_000_000))
	h := adHeader("xfmt")
	e.send(t, adChat, h, []byte(`{"model":"gpt-5.4","messages":`+msgs+`}`), false)
	res := e.send(t, adAnthropic, h, []byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"messages":`+msgs+`}`), true)
	if res.trimmed != 2 {
		t.Fatalf("trimmed = %d", res.trimmed)
	}
	if !strings.Contains(string(res.body()), "THIRD QUESTION") {
		t.Fatalf("the cut turn lost its text:\n%s", res.body())
	}
}

// The route's agent reaches sessions/<sid>.trim.json ("agent"); the unknown route records none.
func TestTrimStateRecordsAgent(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "agentsess", "claude-mythos-5-1")
	c.userTurn("first", output(1, 0))
	r.accepted(t)
	body := []byte(`{"model":"claude-mythos-5-1","max_tokens":10,"messages":[{"role":"user","content":"plain"}]}`)
	post(t, r.srv.URL+"/v1/messages", body, map[string]string{"X-Smarter-Compact-Session-Id": "anon"})
	must(t, r.proxy.Close())
	for sid, want := range map[string]string{"agentsess": "claude-code", "anon": ""} {
		b, err := r.root.LoadTrimState(sid)
		must(t, err)
		if st := decodeTrimState(b); st.Agent != want {
			t.Errorf("%s: agent %q want %q (%s)", sid, st.Agent, want, b)
		}
	}
}

// TestFirstTurnReuseKeepsThreadsApart: a request that repeats the previous one's messages
// from the start takes them, first turn included, from that request's thread cache
// (placeMessages) only when it names the same thread. Here the first turn grows by a second
// user message, which names another thread, and the new thread's cached messages must be
// its own (message.handed records what was stored for its thread); the next request of the
// new thread takes all of its repeated messages from that thread's cache.
func TestFirstTurnReuseKeepsThreadsApart(t *testing.T) {
	p := benchProxy(t, 10_000_000)
	h := benchHeader("first-turn")
	body := func(msgs ...string) []byte {
		return []byte(`{"model":"claude-mythos-5-1","max_tokens":10,"messages":[` + strings.Join(msgs, ",") + `]}`)
	}
	u1, u2 := `{"role":"user","content":"first task"}`, `{"role":"user","content":"and this too"}`
	a1, u3 := `{"role":"assistant","content":"done"}`, `{"role":"user","content":"next"}`
	rewrite := func(b []byte) (*rewritten, *session) {
		t.Helper()
		res, sess, err := p.rewrite(h, b)
		if err != nil {
			t.Fatal(err)
		}
		p.root.SettleAll()
		return res, sess
	}
	res1, sess := rewrite(body(u1))
	res2, _ := rewrite(body(u1, u2, a1))
	if res1.thread == res2.thread {
		t.Fatal("the grown first turn should name another thread")
	}
	one := sess.threads[threadCacheKey(anthropicFormat, res1.thread)]
	two := sess.threads[threadCacheKey(anthropicFormat, res2.thread)]
	if len(one) != 1 || len(two) != 3 {
		t.Fatalf("thread caches of %d and %d messages, want 1 and 3", len(one), len(two))
	}
	if two[0] == one[0] {
		t.Error("the second thread's first message is the first thread's cached message")
	}
	res3, _ := rewrite(body(u1, u2, a1, u3))
	three := sess.threads[threadCacheKey(anthropicFormat, res3.thread)]
	if res3.thread != res2.thread || len(three) != 4 {
		t.Fatalf("third request: thread %q of %d messages, want %q of 4", res3.thread, len(three), res2.thread)
	}
	for i := range two {
		if three[i] != two[i] {
			t.Errorf("message %d was parsed again, not taken from the thread's cache", i)
		}
	}
}
