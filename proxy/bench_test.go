package proxy

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// newBenchConvo is the Claude Code conversation of the request-path benchmarks
// (fakeupstream.ClaudeCodeConvo), session "bench" in its metadata.
func newBenchConvo() *fakeupstream.Convo {
	return fakeupstream.NewConvo(fakeupstream.ClaudeCodeConvo, "bench")
}

// benchConvoOf is newBenchConvo with n steps added.
func benchConvoOf(n int) *fakeupstream.Convo {
	c := newBenchConvo()
	for range n {
		c.Add()
	}
	return c
}

func benchProxy(b testing.TB, trimAt int) *Proxy {
	root := openRoot(b)
	s := testSettings(trimAt)
	return New(s, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func benchHeader(sid string) http.Header {
	h := http.Header{}
	h.Set("X-Claude-Code-Session-Id", sid)
	return h
}

// anthropicBench is the target of the Claude Code benchmarks (what rewrite uses).
var anthropicBench = target{anthropicFormat, "anthropic"}

// startBenchSession sends a session's first request (h, body) through p as tg. With cut it
// first makes one cut (a 1000-token threshold), then keeps the threshold out of reach, so
// the warm requests after it carry that cut.
func startBenchSession(b *testing.B, p *Proxy, tg target, h http.Header, body []byte, cut bool) {
	if cut {
		p.cfg().TrimAtTokens = 1000
		if res, _, err := p.rewriteAs(tg, h, body); err != nil || res.trimmed != 2 {
			b.Fatalf("no cut: %v", err)
		}
	}
	p.cfg().TrimAtTokens = 10_000_000
	if _, _, err := p.rewriteAs(tg, h, body); err != nil {
		b.Fatal(err)
	}
}

// benchRewrite is the timed rewrite of a benchmark; an error or no result ends it.
func benchRewrite(b *testing.B, p *Proxy, tg target, h http.Header, body []byte) *rewritten {
	res, _, err := p.rewriteAs(tg, h, body)
	if err != nil || res == nil {
		b.Fatal(err)
	}
	return res
}

// convoOfSize grows a conversation to about 400 messages and 300 KB.
func convoOfSize() *fakeupstream.Convo {
	c := newBenchConvo()
	for len(c.Items) < 400 {
		c.Add()
	}
	return c
}

// BenchmarkRequestPathWarm: a session whose previous request is known; each request adds
// one tool step and makes no new cut. The variant "after-cut" re-renders a stored cut. To
// keep the request near 300 KB and 400 messages, a session is replaced (untimed) after 40
// steps.
func BenchmarkRequestPathWarm(b *testing.B) {
	session := func(n int) (*fakeupstream.Convo, http.Header) {
		return convoOfSize(), benchHeader(fmt.Sprintf("bench-%d", n))
	}
	benchWarm(b, anthropicBench, session, func(c *fakeupstream.Convo, _ int) bool { return len(c.Items) >= 440 }, "msgs/req")
}

// benchWarm is the warm request path of the benchmarks of one format, tg: a session whose
// previous request is known, each request one more tool step, "no-cut" making no cut and
// "after-cut" re-rendering a stored one. session returns the n-th session's conversation
// and headers; a session is replaced (untimed) once full says so of its conversation and the
// steps grown on it. It reports KB per request and the list's items per request as unit.
func benchWarm(b *testing.B, tg target, session func(n int) (*fakeupstream.Convo, http.Header), full func(c *fakeupstream.Convo, grown int) bool, unit string) {
	for _, tc := range []struct {
		name   string
		trimAt int
	}{{"no-cut", 10_000_000}, {"after-cut", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchProxy(b, tc.trimAt)
			var c *fakeupstream.Convo
			var h http.Header
			sessions, size, items, grown := 0, 0, 0, 0
			fresh := func() {
				sessions++
				c, h = session(sessions)
				grown = 0
				startBenchSession(b, p, tg, h, c.Body(), tc.trimAt == 0)
			}
			fresh()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if full(c, grown) {
					fresh()
				}
				c.Add()
				grown++
				body := c.Body()
				size += len(body)
				items += len(c.Items)
				b.StartTimer()
				res := benchRewrite(b, p, tg, h, body)
				if tc.trimAt == 0 && res.trimmed != 1 {
					b.Fatalf("trimmed = %d, want 1 (carried cut)", res.trimmed)
				}
				if tc.trimAt != 0 && res.trimmed != 0 {
					b.Fatalf("trimmed = %d, want 0", res.trimmed)
				}
			}
			b.ReportMetric(float64(size)/float64(b.N)/1024, "KB/req")
			b.ReportMetric(float64(items)/float64(b.N), unit)
		})
	}
}

