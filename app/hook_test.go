package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// hookSystem is a process whose stdin is in and whose store is a fresh state directory.
func hookSystem(t *testing.T, in string) (sys system, state string, stdout, stderr *syncBuffer) {
	t.Helper()
	state = t.TempDir()
	sys, stdout, stderr = testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state})
	sys.stdin = strings.NewReader(in)
	sys.workdir = "/work/dir"
	return sys, state, stdout, stderr
}

func readRegistration(t *testing.T, state, sid string) store.Registration {
	t.Helper()
	path := filepath.Join(state, "context", "sessions", sid+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("registration: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("registration %s is not JSON: %v", b, err)
	}
	for _, k := range []string{"session_id", "agent", "cwd", "registered_at"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("registration %s lacks %q", b, k)
		}
	}
	var reg store.Registration
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, reg.RegisteredAt); err != nil || !strings.HasSuffix(reg.RegisteredAt, "Z") {
		t.Errorf("registered_at %q is not ISO 8601 UTC", reg.RegisteredAt)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf("registration mode %o, want 600", fi.Mode().Perm())
	}
	return reg
}

func TestHookSessionStart(t *testing.T) {
	t.Parallel()
	// Claude Code's SessionStart input (hooks reference): the ids, the transcript, the cwd, the
	// event and its source.
	in := `{"session_id":"6f0c2a4e-1b7d-4c8e-9a55-0e2f1d3c4b5a","transcript_path":"/h/.claude/projects/x/6f0c.jsonl",` +
		`"cwd":"/home/u/project","hook_event_name":"SessionStart","source":"startup","model":"claude-opus-5-5"}`
	sys, state, stdout, stderr := hookSystem(t, in)
	if err := run(t.Context(), []string{"hook", "session-start"}, sys); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "" || stderr.String() != "" {
		t.Errorf("stdout %q, stderr %q: want nothing (SessionStart's stdout goes into the model's context)", stdout, stderr)
	}
	reg := readRegistration(t, state, "6f0c2a4e-1b7d-4c8e-9a55-0e2f1d3c4b5a")
	if reg.SessionID != "6f0c2a4e-1b7d-4c8e-9a55-0e2f1d3c4b5a" || reg.Agent != "claude-code" || reg.Cwd != "/home/u/project" || reg.Bank != "" {
		t.Errorf("registration %+v", reg)
	}
}

func TestHookSessionStartSanitizesID(t *testing.T) {
	t.Parallel()
	sys, state, _, _ := hookSystem(t, `{"session_id":" ses/../x😀 ","cwd":"/p"}`)
	if err := run(t.Context(), []string{"hook", "session-start"}, sys); err != nil {
		t.Fatal(err)
	}
	if reg := readRegistration(t, state, "ses_.._x_"); reg.SessionID != "ses_.._x_" {
		t.Errorf("session_id %q, want the sanitized id", reg.SessionID)
	}
}

func TestHookPromptSubmitForce(t *testing.T) {
	t.Parallel()
	for _, prompt := range []string{"/smarter-compact", "  /smarter-compact\n"} {
		sys, state, stdout, stderr := hookSystem(t, `{"session_id":"s1","transcript_path":"/t","cwd":"/p","hook_event_name":"UserPromptSubmit","prompt":`+jsonString(prompt)+`}`)
		if err := run(t.Context(), []string{"hook", "prompt-submit"}, sys); err != nil {
			t.Fatal(err)
		}
		flag := filepath.Join(state, "context", "sessions", "s1.force")
		fi, err := os.Stat(flag)
		if err != nil {
			t.Fatalf("prompt %q: force flag: %v", prompt, err)
		}
		if fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("force flag: size %d mode %o, want an empty file with mode 600", fi.Size(), fi.Mode().Perm())
		}
		var out map[string]string
		if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
			t.Fatalf("stdout %q is not one JSON object: %v", stdout, err)
		}
		if len(out) != 2 || out["decision"] != "block" || !strings.Contains(out["reason"], "next request") {
			t.Errorf("stdout %q, want {\"decision\":\"block\",\"reason\":…}", stdout)
		}
		if stderr.String() != "" {
			t.Errorf("stderr %q", stderr)
		}
	}
}

