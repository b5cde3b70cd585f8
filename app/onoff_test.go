package app

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// togglesServer serves the real route table with tg on a loopback port; it returns the port.
func togglesServer(t *testing.T, tg *toggles) int {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	ts.Config.Handler = routes(port, http.NotFoundHandler(), http.NotFoundHandler(), tg, slog.New(slog.DiscardHandler))
	ts.Start()
	t.Cleanup(ts.Close)
	return port
}

func allOn() map[string]bool {
	return map[string]bool{agentClaudeCode: true, agentCodex: true, agentOpenCode: true, agentUnknown: true}
}

func TestOnOffRunningService(t *testing.T) {
	t.Parallel()
	tg := newToggles(allOn())
	port := togglesServer(t, tg)
	const userText = "# my settings\r\n[context_proxy]\r\nport = PORT # the proxy\r\n\r\n[context_proxy.agents]\r\ncodex = true # keep\r\n\r\n[compaction]\r\nrecall = false\r\n"
	path := writeConfig(t, strings.ReplaceAll(userText, "PORT", strconv.Itoa(port)))
	sys, stdout, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path})

	if err := run(t.Context(), []string{"off", "codex", "claude-code"}, sys); err != nil {
		t.Fatalf("off: %v", err)
	}
	if tg.Enabled(agentCodex) || tg.Enabled(agentClaudeCode) || !tg.Enabled(agentOpenCode) {
		t.Errorf("toggles after off codex claude-code: %s", tg)
	}
	got, _ := os.ReadFile(path)
	want := strings.ReplaceAll("# my settings\r\n[context_proxy]\r\nport = PORT # the proxy\r\n\r\n[context_proxy.agents]\r\ncodex = false # keep\r\nclaude-code = false\r\n\r\n[compaction]\r\nrecall = false\r\n", "PORT", strconv.Itoa(port))
	if string(got) != want {
		t.Errorf("config after off:\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(stdout.String(), "trimming off for claude-code, codex: saved in "+path) || !strings.Contains(stdout.String(), "running service") {
		t.Errorf("stdout %q", stdout)
	}

	// No agent named: all of them.
	if err := run(t.Context(), []string{"on"}, sys); err != nil {
		t.Fatalf("on: %v", err)
	}
	if tg.String() != "claude-code=on codex=on opencode=on unknown=on" {
		t.Errorf("toggles after on: %s", tg)
	}
	cfg, err := LoadConfig(path, true, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range configuredAgents {
		if !cfg.Agents[a] {
			t.Errorf("%s is off in the saved config", a)
		}
	}
	got, _ = os.ReadFile(path)
	if !strings.Contains(string(got), "[context_proxy.agents]\r\ncodex = true # keep\r\nclaude-code = true\r\nopencode = true\r\n\r\n[compaction]") {
		t.Errorf("config after on:\n%s", got)
	}
}

func TestOnOffServiceDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	sys, stdout, _ := testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(port)})
	if err := run(t.Context(), []string{"off", "opencode"}, sys); err != nil {
		t.Fatalf("off: %v", err)
	}
	path := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the config was not created: %v", err)
	}
	if string(got) != "[context_proxy.agents]\nopencode = false\n" {
		t.Errorf("new config %q", got)
	}
	if runtime.GOOS != "windows" {
		fi, _ := os.Stat(path)
		di, _ := os.Stat(filepath.Dir(path))
		if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
			t.Errorf("modes: file %o, dir %o; want 600 and 700", fi.Mode().Perm(), di.Mode().Perm())
		}
	}
	if !strings.Contains(stdout.String(), "not running") || !strings.Contains(stdout.String(), "applies when it starts") {
		t.Errorf("stdout %q: want it to say the service is down and the change is saved", stdout)
	}
}

