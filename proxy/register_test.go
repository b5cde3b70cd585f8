package proxy

import (
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	memorypkg "github.com/smarter-compact/smarter-compact/proxy/memory"
	"github.com/smarter-compact/smarter-compact/proxy/memory/fakehindsight"
	"github.com/smarter-compact/smarter-compact/store"
)

func TestCwdOf(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"input":[{"content":"<environment_context>\n  <cwd>/work/shop</cwd>\n</environment_context>"}]}`, "/work/shop"},
		{`{"system":[{"text":"# Environment\n - Primary working directory: /home/u/src/app\n - Is a git repository: true"}]}`, "/home/u/src/app"},
		{`{"messages":[{"content":"Working directory: /srv/x/\n"}]}`, "/srv/x"},
		{`{"messages":[{"content":"Working directory: relative/dir\n"}]}`, ""},
		{`{"messages":[{"content":"no directory here"}]}`, ""},
	} {
		if got := cwdOf([]byte(tc.raw)); got != tc.want {
			t.Errorf("cwdOf(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// A Codex session has no hook: with [memory] configured the proxy registers it with the
// bank of the working directory its requests name, and its cut then carries the recall. A
// session a hook registered keeps its registration.
func TestProxyRegistersFirstSeenSessionsWithTheBank(t *testing.T) {
	hs := fakehindsight.Start(t, fakehindsight.Options{Recall: func(bank, query string) []string { return recalledTexts }})
	s := testSettings(8000)
	s.Recall = memorypkg.NewHindsight(hs.URL, "")
	s.BankFor = func(cwd string) string { return "coding-agent::" + cwd[strings.LastIndex(cwd, "/")+1:] }
	r := newSimRig(t, s, fakeupstream.Options{})
	must(t, r.root.Register(store.Registration{SessionID: "hooked", Agent: "claude-code", Cwd: "/src/hooked", Bank: "kept"}))

	sid := "019a0000-0000-7000-8000-0000000000c1"
	c := newRespSim(t, r.srv.URL+routeCodexResponses, sid, "gpt-5-codex", codexStyle)
	for i := range 5 {
		c.userTurn("turn "+string(rune('0'+i))+": use tools", output(40, 3))
	}
	reg, err := r.root.Registration(sid)
	if err != nil || reg == nil {
		t.Fatalf("registration %v, %v: the proxy should register the Codex session", reg, err)
	}
	if reg.Agent != "codex" || reg.Cwd != "/work/"+sid || reg.Bank != "coding-agent::"+sid {
		t.Fatalf("registration %+v", reg)
	}
	trimmedWithRecall := false
	for _, p := range pointerTexts(t, r.accepted(t)) {
		if strings.Contains(p, "\n"+recallWhole) {
			trimmedWithRecall = true
		}
	}
	if !trimmedWithRecall {
		t.Fatal("no request carried the recall after the proxy registered the session")
	}
	if calls := hs.Recalls(); len(calls) == 0 || calls[0].Bank != "coding-agent::"+sid {
		t.Fatalf("recall calls %+v", calls)
	}

	cc := r.client(t, "hooked", "claude-opus-5-5")
	cc.userTurn("hello", output(1, 0))
	if reg, _ := r.root.Registration("hooked"); reg == nil || reg.Bank != "kept" || reg.Cwd != "/src/hooked" {
		t.Fatalf("a hook's registration was replaced: %+v", reg)
	}
}
