package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/app/apptest"
	"github.com/smarter-compact/smarter-compact/app/tray"
	"github.com/smarter-compact/smarter-compact/installer"
)

// TestServe runs the serve command in process, on a real loopback port, over a real context
// store in a temporary directory and the real proxy, with a fake Anthropic upstream.
func TestServe(t *testing.T) {
	t.Parallel()
	var (
		mu                        sync.Mutex
		upstreamPath, upstreamKey string
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamPath, upstreamKey = r.URL.Path, r.Header.Get("X-Api-Key")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[],"has_more":false}`)
	}))
	defer upstream.Close()

	state := t.TempDir()
	port := freePort(t)
	sys, _, logs := testSystem(t, env{
		"SMARTER_COMPACT_STATE_DIR":          state,
		"SMARTER_COMPACT_UPSTREAM_ANTHROPIC": upstream.URL,
		"CONTEXT_PROXY_PORT":                 strconv.Itoa(port),
		"CONTEXT_TRIM_TO_FRACTION":           "2",
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, sys) }()

	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitHealthy(t, base, done)

	t.Run("foreign Host refused", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		req.Host = "rebind.example:" + strconv.Itoa(port)
		if code, body := do(t, req); code != http.StatusForbidden {
			t.Errorf("status %d (%q), want 403", code, body)
		}
	})
	t.Run("browser refused on a model route", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/claude-code/v1/models", nil)
		req.Header.Set("Origin", "https://evil.example")
		if code, body := do(t, req); code != http.StatusForbidden {
			t.Errorf("status %d (%q), want 403", code, body)
		}
	})
	t.Run("mcp answers initialize", func(t *testing.T) {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if code, body := do(t, req); code != http.StatusOK || !strings.Contains(body, `"name":"smarter-compact"`) {
			t.Errorf("status %d, body %q; want the server's initialize result", code, body)
		}
		req, _ = http.NewRequest("POST", base+"/mcp", strings.NewReader(`{}`))
		req.Host = "rebind.example:" + strconv.Itoa(port)
		if code, body := do(t, req); code != http.StatusForbidden {
			t.Errorf("foreign Host on /mcp: status %d (%q), want 403", code, body)
		}
	})
	t.Run("api needs the token serve created", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(sys.configDir, "smarter-compact", "api-token"))
		if err != nil {
			t.Fatalf("serve made no API token: %v", err)
		}
		token := strings.TrimSpace(string(b))
		req, _ := http.NewRequest("GET", base+"/api/status", nil)
		if code, body := do(t, req); code != http.StatusUnauthorized {
			t.Errorf("GET /api/status without the token: %d %q, want 401", code, body)
		}
		req, _ = http.NewRequest("GET", base+"/api/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		code, body := do(t, req)
		if code != http.StatusOK || !strings.Contains(body, `"revision":`) || !strings.Contains(body, `"configPath":`) {
			t.Errorf("GET /api/status with the token: %d %q", code, body)
		}
	})
	t.Run("model route reaches the upstream", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/claude-code/v1/models", nil)
		req.Header.Set("X-Api-Key", "sk-ant-test-secret")
		code, body := do(t, req)
		if code != http.StatusOK || body != `{"data":[],"has_more":false}` {
			t.Errorf("status %d, body %q; want the upstream's 200", code, body)
		}
		mu.Lock()
		defer mu.Unlock()
		if upstreamPath != "/v1/models" || upstreamKey != "sk-ant-test-secret" {
			t.Errorf("upstream saw path %q, key %q; want /v1/models with the client's key", upstreamPath, upstreamKey)
		}
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel, want nil", err)
		}
	case <-time.After(shutdownGrace + 5*time.Second):
		t.Fatal("serve did not return after cancel")
	}

	out := logs.String()
	for _, want := range []string{
		"tray: no D-Bus session bus",
		"CONTEXT_TRIM_TO_FRACTION=\\\"2\\\"",
		"addr=http://127.0.0.1:" + strconv.Itoa(port),
		"store=" + state,
		`agents="claude-code=on codex=on opencode=on unknown=on"`,
		"retention sweep",
		"shutting down",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs do not contain %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "running headless") != 1 {
		t.Errorf("the headless notice should appear once:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(sys.configDir, "smarter-compact", "api-token")); len(b) == 0 || strings.Contains(out, strings.TrimSpace(string(b))) {
		t.Errorf("the API token is missing or in the logs:\n%s", out)
	}
	if strings.Contains(out, "sk-ant-test-secret") {
		t.Errorf("logs contain the API key:\n%s", out)
	}
	if entries, err := os.ReadDir(state); err != nil || len(entries) == 0 {
		t.Errorf("the context store under %s was not created (%v)", filepath.Clean(state), err)
	}
}

// freePort returns a loopback port that was free a moment ago (apptest.FreePort).
func freePort(t *testing.T) int { t.Helper(); return apptest.FreePort(t) }

// waitHealthy polls /healthz until it answers "ok", serve fails, or 10 s pass.
func waitHealthy(t *testing.T, base string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("serve returned early: %v", err)
		default:
		}
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "ok" {
				return
			}
			t.Fatalf("/healthz: status %d, body %q", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("serve did not answer /healthz within 10 s")
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestServeHungSessionBus: a D-Bus session bus that accepts connections and never answers
// must not hold up serving: the tray looks for its host in the background (up to
// tray.DialTimeout) while requests are answered. serve runs in a child process, since the
// tray library runs once per process.
func TestServeHungSessionBus(t *testing.T) {
	if os.Getenv("SMARTER_COMPACT_TEST_CHILD") == "serve" {
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		if err := Main(ctx, []string{"serve", "--port", os.Getenv("SMARTER_COMPACT_TEST_PORT")}); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if runtime.GOOS != "linux" {
		t.Skip("the tray dials a D-Bus session bus on Linux only")
	}
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})

	port := freePort(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestServeHungSessionBus$")
	cmd.Env = append(os.Environ(),
		"SMARTER_COMPACT_TEST_CHILD=serve", "SMARTER_COMPACT_TEST_PORT="+strconv.Itoa(port),
		"HOME="+filepath.Join(dir, "home"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"), "SMARTER_COMPACT_STATE_DIR="+filepath.Join(dir, "state"),
		"SMARTER_COMPACT_CONFIG=", "CONTEXT_PROXY_PORT=", "XDG_RUNTIME_DIR="+dir,
		"DBUS_SESSION_BUS_ADDRESS=unix:path="+sock)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	gone := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(gone) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-gone:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
	})

	base := "http://127.0.0.1:" + strconv.Itoa(port)
	c := &http.Client{Timeout: 500 * time.Millisecond}
	for {
		if time.Since(start) > tray.DialTimeout-time.Second {
			t.Fatalf("serve did not answer /healthz within %s while the session bus hangs (the tray's dial is %s):\n%s", time.Since(start).Round(time.Millisecond), tray.DialTimeout, out.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("serve exited: %v\n%s", err, out.String())
		default:
		}
		resp, err := c.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("healthy after %s with a hung session bus", time.Since(start).Round(time.Millisecond))
	// The address file next to the API token names where it listens.
	if got := installer.ReadAddrFile(filepath.Join(dir, "config")); got != base {
		t.Errorf("address file %q, want %q", got, base)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
	if got := installer.ReadAddrFile(filepath.Join(dir, "config")); got != "" {
		t.Errorf("the address file outlived the service: %q", got)
	}
	if !strings.Contains(out.String(), "tray: no D-Bus session bus") {
		t.Errorf("the hung bus was not reported:\n%s", out.String())
	}
}

// TestServeSecondLaunch: a second serve on the port of a running one (the app, the
// .desktop entry or the Start-menu shortcut while the login copy runs) opens the running
// one's dashboard, logs one line and returns nil (exit 0); the first keeps serving. Both
// are real serves on one free port; the browser opener is injected. A program on the port
// that is not smarter-compact stays an error that says what to do, and opens nothing.
func TestServeSecondLaunch(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	e := env{"SMARTER_COMPACT_STATE_DIR": t.TempDir(), "CONTEXT_PROXY_PORT": strconv.Itoa(port)}
	first, _, firstLogs := testSystem(t, e)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--no-tray"}, first) }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitHealthy(t, base, done)

	second, _, logs := testSystem(t, e)
	var opened []string
	second.openURL = func(u string) error { opened = append(opened, u); return nil }
	if err := run(t.Context(), []string{"serve"}, second); err != nil {
		t.Fatalf("second serve: %v, want nil (a hand-off)\n%s", err, logs)
	}
	if len(opened) != 1 || opened[0] != base+"/" {
		t.Errorf("opened %q, want the dashboard %s/ once", opened, base)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "already running here: opened its dashboard") {
		t.Errorf("want one log line of the hand-off, got %d:\n%s", n, logs)
	}
	// A browser that cannot start: still a hand-off, and the line names the address.
	second, _, logs = testSystem(t, e)
	second.openURL = func(string) error { return errors.New("no browser here") }
	if err := run(t.Context(), []string{"serve", "--port", strconv.Itoa(port)}, second); err != nil {
		t.Fatalf("second serve, browser failing: %v, want nil", err)
	}
	if out := logs.String(); !strings.Contains(out, "open its dashboard yourself") || !strings.Contains(out, "dashboard="+base+"/") || !strings.Contains(out, "no browser here") {
		t.Errorf("the browser's failure is not reported with the address:\n%s", out)
	}
	waitHealthy(t, base, done) // the first one still serves
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first serve: %v\n%s", err, firstLogs)
	}

	// Another HTTP program on a port: not smarter-compact, though its /healthz says ok.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer other.Close()
	otherPort := other.Listener.Addr().(*net.TCPAddr).Port
	sys, _, _ := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": t.TempDir(), "CONTEXT_PROXY_PORT": strconv.Itoa(otherPort)})
	sys.openURL = func(u string) error { t.Errorf("opened %s for another program", u); return nil }
	err := run(t.Context(), []string{"serve", "--no-tray"}, sys)
	for _, want := range []string{fmt.Sprintf("port %d is in use by another program, not smarter-compact", otherPort), "X-Smarter-Compact", "CONTEXT_PROXY_PORT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve beside another program: %v, want an error containing %q", err, want)
		}
	}
	if ExitCode(err) != 1 {
		t.Errorf("exit code %d, want 1", ExitCode(err))
	}
}

func TestConfigAgentUpstreams(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, "[upstream]\nanthropic = \"https://family.example\"\n\n"+
		"[upstream.agents.claude-code]\nanthropic = \"https://gw.example/anthropic/\"\n\n"+
		"[upstream.agents.codex]\ncodex = \"http://codex-gw.example/backend\"\nopenai = \"https://oa.example/v1\"\n",
		env{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC": "https://env.example"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"claude-code": {"anthropic": "https://gw.example/anthropic"},
		"codex":       {"codex": "http://codex-gw.example/backend", "openai": "https://oa.example/v1"},
	}
	if !reflect.DeepEqual(cfg.Proxy.AgentUpstreams, want) {
		t.Errorf("AgentUpstreams = %v, want %v", cfg.Proxy.AgentUpstreams, want)
	}
	if cfg.Proxy.Upstreams["anthropic"] != "https://env.example" {
		t.Errorf("[upstream] anthropic = %q: the environment wins over the family key only", cfg.Proxy.Upstreams["anthropic"])
	}
	if got := agentUpstreamsLog(cfg.Proxy.AgentUpstreams); got != "claude-code.anthropic=https://gw.example/anthropic codex.openai=https://oa.example/v1 codex.codex=http://codex-gw.example/backend" {
		t.Errorf("startup log: %s", got)
	}

	cfg, err = load(t, "", nil)
	if err != nil || cfg.Proxy.AgentUpstreams != nil || agentUpstreamsLog(nil) != "none" {
		t.Errorf("no tables: %v, %v", cfg.Proxy.AgentUpstreams, err)
	}
}
