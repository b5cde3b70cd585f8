package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, `
[memory]
provider = "hindsight"
url = "http://127.0.0.1:8888/"
api_key = "from-file"

[memory.banks]
"/src/work" = "work::{repo}"
"/src/work/secret" = "secret"
`, env{"SMARTER_COMPACT_MEMORY_API_KEY": "from-env"})
	if err != nil {
		t.Fatal(err)
	}
	want := MemoryConfig{Provider: "hindsight", URL: "http://127.0.0.1:8888", APIKey: "from-env", Bank: "coding-agent::{repo}",
		Banks: map[string]string{"/src/work": "work::{repo}", "/src/work/secret": "secret"}}
	if !reflect.DeepEqual(cfg.Memory, want) {
		t.Fatalf("memory %+v\nwant %+v", cfg.Memory, want)
	}
	if s := cfg.Memory.String(); strings.Contains(s, "from-env") || strings.Contains(s, "from-file") {
		t.Fatalf("String shows the API key: %s", s)
	}

	none, err := load(t, "", env{})
	if err != nil || none.Memory.Configured() || none.Memory.BankFor("/src/x") != "" {
		t.Fatalf("no [memory] table: %+v, %v; want no memory and no bank", none.Memory, err)
	}
}

func TestMemoryConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, text, want string }{
		{"no url", "[memory]\nprovider = \"hindsight\"\n", `[memory] url is missing: the [memory] table needs the provider's base URL`},
		{"bad provider", "[memory]\nprovider = \"mem0\"\nurl = \"http://x\"\n", `[memory] provider = "mem0": must be "hindsight"`},
		{"bad url", "[memory]\nurl = \"localhost:8888\"\n", `[memory] url = "localhost:8888": must be an absolute http or https URL`},
		{"relative prefix", "[memory]\nurl = \"http://x\"\n[memory.banks]\n\"src\" = \"b\"\n", `[memory.banks] src = "b": must be an absolute path prefix`},
		{"empty bank", "[memory]\nurl = \"http://x\"\nbank = \" \"\n", `[memory] bank = "": must be a bank name`},
		{"unknown key", "[memory]\nurl = \"http://x\"\nkey = \"k\"\n", `unknown key "memory.key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.text, env{"SMARTER_COMPACT_MEMORY_API_KEY": "secret-value"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Fatal("the error shows the API key")
			}
		})
	}
}

func TestMemoryBankFor(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	repo := filepath.Join(base, "src", "demo-repo")
	sub := filepath.Join(repo, "pkg", "inner")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(base, "work")
	m := MemoryConfig{Provider: "hindsight", URL: "http://x", Bank: defaultBank, Banks: map[string]string{
		work:                            "work::{repo}",
		filepath.Join(work, "secret"):   "secret",
		filepath.Join(base, "src", "d"): "not-a-path-prefix-of-demo-repo",
	}}
	for _, tc := range []struct{ cwd, want string }{
		{sub, "coding-agent::demo-repo"}, // the git root's name, not the cwd's
		{repo, "coding-agent::demo-repo"},
		{filepath.Join(base, "plain"), "coding-agent::plain"}, // no .git: the cwd's own name
		{filepath.Join(work, "app"), "work::app"},
		{filepath.Join(work, "secret", "x"), "secret"}, // longest prefix wins
		{filepath.Join(work, "secretive"), "work::secretive"},
		{"", ""},
	} {
		if got := m.BankFor(tc.cwd); got != tc.want {
			t.Errorf("BankFor(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
}
