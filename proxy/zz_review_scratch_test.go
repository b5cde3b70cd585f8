package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// While every rewrite slot is busy longer than IdleTimeout, the request's context ends by
// the idle timer (not because the client left) and serveRewrite returns without writing:
// the client gets 200 with an empty body.
func TestReviewSlotWaitIdleAnswersEmpty200(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}`)
	}))
	t.Cleanup(upstream.Close)
	root, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": upstream.URL}
	s.IdleTimeout = 200 * time.Millisecond
	p := New(s, allOn{}, root, slog.New(slog.DiscardHandler))
	for range cap(p.work) { // every slot taken by (simulated) long rewrites
		p.work <- struct{}{}
	}
	go func() {
		time.Sleep(time.Second)
		for range cap(p.work) {
			<-p.work
		}
	}()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	body := `{"model":"claude-sonnet-4","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest("POST", srv.URL+"/claude-code/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Claude-Code-Session-Id", "slotwait")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && len(got) == 0 {
		t.Fatalf("status 200 with an empty body after the idle timeout fired in the slot wait")
	}
	t.Logf("status %d body %q", resp.StatusCode, got)
}
