package app

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// installSystem is a machine with Claude Code installed (its settings.json pointing at a
// gateway), neither Codex nor OpenCode, and nothing listening on the proxy's port.
func installSystem(t *testing.T) (sys system, stdout *syncBuffer, settings, before string) {
	t.Helper()
	sys, stdout, _ = testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(freePort(t))})
	sys.exe = filepath.Join(t.TempDir(), "bin", "smarter-compact")
	settings = filepath.Join(sys.home, ".claude", "settings.json")
	before = "{\n  // mine\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"https://gw.example/anthropic/\"\n  },\n  \"model\": \"opus\"\n}\n"
	if err := os.MkdirAll(filepath.Dir(settings), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	return sys, stdout, settings, before
}

// snapshot returns every file under the directories with its bytes.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			out[path] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestInstallDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	sys, stdout, _, _ := installSystem(t)
	before := snapshot(t, sys.home, sys.configDir)
	if err := run(t.Context(), []string{"install", "--dry-run", "--service"}, sys); err != nil {
		t.Fatalf("install --dry-run: %v\n%s", err, stdout)
	}
	if after := snapshot(t, sys.home, sys.configDir); !maps.Equal(before, after) {
		t.Errorf("--dry-run changed files:\nbefore %v\nafter %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	out := stdout.String()
	wantIn(t, "stdout", out, []string{
		"claude-code: would wire\n",
		"  would write " + filepath.Join(sys.home, ".claude", "settings.json") + "\n",
		"codex: ", "opencode: ", "not installed",
		"+++ ", "+    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:",
		`claude-code: chained to its previous base URL: [upstream.agents.claude-code] anthropic = "https://gw.example/anthropic"`,
		"would write those keys to " + filepath.Join(sys.configDir, "smarter-compact", "config.toml"),
		"service: would register the login service (smarter-compact service install)\n",
		"dry run: nothing written\n",
	})
}

func TestInstallUninstall(t *testing.T) {
	t.Parallel()
	sys, stdout, settings, before := installSystem(t)
	if err := run(t.Context(), []string{"install", "--agents", "claude-code"}, sys); err != nil {
		t.Fatalf("install: %v\n%s", err, stdout)
	}
	out := stdout.String()
	config := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	wantIn(t, "stdout", out, []string{
		"claude-code: wired\n",
		"  wrote " + settings + "\n",
		"wrote those keys to " + config,
		"the service does not answer at http://127.0.0.1:",
		"smarter-compact service install",
	})
	if strings.Contains(out, "codex") {
		t.Errorf("--agents claude-code reported codex:\n%s", out)
	}
	got, _ := os.ReadFile(settings)
	if !strings.Contains(string(got), "// mine") || !strings.Contains(string(got), sys.exe) {
		t.Errorf("settings.json after install:\n%s", got)
	}
	cfg, err := LoadConfig(config, true, env{}.get)
	if err != nil {
		t.Fatalf("config.toml after install: %v", err)
	}
	if got := cfg.Proxy.AgentUpstreams["claude-code"]["anthropic"]; got != "https://gw.example/anthropic" || cfg.Proxy.Upstreams["anthropic"] != "https://api.anthropic.com" {
		t.Errorf("[upstream.agents.claude-code] anthropic = %q, [upstream] anthropic = %q: want the chained gateway for Claude Code only", got, cfg.Proxy.Upstreams["anthropic"])
	}
	if fi, err := os.Stat(config); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.toml: %v, mode %v", err, fi.Mode())
	}

	// Idempotent.
	stdout2 := new(syncBuffer)
	sys.stdout = stdout2
	if err := run(t.Context(), []string{"install", "--agents", "claude-code"}, sys); err != nil {
		t.Fatalf("second install: %v\n%s", err, stdout2)
	}
	if !strings.Contains(stdout2.String(), "claude-code: already wired, nothing to change") {
		t.Errorf("second install:\n%s", stdout2)
	}

	// Uninstall, dry run first.
	stdout3 := new(syncBuffer)
	sys.stdout = stdout3
	wired := snapshot(t, sys.home, sys.configDir)
	if err := run(t.Context(), []string{"uninstall", "--dry-run"}, sys); err != nil {
		t.Fatalf("uninstall --dry-run: %v\n%s", err, stdout3)
	}
	if !maps.Equal(wired, snapshot(t, sys.home, sys.configDir)) || !strings.Contains(stdout3.String(), "dry run: nothing written") {
		t.Errorf("uninstall --dry-run wrote files or did not say so:\n%s", stdout3)
	}
	if err := run(t.Context(), []string{"uninstall"}, sys); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, stdout3)
	}
	wantIn(t, "uninstall output", stdout3.String(), []string{
		"claude-code: unwired",
		"  restored " + settings + "\n",
		"  removed " + filepath.Join(sys.home, ".claude.json") + " (install had created it)\n",
	})
	if _, err := os.Stat(filepath.Join(sys.home, ".claude.json")); err == nil {
		t.Error("~/.claude.json, which install created, is still there")
	}
	if got, _ := os.ReadFile(settings); string(got) != before {
		t.Errorf("settings.json after uninstall:\n%s\nwant\n%s", got, before)
	}
}

func TestInstallErrors(t *testing.T) {
	t.Parallel()
	t.Run("unknown agent", func(t *testing.T) {
		t.Parallel()
		sys, _, _, _ := installSystem(t)
		for _, cmd := range []string{"install", "uninstall"} {
			err := run(t.Context(), []string{cmd, "--agents", "claude-code,cursor"}, sys)
			if ExitCode(err) != 2 || !strings.Contains(err.Error(), `unknown agent "cursor": use claude-code, codex, opencode`) {
				t.Errorf("%s: err %v", cmd, err)
			}
		}
	})
	t.Run("broken file", func(t *testing.T) {
		t.Parallel()
		sys, stdout, settings, before := installSystem(t)
		codexConfig := filepath.Join(sys.home, ".codex", "config.toml")
		if err := os.MkdirAll(filepath.Dir(codexConfig), 0o700); err != nil {
			t.Fatal(err)
		}
		const broken = "model = \"gpt-5\"\n[model_providers\n"
		if err := os.WriteFile(codexConfig, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		err := run(t.Context(), []string{"install"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), codexConfig) || !strings.Contains(err.Error(), "smarter-compact install --agents codex") {
			t.Fatalf("err %v, want exit 1 naming %s and how to retry\n%s", err, codexConfig, stdout)
		}
		// The cause is said once: on stdout with the agent's line, or in the error.
		if all := stdout.String() + err.Error(); strings.Count(all, codexConfig) != 1 {
			t.Errorf("the broken file is named %d times, want once:\n%s", strings.Count(all, codexConfig), all)
		}
		if got, _ := os.ReadFile(codexConfig); string(got) != broken {
			t.Errorf("the broken file was changed: %q", got)
		}
		// The other agents are still wired.
		if got, _ := os.ReadFile(settings); string(got) == before || !strings.Contains(stdout.String(), "claude-code: wired") {
			t.Errorf("claude-code was not wired next to the failed codex:\n%s", stdout)
		}
	})
	t.Run("no home", func(t *testing.T) {
		t.Parallel()
		sys, _, _, _ := installSystem(t)
		sys.home = ""
		if err := run(t.Context(), []string{"install"}, sys); ExitCode(err) != 1 || !strings.Contains(err.Error(), "home directory") {
			t.Errorf("err %v", err)
		}
	})
}
