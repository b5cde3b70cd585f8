package proxy

// Regression tests from a second review (parse fast path, dry count_tokens, session lock
// before parse): each TestReview2… reproduced a finding before its fix; the fuzz target
// checks that the fast path parses exactly as a full scan.

import (
	"bytes"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// knownFrom parses prev with a full scan and returns what remember would keep for it (the
// cache holds copies of the messages), or nil when prev does not parse.
func knownFrom(prev []byte) *known {
	pr, err := parseAnthropic(prev, nil)
	if err != nil {
		return nil
	}
	msgs := make([]*message, len(pr.rawMsgs))
	for i, raw := range pr.rawMsgs {
		msgs[i] = &message{raw: bytes.Clone(raw)}
	}
	return remember(pr, msgs, nil)
}

// sameParse reports how a fast-path parse differs from a full scan ("" when it does not).
func sameParse(body []byte, k *known) string {
	slow, serr := parseAnthropic(body, nil)
	fast, ferr := parseAnthropic(body, k)
	if (serr == nil) != (ferr == nil) {
		return "errors differ: full " + errString(serr) + " / fast " + errString(ferr)
	}
	if serr != nil {
		return ""
	}
	if len(slow.top) != len(fast.top) || len(slow.rawMsgs) != len(fast.rawMsgs) {
		return "shapes differ"
	}
	for i := range slow.top {
		s, f := slow.top[i], fast.top[i]
		if s.key != f.key || s.vs != f.vs || s.start != f.start || s.end != f.end || !bytes.Equal(s.val, f.val) {
			return "member differs: " + s.key
		}
	}
	off := func(b []byte) int { return len(body) - cap(b) } // spans are sub-slices of body
	for i := range slow.rawMsgs {
		if !bytes.Equal(slow.rawMsgs[i], fast.rawMsgs[i]) || off(slow.rawMsgs[i]) != off(fast.rawMsgs[i]) {
			return "message span differs"
		}
	}
	if slow.messagesAt != fast.messagesAt || slow.systemAt != fast.systemAt || !bytes.Equal(slow.system, fast.system) {
		return "indexes differ"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The fast path must accept exactly what a full scan accepts and split it the same way,
// whatever the previous request was. Run with
// go test -tags sqlite_fts5 ./proxy/ -run '^$' -fuzz FuzzReview2ParseFastPath -fuzztime 60s
func FuzzReview2ParseFastPath(f *testing.F) {
	prev := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2],"n":12,"t":true}`
	seeds := []string{
		prev,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1},{"role":"assistant","content":"d"}],"system":"s","tools":[1,2],"n":12,"t":true}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2],"n":123,"t":truex}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"} ,{"role":"assistant","content":[{"type":"text","text":"b"}]} ],"system":"s" , "tools":[1,2],"n":12.5,"t":true }`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2],"n":12,"t":true]`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}}],"system":"s","tools":[1,2],"n":12,"t":true}`,
		`{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"a"},1],"n":12e5}`,
	}
	for _, s := range seeds {
		f.Add([]byte(prev), []byte(s))
		f.Add([]byte(s), []byte(prev))
	}
	f.Fuzz(func(t *testing.T, prev, body []byte) {
		k := knownFrom(prev)
		if k == nil {
			return
		}
		if d := sameParse(body, k); d != "" {
			t.Fatalf("%s\nprev %q\nbody %q", d, prev, body)
		}
	})
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

// R2-2. A second "messages" member that is not a list is no longer rejected. scanTop keeps
// the elements of the last "messages" value that was an array, while parseAnthropic points
// messagesAt at the last "messages" member whatever its kind, and checks only msgs != nil.
// The old parse (arrayElems(top[messagesAt].val)) failed open here. Now the proxy splices
// the first list's messages over the second value, so a request the API would read as
// "messages": "x" (last member wins) and reject goes upstream as a valid one — the proxy
// changes what the client asked for instead of forwarding its bytes. Not the fast path: a
// full scan does the same. Fix: in scanTop reset msgs = nil when a "messages" value is not
// an array (or record which member msgs came from and check it is top[messagesAt]).
func TestReview2DuplicateMessagesKeyFailsOpen(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"a"}],"messages":"x"}`)
	if req, err := parseAnthropic(body, nil); err == nil {
		t.Errorf("accepted: messages at member %d (%s) but %d message(s) from another member", req.messagesAt, req.top[req.messagesAt].val, len(req.rawMsgs))
	}
}
