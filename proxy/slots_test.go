package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A request that waits for a rewrite slot longer than the idle timeout gets a 504 in the
// route's envelope, never an empty 200.
func TestSlotWaitPastIdleTimeoutAnswers504(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{}`) }))
	defer up.Close()
	root := openRoot(t)
	// In a synctest bubble the slot wait, the idle timer and the second that holds the slots
	// run on the bubble's clock. The request goes to ServeHTTP directly: it never reaches
	// the upstream, and a socket would not let the bubble's clock advance.
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Upstreams = map[string]string{"anthropic": up.URL}
		s.IdleTimeout = 200 * time.Millisecond
		p := New(s, allOn{}, root, slog.New(slog.DiscardHandler))
		for range cap(p.work) { // every slot busy for a second
			p.work <- struct{}{}
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			time.Sleep(time.Second)
			for range cap(p.work) {
				<-p.work
			}
		}()
		req := httptest.NewRequest("POST", "/claude-code/v1/messages",
			strings.NewReader(`{"model":"claude-opus-5-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Claude-Code-Session-Id", "slot-wait")
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		resp := w.Result()
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), `"timeout_error"`) {
			t.Fatalf("got %d %q, want a 504 timeout_error", resp.StatusCode, b)
		}
		<-drained // the bubble ends with its goroutines; its clock stops when this function returns
	})
}
