package app

import (
	"reflect"
	"strings"
	"testing"
)

func TestConfigAgentUpstreams(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, "[upstream]\nanthropic = \"https://family.example\"\n\n"+
		"[upstream.agents.claude-code]\nanthropic = \"https://gw.example/anthropic/\"\n\n"+
		"[upstream.agents.codex]\ncodex = \"http://codex-gw.example/backend\"\nopenai = \"https://oa.example/v1\"\n",
		env{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC": "https://env.example"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"claude-code": {"anthropic": "https://gw.example/anthropic"},
		"codex":       {"codex": "http://codex-gw.example/backend", "openai": "https://oa.example/v1"},
	}
	if !reflect.DeepEqual(cfg.Proxy.AgentUpstreams, want) {
		t.Errorf("AgentUpstreams = %v, want %v", cfg.Proxy.AgentUpstreams, want)
	}
	if cfg.Proxy.Upstreams["anthropic"] != "https://env.example" {
		t.Errorf("[upstream] anthropic = %q: the environment wins over the family key only", cfg.Proxy.Upstreams["anthropic"])
	}
	if got := agentUpstreamsLog(cfg.Proxy.AgentUpstreams); got != "claude-code.anthropic=https://gw.example/anthropic codex.openai=https://oa.example/v1 codex.codex=http://codex-gw.example/backend" {
		t.Errorf("startup log: %s", got)
	}

	cfg, err = load(t, "", nil)
	if err != nil || cfg.Proxy.AgentUpstreams != nil || agentUpstreamsLog(nil) != "none" {
		t.Errorf("no tables: %v, %v", cfg.Proxy.AgentUpstreams, err)
	}
}

func TestConfigAgentUpstreamErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, file string
		want       []string
	}{
		{"unknown agent", "[upstream.agents.cursor]\nanthropic = \"https://x.example\"\n",
			[]string{":1:", `unknown agent "cursor" in [upstream.agents.cursor]: use claude-code, codex, opencode`}},
		{"unknown family", "[upstream.agents.opencode]\ngemini = \"https://x.example\"\n",
			[]string{":2:", `unknown key "upstream.agents.opencode.gemini"`}},
		{"bad URL", "[upstream.agents.opencode]\nopenai = \"ftp://x.example\"\nanthropic = \"https://ok.example/?q=1\"\n",
			[]string{`[upstream.agents.opencode] openai = "ftp://x.example": must be an absolute http or https URL`,
				`[upstream.agents.opencode] anthropic = "https://ok.example/?q=1": must be an absolute http or https URL`}},
		{"wrong type", "[upstream.agents.claude-code]\nanthropic = 3\n",
			[]string{":2:", "[upstream.agents.claude-code] anthropic must be an absolute http or https URL"}},
		{"agent not a table", "[upstream.agents]\ncodex = \"https://x.example\"\n",
			[]string{":2:", "upstream.agents.codex must be a table"}},
	} {
		_, err := load(t, c.file, nil)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}
