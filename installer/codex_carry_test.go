package installer

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// TestCodexCarriesCredentials: whatever the replaced provider carried for authentication and
// headers, our provider table carries the same after install (parsed back by go-toml, so a
// quoting fault in the rendering fails here), and a second install keeps it.
func TestCodexCarriesCredentials(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name     string
		provider string // the user's provider table body
		want     codexCarry
	}{
		{"openrouter", `base_url = "https://openrouter.ai/api/v1"
env_key = "OPENROUTER_API_KEY"
http_headers = { "HTTP-Referer" = "https://x.example", "X-Title" = "quote \" back\\slash ü" }
`, codexCarry{EnvKey: "OPENROUTER_API_KEY", HTTPHeaders: map[string]string{"HTTP-Referer": "https://x.example", "X-Title": "quote \" back\\slash ü"}}},
		{"azure", `base_url = "https://corp.openai.azure.com/openai"
env_key = "AZURE_OPENAI_API_KEY"
env_key_instructions = "ask IT"
env_http_headers = { "X-Team" = "TEAM_VAR" }
query_params = { api-version = "2025-04-01-preview" }
requires_openai_auth = false
`, codexCarry{EnvKey: "AZURE_OPENAI_API_KEY", EnvKeyInstructions: "ask IT", EnvHTTPHeaders: map[string]string{"X-Team": "TEAM_VAR"},
			QueryParams: map[string]string{"api-version": "2025-04-01-preview"}, RequiresOpenAIAuth: &no}},
		{"litellm-chatgpt", `base_url = "https://litellm.corp/backend-api/codex"
requires_openai_auth = true
http_headers = { "x-litellm-api-key" = "Bearer sk-1" }
`, codexCarry{RequiresOpenAIAuth: &yes, HTTPHeaders: map[string]string{"x-litellm-api-key": "Bearer sk-1"}}},
		{"no-auth", `base_url = "http://gpu-box.lan:8000/v1"
`, codexCarry{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			cfg := filepath.Join(home, ".codex", "config.toml")
			if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
				t.Fatal(err)
			}
			text := "model_provider = \"gw\"\n\n[model_providers.gw]\n" + tc.provider
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			env := Env{Home: home, Port: 4100, Exe: testExe, StateDir: filepath.Join(home, "state"), Now: time.Now}
			for i := range 2 {
				rep := Install(env, []Agent{Codex{}}, false)
				if err := rep.Agents[0].Err; err != nil {
					t.Fatalf("install %d: %v", i+1, err)
				}
				b, err := os.ReadFile(cfg)
				if err != nil {
					t.Fatal(err)
				}
				var got codexConf
				if err := toml.Unmarshal(b, &got); err != nil {
					t.Fatalf("install %d wrote TOML that does not parse: %v\n%s", i+1, err, b)
				}
				ours := got.ModelProviders[codexProvider]
				if ours == nil || !reflect.DeepEqual(ours.codexCarry, tc.want) {
					t.Errorf("install %d: [model_providers.%s] carries %+v, want %+v\n%s", i+1, codexProvider, ours, tc.want, b)
				}
			}
			if rep := Uninstall(env, []Agent{Codex{}}, false); rep.Agents[0].Err != nil {
				t.Fatal(rep.Agents[0].Err)
			}
			if b, _ := os.ReadFile(cfg); string(b) != text {
				t.Errorf("after uninstall:\n%s\nwant:\n%s", b, text)
			}
		})
	}
}

// TestOpenCodeKeepsProviderOptions: install changes only a routed provider's
// options.baseURL, so its apiKey (an {env:…} reference here) and headers still go with every
// request, now to the proxy, which forwards them to the chained upstream; uninstall gives
// the file back byte for byte.
func TestOpenCodeKeepsProviderOptions(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cfg := filepath.Join(home, ".config", "opencode", "opencode.json")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	text := `{
  "provider": {
    "openai": {
      "options": {
        "baseURL": "https://gw.example/openai/v1",
        "apiKey": "{env:GW_KEY}",
        "headers": {"X-Gateway-Team": "agents", "X-Title": "mine"}
      }
    }
  }
}
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := Env{Home: home, Port: 4100, Exe: testExe, StateDir: filepath.Join(home, "state"), Now: time.Now}
	rep := Install(env, []Agent{OpenCode{Plugin: testPlugin}}, false)
	if err := rep.Agents[0].Err; err != nil {
		t.Fatal(err)
	}
	if got := rep.Agents[0].Upstreams["openai"]; got != "https://gw.example/openai" {
		t.Errorf("chained openai upstream %q, want https://gw.example/openai", got)
	}
	var doc struct {
		Provider map[string]struct {
			Options map[string]any `json:"options"`
		} `json:"provider"`
	}
	if err := readJSONC(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	o := doc.Provider["openai"].Options
	want := map[string]any{"baseURL": "http://127.0.0.1:4100/opencode/openai/v1", "apiKey": "{env:GW_KEY}",
		"headers": map[string]any{"X-Gateway-Team": "agents", "X-Title": "mine"}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("provider.openai.options after install = %v, want %v", o, want)
	}
	if rep := Uninstall(env, []Agent{OpenCode{Plugin: testPlugin}}, false); rep.Agents[0].Err != nil {
		t.Fatal(rep.Agents[0].Err)
	}
	if b, _ := os.ReadFile(cfg); string(b) != text {
		t.Errorf("after uninstall:\n%s\nwant:\n%s", b, text)
	}
}
