package app

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/store/storetest"
	"github.com/smarter-compact/smarter-compact/web"
)

// stubModels stands in for the proxy: it records the path it saw and checks that the
// ResponseWriter still flushes (SSE streams through the router).
func stubModels(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Errorf("%s: ResponseWriter %T is not an http.Flusher", r.URL.Path, w)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "models "+r.URL.Path)
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("%s: Flush: %v", r.URL.Path, err)
		}
	})
}

// testAPIToken is the /api bearer token of serveRoute's dashboard.
const testAPIToken = "0123456789abcdef"

func serveRoute(t *testing.T, port int, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	recall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "mcp "+r.Method)
	})
	st, _, _ := testState(t, "", env{})
	root := storetest.OpenRoot(t)
	log := slog.New(slog.DiscardHandler)
	dash := web.New(web.Options{Root: root, Control: st, APIToken: testAPIToken, Log: log})
	h := routes(port, stubModels(t), recall, dash, log)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestRoutesTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path string
		wantCode     int
		wantBody     string
	}{
		{"GET", "/healthz", 200, "ok"},
		{"POST", "/claude-code/v1/messages", 200, "models /claude-code/v1/messages"},
		{"POST", "/codex/responses", 200, "models /codex/responses"},
		{"POST", "/opencode/anthropic/v1/messages", 200, "models /opencode/anthropic/v1/messages"},
		{"POST", "/v1/messages", 200, "models /v1/messages"},
		{"POST", "/v1/chat/completions", 200, "models /v1/chat/completions"},
		{"GET", "/v1/models", 200, "models /v1/models"},
		{"POST", "/backend-api/codex/responses", 200, "models /backend-api/codex/responses"},
		{"POST", "/mcp", 200, "mcp POST"},
		{"GET", "/mcp", 200, "mcp GET"},
		{"DELETE", "/mcp", 200, "mcp DELETE"},
		{"POST", "/mcp/x", 404, ""},
		{"GET", "/nowhere", 404, ""},
		{"POST", "/v2/messages", 404, ""},
		{"POST", "/backend-api/other", 404, ""},
		{"POST", "/healthz", 405, ""},
		{"HEAD", "/healthz", 200, ""},
		{"HEAD", "/", 200, ""},
		{"HEAD", "/ui/settings", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			w := serveRoute(t, 4100, httptest.NewRequest(tt.method, "http://127.0.0.1:4100"+tt.path, nil))
			if w.Code != tt.wantCode {
				t.Fatalf("status %d, want %d (body %q)", w.Code, tt.wantCode, w.Body)
			}
			if tt.wantBody != "" && w.Body.String() != tt.wantBody {
				t.Errorf("body %q, want %q", w.Body, tt.wantBody)
			}
			if strings.HasPrefix(tt.wantBody, "models ") && !w.Flushed {
				t.Error("the model route's Flush did not reach the connection")
			}
		})
	}
}

func TestRoutesHostCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host   string
		port   int
		wantOK bool
	}{
		{"127.0.0.1:4100", 4100, true},
		{"localhost:4100", 4100, true},
		{"LocalHost:4100", 4100, true},
		{"[::1]:4100", 4100, true},
		{"127.0.0.1:80", 80, true},
		{"localhost", 80, true},
		{"127.0.0.1:4101", 4100, false},
		{"localhost", 4100, false},
		{"evil.example:4100", 4100, false},
		{"localhost.evil.example:4100", 4100, false},
		{"127.0.0.2:4100", 4100, false},
		{"0.0.0.0:4100", 4100, false},
		{"[::ffff:127.0.0.1]:4100", 4100, false},
		{"", 4100, false},
	}
	for _, tt := range tests {
		for _, path := range []string{"/healthz", "/claude-code/v1/messages", "/mcp", "/nowhere", "/", "/ui/sessions", "/api/status"} {
			t.Run(tt.host+path, func(t *testing.T) {
				t.Parallel()
				req := httptest.NewRequest("GET", path, nil)
				req.Host = tt.host
				req.Header.Set("Authorization", "Bearer "+testAPIToken)
				w := serveRoute(t, tt.port, req)
				if refused := w.Code == http.StatusForbidden; refused == tt.wantOK {
					t.Fatalf("Host %q on port %d: status %d (body %q), want allowed=%v", tt.host, tt.port, w.Code, w.Body, tt.wantOK)
				}
				if !tt.wantOK && !strings.Contains(w.Body.String(), "DNS rebinding") {
					t.Errorf("refusal %q does not say why", w.Body)
				}
			})
		}
	}
}

