package app

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
	must(t, os.MkdirAll(filepath.Join(repo, ".git"), 0o700))
	must(t, os.MkdirAll(sub, 0o700))
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

// Registrations carry the bank when config.toml has a [memory] table (contract: Location).
func TestHookRegistrationCarriesTheBank(t *testing.T) {
	t.Parallel()
	in := `{"session_id":"sess-bank","cwd":"/home/u/projects/shop","hook_event_name":"SessionStart","source":"startup"}`
	sys, state, stdout, stderr := hookSystem(t, in)
	cfgDir := filepath.Join(sys.configDir, "smarter-compact")
	must(t, os.MkdirAll(cfgDir, 0o700))
	must(t, os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte("[memory]\nurl = \"http://127.0.0.1:8888\"\n"), 0o600))
	if err := run(t.Context(), []string{"hook", "session-start"}, sys); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "" || stderr.String() != "" {
		t.Fatalf("stdout %q, stderr %q", stdout, stderr)
	}
	if reg := readRegistration(t, state, "sess-bank"); reg.Bank != "coding-agent::shop" {
		t.Fatalf("registration %+v: want bank coding-agent::shop", reg)
	}

	sys.stdin = nil
	if err := run(t.Context(), []string{"hook", "opencode-session", "--cwd", "/home/u/projects/cart", "ses_bank"}, sys); err != nil {
		t.Fatal(err)
	}
	if reg := readRegistration(t, state, "ses_bank"); reg.Bank != "coding-agent::cart" || reg.Agent != "opencode" {
		t.Fatalf("registration %+v: want bank coding-agent::cart", reg)
	}

	// a config that does not load registers without a bank and says so in one line
	must(t, os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte("[memory]\n"), 0o600))
	sys.stdin = strings.NewReader(strings.Replace(in, "sess-bank", "sess-nobank", 1))
	if err := run(t.Context(), []string{"hook", "session-start"}, sys); err != nil {
		t.Fatal(err)
	}
	if reg := readRegistration(t, state, "sess-nobank"); reg.Bank != "" {
		t.Fatalf("registration %+v: want no bank", reg)
	}
	if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.Contains(stderr.String(), "registered without a memory bank") {
		t.Fatalf("stderr %q: want one line", stderr)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// status names the memory provider and bank, never the API key.
func TestStatusShowsMemoryWithoutTheKey(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, "[memory]\nurl = \"http://127.0.0.1:8888\"\napi_key = \"file-secret\"\n")
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": t.TempDir(), "CONTEXT_PROXY_PORT": "1",
		"SMARTER_COMPACT_MEMORY_API_KEY": "env-secret"})
	if err := run(t.Context(), []string{"status", "--verbose", "--config", config}, sys); err != nil {
		t.Fatalf("status: %v (%s)", err, stderr)
	}
	out := stdout.String()
	if !strings.Contains(out, `Memory: recall on trim: hindsight at http://127.0.0.1:8888, bank "coding-agent::{repo}", 0 mapped prefixes, api key set`) {
		t.Errorf("status lacks the memory line:\n%s", out)
	}
	if strings.Contains(out+stderr.String(), "secret") {
		t.Errorf("status shows the API key:\n%s", out)
	}
}
