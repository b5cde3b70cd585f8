package app

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// installSystem is a machine with Claude Code installed (its settings.json pointing at a
// gateway), neither Codex nor OpenCode, and nothing listening on the proxy's port.
func installSystem(t *testing.T) (sys system, stdout *syncBuffer, settings, before string) {
	t.Helper()
	sys, stdout, _ = testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(freePort(t)), "LOCALAPPDATA": t.TempDir()})
	sys.exe = filepath.Join(t.TempDir(), "bin", "smarter-compact")
	fakeBinary(t, sys.exe, version)
	settings = filepath.Join(sys.home, ".claude", "settings.json")
	before = "{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"https://gw.example/anthropic/\"\n  },\n  \"model\": \"opus\"\n}\n"
	writeTestFile(t, settings, before)
	return sys, stdout, settings, before
}

// fakeBinary writes an executable at path that prints what `smarter-compact version` of
// version v prints (a shell script: the tests that run it skip on Windows).
func fakeBinary(t *testing.T, path, v string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho 'smarter-compact " + v + " (test build)'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// stablePath is where install copies a binary that is not in a package's folder, on this
// test's machine (installer.StableExe).
func stablePath(sys system) string {
	if runtime.GOOS == "windows" {
		return sys.getenv("LOCALAPPDATA") + `\Programs\Smarter Compact\smarter-compact.exe`
	}
	return filepath.Join(sys.home, ".local", "bin", "smarter-compact")
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
		"binary: would copy " + sys.exe + " to " + stablePath(sys) + ", which the agents and the login service would run\n",
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
	cfgFile := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	wantIn(t, "stdout", out, []string{
		"claude-code: wired\n",
		"  wrote " + settings + "\n",
		"wrote those keys to " + cfgFile,
		"the service does not answer at http://127.0.0.1:",
		startAdvice(t.Context(), sys, ""),
	})
	if strings.Contains(out, "codex") {
		t.Errorf("--agents claude-code reported codex:\n%s", out)
	}
	got, _ := os.ReadFile(settings)
	if !strings.Contains(string(got), `"model": "opus"`) || !strings.Contains(string(got), stablePath(sys)) || strings.Contains(string(got), sys.exe) {
		t.Errorf("settings.json after install, want the hooks to run %s, not %s:\n%s", stablePath(sys), sys.exe, got)
	}
	wantIn(t, "stdout", out, []string{"binary: copied " + sys.exe + " to " + stablePath(sys) + "; the agents and the login service run that copy"})
	if src, dst := readText(t, sys.exe), readText(t, stablePath(sys)); src != dst {
		t.Errorf("the stable copy differs from the binary it was copied from")
	}
	if fi, err := os.Stat(stablePath(sys)); runtime.GOOS != "windows" && (err != nil || fi.Mode().Perm() != 0o755) {
		t.Errorf("stable copy: %v, mode %v, want 0755", err, fi.Mode())
	}
	cfg, err := config.Load(cfgFile, true, env{}.Get)
	if err != nil {
		t.Fatalf("config.toml after install: %v", err)
	}
	if got := cfg.Proxy.AgentUpstreams["claude-code"]["anthropic"]; got != "https://gw.example/anthropic" || cfg.Proxy.Upstreams["anthropic"] != "https://api.anthropic.com" {
		t.Errorf("[upstream.agents.claude-code] anthropic = %q, [upstream] anthropic = %q: want the chained gateway for Claude Code only", got, cfg.Proxy.Upstreams["anthropic"])
	}
	if fi, err := os.Stat(cfgFile); err != nil || fi.Mode().Perm() != 0o600 {
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
		"binary: " + stablePath(sys) + " stays (install put it there): delete it once nothing runs it",
	})
	if _, err := os.Stat(stablePath(sys)); err != nil {
		t.Errorf("uninstall removed the stable copy: %v", err)
	}
	// Run from the stable copy itself (the usual case: it is on PATH), uninstall says so too.
	stdout4 := new(syncBuffer)
	sys.stdout, sys.exe = stdout4, stablePath(sys)
	if err := run(t.Context(), []string{"uninstall"}, sys); err != nil {
		t.Fatalf("uninstall from the stable copy: %v\n%s", err, stdout4)
	}
	wantIn(t, "uninstall output, run from the stable copy", stdout4.String(), []string{"binary: " + stablePath(sys) + " stays"})
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
		const broken = "model = \"gpt-5\"\n[model_providers\n"
		writeTestFile(t, codexConfig, broken)
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

// TestInstallRefusesJSONCSettings: Claude Code ignores a settings.json with comments, so
// install does not wire it, says why and what to do, and leaves the file as it was.
func TestInstallRefusesJSONCSettings(t *testing.T) {
	t.Parallel()
	sys, stdout, settings, _ := installSystem(t)
	const jsonc = "{\n  // mine\n  \"model\": \"opus\",\n}\n"
	if err := os.WriteFile(settings, []byte(jsonc), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"install", "--agents", "claude-code"}, sys)
	if ExitCode(err) != 1 {
		t.Fatalf("install on a JSONC settings.json: %v, want exit 1\n%s", err, stdout)
	}
	wantIn(t, "install's output and error", stdout.String()+err.Error(), []string{
		"claude-code: " + settings + ": line 2: comments or trailing commas (JSONC), which Claude Code does not accept",
		"remove the comments and trailing commas, then run 'smarter-compact install --agents claude-code'",
	})
	if got := readText(t, settings); got != jsonc {
		t.Errorf("settings.json changed:\n%s", got)
	}
}

// TestServiceRegistersStableCopy: once install has put the binary at the per-user path,
// `service` (install, status, doctor's comparison) names that copy, not the build the
// command ran from.
func TestServiceRegistersStableCopy(t *testing.T) {
	t.Parallel()
	sys, stdout, _, _ := installSystem(t)
	if got := withStableExe(sys).exe; got != sys.exe {
		t.Fatalf("before install: %s, want the running %s", got, sys.exe)
	}
	if err := run(t.Context(), []string{"install", "--agents", "claude-code"}, sys); err != nil {
		t.Fatalf("install: %v\n%s", err, stdout)
	}
	if got := withStableExe(sys).exe; got != stablePath(sys) {
		t.Errorf("after install: %s, want the stable copy %s", got, stablePath(sys))
	}
}