func TestRoutesRefuseBrowsers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		path     string
		header   http.Header
		wantCode int
	}{
		{"agent, no browser headers", "/claude-code/v1/messages", nil, 200},
		{"user-typed navigation", "/v1/messages", http.Header{"Sec-Fetch-Site": {"none"}}, 200},
		{"cross-site fetch", "/v1/messages", http.Header{"Sec-Fetch-Site": {"cross-site"}}, 403},
		{"same-origin fetch", "/codex/responses", http.Header{"Sec-Fetch-Site": {"same-origin"}}, 403},
		{"empty Sec-Fetch-Site", "/codex/responses", http.Header{"Sec-Fetch-Site": {""}}, 403},
		{"Origin", "/opencode/anthropic/v1/messages", http.Header{"Origin": {"https://evil.example"}}, 403},
		{"Origin null", "/backend-api/codex/responses", http.Header{"Origin": {"null"}}, 403},
		{"Origin with none", "/v1/responses", http.Header{"Origin": {"http://127.0.0.1:4100"}, "Sec-Fetch-Site": {"none"}}, 403},
		{"agent on mcp", "/mcp", nil, 200},
		{"browser on mcp", "/mcp", http.Header{"Origin": {"https://evil.example"}}, 403},
		{"healthz answers browsers", "/healthz", http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("POST", "http://127.0.0.1:4100"+tt.path, strings.NewReader("{}"))
			if tt.path == "/healthz" {
				req.Method = "GET"
			}
			for k, v := range tt.header {
				req.Header[k] = v
			}
			w := serveRoute(t, 4100, req)
			if w.Code != tt.wantCode {
				t.Fatalf("status %d (body %q), want %d", w.Code, w.Body, tt.wantCode)
			}
			if w.Code == 403 && !strings.Contains(w.Body.String(), "browser requests are refused") {
				t.Errorf("refusal %q does not say why", w.Body)
			}
		})
	}
}

// TestRoutesDashboard checks that the dashboard and /api are mounted inside the Host check
// with their own guards (package web tests them in depth).
func TestRoutesDashboard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path string
		header             http.Header
		wantCode           int
		wantType           string
	}{
		{"overview", "GET", "/", nil, 200, "text/html"},
		{"sessions", "GET", "/ui/sessions", nil, 200, "text/html"},
		{"htmx", "GET", "/ui/static/htmx.min.js", nil, 200, "javascript"},
		{"api with token", "GET", "/api/agents", http.Header{"Authorization": {"Bearer " + testAPIToken}}, 200, "application/json"},
		{"api without token", "GET", "/api/agents", nil, 401, "application/json"},
		{"api from a browser", "GET", "/api/agents", http.Header{"Authorization": {"Bearer " + testAPIToken}, "Sec-Fetch-Site": {"same-origin"}}, 403, "application/json"},
		{"switch without CSRF token", "POST", "/ui/pause", nil, 403, "text/html"},
		{"cross-site switch", "POST", "/ui/pause", http.Header{"Sec-Fetch-Site": {"cross-site"}}, 403, "text/html"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tt.method, "http://127.0.0.1:4100"+tt.path, strings.NewReader("paused=true"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tt.header {
				req.Header[k] = v
			}
			w := serveRoute(t, 4100, req)
			if w.Code != tt.wantCode {
				t.Fatalf("status %d (body %.300q), want %d", w.Code, w.Body, tt.wantCode)
			}
			if ct := w.Header().Get("Content-Type"); !strings.Contains(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tt.wantType)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
		})
	}
}
