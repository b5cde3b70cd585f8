//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// TestE2EInstall checks that the real CLIs read what `smarter-compact install` wrote (issue 5,
// Show): in a temporary HOME with Claude Code, Codex and OpenCode "installed" (their config
// directories exist, holding the user's own settings), `install` wires all three at a running
// serve; then `claude -p`, `codex exec` and `opencode run`, given no base URL of ours, send
// their requests through serve to the strict fake model, and the hooks and the OpenCode plugin
// register the sessions. `uninstall` then puts the config files back byte for byte, and the
// same runs no longer reach serve: they try the default API hosts, which the test's stand-in
// for the internet refuses.
func TestE2EInstall(t *testing.T) {
	claude := claudeCLI.find(t)
	codex := codexCLI.find(t)
	opencode := openCodeCLI.find(t)
	claudeCLI.logVersion(t, claude)
	codexCLI.logVersion(t, codex)
	openCodeCLI.logVersion(t, opencode)
	bin := buildBinary(t)

	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: installReply, APIKey: "dummy-key"})
	srv := startServe(t, bin,
		"SMARTER_COMPACT_UPSTREAM_ANTHROPIC="+fake.URL,
		"SMARTER_COMPACT_UPSTREAM_OPENAI="+fake.URL+"/v1",
		"SMARTER_COMPACT_UPSTREAM_CODEX="+fake.URL+"/v1")
	out := startOutside(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", diagnose(fake, srv))
		}
	})

	root := t.TempDir()
	home := filepath.Join(root, "home")
	work := filepath.Join(root, "work")
	xdg := filepath.Join(home, ".config")
	codexHome := filepath.Join(home, ".codex")
	openCodeDir := filepath.Join(xdg, "opencode")
	for _, d := range []string{work, filepath.Join(home, ".claude"), codexHome, openCodeDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The user's own settings, which install must keep and uninstall must give back.
	files := map[string]string{
		filepath.Join(home, ".claude", "settings.json"): "{\n  \"permissions\": {\n    \"allow\": [\"Bash(ls:*)\"]\n  },\n  \"env\": {\n    \"DISABLE_AUTOUPDATER\": \"1\"\n  }\n}\n",
		filepath.Join(home, ".claude.json"):             "{\n  \"numStartups\": 1,\n  \"hasCompletedOnboarding\": true\n}\n",
		filepath.Join(codexHome, "config.toml"): "# my Codex settings\nmodel = \"gpt-5-codex\"\napproval_policy = \"never\"\nsandbox_mode = \"workspace-write\"\n" +
			"check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n",
		filepath.Join(openCodeDir, "opencode.jsonc"): "{\n  // my OpenCode settings\n  \"$schema\": \"https://opencode.ai/config.json\",\n" +
			"  \"model\": \"anthropic/claude-sonnet-4-5\",\n  \"autoupdate\": false,\n  \"share\": \"disabled\",\n}\n",
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	seedOpenCodeConfigDir(t, openCodeDir) // no plugin SDK install from the registry
	// Codex's API-key login (auth.json), which requires_openai_auth sends on.
	login := exec.Command(codex, "login", "--with-api-key")
	login.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + codexHome, "TERM=dumb"}
	login.Stdin = strings.NewReader("dummy-key\n")
	if b, err := login.CombinedOutput(); err != nil {
		t.Fatalf("codex login --with-api-key: %v\n%s", err, b)
	}
	before := readTree(t, home)

	installEnv := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + xdg, "CODEX_HOME=" + codexHome, "CONTEXT_PROXY_PORT=" + strconv.Itoa(srv.port)}
	agentsFlag := []string{"--agents", "claude-code,codex,opencode"}

	// --dry-run prints the diffs and writes nothing.
	r := runBin(t, bin, work, installEnv, append([]string{"install", "--dry-run"}, agentsFlag...)...)
	if r.err != nil || !strings.Contains(r.stdout, "dry run: nothing written") || !strings.Contains(r.stdout, "+++ ") {
		t.Fatalf("install --dry-run:\n%s", r)
	}
	if diff := diffTrees(before, readTree(t, home)); diff != "" {
		t.Fatalf("install --dry-run changed files:\n%s", diff)
	}

	r = runBin(t, bin, work, installEnv, append([]string{"install"}, agentsFlag...)...)
	t.Logf("install:\n%s", r.stdout)
	installOut := r.stdout
	for _, a := range []string{"claude-code", "codex", "opencode"} {
		if !strings.Contains(r.stdout, a+": wired") {
			t.Errorf("install did not wire %s:\n%s", a, r)
		}
	}
	if r.err != nil || t.Failed() {
		t.FailNow()
	}
	installed := readTree(t, home)
	settings := installed[filepath.Join(home, ".claude", "settings.json")]
	if strings.Contains(string(settings), "ENABLE_TOOL_SEARCH") {
		t.Errorf("install set ENABLE_TOOL_SEARCH:\n%s", settings)
	}

	// The agents' environment: their credentials and offline switches, the store serve uses
	// (for the hooks and the MCP server), the refusing stand-in for the internet. No base URL.
	agentEnv := append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + xdg, "CODEX_HOME=" + codexHome,
		"SMARTER_COMPACT_STATE_DIR=" + srv.stateDir}, out.env()...)
	claudeEnv := append(slices.Clone(agentEnv), "ANTHROPIC_API_KEY=dummy-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	openCodeEnv := append(slices.Clone(agentEnv), "ANTHROPIC_API_KEY=dummy-key",
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1")
	codexArgs := []string{"exec", "--skip-git-repo-check", "--disable", "plugins", "--disable", "apps", "--json"}
	sessions := filepath.Join(srv.stateDir, "context", "sessions")

	t.Run("claude-code", func(t *testing.T) {
		n := len(fake.Requests())
		run := runAgent(t, 3*time.Minute, claude, work, claudeEnv, "-p", "E2E-INSTALL claude-code")
		if run.err != nil || !strings.Contains(run.stdout, "E2E-INSTALL-OK") {
			t.Fatalf("claude -p:\n%s", run)
		}
		recs := modelCalls(fake.Requests()[n:])
		if len(recs) == 0 {
			t.Fatalf("Claude Code's request did not reach the fake through serve")
		}
		sid, ok := store.SanitizeSID(recs[0].Header.Get("X-Claude-Code-Session-Id"))
		if !ok || !strings.HasPrefix(recs[0].Path, "/v1/messages") {
			t.Fatalf("request %s %s, session header %q", recs[0].Method, recs[0].Path, recs[0].Header.Get("X-Claude-Code-Session-Id"))
		}
		checkRegistration(t, sessions, sid, "claude-code", work)
		checkSessionDB(t, sessions, sid)

		// ToolSearch with our base URL (issue 5, Deliver 2): the installer does not set
		// ENABLE_TOOL_SEARCH, so deferral must survive a loopback ANTHROPIC_BASE_URL.
		var body struct {
			Tools []struct {
				Name         string `json:"name"`
				DeferLoading bool   `json:"defer_loading"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(recs[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		var names []string
		deferred := 0
		for _, tool := range body.Tools {
			names = append(names, tool.Name)
			if tool.DeferLoading {
				deferred++
			}
		}
		mcpNamed := bytes.Contains(recs[0].Body, []byte("mcp__smarter-compact__smart_compact_search"))
		t.Logf("Claude Code through ANTHROPIC_BASE_URL=%s/claude-code: %d tools %q, %d with defer_loading; our MCP tools named in the request: %v (%d bytes)",
			srv.url(), len(names), names, deferred, mcpNamed, len(recs[0].Body))
		if !slices.Contains(names, "ToolSearch") || deferred == 0 {
			t.Errorf("tool search is off with our base URL (no ToolSearch tool or no deferred tool): the installer should set ENABLE_TOOL_SEARCH")
		}
		if !mcpNamed {
			t.Errorf("the request does not name mcp__smarter-compact__smart_compact_search: Claude Code did not start the MCP server from ~/.claude.json")
		}
		for _, tool := range body.Tools {
			if strings.HasPrefix(tool.Name, "mcp__smarter-compact__") && !tool.DeferLoading {
				t.Logf("our MCP tool %s is loaded up front, not deferred", tool.Name)
			}
		}

		// /smarter-compact: the UserPromptSubmit hook sets the force flag and keeps the prompt
		// from the model.
		n = len(fake.Requests())
		run = runAgent(t, 2*time.Minute, claude, work, claudeEnv, "-p", "/smarter-compact", "--continue")
		t.Logf("claude -p /smarter-compact --continue:\n%s", run)
		if _, err := os.Stat(filepath.Join(sessions, sid+".force")); err != nil {
			t.Errorf("/smarter-compact did not set the force flag of session %s: %v", sid, err)
		}
		if calls := modelCalls(fake.Requests()[n:]); len(calls) > 0 {
			t.Errorf("/smarter-compact reached the model (%d requests): the hook did not block it", len(calls))
		}
	})

	t.Run("codex", func(t *testing.T) {
		n := len(fake.Requests())
		run := runAgent(t, 3*time.Minute, codex, work, agentEnv, append(slices.Clone(codexArgs), "E2E-INSTALL codex")...)
		ev := codexEvents(run.stdout)
		if run.err != nil || len(ev.errors) > 0 || !strings.Contains(strings.Join(ev.messages, "\n"), "E2E-INSTALL-OK") {
			t.Fatalf("codex exec (errors %q):\n%s", ev.errors, run)
		}
		recs := modelCalls(fake.Requests()[n:])
		if len(recs) == 0 || !strings.HasSuffix(recs[0].Path, "/responses") {
			t.Fatalf("Codex's request did not reach the fake's /responses through serve: %d calls", len(recs))
		}
		sid, ok := store.SanitizeSID(ev.thread)
		if !ok {
			t.Fatalf("codex printed no thread id:\n%s", run)
		}
		checkSessionDB(t, sessions, sid)
	})

	t.Run("opencode", func(t *testing.T) {
		n := len(fake.Requests())
		run := runAgent(t, 3*time.Minute, opencode, work, openCodeEnv, "run", "--format", "json", "E2E-INSTALL", "opencode")
		ev := openCodeEvents(run.stdout)
		if run.err != nil || len(ev.errors) > 0 || !strings.Contains(strings.Join(ev.texts, "\n"), "E2E-INSTALL-OK") {
			t.Fatalf("opencode run (errors %q):\n%s", ev.errors, run)
		}
		recs := modelCalls(fake.Requests()[n:])
		if len(recs) == 0 {
			t.Fatalf("OpenCode's requests did not reach the fake through serve")
		}
		sid, ok := store.SanitizeSID(ev.session)
		if !ok {
			t.Fatalf("opencode printed no session id:\n%s", run)
		}
		for _, rec := range recs {
			if got := rec.Header.Get("X-Smarter-Compact-Session-Id"); got != ev.session {
				t.Errorf("%s %s: x-smarter-compact-session-id %q, want the plugin's %q", rec.Method, rec.Path, got, ev.session)
			}
		}
		checkRegistration(t, sessions, sid, "opencode", work)
		checkSessionDB(t, sessions, sid)
	})
	if t.Failed() {
		t.FailNow()
	}

	// uninstall: the config files are back, byte for byte.
	r = runBin(t, bin, work, installEnv, append([]string{"uninstall"}, agentsFlag...)...)
	t.Logf("uninstall:\n%s", r.stdout)
	if r.err != nil {
		t.Fatalf("uninstall:\n%s", r)
	}
	after := readTree(t, home)
	for path := range files {
		if path == filepath.Join(home, ".claude.json") {
			continue // Claude Code's own state: it rewrote it during the runs
		}
		if !bytes.Equal(after[path], before[path]) {
			t.Errorf("%s after uninstall:\n%s\nbefore install:\n%s", path, after[path], before[path])
		}
	}
	var state map[string]any
	if err := json.Unmarshal(after[filepath.Join(home, ".claude.json")], &state); err != nil {
		t.Errorf("~/.claude.json after uninstall: %v", err)
	} else if servers, _ := state["mcpServers"].(map[string]any); servers["smarter-compact"] != nil {
		t.Errorf("~/.claude.json still has our MCP server: %v", servers)
	}
	// Every file install created is gone, except smarter-compact's own (its config.toml, the
	// install diffs and snapshots, and the stable copy of the binary the agents ran).
	ours := filepath.Join(xdg, "smarter-compact") + string(filepath.Separator)
	stable := filepath.Join(home, ".local", "bin", "smarter-compact")
	if _, ok := installed[stable]; !ok || !strings.Contains(installOut, "binary: copied "+bin+" to "+stable) {
		t.Errorf("install did not copy %s to %s:\n%s", bin, stable, installOut)
	}
	if !bytes.Contains(settings, []byte(stable)) {
		t.Errorf("settings.json's hooks do not run the stable copy %s:\n%s", stable, settings)
	}
	var kept []string
	for path := range installed {
		if _, had := before[path]; had {
			continue
		}
		_, left := after[path]
		switch {
		case left && path == stable:
			kept = append(kept, path)
		case left && strings.HasPrefix(path, ours):
			kept = append(kept, strings.TrimPrefix(path, ours))
		case left:
			t.Errorf("%s, which install created, is left over after uninstall", path)
		}
	}
	slices.Sort(kept)
	t.Logf("uninstall kept smarter-compact's own files: %q", kept)
	if entries, err := os.ReadDir(filepath.Join(openCodeDir, "plugin")); err == nil {
		t.Logf("OpenCode's plugin/ directory is left after uninstall, with %d entries", len(entries))
	}

	// And the CLIs no longer reach serve: each tries its default API host, which the stand-in
	// for the internet refuses.
	n := len(fake.Requests())
	tried := len(out.attempts())
	var wg sync.WaitGroup
	runs := make([]agentRun, 3)
	for i, f := range []func() agentRun{
		func() agentRun {
			return runAgent(t, 45*time.Second, claude, work, claudeEnv, "-p", "E2E-INSTALL after uninstall")
		},
		func() agentRun {
			return runAgent(t, 45*time.Second, codex, work, agentEnv, append(slices.Clone(codexArgs), "E2E-INSTALL after uninstall")...)
		},
		func() agentRun {
			return runAgent(t, 45*time.Second, opencode, work, openCodeEnv, "run", "--format", "json", "E2E-INSTALL", "after", "uninstall")
		},
	} {
		wg.Go(func() { runs[i] = f() })
	}
	wg.Wait()
	if got := fake.Requests()[n:]; len(got) > 0 {
		var paths []string
		for _, r := range got {
			paths = append(paths, r.Method+" "+r.Path)
		}
		t.Errorf("after uninstall serve still got %d requests: %q", len(got), paths)
	}
	hosts := out.attempts()[tried:]
	t.Logf("after uninstall the CLIs tried (refused): %q", hosts)
	for _, h := range []string{"api.anthropic.com", "api.openai.com"} {
		if !slices.ContainsFunc(hosts, func(s string) bool { return strings.Contains(s, h) }) {
			t.Errorf("no CLI tried %s after uninstall", h)
		}
	}
	for i, name := range []string{"claude", "codex", "opencode"} {
		if runs[i].err == nil && strings.Contains(runs[i].stdout, "E2E-INSTALL-OK") {
			t.Errorf("%s still got the fake's answer after uninstall:\n%s", name, runs[i])
		}
	}
}

// installReply answers every model call with a short text (after a thinking block when the
// request turns thinking on).
func installReply(req *fakeupstream.Request) fakeupstream.Reply {
	c := fakeupstream.ThinkingFirst(req, "Answering the install check.")
	return fakeupstream.Reply{Content: append(c, fakeupstream.Text("E2E-INSTALL-OK"))}
}

// modelCalls keeps the model calls (the three formats) of recs.
func modelCalls(recs []fakeupstream.Recorded) []fakeupstream.Recorded {
	var out []fakeupstream.Recorded
	for _, r := range recs {
		if r.Format != "" {
			out = append(out, r)
		}
	}
	return out
}

// checkRegistration waits briefly for sessions/<sid>.json (the OpenCode plugin runs the hook
// without waiting for it) and checks its agent and cwd.
func checkRegistration(t *testing.T, sessions, sid, agent, cwd string) {
	t.Helper()
	path := filepath.Join(sessions, sid+".json")
	var b []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, err = os.ReadFile(path); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		entries, _ := os.ReadDir(sessions)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("no registration for %s session %s: %v (sessions/ holds %q)", agent, sid, err, names)
		return
	}
	var reg store.Registration
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Errorf("registration %s: %v", b, err)
		return
	}
	want, _ := filepath.EvalSymlinks(cwd)
	got, _ := filepath.EvalSymlinks(reg.Cwd)
	if reg.SessionID != sid || reg.Agent != agent || got != want || reg.RegisteredAt == "" {
		t.Errorf("registration %s, want session %s, agent %s, cwd %s", b, sid, agent, cwd)
	}
}

// checkSessionDB checks that serve stored the session: sessions/<sid>.db exists.
func checkSessionDB(t *testing.T, sessions, sid string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sessions, sid+".db")); err != nil {
		t.Errorf("serve stored no database for session %s: %v", sid, err)
	}
}

// binRun is one finished run of the smarter-compact binary.
type binRun struct {
	args           []string
	stdout, stderr string
	err            error
}

func (r binRun) String() string {
	return fmt.Sprintf("smarter-compact %q: %v\nstdout:\n%s\nstderr:\n%s", r.args, r.err, r.stdout, r.stderr)
}

// runBin runs the smarter-compact binary with PATH and env only.
func runBin(t *testing.T, bin, cwd string, env []string, args ...string) binRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = cwd
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return binRun{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// readTree returns every regular file under dir with its bytes.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[path] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffTrees names the files added, removed or changed from a to b.
func diffTrees(a, b map[string][]byte) string {
	var lines []string
	for p, x := range a {
		y, ok := b[p]
		switch {
		case !ok:
			lines = append(lines, "removed "+p)
		case !bytes.Equal(x, y):
			lines = append(lines, "changed "+p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			lines = append(lines, "added "+p)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
