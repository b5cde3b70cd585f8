package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// recordingWirer is the installer as the wire page sees it, recording what it was asked;
// app's test (TestWirePageAppliesAndUndoes) drives the real installer.
type recordingWirer struct {
	plans   []WirePlan
	planErr error
	runErr  error
	calls   []string
}

func (w *recordingWirer) Plan(context.Context) ([]WirePlan, error) { return w.plans, w.planErr }

func (w *recordingWirer) Install(_ context.Context, agents []string) (string, error) {
	w.calls = append(w.calls, "install "+strings.Join(agents, ","))
	return "claude-code: wired\n", w.runErr
}

func (w *recordingWirer) Uninstall(_ context.Context, agents []string) (string, error) {
	w.calls = append(w.calls, "uninstall "+strings.Join(agents, ","))
	return "claude-code: unwired\n", w.runErr
}

func wireHarness(t *testing.T, w Wirer) *harness {
	t.Helper()
	h := newHarness(t)
	h.srv.wirer = w
	return h
}

func TestWirePage(t *testing.T) {
	w := &recordingWirer{plans: []WirePlan{
		{Agent: "claude-code", Wiring: WiringNotWired, Detail: "~/.claude/settings.json", InstallDiff: "--- a\n+++ a\n+<b>\"x\"</b>\n", InstallFiles: []string{"/h/.claude/settings.json"}},
		{Agent: "codex", Wiring: WiringWired, UninstallDiff: "--- c\n+++ c\n-x\n"},
		{Agent: "opencode", Wiring: WiringNotInstalled, Detail: "looked for ~/.config/opencode"},
	}}
	h := wireHarness(t, w)
	d := doc(t, h.get("/ui/wire"), http.StatusOK)
	if cur, _ := one(t, d, "nav-wire").Attr("aria-current"); cur != "page" {
		t.Errorf("nav aria-current %q", cur)
	}
	// The diff is shown as text, escaped, exactly.
	if got := one(t, d, "wire-diff-claude-code").Text(); got != w.plans[0].InstallDiff {
		t.Errorf("diff %q, want %q", got, w.plans[0].InstallDiff)
	}
	for id, want := range map[string]string{
		"wire-meaning-claude-code": "Claude Code is installed but not wired: its requests go straight to its model API, so nothing is stored or trimmed.",
		"wire-meaning-codex":       "Codex CLI is wired: its requests go through smarter-compact",
		"wire-meaning-opencode":    "OpenCode is not installed on this machine",
	} {
		if got := text(one(t, d, id)); !strings.Contains(got, want) {
			t.Errorf("%s: %q lacks %q", id, got, want)
		}
	}
	if d.Find(testID("wire-apply-codex")).Length() != 0 || d.Find(testID("wire-apply-opencode")).Length() != 0 {
		t.Error("a Wire button for an agent with nothing to change")
	}
	one(t, d, "wire-undo-codex")
	if d.Find(testID("wire-undo-claude-code")).Length() != 0 {
		t.Error("an Undo button for an agent with nothing to undo")
	}
	if d.Find(testID("wire-all")).Length() != 0 {
		t.Error("Wire all with one agent to wire")
	}

	// A button: the wirer runs, the page shows its lines.
	csrf, _ := d.Find(testID("wire-apply-claude-code") + ` input[name="csrf"]`).Attr("value")
	res := h.post("/ui/wire/install", url.Values{"agent": {"claude-code"}, "csrf": {csrf}}, nil)
	if res.Code != http.StatusSeeOther {
		t.Fatalf("POST install: %d %s", res.Code, res.Body)
	}
	loc := res.Header().Get("Location")
	d = doc(t, h.get(loc), http.StatusOK)
	if got := text(one(t, d, "wire-report")); !strings.Contains(got, "Wired claude-code") || !strings.Contains(got, "claude-code: wired") {
		t.Errorf("report %q", got)
	}
	res = h.post("/ui/wire/uninstall", url.Values{"agent": {"all"}, "csrf": {csrf}}, nil)
	if res.Code != http.StatusSeeOther {
		t.Fatalf("POST uninstall: %d", res.Code)
	}
	if got := strings.Join(w.calls, "; "); got != "install claude-code; uninstall claude-code,codex,opencode" {
		t.Errorf("calls %q", got)
	}

	// Refused: no token, a foreign origin, an unknown agent; the wirer is not called.
	w.calls = nil
	for name, r := range map[string]struct {
		form   url.Values
		header http.Header
		want   int
	}{
		"no token":       {url.Values{"agent": {"codex"}}, nil, http.StatusForbidden},
		"wrong token":    {url.Values{"agent": {"codex"}, "csrf": {"x"}}, nil, http.StatusForbidden},
		"foreign origin": {url.Values{"agent": {"codex"}, "csrf": {csrf}}, http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		"unknown agent":  {url.Values{"agent": {"cursor"}, "csrf": {csrf}}, nil, http.StatusBadRequest},
	} {
		if res := h.post("/ui/wire/install", r.form, r.header); res.Code != r.want {
			t.Errorf("%s: %d, want %d", name, res.Code, r.want)
		}
	}
	if len(w.calls) != 0 {
		t.Errorf("refused requests reached the installer: %v", w.calls)
	}

	// A failed run says why on the page.
	w.runErr = errors.New("codex: config.toml:3: expected '='")
	res = h.post("/ui/wire/install", url.Values{"agent": {"codex"}, "csrf": {csrf}}, nil)
	d = doc(t, h.get(res.Header().Get("Location")), http.StatusOK)
	if got := text(one(t, d, "wire-report")); !strings.Contains(got, "install of codex failed: codex: config.toml:3: expected '='") {
		t.Errorf("failure report %q", got)
	}
}

func TestWirePageWithoutWirer(t *testing.T) {
	h := newHarness(t)
	d := doc(t, h.get("/ui/wire"), http.StatusOK)
	if got := text(one(t, d, "wire-problem")); !strings.Contains(got, "smarter-compact install --dry-run") {
		t.Errorf("problem %q", got)
	}
}

// TestOverviewFirstSteps checks the empty dashboard says what to do next, and that the
// panel goes once a session is stored.
func TestOverviewFirstSteps(t *testing.T) {
	h := newHarness(t)
	d := doc(t, h.get("/"), http.StatusOK)
	step := text(one(t, d, "first-step-wire"))
	if !strings.Contains(step, "Installed but not wired: codex") {
		t.Errorf("first step %q does not name the agent to wire", step)
	}
	if href, _ := one(t, d, "first-step-wire-link").Attr("href"); href != "/ui/wire" {
		t.Errorf("first step links %q", href)
	}
	if got := text(one(t, d, "agent-wire-codex")); !strings.Contains(got, "Installed, but its requests do not come here. Wire it") {
		t.Errorf("codex's card says %q", got)
	}
	if d.Find(testID("agent-wire-claude-code")).Length() != 0 || d.Find(testID("agent-wire-opencode")).Length() != 0 {
		t.Error("a wired or not installed agent's card offers to wire it")
	}
	if got := text(one(t, d, "first-steps")); !strings.Contains(got, "Not installed here: opencode") || !strings.Contains(got, "smarter-compact doctor") {
		t.Errorf("first steps %q", got)
	}
	seedSession(t, h.root, "ses-1", "codex", "/home/dev/p", textRows(2, "r %d"))
	d = doc(t, h.get("/"), http.StatusOK)
	if d.Find(testID("first-steps")).Length() != 0 {
		t.Error("the first steps are still shown with a session stored")
	}
}