// BenchmarkRewriteWarmAlone: the rewrite of a warm request with the store out of the way:
// one session of about 300 KB (the 120k-token order) or 3 MB (1M), each request one more
// tool step, and the session's queued writes settled between requests, untimed, so that
// neither their commits nor their CPU on the other core are in the time: ns/op is the
// rewrite alone, the part of serve's added latency that is not the store
// (docs/decisions.md: what a warm request costs).
func BenchmarkRewriteWarmAlone(b *testing.B) {
	for _, kb := range []int{300, 3000} {
		b.Run(fmt.Sprintf("%dKB", kb), func(b *testing.B) {
			p := benchProxy(b, 10_000_000)
			c := newBenchConvo()
			for len(c.Body()) < kb*1024 {
				for range 20 {
					c.Add()
				}
			}
			h := benchHeader("bench-alone")
			startBenchSession(b, p, anthropicBench, h, c.Body(), false)
			p.root.SettleAll()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p.root.SettleAll()
				c.Add()
				body := c.Body()
				b.StartTimer()
				benchRewrite(b, p, anthropicBench, h, body)
			}
		})
	}
}

// BenchmarkRequestPathNewCut: the request that crosses the threshold and makes a new cut,
// on a session warmed with the same history minus one step (its rows committed first), at
// about 120k and 400k tokens (body bytes / 3, the sizes of the bench's overhead run). ns/op
// is the rewrite; commit-µs/op is the wait after it until the session's queued writes (the
// cut's rows and its trim event) are committed, which the end of the response waits for
// (storeReply).
func BenchmarkRequestPathNewCut(b *testing.B) {
	for _, tokens := range []int{120_000, 400_000} {
		b.Run(fmt.Sprintf("%dk", tokens/1000), func(b *testing.B) {
			p := benchProxy(b, 10_000_000)
			c := newBenchConvo()
			for c.Size()/3 < tokens {
				c.Add()
			}
			var commit time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sid := fmt.Sprintf("bench-%d", i)
				h := benchHeader(sid)
				p.cfg().TrimAtTokens = 10_000_000
				if _, _, err := p.rewrite(h, c.Body()); err != nil {
					b.Fatal(err)
				}
				p.root.Settle(sid)
				c2 := c.Clone()
				c2.Add()
				body := c2.Body()
				p.cfg().TrimAtTokens = 60_000
				b.SetBytes(int64(len(body)))
				b.StartTimer()
				res := benchRewrite(b, p, anthropicBench, h, body)
				b.StopTimer()
				if res.trimmed != 2 {
					b.Fatalf("trimmed = %d, want 2 (new cut)", res.trimmed)
				}
				t0 := time.Now()
				p.root.Settle(sid)
				commit += time.Since(t0)
				b.StartTimer()
			}
			b.ReportMetric(float64(commit.Microseconds())/float64(b.N), "commit-µs/op")
		})
	}
}

