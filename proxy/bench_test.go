package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
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
	for _, tc := range []struct {
		name   string
		trimAt int
	}{{"no-cut", 10_000_000}, {"after-cut", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchProxy(b, tc.trimAt)
			var c *fakeupstream.Convo
			var h http.Header
			sessions, size, msgs := 0, 0, 0
			fresh := func() {
				c = convoOfSize()
				sessions++
				h = benchHeader(fmt.Sprintf("bench-%d", sessions))
				body := c.Body()
				if tc.trimAt == 0 {
					// make one cut first, then keep the threshold out of reach
					p.cfg().TrimAtTokens = 1000
					if res, _, err := p.rewrite(h, body); err != nil || res.trimmed != 2 {
						b.Fatalf("no cut: %v", err)
					}
				}
				p.cfg().TrimAtTokens = 10_000_000
				if _, _, err := p.rewrite(h, body); err != nil {
					b.Fatal(err)
				}
			}
			fresh()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if len(c.Items) >= 440 {
					fresh()
				}
				c.Add()
				body := c.Body()
				size += len(body)
				msgs += len(c.Items)
				b.StartTimer()
				res, _, err := p.rewrite(h, body)
				if err != nil || res == nil {
					b.Fatal(err)
				}
				if tc.trimAt == 0 && res.trimmed != 1 {
					b.Fatalf("trimmed = %d, want 1 (carried cut)", res.trimmed)
				}
			}
			b.ReportMetric(float64(size)/float64(b.N)/1024, "KB/req")
			b.ReportMetric(float64(msgs)/float64(b.N), "msgs/req")
		})
	}
}

// BenchmarkRequestPathNewCut: the request that crosses the threshold and makes a new cut,
// on a session warmed with the same history minus one step.
func BenchmarkRequestPathNewCut(b *testing.B) {
	p := benchProxy(b, 10_000_000)
	c := convoOfSize()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := benchHeader(fmt.Sprintf("bench-%d", i))
		p.cfg().TrimAtTokens = 10_000_000
		if _, _, err := p.rewrite(h, c.Body()); err != nil {
			b.Fatal(err)
		}
		c2 := c.Clone()
		c2.Add()
		body := c2.Body()
		p.cfg().TrimAtTokens = 60_000
		b.SetBytes(int64(len(body)))
		b.StartTimer()
		res, _, err := p.rewrite(h, body)
		if err != nil || res == nil {
			b.Fatal(err)
		}
		if res.trimmed != 2 {
			b.Fatalf("trimmed = %d, want 2 (new cut)", res.trimmed)
		}
	}
}
