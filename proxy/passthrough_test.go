package proxy

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/store"
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
	root, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
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
