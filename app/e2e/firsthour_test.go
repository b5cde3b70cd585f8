//go:build e2e

package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// envDeb names a prebuilt .deb (the one `make dist` writes to dist/) for TestE2EFirstHour.
const envDeb = "SMARTER_COMPACT_E2E_DEB"

// firstHourLimit is issue 15's aim: a package install to the first trimmed request in under
// 2 minutes of wall time.
const firstHourLimit = 2 * time.Minute

// TestE2EFirstHour measures what a new user waits from `dpkg -i` of the .deb ($envDeb) into
// the real system to the first request whose forwarded body was trimmed: the install, the
// wiring of Claude Code (`smarter-compact install` with a temporary HOME), the service up
// (`smarter-compact serve` in the background, as docs/install.md says for a machine without
// a service manager) and the real Claude Code session against the strict fake upstream until
// /api/status counts a trim. It logs each phase as "firsthour: <phase> <seconds>s", fails
// past firstHourLimit, then checks `uninstall` gives the user's files back byte for byte and
// purges the package. It needs root and the package, and skips with the reason otherwise.
func TestE2EFirstHour(t *testing.T) {
	deb := os.Getenv(envDeb)
	if deb == "" {
		t.Skipf("%s is not set: build the package with `make dist` and set it to dist/smarter-compact_*_linux_amd64.deb (.ci/check-linux-packages does)", envDeb)
	}
	if os.Geteuid() != 0 {
		t.Skip("dpkg -i into the real system needs root (CI runs as root)")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg on this machine: the .deb cannot be installed")
	}
	if exec.Command("dpkg", "-s", "smarter-compact").Run() == nil {
		t.Skip("smarter-compact is already installed on this machine; the test does not replace it")
	}
	claude := claudeCLI.find(t)
	const bin = "/usr/bin/smarter-compact"

	root := t.TempDir()
	home := filepath.Join(root, "home")
	work := filepath.Join(root, "work")
	makeDirs(t, work, filepath.Join(home, ".claude"))
	// The user's settings, which uninstall must give back byte for byte; ~/.claude.json is
	// Claude Code's own state (it rewrites it every run), so only our MCP entry is checked there.
	settings := filepath.Join(home, ".claude", "settings.json")
	settingsText := "{\n  \"env\": {\n    \"DISABLE_AUTOUPDATER\": \"1\"\n  }\n}\n"
	claudeJSON := filepath.Join(home, ".claude.json")
	for path, text := range map[string]string{settings: settingsText, claudeJSON: "{\n  \"numStartups\": 1,\n  \"hasCompletedOnboarding\": true\n}\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sc := &script{dir: filepath.Join(work, "data")}
	sc.writeFiles(t)
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: sc.reply, APIKey: "dummy-key"})

	mark := time.Now()
	phase := func(name string) {
		d := time.Since(mark)
		t.Logf("firsthour: %-14s %6.1fs", name, d.Seconds())
		mark = time.Now()
	}
	start := time.Now()

	// Install.
	t.Cleanup(func() {
		if b, err := exec.Command("dpkg", "-P", "smarter-compact").CombinedOutput(); err != nil {
			t.Errorf("dpkg -P smarter-compact: %v\n%s", err, b)
		}
		if _, err := os.Stat(bin); err == nil {
			t.Errorf("%s is left after dpkg -P", bin)
		}
	})
	if b, err := exec.Command("dpkg", "-i", deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i %s: %v\n%s", deb, err, b)
	}
	phase("install")

	// Service up: serve in the background on the user's HOME.
	srv := startPackagedServe(t, bin, root, home,
		"SMARTER_COMPACT_UPSTREAM_ANTHROPIC="+fake.URL, "CONTEXT_TRIM_AT_TOKENS="+strconv.Itoa(trimAtTokens))
	phase("service up")

	// Wire Claude Code.
	installEnv := []string{"HOME=" + home, "CONTEXT_PROXY_PORT=" + strconv.Itoa(srv.port)}
	r := runBin(t, bin, work, installEnv, "install", "--agents", "claude-code")
	if r.err != nil || !strings.Contains(r.stdout, "claude-code: wired") {
		t.Fatalf("install --agents claude-code:\n%s", r)
	}
	phase("wire")

	// The agent, turn by turn, until serve counts a trim.
	env := []string{"HOME=" + home, "ANTHROPIC_API_KEY=dummy-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"SMARTER_COMPACT_STATE_DIR=" + srv.stateDir}
	trimmed := false
	for i, turn := range e2eTurns {
		run := runAgent(t, 3*time.Minute, claude, work, env, claudeTurnArgs(i, turn.prompt)...)
		if run.err != nil {
			t.Fatalf("turn %d: claude failed:\n%s\n%s", i+1, run, diagnose(fake, srv))
		}
		if trims(t, srv, home) > 0 {
			trimmed = true
			break
		}
	}
	if !trimmed {
		t.Fatalf("no trim after %d turns at CONTEXT_TRIM_AT_TOKENS=%d\n%s", len(e2eTurns), trimAtTokens, diagnose(fake, srv))
	}
	phase("agent to trim")
	total := time.Since(start)
	t.Logf("firsthour: %-14s %6.1fs", "total", total.Seconds())
	if total > firstHourLimit {
		t.Errorf("package install to first trim took %s, over issue 15's %s", total.Round(100*time.Millisecond), firstHourLimit)
	}

	// uninstall gives the user's files back byte for byte.
	r = runBin(t, bin, work, installEnv, "uninstall", "--agents", "claude-code")
	if r.err != nil {
		t.Fatalf("uninstall:\n%s", r)
	}
	if b, err := os.ReadFile(settings); err != nil || string(b) != settingsText {
		t.Errorf("~/.claude/settings.json after uninstall (%v):\n%s\nbefore install:\n%s", err, b, settingsText)
	}
	var state struct {
		MCPServers map[string]any `json:"mcpServers"`
	}
	if b, err := os.ReadFile(claudeJSON); err != nil || json.Unmarshal(b, &state) != nil {
		t.Errorf("~/.claude.json after uninstall: %v\n%s", err, b)
	} else if state.MCPServers["smarter-compact"] != nil {
		t.Errorf("~/.claude.json still has our MCP server: %v", state.MCPServers)
	}
}

// startPackagedServe runs the installed bin's `serve --no-tray` with HOME at home and its
// state and empty config under dir, env after; it stops when the test ends.
func startPackagedServe(t *testing.T, bin, dir, home string, env ...string) *serveProc {
	t.Helper()
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := launchServe(t, bin, dir, []string{"serve", "--no-tray"}, []string{"HOME=" + home, "SMARTER_COMPACT_CONFIG=" + config}, env)
	logServeOnFailure(t, srv)
	return srv
}

// trims is today's trim count from serve's GET /api/status, with the API token serve keeps
// under home's config directory (~/.config/smarter-compact/api-token).
func trims(t *testing.T, srv *serveProc, home string) int64 {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(home, ".config", "smarter-compact", "api-token"))
	if err != nil {
		t.Fatalf("serve's API token: %v", err)
	}
	req, err := http.NewRequest("GET", srv.url()+"/api/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/status: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Today *struct {
			Trims int64 `json:"trims"`
		} `json:"today"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/status: %d, %v", resp.StatusCode, err)
	}
	if body.Today == nil {
		return 0
	}
	return body.Today.Trims
}
