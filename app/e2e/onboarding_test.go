//go:build e2e

package e2e_test

// The browser test of onboarding (issue 15, Deliver 4 and "Show"): headless Chromium against
// the real `smarter-compact serve` with a home that has Claude Code and Codex configs. The
// empty overview says what to do next; "Wire my agents" shows the diff `install --dry-run`
// prints, applies it with one click and undoes it with another, after which every file is
// back byte for byte; the sessions list names a session by its project and first prompt.
// Screenshots at 1280 and 420 pixels of the empty overview, the wire page and a session page.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const (
	onboardSID     = "3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	onboardProject = "shop-frontend"
	onboardPrompt  = "E2E-ONBOARD: fix the flaky checkout test"
)

func TestE2EOnboarding(t *testing.T) {
	chromium := findChromium(t)
	shots := artifactDir(t, "onboarding")
	bin := buildBinary(t)
	fake, srv := serveWithFake(t, bin, dashReply)
	home := filepath.Join(filepath.Dir(srv.stateDir), "home")
	files := map[string]string{
		filepath.Join(home, ".claude", "settings.json"): "{\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}\n",
		filepath.Join(home, ".codex", "config.toml"):    "# my codex settings\nmodel = \"gpt-5\" # keep this comment\n\n[tui]\nnotifications = true\n",
	}
	for path, text := range files {
		makeDirs(t, filepath.Dir(path))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(when string) {
		t.Helper()
		for path, text := range files {
			if got, _ := os.ReadFile(path); string(got) != text {
				t.Errorf("%s: %s is not byte for byte what it was:\n%q\nwant\n%q", when, path, got, text)
			}
		}
	}

	// What the CLI would apply, with serve's environment.
	dry := exec.Command(bin, "install", "--dry-run")
	dry.Env = srv.cmd.Env
	out, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("install --dry-run: %v\n%s", err, out)
	}
	cliDiff := string(out)

	b := openBrowser(t, chromium, srv.url(), shots)
	// shots saves the page at 1280 and at 420 pixels wide; at 420 nothing may stick out.
	both := func(name string) {
		t.Helper()
		b.do("viewport 1280", chromedp.EmulateViewport(1280, 800))
		b.shot(name + "-1280")
		b.do("viewport 420", chromedp.EmulateViewport(420, 800))
		b.checkNoHorizontalScroll(name + " at 420")
		b.shot(name + "-420")
		b.do("viewport 1280", chromedp.EmulateViewport(1280, 800))
	}
	b.do("viewport 1280×800", chromedp.EmulateViewport(1280, 800))

	// 1. The empty overview says what to do next, and links the wire page.
	b.at("empty overview")
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="first-steps"]`)))
	// The service reads the agents' files again every 10 s (the configs were written after
	// it started); the overview's 1 s poll shows the change.
	b.waitJS("the first step names the agents to wire", 20*time.Second,
		`(document.querySelector('[data-testid="first-step-wire"]')?.textContent ?? '').replace(/\s+/g, ' ').includes('Installed but not wired: claude-code, codex')`)
	both("overview-empty")

	// 2. The wire page: each agent's state in words, the CLI's diff.
	b.at("wire page")
	b.do("open Wire my agents", chromedp.Click(chromedp.CSS(`[data-testid="first-step-wire-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="wire-agent-claude-code"]`)))
	for agent, want := range map[string]string{"claude-code": "not wired", "codex": "not wired", "opencode": "not installed"} {
		if got := b.text(`[data-testid="wire-state-` + agent + `"]`); got != want {
			b.fail("wire page", fmt.Errorf("%s shows %q, want %q", agent, got, want))
		}
	}
	for _, agent := range []string{"claude-code", "codex"} {
		diff := b.textContent(`[data-testid="wire-diff-` + agent + `"]`)
		if !strings.Contains(diff, "+++ ") || !strings.Contains(cliDiff, diff) {
			b.fail("wire page", fmt.Errorf("%s: the page's diff is not the one install --dry-run prints:\n%s\n--- CLI:\n%s", agent, diff, cliDiff))
		}
	}
	unchanged("after showing the wire page")
	both("wire")

	// 3. Wire all, one click: the files point at serve, the page says wired.
	b.at("wire all")
	b.do("click Wire all", chromedp.Click(chromedp.CSS(`[data-testid="wire-all"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="wire-report"]`)))
	if r := b.text(`[data-testid="wire-report"]`); !strings.Contains(r, "claude-code: wired") || !strings.Contains(r, "codex: wired") {
		b.fail("wire all", fmt.Errorf("report %q", r))
	}
	for path, text := range files {
		if got, _ := os.ReadFile(path); string(got) == text || !strings.Contains(string(got), srv.url()) {
			b.fail("wire all", fmt.Errorf("%s does not point at %s after Wire all:\n%s", path, srv.url(), got))
		}
	}
	for _, agent := range []string{"claude-code", "codex"} {
		if got := b.text(`[data-testid="wire-state-` + agent + `"]`); got != "wired" {
			b.fail("wire all", fmt.Errorf("%s shows %q after Wire all, want wired", agent, got))
		}
	}
	both("wire-after-wiring")

	// 4. Undo each: every file back byte for byte.
	for _, agent := range []string{"codex", "claude-code"} {
		b.at("undo " + agent)
		b.do("click Undo for "+agent, chromedp.Click(chromedp.CSS(`[data-testid="wire-undo-`+agent+`"] button`)))
		// The page before the click has a report too: wait for the new one.
		b.waitJS("the report of undo "+agent, 10*time.Second,
			`(document.querySelector('[data-testid="wire-report"]')?.textContent ?? '').includes('Undone: `+agent+` no longer wired')`)
	}
	unchanged("after Undo")

	// 5. A session, registered by the hook as Claude Code's SessionStart does: listed by
	// its project and first prompt; its page.
	hook := exec.Command(bin, "hook", "session-start")
	hook.Env = srv.cmd.Env
	hook.Stdin = strings.NewReader(fmt.Sprintf(`{"session_id":%q,"cwd":%q,"hook_event_name":"SessionStart","source":"startup"}`,
		onboardSID, filepath.Join(home, "src", onboardProject)))
	if out, err := hook.CombinedOutput(); err != nil {
		t.Fatalf("hook session-start: %v\n%s", err, out)
	}
	s := &claudeSession{t: t, base: srv.url() + "/claude-code", sid: onboardSID}
	s.send([]map[string]any{
		{"type": "text", "text": "<system-reminder>context the agent adds</system-reminder>"},
		{"type": "text", "text": onboardPrompt},
	})
	s.send("E2E-ONBOARD 2: and run it twice.")
	b.at("sessions")
	row := `[data-testid="session-row"][data-session="` + onboardSID + `"]`
	ok := waitFor(10*time.Second, func() bool {
		b.do("load the sessions", chromedp.Navigate(srv.url()+"/ui/sessions"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="sessions-table"]`)))
		n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+row+`').length`))
		return err == nil && n == 1
	})
	if !ok {
		b.fail("sessions", fmt.Errorf("no row for session %s", onboardSID))
	}
	if got := b.text(row + ` [data-testid="session-project"]`); got != onboardProject {
		b.fail("sessions", fmt.Errorf("project %q, want %q", got, onboardProject))
	}
	if got := b.text(row + ` [data-testid="session-prompt"]`); got != onboardPrompt {
		b.fail("sessions", fmt.Errorf("first prompt %q, want %q", got, onboardPrompt))
	}
	both("sessions")
	b.at("session page")
	b.do("open the session", chromedp.Click(chromedp.CSS(row+` [data-testid="session-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-sessions"]`)))
	if loc := b.location(); !strings.HasSuffix(loc, "/ui/sessions/"+onboardSID) {
		b.fail("session page", fmt.Errorf("the link went to %s", loc))
	}
	both("session")

	// 6. With a session stored, the overview has no first steps.
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="stat-trims"]`)))
	if n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="first-steps"]').length`)); n != 0 {
		b.fail("overview", fmt.Errorf("the first steps are still shown with a session stored"))
	}
	b.checkConsole()
	if rej := fake.Rejections(); len(rej) > 0 {
		t.Fatalf("the fake upstream rejected %d requests: %+v", len(rej), rej)
	}
}
