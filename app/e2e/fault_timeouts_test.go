//go:build e2e

package e2e_test

// The fault suite (issue 16), a client or an upstream that stalls, against the built binary
// with body_read_timeout_s and upstream_idle_timeout_s at one second (set by environment).
// app/serve_timeouts_test.go holds the fast in-process versions of the same checks.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/app/apptest"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// faultHang bounds every wait on a stalled peer: with both timeouts at 1 s an answer after
// half of it means the timeout did not apply.
const faultHang = 20 * time.Second

var faultTimeouts = []string{"CONTEXT_PROXY_BODY_READ_TIMEOUT_S=1", "CONTEXT_PROXY_UPSTREAM_IDLE_TIMEOUT_S=1"}

// TestE2EFaultSlowBody: a client that sends one byte of its body and stalls (slowloris) gets
// a 400 naming body_read_timeout_s and its connection closed, well before faultHang.
func TestE2EFaultSlowBody(t *testing.T) {
	bin := buildBinary(t)
	srv := startServe(t, bin, append([]string{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC=http://127.0.0.1:1"}, faultTimeouts...)...)
	logServeOnFailure(t, srv)
	apptest.CheckSlowBody(t, srv.port, faultHang)
}

// TestE2EFaultSilentUpstream: an upstream that accepts the request and never answers; the
// client gets serve's 504 well before faultHang, and serve still answers the next request.
func TestE2EFaultSilentUpstream(t *testing.T) {
	bin := buildBinary(t)
	upstream := fakeupstream.StartSilent(t)
	srv := startServe(t, bin, append([]string{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC=" + upstream}, faultTimeouts...)...)
	logServeOnFailure(t, srv)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), faultHang)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url()+"/claude-code/v1/messages", strings.NewReader(apptest.StreamRequest))
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("request %d: no 504 from a silent upstream after %s: %v", i, time.Since(start).Round(time.Millisecond), err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		took := time.Since(start)
		t.Logf("request %d, silent upstream: %d after %s: %q", i, resp.StatusCode, took.Round(time.Millisecond), body)
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("request %d: status %d (%q), want 504", i, resp.StatusCode, body)
		}
		if took >= faultHang/2 {
			t.Errorf("request %d: 504 after %s with upstream_idle_timeout_s = 1", i, took)
		}
	}
}
