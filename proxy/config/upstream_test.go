package config

import (
	"strings"
	"testing"
)

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