func TestOnOffErrors(t *testing.T) {
	t.Parallel()
	t.Run("unknown agent", func(t *testing.T) {
		t.Parallel()
		sys, _, _ := testSystem(t, env{})
		err := run(t.Context(), []string{"on", "cursor"}, sys)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), `unknown agent "cursor": use claude-code, codex, opencode`) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("invalid config untouched", func(t *testing.T) {
		t.Parallel()
		const text = "[context_proxy]\nport = 99999\n"
		path := writeConfig(t, text)
		sys, _, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path})
		err := run(t.Context(), []string{"off"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "nothing changed") {
			t.Fatalf("err %v", err)
		}
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Errorf("config changed: %q", got)
		}
	})
	t.Run("inline table", func(t *testing.T) {
		t.Parallel()
		const text = "[context_proxy]\nagents = { codex = true }\n"
		path := writeConfig(t, text)
		sys, _, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path, "CONTEXT_PROXY_PORT": "1"})
		err := run(t.Context(), []string{"off", "codex"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "codex = false") {
			t.Fatalf("err %v: want the line to write by hand", err)
		}
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Errorf("config changed: %q", got)
		}
	})
	t.Run("old service without the API", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(ts.Close)
		port := ts.Listener.Addr().(*net.TCPAddr).Port
		sys, _, _ := testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(port)})
		err := run(t.Context(), []string{"on", "codex"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "saved, but the running service did not take the change") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestControlAPI(t *testing.T) {
	t.Parallel()
	tg := newToggles(allOn())
	post := func(path, ctype, body string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://127.0.0.1:4100"+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
				continue
			}
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		routes(4100, http.NotFoundHandler(), http.NotFoundHandler(), tg, slog.New(slog.DiscardHandler)).ServeHTTP(w, req)
		return w
	}
	tests := []struct {
		name, path, ctype, body string
		hdr                     []string
		wantCode                int
		wantBody                string
		wantCodex               bool
	}{
		{"off", "/api/agents/codex", "application/json", `{"enabled":false}`, nil, 200, `{"agent":"codex","enabled":false}`, false},
		{"on with charset", "/api/agents/codex", "application/json; charset=utf-8", `{"enabled": true}`, nil, 200, `{"agent":"codex","enabled":true}`, true},
		{"form post", "/api/agents/codex", "application/x-www-form-urlencoded", `enabled=false`, nil, 415, "Content-Type", true},
		{"text/plain", "/api/agents/codex", "text/plain", `{"enabled":false}`, nil, 415, "Content-Type", true},
		{"no enabled", "/api/agents/codex", "application/json", `{}`, nil, 400, "enabled", true},
		{"extra key", "/api/agents/codex", "application/json", `{"enabled":false,"x":1}`, nil, 400, "enabled", true},
		{"not a bool", "/api/agents/codex", "application/json", `{"enabled":"no"}`, nil, 400, "enabled", true},
		{"unknown agent", "/api/agents/cursor", "application/json", `{"enabled":false}`, nil, 404, `unknown agent \"cursor\"`, true},
		{"browser", "/api/agents/codex", "application/json", `{"enabled":false}`, []string{"Origin", "https://evil.example"}, 403, "browser requests are refused", true},
		{"fetch metadata", "/api/agents/codex", "application/json", `{"enabled":false}`, []string{"Sec-Fetch-Site", "same-origin"}, 403, "browser requests are refused", true},
		{"rebinding", "/api/agents/codex", "application/json", `{"enabled":false}`, []string{"Host", "evil.example:4100"}, 403, "DNS rebinding", true},
	}
	for _, tt := range tests { // in order: each case starts from the state the last left
		w := post(tt.path, tt.ctype, tt.body, tt.hdr...)
		if w.Code != tt.wantCode || !strings.Contains(w.Body.String(), tt.wantBody) {
			t.Errorf("%s: %d %q, want %d with %q", tt.name, w.Code, w.Body, tt.wantCode, tt.wantBody)
		}
		if tg.Enabled(agentCodex) != tt.wantCodex {
			t.Errorf("%s: codex enabled = %v, want %v", tt.name, tg.Enabled(agentCodex), tt.wantCodex)
		}
	}

	req := httptest.NewRequest("GET", "http://127.0.0.1:4100/api/agents", nil)
	w := httptest.NewRecorder()
	routes(4100, http.NotFoundHandler(), http.NotFoundHandler(), tg, slog.New(slog.DiscardHandler)).ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Body)
	const want = `{"agents":[{"agent":"claude-code","enabled":true},{"agent":"codex","enabled":true},{"agent":"opencode","enabled":true},{"agent":"unknown","enabled":true}]}` + "\n"
	if w.Code != 200 || string(body) != want || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /api/agents: %d %s %q", w.Code, w.Header().Get("Content-Type"), body)
	}
}
