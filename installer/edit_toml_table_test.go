package installer

import (
	"encoding/json"
	"strings"
	"testing"
)

// The cases of app's TestSetConfigKeys (configfile_test.go, folded here), same inputs and bytes.
func TestSetKeyIn(t *testing.T) {
	t.Parallel()
	agents := [][2]string{{"codex", "false"}}
	tests := []struct {
		name, in, section string
		keys              [][2]string
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
		{"CRLF", "[upstream]\r\nopenai = \"https://a.example\"\r\n", "upstream", [][2]string{{"anthropic", `"https://gw.example/anthropic"`}},
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
			d, err := ParseTOMLDoc([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keys {
				if _, err := d.SetKeyIn(tt.section, k[0], json.RawMessage(k[1])); err != nil {
					t.Fatal(err)
				}
			}
			if got := d.Bytes(); string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// The cases of app's TestSetConfigKeysRefuses (folded here): each input is refused, by the
// parse or by SetKeyIn.
func TestSetKeyInRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"[context_proxy]\nagents = { codex = true }\n",
		"context_proxy.agents.codex = true\n",
		"[context_proxy]\nagents.codex = true\n",
		"[context_proxy.agents\n",
	} {
		d, err := ParseTOMLDoc([]byte(in))
		if err != nil {
			continue // refused: not TOML
		}
		if _, err := d.SetKeyIn("context_proxy.agents", "codex", json.RawMessage("false")); err == nil {
			t.Errorf("%q: edited to %q, want an error", in, d.Bytes())
		}
	}
}

// The cases of app's TestTOMLString (configfile_test.go; app now uses TOMLString): the basic
// string SetKeyIn writes, and its text given back as a value.
func TestSetKeyInString(t *testing.T) {
	t.Parallel()
	got := TOMLString("a\"b\\c\x01\x7fé")
	if want := `"a\"b\\c\u0001\u007Fé"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	d, _ := ParseTOMLDoc(nil)
	v, _ := json.Marshal("\a\v" + strings.Repeat("é", 3))
	if _, err := d.SetKeyIn("upstream", "x", v); err != nil {
		t.Errorf("a quoted string does not decode: %v", err)
	}
	if _, err := d.SetKeyIn("upstream", "y", json.RawMessage(TOMLString("\a\v"+strings.Repeat("é", 3)))); err != nil {
		t.Errorf("TOMLString's text is not a value SetKeyIn takes: %v", err)
	}
}

// The cases of app's TestRemoveConfigKeys (install_upstream_test.go, folded here), same
// inputs and bytes.
func TestRemoveKeyIn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want    string
		table, blank, eol bool
		names             []string
	}{
		{"appended table goes", "a = 1\n\n[upstream.agents.codex]\ncodex = \"https://x\"\n", "a = 1\n", true, true, false, []string{"codex"}},
		{"user table after ours keeps its blank line", "a = 1\n\n[upstream.agents.codex]\ncodex = \"https://x\"\n\n[mine]\nb = 2\n", "a = 1\n\n[mine]\nb = 2\n", true, true, false, []string{"codex"}},
		{"table with a comment stays", "[upstream.agents.codex]\n# mine\ncodex = \"https://x\"\n", "[upstream.agents.codex]\n# mine\n", true, false, false, []string{"codex"}},
		{"user's table keeps its header", "[upstream.agents.codex]\ncodex = \"https://x\"\nopenai = \"https://y\"\n", "[upstream.agents.codex]\nopenai = \"https://y\"\n", false, false, false, []string{"codex"}},
		{"CRLF and no final newline", "a = 1\r\n\r\n[upstream.agents.codex]\r\ncodex = \"https://x\"\r\n", "a = 1", true, true, true, []string{"codex"}},
	} {
		got, err := RemoveKeysIn([]byte(c.in), "upstream.agents.codex", c.names, c.table, c.blank, c.eol)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if _, err := RemoveKeysIn([]byte("[upstream.agents]\ncodex = { codex = \"https://x\" }\n"), "upstream.agents.codex", []string{"codex"}, true, false, false); err == nil {
		t.Error("inline table: no error")
	}
	if got, err := RemoveKeysIn([]byte("a = 1\n"), "upstream.agents.codex", []string{"codex"}, true, true, true); err != nil || string(got) != "a = 1\n" {
		t.Errorf("no table: %q, %v", got, err)
	}
}
