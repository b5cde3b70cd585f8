package installer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestReadWiring: each agent's base URLs, read at the paths Install uses (CODEX_HOME,
// XDG_CONFIG_HOME, OpenCode's .jsonc before .json), by provider id; Codex's provider defined
// but not selected; no file is fs.ErrNotExist.
func TestReadWiring(t *testing.T) {
	t.Parallel()
	home, codex, xdg := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(codex, "config.toml"), "model_provider = \"openai\"\n[model_providers.smarter-compact]\nbase_url = \"http://127.0.0.1:4100/codex\"\n[model_providers.a]\nbase_url = \"https://a.example\"\n")
	write(filepath.Join(xdg, "opencode", "opencode.jsonc"), "{\n  // mine\n  \"provider\": {\"openai\": {\"options\": {\"baseURL\": \"http://127.0.0.1:4100/opencode/openai/v1\"}}, \"anthropic\": {\"options\": {}},},\n}\n")
	write(filepath.Join(xdg, "opencode", "opencode.json"), "{\"provider\": {\"x\": {\"options\": {\"baseURL\": \"https://never.example\"}}}}\n")
	env := Env{Home: home, Getenv: func(k string) string { return map[string]string{"CODEX_HOME": codex, "XDG_CONFIG_HOME": xdg}[k] }}

	got := ReadWiring(env)
	if len(got) != 3 {
		t.Fatalf("%d agents, want 3: %+v", len(got), got)
	}
	if c := got[0]; c.Agent != "claude-code" || c.File != filepath.Join(home, ".claude", "settings.json") || !errors.Is(c.Err, fs.ErrNotExist) {
		t.Errorf("claude-code: %+v, want no file", c)
	}
	wantCodex := Wiring{Agent: "codex", File: filepath.Join(codex, "config.toml"), Unselected: true, Selected: "openai",
		URLs: []AgentURL{{"model_providers.a.base_url", "https://a.example"}, {"model_providers.smarter-compact.base_url", "http://127.0.0.1:4100/codex"}}}
	if !reflect.DeepEqual(got[1], wantCodex) {
		t.Errorf("codex:\n%+v\nwant\n%+v", got[1], wantCodex)
	}
	wantOpen := Wiring{Agent: "opencode", File: filepath.Join(xdg, "opencode", "opencode.jsonc"),
		URLs: []AgentURL{{"provider.openai.options.baseURL", "http://127.0.0.1:4100/opencode/openai/v1"}}}
	if !reflect.DeepEqual(got[2], wantOpen) {
		t.Errorf("opencode:\n%+v\nwant\n%+v", got[2], wantOpen)
	}

	write(filepath.Join(home, ".claude", "settings.json"), "{\"env\": {\"ANTHROPIC_BASE_URL\": \"http://localhost:4100/claude-code\"}, // mine\n}\n")
	write(filepath.Join(codex, "config.toml"), "[model_providers\n")
	got = ReadWiring(env)
	if want := []AgentURL{{"env.ANTHROPIC_BASE_URL", "http://localhost:4100/claude-code"}}; !reflect.DeepEqual(got[0].URLs, want) || got[0].Err != nil {
		t.Errorf("claude-code: %+v, want %v", got[0], want)
	}
	if got[1].Err == nil || errors.Is(got[1].Err, fs.ErrNotExist) || got[1].URLs != nil {
		t.Errorf("codex with a broken config.toml: %+v, want a parse error", got[1])
	}
}

// TestAgentURLOurs: a loopback URL is ours on the agent's route (any port) or on our port;
// the port defaults by scheme.
func TestAgentURLOurs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url, port string
		ours      bool
	}{
		{"http://127.0.0.1:4100/claude-code", "4100", true},
		{"http://localhost:4200/claude-code/v1", "4200", true}, // stale port, our route
		{"http://[::1]:4100/other", "4100", true},              // our port
		{"http://LOCALHOST/claude-code", "80", true},
		{"https://127.0.0.1/claude-codex", "443", false},
		{"http://127.0.0.1:11434/v1", "11434", false},
		{"https://gw.example:4100/claude-code", "", false},
		{"not a url", "", false},
	} {
		p, ours := AgentURL{URL: c.url}.Ours("claude-code", 4100)
		if ours != c.ours || (ours && p != c.port) {
			t.Errorf("%s: ours %v port %q, want %v %q", c.url, ours, p, c.ours, c.port)
		}
	}
}
