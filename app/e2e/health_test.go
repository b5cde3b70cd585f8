//go:build e2e

package e2e_test

// The health record end to end (issue 15 item 2, issue 16 item 1): the real serve with the
// real fake upstream stopped shows the upstream error on the overview within one poll (in
// headless Chromium), in `status --json`, in /api/status and as the tray's error state over
// D-Bus; with the state dir on a full 2 MiB tmpfs, every request still goes through and
// /api/status says the store cannot write, with what to do, once in the log.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// healthBody is a small Claude Code request of session sid.
func healthBody(sid, prompt string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": dashModel, "max_tokens": 256,
		"system":   []map[string]any{{"type": "text", "text": "You are the e2e health test's agent."}},
		"messages": []map[string]any{{"role": "user", "content": prompt}},
		"metadata": map[string]any{"user_id": fmt.Sprintf(`{"device_id":"d","account_uuid":"","session_id":%q}`, sid)},
	})
	return b
}

// postClaude sends body on serve's Claude Code route and returns the status.
func postClaude(t *testing.T, base, sid string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/claude-code/v1/messages", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", "dummy-key")
	req.Header.Set("User-Agent", "claude-cli/"+claudeVersion+" (external, cli)")
	req.Header.Set("X-Claude-Code-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /claude-code/v1/messages: %v", err)
	}
	defer resp.Body.Close()
	var sink bytes.Buffer
	sink.ReadFrom(resp.Body)
	return resp.StatusCode
}

