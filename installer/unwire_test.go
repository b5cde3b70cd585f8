package installer

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestUnwireGoldenLostState runs every testdata/agents/*.txtar that installs through the
// two ways the state directory gets lost (a deleted ~/.config/smarter-compact, a new machine
// with synced dotfiles):
//
//   - install, delete the state, uninstall: tier 3 removes what is ours;
//   - install, delete the state, install again (a fresh record, no snapshot), uninstall:
//     tier 1 removes what is ours.
//
// Either way nothing of ours may be left (Unwire finds nothing, no file names the proxy's
// port), both ways must end with the same bytes, and a file of the user's that install did
// not touch must be as it was.
func TestUnwireGoldenLostState(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "agents", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		g := readGolden(t, file)
		if g.wantErr != "" {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			agent := testAgent(g.agent)

			run := func(reinstall bool) map[string][]byte {
				home, cfg := t.TempDir(), t.TempDir()
				writeTree(t, home, g.before)
				env := g.testEnv(home, cfg)
				before := readTree(t, home)
				checkReport(t, "Install", Install(env, []Agent{agent}, false))
				installed := readTree(t, home)
				if err := os.RemoveAll(env.StateDir); err != nil {
					t.Fatal(err)
				}
				wantTier := 3
				if reinstall {
					rep := Install(env, []Agent{agent}, false)
					checkReport(t, "Install after the state was lost", rep)
					compareTree(t, "after the second install", readTree(t, home), installed)
					if _, err := os.Stat(diffPath(env, g.agent)); err != nil {
						t.Fatalf("the second install wrote no record: %v", err)
					}
					if entries, _ := os.ReadDir(snapshotDir(env, g.agent)); slices.ContainsFunc(entries, func(e os.DirEntry) bool {
						return strings.HasSuffix(e.Name(), ".snapshot")
					}) {
						t.Errorf("the second install took a snapshot of the wired files")
					}
					wantTier = 1
				}

				// Dry run: reports, writes nothing.
				dry := one(t, Uninstall(env, []Agent{agent}, true))
				if dry.Err != nil || dry.Tier != wantTier || dry.Diff == "" {
					t.Fatalf("dry-run Uninstall: tier %d (want %d), err %v, diff %q, skipped %q", dry.Tier, wantTier, dry.Err, dry.Diff, dry.Skipped)
				}
				compareTree(t, "after a dry-run uninstall", readTree(t, home), installed)

				rep := one(t, Uninstall(env, []Agent{agent}, false))
				if rep.Err != nil || rep.Tier != wantTier {
					t.Fatalf("Uninstall: tier %d (want %d), err %v, skipped %q", rep.Tier, wantTier, rep.Err, rep.Skipped)
				}
				if wantTier == 3 && !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "recognizably") }) {
					t.Errorf("tier 3 notes do not say what happened: %q", rep.Notes)
				}
				got := readTree(t, home)
				left, err := agent.(Unwirer).Unwire(env)
				if err != nil {
					t.Fatalf("Unwire after uninstall: %v", err)
				}
				for _, fe := range left.Files {
					t.Errorf("after uninstall, Unwire still finds ours in %s:\n%s", relPath(t, home, fe.Path), lineDiff(fe.Before, fe.After))
				}
				for name, data := range got {
					if bytes.Contains(data, []byte("127.0.0.1:4100")) {
						t.Errorf("after uninstall, %s still names the proxy:\n%s", name, data)
					}
					if b, ok := before[name]; ok && bytes.Equal(b, installed[name]) && !bytes.Equal(b, data) && !bytes.Contains(b, []byte("smarter-compact")) {
						t.Errorf("after uninstall, %s, which install left alone, changed:\n%s", name, lineDiff(b, data))
					}
				}
				// A second uninstall finds nothing to do.
				if again := one(t, Uninstall(env, []Agent{agent}, false)); again.Skipped == "" || again.Tier != 0 {
					t.Errorf("second Uninstall: tier %d, skipped %q, err %v", again.Tier, again.Skipped, again.Err)
				}
				return got
			}
			tier3 := run(false)
			tier1 := run(true)
			compareTree(t, "tier 1 after a reinstall vs tier 3", tier1, tier3)
		})
	}
}

// lostState is one agent's files before install and what they must be after install, loss
// of the state directory and uninstall (nil: absent).
type lostState struct {
	name   string
	agent  string
	env    map[string]string
	before map[string]string
	after  map[string]*string
	notes  []string // each in some note of the tier 3 report
}

func str(s string) *string { return &s }

func TestUnwireLostState(t *testing.T) {
	cases := []lostState{
		{
			name:  "claude-code",
			agent: "claude-code",
			before: map[string]string{
				".claude/settings.json": `{
  "model": "opus",
  "env": {
    "ANTHROPIC_BASE_URL": "https://gateway.example.com",
    "FOO": "bar"
  },
  "hooks": {
    "SessionStart": [
      {"hooks": [{"type": "command", "command": "echo mine"}]}
    ]
  }
}
`,
				".claude.json": `{
  "numStartups": 3,
  "mcpServers": {
    "other": {"type": "stdio", "command": "other"}
  }
}
`,
			},
			after: map[string]*string{
				".claude/settings.json": str(`{
  "model": "opus",
  "env": {
    "FOO": "bar"
  },
  "hooks": {
    "SessionStart": [
      {"hooks": [{"type": "command", "command": "echo mine"}]}
    ]
  }
}
`),
				".claude.json": str(`{
  "numStartups": 3,
  "mcpServers": {
    "other": {"type": "stdio", "command": "other"}
  }
}
`),
				".claude/commands/smarter-compact.md": nil,
			},
			notes: []string{"env.ANTHROPIC_BASE_URL", "SessionStart hook", "UserPromptSubmit hook", "mcpServers.smarter-compact", "command file"},
		},
		{
			name:  "codex",
			agent: "codex",
			before: map[string]string{
				".codex/config.toml": `# mine
model_provider = "corp"
model = "gpt-5.4"

[model_providers.corp]
name = "Corp"
base_url = "https://llm.corp.example/v1"

[tui]
notifications = true
`,
			},
			after: map[string]*string{
				".codex/config.toml": str(`# mine
model = "gpt-5.4"

[model_providers.corp]
name = "Corp"
base_url = "https://llm.corp.example/v1"

[tui]
notifications = true
`),
			},
			notes: []string{"falls back to its default", `set model_provider = "<id>"`, "[model_providers.smarter-compact]", "[mcp_servers.smarter-compact]"},
		},
		{
			name:  "opencode",
			agent: "opencode",
			before: map[string]string{
				".config/opencode/opencode.json": `{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "provider": {
    "openai": {"options": {"apiKey": "{env:OPENAI_API_KEY}"}}
  },
  "mcp": {
    "other": {"type": "local", "command": ["other"]}
  }
}
`,
			},
			after: map[string]*string{
				".config/opencode/opencode.json": str(`{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "provider": {
    "openai": {"options": {"apiKey": "{env:OPENAI_API_KEY}"}}
  },
  "mcp": {
    "other": {"type": "local", "command": ["other"]}
  }
}
`),
				".config/opencode/plugin/smarter-compact.js": nil,
			},
			notes: []string{`provider "anthropic"`, `provider "openai"`, "mcp.smarter-compact", "plugin file"},
		},
	}
	for _, c := range cases {
		for _, reinstall := range []bool{false, true} {
			name := c.name + "/tier3"
			if reinstall {
				name = c.name + "/reinstall"
			}
			t.Run(name, func(t *testing.T) {
				home, cfg := t.TempDir(), t.TempDir()
				files := map[string][]byte{}
				for p, s := range c.before {
					files[p] = []byte(s)
				}
				writeTree(t, home, files)
				g := &golden{exe: testExe, env: c.env}
				env := g.testEnv(home, cfg)
				agent := testAgent(c.agent)
				checkReport(t, "Install", Install(env, []Agent{agent}, false))
				if err := os.RemoveAll(filepath.Join(cfg, "smarter-compact")); err != nil {
					t.Fatal(err)
				}
				wantTier := 3
				if reinstall {
					if dry := one(t, Install(env, []Agent{agent}, true)); dry.Err != nil {
						t.Fatalf("dry-run Install: %v", dry.Err)
					}
					if _, err := os.Stat(env.StateDir); err == nil {
						t.Fatalf("dry-run Install wrote %s", env.StateDir)
					}
					rep := one(t, Install(env, []Agent{agent}, false))
					if rep.Err != nil || len(rep.Files) != 0 {
						t.Fatalf("second Install: err %v, files %v", rep.Err, rep.Files)
					}
					if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "recorded it") }) {
						t.Errorf("second Install notes: %q", rep.Notes)
					}
					wantTier = 1
				}
				rep := one(t, Uninstall(env, []Agent{agent}, false))
				if rep.Err != nil || rep.Tier != wantTier {
					t.Fatalf("Uninstall: tier %d (want %d), err %v, skipped %q", rep.Tier, wantTier, rep.Err, rep.Skipped)
				}
				if !reinstall {
					for _, n := range c.notes {
						if !slices.ContainsFunc(rep.Notes, func(s string) bool { return strings.Contains(s, n) }) {
							t.Errorf("no note contains %q:\n%s", n, strings.Join(rep.Notes, "\n"))
						}
					}
				}
				for p, want := range c.after {
					got, err := os.ReadFile(filepath.Join(home, filepath.FromSlash(p)))
					switch {
					case want == nil && err == nil:
						t.Errorf("%s still exists:\n%s", p, got)
					case want == nil:
					case err != nil:
						t.Errorf("%s: %v", p, err)
					case string(got) != *want:
						t.Errorf("%s:\n%s", p, lineDiff([]byte(*want), got))
					}
				}
				if _, err := os.Stat(env.StateDir); err == nil {
					if entries, _ := os.ReadDir(env.StateDir); len(entries) != 0 {
						t.Errorf("state left after uninstall: %v", entries)
					}
				}
			})
		}
	}
}

// TestUnwireLeavesOthersAlone: values that only look like ours stay: a base URL on
// loopback under another path, a hook running another program's `hook session-start`, a
// command file and plugin without our marker, another model_provider.
func TestUnwireLeavesOthersAlone(t *testing.T) {
	home, cfg := t.TempDir(), t.TempDir()
	files := map[string][]byte{
		".claude/settings.json": []byte(`{
  "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:4100/v1"},
  "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "other-tool hook session-start"}]}]}
}
`),
		".claude/commands/smarter-compact.md":        []byte("my own command\n"),
		".codex/config.toml":                         []byte("model_provider = \"openai\"\n\n[model_providers.corp]\nbase_url = \"http://127.0.0.1:9000/codex\"\n"),
		".config/opencode/opencode.json":             []byte(`{"provider": {"openai": {"options": {"baseURL": "http://localhost:11434/v1"}}}}` + "\n"),
		".config/opencode/plugin/smarter-compact.js": []byte("// my own plugin\n"),
	}
	writeTree(t, home, files)
	g := &golden{exe: testExe}
	env := g.testEnv(home, cfg)
	for _, a := range Agents(testPlugin) {
		plan, err := a.(Unwirer).Unwire(env)
		if err != nil {
			t.Fatalf("%s: Unwire: %v", a.Name(), err)
		}
		for _, fe := range plan.Files {
			t.Errorf("%s: Unwire changes %s:\n%s", a.Name(), fe.Path, lineDiff(fe.Before, fe.After))
		}
		rep := one(t, Uninstall(env, []Agent{a}, false))
		if rep.Skipped == "" || rep.Tier != 0 || rep.Err != nil {
			t.Errorf("%s: Uninstall: tier %d, skipped %q, err %v", a.Name(), rep.Tier, rep.Skipped, rep.Err)
		}
	}
	compareTree(t, "after uninstall", readTree(t, home), files)
}

// TestUnwireBrokenFile: tier 3 on a file that does not parse fails, naming it, and writes
// nothing.
func TestUnwireBrokenFile(t *testing.T) {
	home, cfg := t.TempDir(), t.TempDir()
	files := map[string][]byte{
		".claude/settings.json":               []byte("{\"env\": {\n"),
		".claude/commands/smarter-compact.md": []byte(claudeCommand),
	}
	writeTree(t, home, files)
	env := (&golden{exe: testExe}).testEnv(home, cfg)
	rep := one(t, Uninstall(env, []Agent{ClaudeCode{}}, false))
	if rep.Err == nil || !strings.Contains(rep.Err.Error(), "settings.json") {
		t.Fatalf("Uninstall: err %v, want one naming settings.json", rep.Err)
	}
	compareTree(t, "after a failed uninstall", readTree(t, home), files)
}
