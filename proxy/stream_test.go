package proxy

import (
	"bufio"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// The stream reaches the client event by event: the upstream sends its second event only
// after the client has read the first, so a proxy that buffers deadlocks and the test
// fails on its deadline.
func TestStreamIsFlushedPerEvent(t *testing.T) {
	got := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":7}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			return
		}
		io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	r := rigWithUpstream(t, up.URL, 0)
	body := `{"model":"claude-opus-5-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest("POST", r.srv.URL+"/claude-code/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Claude-Code-Session-Id", "stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	deadline := time.AfterFunc(3*time.Second, func() { resp.Body.Close() })
	defer deadline.Stop()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the first event did not arrive on its own: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	close(got)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("the stream did not finish: %q", rest)
	}
	// the usage tap read the split usage: input 5 + cache read 7, output 3
	waitFor(t, func() bool {
		var in, read, out int
		err := sessionDB(t, r, "stream").QueryRow(`SELECT input_tokens, cache_read_tokens, output_tokens FROM events WHERE kind='usage'`).Scan(&in, &read, &out)
		return err == nil && in == 5 && read == 7 && out == 3
	})
}

// An upstream that sends headers and then stalls is cut after the idle timeout.
func TestIdleUpstreamIsCut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	r := rigWithUpstream(t, up.URL, 300*time.Millisecond)
	start := time.Now()
	resp, err := http.Post(r.srv.URL+"/claude-code/v1/messages/other", "application/json", strings.NewReader(`{}`))
	must(t, err)
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the stalled stream was held for %v", waited)
	}
}

// waitFor polls ok for up to two seconds. It stays a poll, not testing/synctest: what it
// waits for (a usage event after a stream over httptest's real sockets, written by the
// store's queue into cgo SQLite) is not durably blocking, so a bubble could not wait for it.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

func rigWithUpstream(t *testing.T, url string, idle time.Duration) *rig {
	root := openRoot(t)
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": url}
	if idle > 0 {
		s.IdleTimeout = idle
	}
	logs := &logBuf{}
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(logs, nil)))
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &rig{proxy: p, srv: srv, root: root, logs: logs}
}

var update = flag.Bool("update", false, "rewrite golden files")

// The rewrite of a hand-written request, forced to trim: kept messages keep their odd
// spacing and escapes byte for byte; only the cut turn, the stripped reply and system
// change. Run with -update to accept a new golden after reading the diff.
func TestRewriteGolden(t *testing.T) {
	in, err := os.ReadFile("testdata/rewrite_in.json")
	must(t, err)
	root := openRoot(t)
	p := New(testSettings(1_000_000), allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	must(t, root.SetForce("golden"))
	h := http.Header{}
	h.Set("X-Claude-Code-Session-Id", "golden")
	res, _, err := p.rewrite(h, in)
	must(t, err)
	if res.trimmed != 2 {
		t.Fatalf("trimmed = %d, want a new cut", res.trimmed)
	}
	const path = "testdata/rewrite_out.golden"
	if *update {
		must(t, os.WriteFile(path, res.body(), 0o644))
	}
	want, err := os.ReadFile(path)
	must(t, err)
	if string(res.body()) != string(want) {
		t.Fatalf("rewrite differs from %s (run with -update after checking):\n got %s", path, res.body())
	}
}