// apiHealth reads /api/status's health with the token serve created under home.
func apiHealth(t *testing.T, base, tokenFile string) (store.HealthSnapshot, []byte) {
	t.Helper()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("the API token: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/status", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	var body struct {
		Health store.HealthSnapshot `json:"health"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw.Bytes(), &body) != nil {
		t.Fatalf("GET /api/status: %s %s", resp.Status, raw.Bytes())
	}
	return body.Health, raw.Bytes()
}

// TestE2EHealthUpstreamStopped: serve in front of the real fake upstream, which then stops.
// The next request's 502 shows on the open overview within one poll (1 s) as a banner with
// the dial error and what to do; `status --json` and /api/status carry it; screenshots of
// the overview with the error at 1280 and 420 wide.
func TestE2EHealthUpstreamStopped(t *testing.T) {
	chromium := findChromium(t)
	shots := artifactDir(t, "health")
	bin := buildBinary(t)
	fake := fakeupstream.New(fakeupstream.Options{Reply: dashReply, APIKey: "dummy-key"})
	up := httptest.NewServer(fake)
	defer up.Close()
	srv := startServe(t, bin, "SMARTER_COMPACT_UPSTREAM_ANTHROPIC="+up.URL)
	logServeOnFailure(t, srv)
	home := filepath.Join(filepath.Dir(srv.stateDir), "home")
	tokenFile := filepath.Join(home, ".config", "smarter-compact", "api-token")
	const sid = "e2e-health-upstream"
	if code := postClaude(t, srv.url(), sid, healthBody(sid, "first, with the upstream up")); code != http.StatusOK {
		t.Fatalf("with the upstream up: %d", code)
	}

	b := openBrowser(t, chromium, srv.url(), shots)
	b.do("viewport 1280×800", chromedp.EmulateViewport(1280, 800))
	b.at("overview, upstream up")
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="health"]`)))
	if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="health-banner"]').length`)); err != nil || n != 0 {
		b.fail("overview, upstream up", fmt.Errorf("a health banner with nothing failing (%d, %v)", n, err))
	}

	upHost := strings.TrimPrefix(up.URL, "http://")
	up.Close() // the upstream stops: its port refuses
	b.at("overview, upstream stopped")
	// The first request may still meet the pooled connection the upstream closed (a broken
	// pipe); the second dials and is refused.
	for i := range 2 {
		if code := postClaude(t, srv.url(), sid, healthBody(sid, fmt.Sprintf("request %d with the upstream stopped", i))); code != http.StatusBadGateway {
			t.Fatalf("request %d with the upstream stopped: %d, want 502", i, code)
		}
	}
	sent := time.Now()
	// one poll: the page asks every second; allow the poll period plus its answer
	b.waitJS("the health banner names the upstream", 2500*time.Millisecond,
		`(document.querySelector('[data-testid="health-problem-upstream"]')?.textContent ?? '').includes('Upstream `+upHost+` fails')`)
	t.Logf("the overview showed the upstream error %s after the request's 502", time.Since(sent).Round(10*time.Millisecond))
	problem := b.text(`[data-testid="health-problem-upstream"]`)
	for _, want := range []string{"connection refused", "nothing accepts connections there", "SMARTER_COMPACT_UPSTREAM_ANTHROPIC", "2 times since"} {
		if !strings.Contains(problem, want) {
			t.Errorf("the banner %q lacks %q", problem, want)
		}
	}
	for _, w := range []int64{1280, 420} {
		name := fmt.Sprintf("overview-upstream-error-%d", w)
		b.do(fmt.Sprintf("viewport %d×800", w), chromedp.EmulateViewport(w, 800))
		b.at(name)
		b.do("reload the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="health-banner"]`)))
		b.checkNoHorizontalScroll(name)
		b.shot(name)
	}
	b.checkConsole()

	snap, raw := apiHealth(t, srv.url(), tokenFile)
	up2 := snap.Kind(store.HealthUpstream)
	if snap.Active != 1 || up2.Count != 2 || len(up2.Entries) != 1 || up2.Entries[0].Class != "connection_refused" || up2.Entries[0].Key != upHost {
		t.Errorf("/api/status health: %s", healthOnly(raw))
	}

	cmd := exec.Command(bin, "status", "--json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SMARTER_COMPACT_STATE_DIR=" + srv.stateDir,
		"CONTEXT_PROXY_PORT=" + fmt.Sprint(srv.port), "SMARTER_COMPACT_CONFIG=" + filepath.Join(filepath.Dir(srv.stateDir), "config.toml")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	var rep struct {
		Health struct {
			Source string `json:"source"`
			store.HealthSnapshot
		} `json:"health"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if rep.Health.Source != "service" || rep.Health.Active != 1 || rep.Health.Kind(store.HealthUpstream).Entries[0].Class != "connection_refused" {
		t.Errorf("status --json health: %+v", rep.Health)
	}
}

// healthOnly is the "health" member of an /api/status answer, for the log.
func healthOnly(raw []byte) string {
	var body struct {
		Health json.RawMessage `json:"health"`
	}
	_ = json.Unmarshal(raw, &body)
	return string(body.Health)
}

// TestE2EHealthTray: serve with its tray on a private D-Bus bus; with the upstream stopped,
// the next request turns the icon to error, shows the problem line in the menu and names
// the failing upstream in the tooltip, without waiting for the tray's 5 s refresh.
func TestE2EHealthTray(t *testing.T) {
	daemon := findDBusDaemon(t)
	bin := buildBinary(t)
	bus := startBus(t, daemon)
	startWatcher(t, bus)
	fake := fakeupstream.New(fakeupstream.Options{Reply: dashReply, APIKey: "dummy-key"})
	up := httptest.NewServer(fake)
	defer up.Close()
	srv := startTrayServe(t, bin, trayConfig, "DBUS_SESSION_BUS_ADDRESS="+bus.addr, "SMARTER_COMPACT_UPSTREAM_ANTHROPIC="+up.URL)
	tc := connectTray(t, bus, srv.cmd.Process.Pid)
	tc.layout(t)
	tc.checkIcon(t, assets.TrayActive, 3*time.Second)
	const sid = "e2e-health-tray"
	if code := postClaude(t, srv.url(), sid, healthBody(sid, "with the upstream up")); code != http.StatusOK {
		t.Fatalf("with the upstream up: %d", code)
	}
	problem := findProblemItem(t, tc)
	if problem.visible {
		t.Errorf("the problem line is visible with nothing failing: %+v", problem)
	}
	upHost := strings.TrimPrefix(up.URL, "http://")
	up.Close()
	for i := range 2 { // as in TestE2EHealthUpstreamStopped: a broken pipe, then refused
		if code := postClaude(t, srv.url(), sid, healthBody(sid, fmt.Sprintf("request %d with the upstream stopped", i))); code != http.StatusBadGateway {
			t.Fatalf("request %d with the upstream stopped: %d, want 502", i, code)
		}
	}
	tc.checkIcon(t, assets.TrayError, 2*time.Second)
	var last menuItem
	if !waitFor(2*time.Second, func() bool {
		last = findProblemItem(t, tc)
		return last.visible && strings.Contains(last.label, "Upstream "+upHost+" fails")
	}) {
		t.Errorf("the menu's problem line: %+v, want it visible naming the upstream", last)
	}
	v, err := tc.sni.GetProperty(sniInterface + ".ToolTip")
	if err != nil {
		t.Fatal(err)
	}
	tip := fmt.Sprint(v.Value())
	t.Logf("after the 502s: the error icon, the menu's problem line %q, the tooltip %q", last.label, tip)
	if !strings.Contains(tip, "Upstream "+upHost+" fails") || !strings.Contains(tip, "SMARTER_COMPACT_UPSTREAM_ANTHROPIC") {
		t.Errorf("tooltip %q: want the failing upstream and where it is set", tip)
	}
	if _, err := srv.sigterm(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, srv.log)
	}
}

// findProblemItem returns the second item of the menu (after the status line), which must
// be the problem line.
func findProblemItem(t *testing.T, tc *trayClient) menuItem {
	t.Helper()
	items := tc.items(t)
	if len(items) < 2 {
		t.Fatalf("the menu has %d items", len(items))
	}
	if !strings.HasPrefix(items[1].label, "Problem") {
		t.Fatalf("the menu's second item is %q, not the problem line", items[1].label)
	}
	return items[1]
}
