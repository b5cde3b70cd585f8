package proxy

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// Request-path benchmarks of the OpenAI formats, the counterparts of BenchmarkRequestPathWarm
// and BenchmarkRequestPathNewCut: a Codex-shaped Responses request and an OpenCode-shaped
// Chat request of about 300 KB (≈120k tokens at 2.5 characters a token), measured warm
// (the session's next request appends one step: the fast path) and on the request that
// makes a new cut.

// newCodexBench is Codex CLI's Responses conversation (fakeupstream.CodexConvo), newChatBench
// OpenCode's Chat Completions conversation (fakeupstream.OpenCodeConvo).
func newCodexBench() *fakeupstream.Convo { return fakeupstream.NewConvo(fakeupstream.CodexConvo, "") }
func newChatBench() *fakeupstream.Convo  { return fakeupstream.NewConvo(fakeupstream.OpenCodeConvo, "") }

// benchFormat is the wire format of a bench conversation.
func benchFormat(c *fakeupstream.Convo) apiFormat {
	if c.Shape == fakeupstream.CodexConvo {
		return responsesFormat
	}
	return chatFormat
}

// ofSize grows the conversation to about 300 KB.
func ofSize(c *fakeupstream.Convo) *fakeupstream.Convo {
	for len(c.Body()) < 300<<10 {
		c.Add()
	}
	return c
}

// oaBenchTarget and oaBenchHeader are the route and headers of the format's client: Codex
// on the Codex backend (session in prompt_cache_key, session-id and thread-id), OpenCode's
// Chat on the OpenAI family (session in x-session-id).
func oaBenchTarget(f apiFormat) target {
	if f == responsesFormat {
		return target{responsesFormat, "codex"}
	}
	return target{chatFormat, "openai"}
}

func oaBenchHeader(f apiFormat, sid string) http.Header {
	h := http.Header{}
	if f == responsesFormat {
		h.Set("Session-Id", sid)
		h.Set("Thread-Id", sid)
	} else {
		h.Set("X-Session-Id", sid)
	}
	return h
}

// oaBenchSession returns the convo with its session id put where the client sends it.
func oaBenchSession(c *fakeupstream.Convo, sid string) *fakeupstream.Convo {
	if c.Shape == fakeupstream.CodexConvo {
		return c.WithSession(sid)
	}
	return c.Clone()
}

func BenchmarkResponsesRequestPathWarm(b *testing.B) { benchOpenAIWarm(b, newCodexBench) }
func BenchmarkChatRequestPathWarm(b *testing.B)      { benchOpenAIWarm(b, newChatBench) }

func BenchmarkResponsesRequestPathNewCut(b *testing.B) { benchOpenAINewCut(b, newCodexBench) }
func BenchmarkChatRequestPathNewCut(b *testing.B)      { benchOpenAINewCut(b, newChatBench) }

// benchOpenAIWarm: a session whose previous request is known; each request adds one tool
// step and makes no new cut. "after-cut" re-renders a stored cut. A session is replaced
// (untimed) after 40 steps, to keep the request near 300 KB.
func benchOpenAIWarm(b *testing.B, newConvo func() *fakeupstream.Convo) {
	base := ofSize(newConvo())
	f := benchFormat(base)
	session := func(n int) (*fakeupstream.Convo, http.Header) {
		sid := fmt.Sprintf("bench-%d", n)
		return oaBenchSession(base, sid), oaBenchHeader(f, sid)
	}
	benchWarm(b, oaBenchTarget(f), session, func(_ *fakeupstream.Convo, grown int) bool { return grown >= 40 }, "items/req")
}

// benchOpenAINewCut: the request that crosses the threshold and makes a new cut, on a
// session warmed with the same history minus one step.
func benchOpenAINewCut(b *testing.B, newConvo func() *fakeupstream.Convo) {
	base := ofSize(newConvo())
	p := benchProxy(b, 10_000_000)
	tg := oaBenchTarget(benchFormat(base))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sid := fmt.Sprintf("bench-%d", i)
		c, h := oaBenchSession(base, sid), oaBenchHeader(benchFormat(base), sid)
		p.cfg().TrimAtTokens = 10_000_000
		if _, _, err := p.rewriteAs(tg, h, c.Body()); err != nil {
			b.Fatal(err)
		}
		c.Add()
		body := c.Body()
		p.cfg().TrimAtTokens = 60_000
		b.SetBytes(int64(len(body)))
		b.StartTimer()
		if res := benchRewrite(b, p, tg, h, body); res.trimmed != 2 {
			b.Fatalf("trimmed = %d, want 2 (new cut)", res.trimmed)
		}
	}
}

// TestRenderAllocatesTheViewOnce: rendering a request allocates the output body and the
// message list once each, about twice the body. The list buffer is sized for the kept
// messages, the pointer and the standing instruction (view.go render); when it is too small
// for what is added, append copies the whole list into a buffer twice its size, on every
// request of a session.
//
// Fails for Responses (bug): the buffer reserves len(StandingInstruction)+64 bytes for the
// instruction, but the developer message item that carries it (responsesInstruction, used
// for Codex and for any request without instructions) is 81 bytes longer than the text, so
// every untrimmed Codex request reallocates its ~300 KB input list.
func TestRenderAllocatesTheViewOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		convo func() *fakeupstream.Convo
	}{{"chat", newChatBench}, {"responses", newCodexBench}} {
		t.Run(tc.name, func(t *testing.T) {
			c := ofSize(tc.convo())
			body := c.Body()
			p := benchProxy(t, 10_000_000)
			req, err := parseRequest(benchFormat(c), body, nil)
			must(t, err)
			msgs, _, err := p.buildMessages(&session{threads: map[string][]*message{}}, req)
			must(t, err)
			plan := noPlan(firstRealUser(msgs))
			family := oaBenchTarget(benchFormat(c)).family
			var v view
			const runs = 20
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			for i := 0; i < runs; i++ {
				v = render(req, msgs, plan, "", true, family)
			}
			runtime.ReadMemStats(&m1)
			perRun := int(m1.TotalAlloc-m0.TotalAlloc) / runs
			if v.out.len() <= len(body) {
				t.Fatalf("the view (%d bytes) does not carry the standing instruction", v.out.len())
			}
			t.Logf("%d KB request, %d KB allocated per render", len(body)>>10, perRun>>10)
			if limit := 2*len(body) + 64<<10; perRun > limit {
				t.Errorf("rendering a %d KB request allocates %d KB, want at most %d KB (body and list once each)", len(body)>>10, perRun>>10, limit>>10)
			}
		})
	}
}
