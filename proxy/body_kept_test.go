package proxy

import (
	"bytes"
	"runtime"
	"testing"
	"weak"
)

// Between requests a session holds no bytes of a request body (issue 18, item 1): the
// cached messages are let go of the body they were parsed from or matched in, and the
// known shape keeps span sums, not copies. Before, the thread cache kept a copy of every
// message (16 MB of live heap at 32 sessions of 120k tokens).
func TestSessionKeepsNoRequestBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		trimAt int
	}{{"no-cut", 10_000_000}, {"cut", 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			p := benchProxy(t, tc.trimAt)
			c := benchConvoOf(12)
			h := benchHeader("kept-" + tc.name)
			var last weak.Pointer[byte]
			for step := range 3 {
				if step > 0 {
					c.Add()
				}
				body := c.Body()
				if _, _, err := p.rewrite(h, body); err != nil {
					t.Fatal(err)
				}
				last = weak.Make(&body[0])
			}
			p.mu.Lock()
			s := p.sessions["kept-"+tc.name]
			p.mu.Unlock()
			s.mu.Lock()
			cached, held := 0, 0
			for _, msgs := range s.threads {
				for _, m := range msgs {
					cached++
					held += len(m.raw)
				}
			}
			s.mu.Unlock()
			if cached == 0 {
				t.Fatal("no messages cached: the fast path has nothing to reuse")
			}
			if held != 0 {
				t.Errorf("the cached messages hold %d bytes of request bodies", held)
			}
			runtime.GC()
			runtime.GC()
			if last.Value() != nil {
				t.Error("the last request's body is still reachable after it was answered")
			}
			runtime.KeepAlive(p)
		})
	}
}

// A message of the same length as the cached one but with other bytes is parsed again, not
// reused by its span sum: its row text is the new one.
func TestReusedMessageNeedsTheSameBytes(t *testing.T) {
	p := benchProxy(t, 10_000_000)
	h := benchHeader("same-length")
	first := []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"task one"},{"role":"assistant","content":"reply"},{"role":"user","content":"next AAAA"}]}`)
	second := bytes.Replace(first, []byte("next AAAA"), []byte("next BBBB"), 1)
	if _, _, err := p.rewrite(h, first); err != nil {
		t.Fatal(err)
	}
	res, sess, err := p.rewrite(h, second)
	if err != nil {
		t.Fatal(err)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	msgs := sess.threads[threadCacheKey(anthropicFormat, res.thread)]
	if len(msgs) != 3 {
		t.Fatalf("%d cached messages, want 3", len(msgs))
	}
	if len(msgs[2].rows) != 1 || msgs[2].key == "" {
		t.Fatalf("message 2 has %d rows", len(msgs[2].rows))
	}
	fres, fsess, err := p.rewrite(benchHeader("same-length-fresh"), second)
	if err != nil {
		t.Fatal(err)
	}
	fsess.mu.Lock()
	defer fsess.mu.Unlock()
	fresh := fsess.threads[threadCacheKey(anthropicFormat, fres.thread)]
	if len(fresh) != 3 || fresh[2].key != msgs[2].key {
		t.Errorf("message 2 kept the fingerprint of the bytes it replaced: %s, a fresh parse gives %s", msgs[2].key, fresh[2].key)
	}
}

// A tool_result's row names the tool of the latest tool_use with its id before it, as the
// map of every tool_use the rows were built with did.
func TestToolNameIsTheLatestUse(t *testing.T) {
	a := &message{toolUses: []toolUse{{"t1", "Read"}, {"t2", "Bash"}}}
	b := &message{toolUses: []toolUse{{"t1", "Grep"}, {"t1", "Edit"}}}
	names := toolNames([]*message{a, b, {}})
	for id, want := range map[string]string{"t1": "Edit", "t2": "Bash", "t3": ""} {
		if got := names.name(id); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
}
