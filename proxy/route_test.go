package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every prefix the listener mounts (RoutePrefixes) reaches a route of routeFor, with and
// without a tail, and a path that only starts like one does not.
func TestRoutePrefixesAreRouted(t *testing.T) {
	tails := map[string]string{OpenCodePrefix: "anthropic/v1/messages", V1Prefix: "messages"}
	for _, prefix := range RoutePrefixes() {
		tail := tails[prefix]
		if tail == "" {
			tail = "responses"
		}
		if _, ok := routeFor(httptest.NewRequest("POST", prefix+tail, nil)); !ok {
			t.Errorf("%s%s: not routed", prefix, tail)
		}
	}
	for _, path := range []string{"/claude-codex/v1/messages", "/v1", "/codexx/responses", "/backend-api/responses"} {
		if rt, ok := routeFor(httptest.NewRequest("POST", path, nil)); ok {
			t.Errorf("%s: routed to %+v, want no route", path, rt)
		}
	}
}

// TestAgentUpstreamOverride: a per-agent upstream takes that agent's traffic of the family
// and no other agent's; unprefixed routes use it only when the agent is inferred.
func TestAgentUpstreamOverride(t *testing.T) {
	hit := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"upstream":"`+name+`","path":"`+r.URL.Path+`"}`)
		}))
		t.Cleanup(s.Close)
		return s
	}
	family, gateway, codexGW := hit("family"), hit("claude-gateway"), hit("codex-gateway")
	root := openRoot(t)
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": family.URL, "openai": family.URL, "codex": family.URL}
	s.AgentUpstreams = map[string]map[string]string{
		"claude-code": {"anthropic": gateway.URL},
		"codex":       {"codex": codexGW.URL},
	}
	// trimming off everywhere: every request passes through unchanged
	off := allOn{off: map[string]bool{"claude-code": true, "codex": true, "opencode": true, "unknown": true}}
	p := New(s, off, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(p)
	defer srv.Close()

	for _, c := range []struct {
		path string
		hdr  map[string]string
		want string
	}{
		{"/claude-code/v1/messages", nil, `{"upstream":"claude-gateway","path":"/v1/messages"}`},
		{"/opencode/anthropic/v1/messages", nil, `{"upstream":"family","path":"/v1/messages"}`},
		{"/opencode/openai/v1/chat/completions", nil, `{"upstream":"family","path":"/v1/chat/completions"}`},
		{"/codex/responses", nil, `{"upstream":"codex-gateway","path":"/responses"}`},
		{"/v1/messages", nil, `{"upstream":"family","path":"/v1/messages"}`},
		{"/v1/messages", map[string]string{"User-Agent": "claude-cli/2.1.0"}, `{"upstream":"claude-gateway","path":"/v1/messages"}`},
		{"/v1/messages", map[string]string{"User-Agent": "opencode/1.0"}, `{"upstream":"family","path":"/v1/messages"}`},
		{"/backend-api/codex/responses", nil, `{"upstream":"family","path":"/responses"}`},
		{"/backend-api/codex/responses", map[string]string{"Originator": "codex_cli_rs"}, `{"upstream":"codex-gateway","path":"/responses"}`},
	} {
		req, _ := http.NewRequest("POST", srv.URL+c.path, strings.NewReader(`{"model":"m","messages":[]}`))
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != c.want {
			t.Errorf("%s %v: got %s, want %s", c.path, c.hdr, b, c.want)
		}
	}
}