func TestHookPromptSubmitOtherPrompts(t *testing.T) {
	t.Parallel()
	for _, prompt := range []string{"fix the bug", "/smarter-compact now", "/smarter-compacts", "please /smarter-compact", ""} {
		sys, state, stdout, stderr := hookSystem(t, `{"session_id":"s1","prompt":`+jsonString(prompt)+`}`)
		if err := run(t.Context(), []string{"hook", "prompt-submit"}, sys); err != nil {
			t.Fatal(err)
		}
		if stdout.String() != "" || stderr.String() != "" {
			t.Errorf("prompt %q: stdout %q, stderr %q: want nothing", prompt, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(state, "context", "sessions", "s1.force")); err == nil {
			t.Errorf("prompt %q set the force flag", prompt)
		}
	}
}

// TestHookPromptSubmitRegisters: a session without a registration (it started before install,
// or its SessionStart hook failed) is registered by its next prompt; an existing registration
// is left alone.
func TestHookPromptSubmitRegisters(t *testing.T) {
	t.Parallel()
	sys, state, _, stderr := hookSystem(t, `{"session_id":"s2","cwd":"/first","prompt":"hi"}`)
	if err := run(t.Context(), []string{"hook", "prompt-submit"}, sys); err != nil {
		t.Fatal(err)
	}
	if reg := readRegistration(t, state, "s2"); reg.Agent != "claude-code" || reg.Cwd != "/first" {
		t.Errorf("registration %+v", reg)
	}
	sys.stdin = strings.NewReader(`{"session_id":"s2","cwd":"/second","prompt":"again"}`)
	if err := run(t.Context(), []string{"hook", "prompt-submit"}, sys); err != nil {
		t.Fatal(err)
	}
	if reg := readRegistration(t, state, "s2"); reg.Cwd != "/first" {
		t.Errorf("the registration was rewritten: %+v", reg)
	}
	if stderr.String() != "" {
		t.Errorf("stderr %q", stderr)
	}
}

// TestHookFailuresNeverBreakTheAgent: every failure exits 0 with one stderr line, and puts
// nothing on stdout but the hook protocol.
func TestHookFailuresNeverBreakTheAgent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stdin string
		args        []string
		wantStderr  string
		wantBlock   bool
	}{
		{"not JSON", "session start", []string{"session-start"}, "not the agent's JSON", false},
		{"no session id", `{"cwd":"/p"}`, []string{"session-start"}, "no session id", false},
		{"blank session id", `{"session_id":" \t "}`, []string{"session-start"}, "no session id", false},
		{"unknown event", `{}`, []string{"stop"}, `unknown event "stop"`, false},
		{"no event", ``, nil, "no event given", false},
		{"argument", `{}`, []string{"session-start", "x"}, "unexpected argument", false},
		{"opencode without sid", ``, []string{"opencode-session"}, "want one argument", false},
		// The store cannot be opened: the command is still kept from the model, and says why.
		{"force without store", `{"session_id":"s1","prompt":"/smarter-compact"}`, []string{"prompt-submit"}, "not an absolute path", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sys, _, stdout, stderr := hookSystem(t, tt.stdin)
			if tt.wantBlock {
				sys.getenv = env{"SMARTER_COMPACT_STATE_DIR": "relative/dir"}.Get
			}
			err := run(t.Context(), append([]string{"hook"}, tt.args...), sys)
			if err != nil {
				t.Fatalf("err %v: a hook must exit 0", err)
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if !strings.Contains(lines[len(lines)-1], tt.wantStderr) || !strings.HasPrefix(lines[len(lines)-1], "smarter-compact hook") {
				t.Errorf("stderr %q, want a last line containing %q", stderr, tt.wantStderr)
			}
			if tt.wantBlock {
				var out map[string]string
				if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil || out["decision"] != "block" || !strings.Contains(out["reason"], "could not set") {
					t.Errorf("stdout %q, want a block that says the flag was not set", stdout)
				}
			} else if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

func TestHookOpenCodeSession(t *testing.T) {
	t.Parallel()
	sys, state, stdout, stderr := hookSystem(t, "")
	if err := run(t.Context(), []string{"hook", "opencode-session", "ses_2a7f9c1e0ffeABCDEFGHIJKLMN"}, sys); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "" || stderr.String() != "" {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	reg := readRegistration(t, state, "ses_2a7f9c1e0ffeABCDEFGHIJKLMN")
	if reg.Agent != "opencode" || reg.Cwd != "/work/dir" {
		t.Errorf("registration %+v, want agent opencode in the working directory", reg)
	}

	if err := run(t.Context(), []string{"hook", "opencode-session", "--cwd", "/other", "ses_b"}, sys); err != nil {
		t.Fatal(err)
	}
	if reg := readRegistration(t, state, "ses_b"); reg.Cwd != "/other" {
		t.Errorf("cwd %q, want --cwd's", reg.Cwd)
	}

	if err := run(t.Context(), []string{"hook", "force", "ses_b"}, sys); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "context", "sessions", "ses_b.force")); err != nil {
		t.Errorf("hook force: %v", err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
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
