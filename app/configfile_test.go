package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/web"
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

// TestWriteConfigFileSymlink: a config.toml that is a symbolic link (kept in a dotfiles
// repository) stays one: the file it points to gets the new text, keeps its mode, and the
// temporary file is made next to it, not next to the link.
func TestWriteConfigFileSymlink(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	dotfiles, conf := t.TempDir(), t.TempDir()
	target := filepath.Join(dotfiles, "smarter-compact.toml")
	if err := os.WriteFile(target, []byte("[context_proxy.agents]\ncodex = true\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	link := filepath.Join(conf, "config.toml")
	rel, err := filepath.Rel(conf, target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil { // relative, as dotfile managers make them
		t.Fatal(err)
	}
	// Through the state, as the dashboard saves.
	sys, _, _ := testSystem(t, env{})
	st, err := newState(stateOptions{Path: link, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetAgent(agentCodex, web.ModeOff); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("config.toml is no longer a symbolic link: %v %v", fi.Mode(), err)
	}
	if got := readText(t, target); got != "[context_proxy.agents]\ncodex = false\n" {
		t.Errorf("the link's target has %q", got)
	}
	if ti, _ := os.Stat(target); ti.Mode().Perm() != 0o640 {
		t.Errorf("the target's mode is %o, want its 640 kept", ti.Mode().Perm())
	}
	for _, dir := range []string{dotfiles, conf} {
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("%s holds %d entries, want 1 (no temporary file left)", dir, len(entries))
		}
	}
	// A link whose target does not exist yet: the target is created, the link kept.
	dangling := filepath.Join(conf, "new.toml")
	if err := os.Symlink(filepath.Join(dotfiles, "sub", "new.toml"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := writeConfigFile(dangling, []byte("x = 1\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the dangling link was replaced")
	}
	if got := readText(t, filepath.Join(dotfiles, "sub", "new.toml")); got != "x = 1\n" {
		t.Errorf("the dangling link's target has %q", got)
	}
	// A loop is an error, not a hang.
	loop := filepath.Join(conf, "loop.toml")
	if err := os.Symlink("loop.toml", loop); err != nil {
		t.Fatal(err)
	}
	if err := writeConfigFile(loop, []byte("x = 1\n")); err == nil {
		t.Error("a link to itself was written")
	}
}
