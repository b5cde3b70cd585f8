package proxy

import (
	"encoding/json"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// R7. count_tokens passes through untouched (DESIGN §4.2), but on a model that binds
// thinking to its prefix the endpoint "runs the same prefix check and returns the same 400"
// (api-rules §2.2, §1.7.4). Every thinking block in the session was produced on the proxy's
// view — system + standing instruction, and after a trim the trimmed messages — so Claude
// Code's count_tokens call with its own history (no standing instruction) is rejected from
// the first thinking turn on, even without any trim.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewCountTokensOnABindingModelIsNotRejected(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "count", "claude-opus-5-5")
	c.userTurn("first, use tools", output(2, 1))
	c.userTurn("second", output(1, 0))
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "how big is this?"})
	doc := decodeJSON(t, c.body())
	for _, k := range []string{"metadata", "max_tokens", "stream"} {
		delete(doc, k)
	}
	body, err := json.Marshal(doc)
	must(t, err)
	status := post(t, r.srv.URL+"/claude-code/v1/messages/count_tokens?beta=true", body, map[string]string{
		"X-Claude-Code-Session-Id": "count",
		"Anthropic-Beta":           "claude-code-20250219,interleaved-thinking-2025-05-14,per-turn-control-2026-07-01",
	})
	if status != 200 {
		rej := r.fake.Rejections()
		t.Fatalf("count_tokens through the proxy: %d %s", status, rej[len(rej)-1].Error)
	}
}

// R2-1. count_tokens runs the rewrite in dry mode, which must leave the session as it was
// (rewrite.go: "without trimming, storing or caching anything"). It does not: rewriteFor
// calls sess.state.thread(thread) before it looks at dry, and thread() inserts an empty
// threadState for a thread it has not seen. Claude Code counts tokens with bodies of its own
// (a probe message, a tool list, a compact summary), each a "thread" the model never saw;
// each leaves an entry in the trim state, which the next save (recordUsage after 30 s, Close,
// eviction) writes into sessions/<sid>.trim.json, where it stays for the session's life.
// Fix: in dry mode read the thread state without creating it, e.g.
//
//	ts := sess.state.Threads[thread]; if ts == nil { ts = &threadState{} } // dry: not inserted
//
// (or only call state.thread on the !dry path).
//
// Regression test from the second review of proxy/ (parse fast path, dry count_tokens,
// session lock before parse).
func TestReview2CountTokensLeavesTheTrimStateAlone(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "dry", "claude-mythos-5-1")
	c.userTurn("first", output(1, 0))
	r.accepted(t)

	r.proxy.mu.Lock()
	sess := r.proxy.sessions["dry"]
	r.proxy.mu.Unlock()
	if sess == nil {
		t.Fatal("no session")
	}
	snapshot := func() (threads []string, cached int, last *known, rows, events int) {
		sess.mu.Lock()
		for k := range sess.state.Threads {
			threads = append(threads, k)
		}
		cached, last = len(sess.threads), sess.last
		sess.mu.Unlock()
		db := sessionDB(t, r, "dry")
		must(t, db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows))
		must(t, db.QueryRow(`SELECT count(*) FROM events`).Scan(&events))
		return
	}
	th0, c0, l0, rows0, ev0 := snapshot()

	body := []byte(`{"model":"claude-mythos-5-1","messages":[{"role":"user","content":"count me, a thread of my own"}]}`)
	status := post(t, r.srv.URL+"/claude-code/v1/messages/count_tokens?beta=true", body, map[string]string{"X-Claude-Code-Session-Id": "dry"})
	if status != 200 {
		t.Fatalf("count_tokens: %d", status)
	}
	th1, c1, l1, rows1, ev1 := snapshot()
	if rows1 != rows0 || ev1 != ev0 || c1 != c0 || l1 != l0 {
		t.Errorf("count_tokens stored something: rows %d→%d events %d→%d cached threads %d→%d known changed %v",
			rows0, rows1, ev0, ev1, c0, c1, l1 != l0)
	}
	if len(th1) != len(th0) {
		t.Errorf("count_tokens added a thread to the trim state: %v → %v", th0, th1)
	}
	// and it reaches the disk with the next save
	sess.mu.Lock()
	sess.dirty = true // as a usage sample of the next model call would
	sess.mu.Unlock()
	must(t, r.proxy.Close())
	b, err := r.root.LoadTrimState("dry")
	must(t, err)
	if st := decodeTrimState(b); len(st.Threads) != len(th0) {
		t.Errorf("saved trim state has %d threads, want %d: %s", len(st.Threads), len(th0), b)
	}
}
