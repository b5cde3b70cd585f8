package installer

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckAgentsBinaries: after Install with an executable that prints this version, every
// agent's named binaries are found (Claude Code's hooks and MCP server, Codex's MCP server,
// OpenCode's MCP server and plugin) and judged ok; removed, each agent fails with the
// install command that fixes it.
func TestCheckAgentsBinaries(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in binary is a shell script")
	}
	home := t.TempDir()
	for _, d := range []string{".claude", ".codex", ".config/opencode"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(t.TempDir(), "my bin", "smarter-compact")
	if err := os.MkdirAll(filepath.Dir(exe), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho 'smarter-compact 1.2.3 (test)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := Env{Home: home, Port: 4100, Exe: exe, StateDir: filepath.Join(home, "state"), Now: time.Now}
	for _, a := range Install(env, Agents(testPlugin), false).Agents {
		if a.Err != nil {
			t.Fatal(a.Err)
		}
	}
	opts := CheckOptions{Port: 4100, Version: "smarter-compact 1.2.3", HealthHeader: "X-Smarter-Compact", StartAdvice: "start it"}
	binaries := func() map[string]Finding {
		out := map[string]Finding{}
		for _, f := range CheckAgents(context.Background(), env, opts) {
			if strings.Contains(f.Message, " run "+exe+": ") {
				out[f.Name] = f
			}
		}
		return out
	}
	got := binaries()
	wheres := map[string][]string{
		"claude-code": {"the hooks (", "the MCP server (" + filepath.Join(home, ".claude.json")},
		"codex":       {"the MCP server (" + filepath.Join(home, ".codex", "config.toml")},
		"opencode":    {"the MCP server (", "the plugin (" + filepath.Join(home, ".config", "opencode", "plugin", "smarter-compact.js")},
	}
	for agent, want := range wheres {
		f, ok := got[agent]
		if !ok || f.Status != CheckOK || !strings.Contains(f.Message, "this version (smarter-compact 1.2.3)") {
			t.Errorf("%s: %+v, want its binary ok", agent, f)
		}
		for _, w := range want {
			if !strings.Contains(f.Message, w) {
				t.Errorf("%s: %q does not name %q", agent, f.Message, w)
			}
		}
	}
	opts.Version = "smarter-compact 1.3.0"
	for agent, f := range binaries() {
		if f.Status != CheckFail || !strings.Contains(f.Message, "it is smarter-compact 1.2.3, this is smarter-compact 1.3.0") {
			t.Errorf("%s with another version: %+v", agent, f)
		}
	}
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	got = binaries()
	for _, agent := range slices.Sorted(maps.Keys(wheres)) {
		f := got[agent]
		if f.Status != CheckFail || !strings.Contains(f.Message, "does not exist") || !strings.Contains(f.Fix, "'smarter-compact install --agents "+agent+"'") {
			t.Errorf("%s with the binary removed: %+v", agent, f)
		}
	}
}

// TestUnquoteShell: shellQuote's inverse, for the paths doctor reads back from the hooks.
func TestUnquoteShell(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/opt/smarter-compact", "/home/a b/$x/`y`/\"q\"/back\\slash", `C:\Users\me\smarter-compact.exe`} {
		want := p
		if windowsPath(p) {
			want = strings.ReplaceAll(p, `\`, "/")
		}
		if got := unquoteShell(shellQuote(p)); got != want {
			t.Errorf("unquoteShell(shellQuote(%q)) = %q, want %q", p, got, want)
		}
	}
}
