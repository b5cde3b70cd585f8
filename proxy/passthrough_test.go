package proxy

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

type noneOn struct{}

func (noneOn) Enabled(string) bool { return false }

// An upstream that answers before it has read the request body (an early error, or a
// stream that starts at once) must reach the client whole on the pass-through path. Go's
// HTTP/1 server drains or closes the incoming body as soon as the response starts; when the
// transport was still copying that body upstream, the copy failed and the transport dropped
// the upstream connection mid-answer: the agent saw "unexpected EOF" (found by make bench;
// about 1 in 6 requests here before bufferBody).
func TestPassThroughEarlyAnswerArrivesWhole(t *testing.T) {
	const events = 200
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for i := range events {
			fmt.Fprintf(w, "event: ping\ndata: {\"i\":%d}\n\n", i)
			fl.Flush()
		}
		io.WriteString(w, "event: message_stop\ndata: {}\n\n")
		// Only now drain the body, as a server that answers early would.
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(upstream.Close)
	root := openRoot(t)
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": upstream.URL}
	p := New(s, noneOn{}, root, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	for i := range 60 {
		// Small bodies (the server drains up to 256 KB of an unread body when the answer
		// starts) and large ones (it stops reading them).
		body := bytes.Repeat([]byte("x"), []int{60 << 10, 200 << 10, 4 << 20}[i%3])
		var rd io.Reader = bytes.NewReader(body)
		if i%2 == 1 {
			rd = io.MultiReader(rd) // no length: sent chunked
		}
		req, _ := http.NewRequest("POST", srv.URL+"/claude-code/v1/messages", rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.HasSuffix(string(got), "event: message_stop\ndata: {}\n\n") {
			t.Fatalf("request %d: the answer broke off after %d bytes (err %v)", i, len(got), err)
		}
	}
}

// R4. A body over the rewrite limit (64 MiB) is supposed to be "forwarded as it came"
// (proxy.go, maxBody). serveRewrite reads only maxBody+1 bytes and forwards those, so the
// upstream gets a truncated body (and the rest of the client's upload is discarded). An
// upstream with a larger limit (a gateway, Bedrock/Vertex through LiteLLM) gets broken JSON.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewOversizedBodyIsForwardedWhole(t *testing.T) {
	var got atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"error","error":{"type":"request_too_large","message":"too large"}}`)
	}))
	defer up.Close()
	r := rigWithUpstream(t, up.URL, 0)

	pad := strings.Repeat("x", maxBody+4096)
	body := []byte(`{"model":"claude-mythos-5-1","max_tokens":10,"messages":[{"role":"user","content":"` + pad + `"}]}`)
	post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "huge"})
	if got.Load() != int64(len(body)) {
		t.Fatalf("upstream received %d bytes, the client sent %d: an oversized body was truncated, not forwarded as it came", got.Load(), len(body))
	}
}

// A Responses request with "conversation" keeps its history upstream like a
// previous_response_id continuation: input holds only the new items, and each is appended
// to the stored conversation, so it passes through untouched (a rewrite would add a
// standing-instruction item to the user's conversation on every turn).
//
// Regression test from the review of the OpenAI adapters.
func TestResponsesConversationPassesThrough(t *testing.T) {
	e := newAdEnv(t, testSettings(1_000_000))
	body := []byte(`{"model":"gpt-5.4","conversation":"conv_123","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"next question"}]}]}`)
	res, _, err := e.p.rewriteAs(adResponses, adHeader("conv"), body)
	if err != errPassThrough {
		got := ""
		if res != nil {
			got = string(res.body())
		}
		t.Fatalf("want pass-through (history lives upstream), got err=%v body:\n%.400s", err, got)
	}
}
