package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/app/apptest"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// timeoutServe starts serve with both timeouts at one second against upstream and returns
// its base URL and port.
func timeoutServe(t *testing.T, upstream string) (string, int) {
	t.Helper()
	port := freePort(t)
	sys, _, _ := testSystem(t, env{
		"SMARTER_COMPACT_STATE_DIR":             t.TempDir(),
		"SMARTER_COMPACT_UPSTREAM_ANTHROPIC":    upstream,
		"CONTEXT_PROXY_PORT":                    strconv.Itoa(port),
		"CONTEXT_PROXY_BODY_READ_TIMEOUT_S":     "1",
		"CONTEXT_PROXY_UPSTREAM_IDLE_TIMEOUT_S": "1",
	})
	ctx, cancel := context.WithCancel(t.Context())
	done, ended := make(chan error, 1), make(chan struct{})
	go func() { done <- run(ctx, []string{"serve", "--no-tray"}, sys); close(ended) }()
	t.Cleanup(func() { cancel(); <-ended })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitHealthy(t, base, done)
	return base, port
}

// TestServeSlowBodyIsCut: a client that sends its body one byte at a time and then stalls
// (slowloris) is answered and its connection closed once body_read_timeout_s has passed.
// Before the setting existed nothing bounded the body: the connection stayed open as long as
// the client kept it.
func TestServeSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	_, port := timeoutServe(t, "http://127.0.0.1:1")
	apptest.CheckSlowBody(t, port, hangGuard)
}

// TestServeSilentUpstreamTimesOut: an upstream that accepts the request and never answers
// gets its 504 after upstream_idle_timeout_s. Before the setting, the idle timeout was a fixed
// 10 minutes.
func TestServeSilentUpstreamTimesOut(t *testing.T) {
	t.Parallel()
	base, _ := timeoutServe(t, fakeupstream.StartSilent(t))
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/claude-code/v1/messages", strings.NewReader(apptest.StreamRequest))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no 504 from a silent upstream after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("silent upstream: %d after %s", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d (%q), want 504", resp.StatusCode, body)
	}
	if !strings.Contains(string(body), "upstream_idle_timeout_s") {
		t.Errorf("the 504 does not name the setting that ended it: %q", body)
	}
}

// TestServeStreamOutlivesTimeouts: a response that streams for longer than both timeouts,
// with gaps shorter than the idle timeout, arrives whole: the body deadline ends with the
// body, and the idle timeout restarts with every chunk.
func TestServeStreamOutlivesTimeouts(t *testing.T) {
	t.Parallel()
	const chunks = 8
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range chunks {
			fmt.Fprintf(w, "event: ping\ndata: {\"type\":\"ping\",\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			select { // the model's pace: a gap shorter than the idle timeout
			case <-time.After(400 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer upstream.Close()
	base, _ := timeoutServe(t, upstream.URL)
	req, _ := http.NewRequest("POST", base+"/claude-code/v1/messages", strings.NewReader(apptest.StreamRequest))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("stream cut after %s: %v (got %q)", time.Since(start).Round(time.Millisecond), err, body)
	}
	if n := strings.Count(string(body), "event: ping"); resp.StatusCode != http.StatusOK || n != chunks {
		t.Fatalf("status %d, %d of %d events after %s: %q", resp.StatusCode, n, chunks, time.Since(start).Round(time.Millisecond), body)
	}
}
