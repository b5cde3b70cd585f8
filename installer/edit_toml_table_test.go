package installer

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSetKeyInNoFinalNewline is the case of app's TestSetConfigKeys (configfile_test.go,
// folded here) that txtar cannot hold: a table appended after a last line without a line
// end. Its other cases are testdata/edit/toml/setkeyin_*.txtar (TestTOMLGolden), their CRLF
// case the CRLF run of setkeyin_string_value.
func TestSetKeyInNoFinalNewline(t *testing.T) {
	t.Parallel()
	d, err := ParseTOMLDoc([]byte("[context_proxy]\nport = 4101"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SetKeyIn("context_proxy.agents", "codex", json.RawMessage("false")); err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.Bytes()), "[context_proxy]\nport = 4101\n\n[context_proxy.agents]\ncodex = false\n"; got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
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
