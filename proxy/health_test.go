package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// upstreamEntry returns the health record's upstream source, failing when there is not
// exactly one.
func upstreamEntry(t *testing.T, r *rig) (store.HealthKindState, store.HealthEntry) {
	t.Helper()
	ks := r.root.Health().Snapshot().Kind(store.HealthUpstream)
	if len(ks.Entries) != 1 {
		t.Fatalf("the health record has %d upstream sources, want 1: %+v", len(ks.Entries), ks)
	}
	return ks, ks.Entries[0]
}

// TestHealthUpstreamStopped: the real fake upstream stopped, so its port refuses; every
// request is counted with its error text and what to do, and the upstream answering again
// resolves it.
func TestHealthUpstreamStopped(t *testing.T) {
	fake := fakeupstream.New(fakeupstream.Options{Reply: scriptedReply, APIKey: "dummy-key"})
	ts := httptest.NewServer(fake)
	s := testSettings(1_000_000)
	s.Upstreams = map[string]string{"anthropic": ts.URL}
	r := rigAround(t, s, fake)
	body := reviewBody("claude-sonnet-4-6", "", u("hello"))
	hdr := map[string]string{"X-Claude-Code-Session-Id": "stopped"}
	if code := post(t, r.srv.URL+"/claude-code/v1/messages", body, hdr); code != http.StatusOK {
		t.Fatalf("with the upstream up: %d", code)
	}
	host := strings.TrimPrefix(ts.URL, "http://")
	ts.Close()
	for i := range 3 {
		if code := post(t, r.srv.URL+"/claude-code/v1/messages", body, hdr); code != http.StatusBadGateway {
			t.Fatalf("request %d with the upstream stopped: %d, want 502", i, code)
		}
	}
	ks, e := upstreamEntry(t, r)
	if ks.Count != 3 || e.Count != 3 || !e.Active || e.Key != host || e.Class != "connection_refused" {
		t.Fatalf("upstream record %+v", ks)
	}
	if !strings.Contains(e.Text, "POST /v1/messages") || !strings.Contains(e.Text, "connection refused") {
		t.Errorf("text %q: want the method, path and the dial error", e.Text)
	}
	if !strings.Contains(e.Hint, "SMARTER_COMPACT_UPSTREAM_ANTHROPIC") {
		t.Errorf("hint %q does not say where the upstream is set", e.Hint)
	}
	// up again on the same address
	ts2 := httptest.NewUnstartedServer(fake)
	ts2.Listener.Close()
	var err error
	if ts2.Listener, err = listenOn(host); err != nil {
		t.Skipf("skipping the recovery half: the port %s was taken meanwhile: %v", host, err)
	}
	ts2.Start()
	defer ts2.Close()
	if code := post(t, r.srv.URL+"/claude-code/v1/messages", body, hdr); code != http.StatusOK {
		t.Fatalf("with the upstream back: %d", code)
	}
	if _, e := upstreamEntry(t, r); e.Active || e.Resolved.IsZero() {
		t.Errorf("after a success the source is still active: %+v", e)
	}
}

// TestHealthUpstreamStatus: 4xx and 5xx answers of the real fake (a wrong key, a scripted
// block it cannot send) are counted with the API's error type and message, the key the
// message could carry removed; the client still gets the answer byte for byte.
func TestHealthUpstreamStatus(t *testing.T) {
	bad := false
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{APIKey: "dummy-key", Reply: func(req *fakeupstream.Request) fakeupstream.Reply {
		if bad {
			return fakeupstream.Reply{Content: []fakeupstream.Block{{Type: "bogus"}}}
		}
		return scriptedReply(req)
	}})
	body := reviewBody("claude-sonnet-4-6", "", u("hello"))
	code := post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "status", "X-Api-Key": "sk-ant-api03-WRONGKEYWRONGKEYWRONGKEY"})
	if code != http.StatusUnauthorized {
		t.Fatalf("with a wrong key: %d, want the fake's 401", code)
	}
	_, e := upstreamEntry(t, r)
	if e.Class != "http_4xx" || !strings.Contains(e.Text, "HTTP 401 authentication_error") || !strings.Contains(e.Hint, "credentials") {
		t.Errorf("401: %+v", e)
	}
	if strings.Contains(e.Text, "WRONGKEY") {
		t.Errorf("the recorded text carries the key: %q", e.Text)
	}
	bad = true
	if code := post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "status"}); code != http.StatusInternalServerError {
		t.Fatalf("a scripted bogus block: %d, want the fake's 500", code)
	}
	ks, e := upstreamEntry(t, r)
	if ks.Count != 2 || e.Class != "http_5xx" || !strings.Contains(e.Text, "HTTP 500 api_error: fakeupstream: scripted block type") || !strings.Contains(e.Hint, "server error") {
		t.Errorf("500: %+v", ks)
	}
}

// TestHealthFailOpenOutsideTheSession: a fail-open is counted in the health record, which
// does not depend on the session database its fail_open event goes to.
func TestHealthFailOpenOutsideTheSession(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	body := append(reviewBody("claude-sonnet-4-6", "", u("hi")), []byte(` {"x":1}`)...)
	post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "trail"})
	ks := r.root.Health().Snapshot().Kind(store.HealthFailOpen)
	if ks.Count != 1 || len(ks.Entries) != 1 || !strings.HasPrefix(ks.Entries[0].Text, "fail-open parse at proxy/") {
		t.Fatalf("fail-open record: %+v", ks)
	}
}

// TestHealthTrimStuck: a threshold below what a trim must keep (the latest turn alone is
// over it) is reported once per session, with the threshold and the estimate.
func TestHealthTrimStuck(t *testing.T) {
	r := newRig(t, testSettings(200), fakeupstream.Options{})
	c := r.client(t, "stuck", "claude-mythos-5-1")
	c.userTurn(strings.Repeat("a long prompt that alone is over the threshold ", 40), output(1, 0))
	c.userTurn(strings.Repeat("another long prompt over the threshold ", 40), output(1, 0))
	ks := r.root.Health().Snapshot().Kind(store.HealthTrimStuck)
	if ks.Count < 2 || len(ks.Entries) != 1 || ks.Entries[0].Key != "stuck" || !ks.Entries[0].Active {
		t.Fatalf("trim_stuck record: %+v", ks)
	}
	if e := ks.Entries[0]; !strings.Contains(e.Text, "threshold 200") || !strings.Contains(e.Hint, "trim_at_tokens") {
		t.Errorf("trim_stuck entry %+v", e)
	}
}

func listenOn(hostport string) (net.Listener, error) { return net.Listen("tcp", hostport) }