// BenchmarkReplyStoreWarm is the cost on the warm path of storing before done (issue 16,
// item 3): a Claude Code session of about 400 messages sends one more step through the proxy,
// streamed, and a request's latency ends when the client has read the last byte of the
// answer (a fixed short reply from a minimal upstream, so it measures the proxy and the
// store, not the fake's checks). Each op sends one request through each of two proxies,
// alternating which goes first: "queue", the behaviour before (rows queued, the reply not
// stored), and "durable" (the reply stored and the session's rows committed before the
// final event). It reports each one's p50 and p99 in µs; ns/op is the pair.
func BenchmarkReplyStoreWarm(b *testing.B) {
	sse := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done with the step; the value is 42.\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":12}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sse)
	}))
	defer up.Close()
	type arm struct {
		name     string
		root     *store.Root
		srv      *httptest.Server
		c        *fakeupstream.Convo
		sid      string
		sessions int
		lat      []time.Duration
	}
	client := &http.Client{}
	send := func(a *arm, body []byte) {
		req, _ := http.NewRequest("POST", a.srv.URL+"/claude-code/v1/messages", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "dummy-key")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("X-Claude-Code-Session-Id", a.sid)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(out) == 0 {
			b.Fatalf("status %d: %.300s", resp.StatusCode, out)
		}
	}
	fresh := func(a *arm) {
		a.c = convoOfSize()
		a.sessions++
		a.sid = fmt.Sprintf("bench-%s-%d", a.name, a.sessions)
		send(a, a.c.Body())
	}
	var arms []*arm
	for _, name := range []string{"queue", "durable"} {
		s := testSettings(10_000_000)
		s.Upstreams = map[string]string{"anthropic": up.URL}
		a := &arm{name: name, root: openRoot(b)}
		p := New(s, allOn{}, a.root, slog.New(slog.NewTextHandler(io.Discard, nil)))
		p.noReplyRows = name == "queue"
		a.srv = httptest.NewServer(p)
		defer a.srv.Close()
		fresh(a)
		arms = append(arms, a)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range arms {
			a := arms[(i+k)%len(arms)]
			b.StopTimer()
			if len(a.c.Items) >= 440 {
				fresh(a)
			}
			a.c.Add()
			body := a.c.Body()
			b.StartTimer()
			t0 := time.Now()
			send(a, body)
			a.lat = append(a.lat, time.Since(t0))
		}
	}
	b.StopTimer()
	for _, a := range arms {
		slices.Sort(a.lat)
		b.ReportMetric(float64(a.lat[len(a.lat)/2].Microseconds()), a.name+"-p50-µs")
		b.ReportMetric(float64(a.lat[len(a.lat)*99/100].Microseconds()), a.name+"-p99-µs")
		a.root.SettleAll()
	}
}

// BenchmarkFastPathParse: the parse of a warm request without the store and the render:
// the known prefix matched, the cached messages reused, the one new tool step parsed and
// its rows chained. Sizes: about 400 messages (300 KB) and 3000 (the 1M-token order).
func BenchmarkFastPathParse(b *testing.B) {
	for _, n := range []int{400, 3000} {
		b.Run(fmt.Sprintf("%d-msgs", n), func(b *testing.B) {
			p := benchProxy(b, 10_000_000)
			c := newBenchConvo()
			for len(c.Items) < n {
				c.Add()
			}
			sess := &session{threads: map[string][]*message{}}
			req, err := parseRequest(anthropicFormat, c.Body(), nil)
			if err != nil {
				b.Fatal(err)
			}
			msgs, thread, err := p.buildMessages(sess, req)
			if err != nil {
				b.Fatal(err)
			}
			sess.keepThread(anthropicFormat, thread, msgs)
			k := remember(req, msgs, nil)
			detachAll(msgs)
			c.Add()
			next := c.Body()
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, err := parseRequest(anthropicFormat, next, k)
				if err != nil {
					b.Fatal(err)
				}
				msgs, _, err := p.buildMessages(sess, req)
				if err != nil {
					b.Fatal(err)
				}
				detachAll(msgs)
			}
		})
	}
}
