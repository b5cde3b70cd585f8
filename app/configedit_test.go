package app

import (
	"strings"
	"testing"
)

func TestSetConfigKeys(t *testing.T) {
	t.Parallel()
	agents := []configKey{{"codex", "false"}}
	tests := []struct {
		name, in, section string
		keys              []configKey
		want              string
	}{
		{"empty file", "", "context_proxy.agents", agents, "[context_proxy.agents]\ncodex = false\n"},
		{"appended after the last table", "[context_proxy]\nport = 4101", "context_proxy.agents", agents,
			"[context_proxy]\nport = 4101\n\n[context_proxy.agents]\ncodex = false\n"},
		{"value replaced, comment and indentation kept", "[context_proxy.agents]\n  codex   =  true   # mine\nopencode = true\n", "context_proxy.agents", agents,
			"[context_proxy.agents]\n  codex = false # mine\nopencode = true\n"},
		{"quoted key and spaced header", "[ context_proxy . \"agents\" ]\n\"codex\" = true\n", "context_proxy.agents", agents,
			"[ context_proxy . \"agents\" ]\ncodex = false\n"},
		{"inserted after the table's last key, before the next table", "[context_proxy.agents]\nopencode = true\n\n# compaction\n[compaction]\nrecall = true\n", "context_proxy.agents", agents,
			"[context_proxy.agents]\nopencode = true\ncodex = false\n\n# compaction\n[compaction]\nrecall = true\n"},
		{"empty table", "[context_proxy.agents]\n[compaction]\n", "context_proxy.agents", agents,
			"[context_proxy.agents]\ncodex = false\n[compaction]\n"},
		{"CRLF", "[upstream]\r\nopenai = \"https://a.example\"\r\n", "upstream", []configKey{{"anthropic", tomlString("https://gw.example/anthropic")}},
			"[upstream]\r\nopenai = \"https://a.example\"\r\nanthropic = \"https://gw.example/anthropic\"\r\n"},
		{"a look-alike header inside a multi-line string", "[context_store]\nembedding_model = \"\"\"\n[context_proxy.agents]\n\"\"\"\n", "context_proxy.agents", agents,
			"[context_store]\nembedding_model = \"\"\"\n[context_proxy.agents]\n\"\"\"\n\n[context_proxy.agents]\ncodex = false\n"},
		{"a key of the same name in another table", "[other]\ncodex = 1\n[context_proxy.agents]\n", "context_proxy.agents", agents,
			"[other]\ncodex = 1\n[context_proxy.agents]\ncodex = false\n"},
		{"same value: unchanged bytes", "[context_proxy.agents]\ncodex = false # x\n", "context_proxy.agents", agents,
			"[context_proxy.agents]\ncodex = false # x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := setConfigKeys([]byte(tt.in), tt.section, tt.keys)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestSetConfigKeysRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"[context_proxy]\nagents = { codex = true }\n",
		"context_proxy.agents.codex = true\n",
		"[context_proxy]\nagents.codex = true\n",
		"[context_proxy.agents\n",
	} {
		if got, err := setConfigKeys([]byte(in), "context_proxy.agents", []configKey{{"codex", "false"}}); err == nil {
			t.Errorf("%q: edited to %q, want an error", in, got)
		}
	}
}

func TestTOMLString(t *testing.T) {
	t.Parallel()
	got := tomlString("a\"b\\c\x01\x7fé")
	if want := `"a\"b\\c\u0001\u007Fé"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := setConfigKeys(nil, "upstream", []configKey{{"x", tomlString("\a\v" + strings.Repeat("é", 3))}}); err != nil {
		t.Errorf("a quoted string does not decode: %v", err)
	}
}
