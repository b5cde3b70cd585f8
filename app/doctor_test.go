package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// findCheck returns the check named name, failing the test when there is none.
func findCheck(t *testing.T, rep doctorReport, name string) doctorCheck {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, rep.Checks)
	return doctorCheck{}
}

// TestDoctorLive: a live service; Claude Code and OpenCode (JSONC with comments and a
// trailing comma) point at it, Codex at a port nobody is configured for.
func TestDoctorLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := liveService(t)
	stale := quietPort(t)
	sys, stdout := serviceSystem(t, port, nil)
	p := strconv.Itoa(port)
	writeTestFile(t, filepath.Join(sys.home, ".claude", "settings.json"),
		`{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:`+p+`/claude-code"}}`)
	writeTestFile(t, filepath.Join(sys.home, ".codex", "config.toml"),
		"model_provider = \"smarter-compact\"\n\n[model_providers.smarter-compact]\nname = \"smarter-compact\"\nbase_url = \"http://127.0.0.1:"+strconv.Itoa(stale)+"/codex\"\n")
	writeTestFile(t, filepath.Join(sys.home, ".config", "opencode", "opencode.jsonc"), `{
  // routed by smarter-compact
  "provider": {
    "anthropic": {"options": {"baseURL": "http://localhost:`+p+`/opencode/anthropic/v1"}},
    "ollama": {"options": {"baseURL": "http://127.0.0.1:11434/v1",},}, /* a local model: not ours */
  },
}`)

	err := doctorCmd(ctx, nil, sys)
	if ExitCode(err) != 1 {
		t.Fatalf("doctor with a stale Codex URL: %v (exit %d), want exit 1\n%s", err, ExitCode(err), stdout)
	}
	out := stdout.String()
	wantIn(t, "doctor output", out, []string{
		"ok    port: smarter-compact answers on http://127.0.0.1:" + p,
		"ok    claude-code: wired to the live service: ",
		"FAIL  codex: stale: ",
		"points at port " + strconv.Itoa(stale) + ", but smarter-compact is configured for port " + p,
		"→ 'smarter-compact install --agents codex' points it at port " + p + "; 'smarter-compact uninstall --agents codex' removes the wiring",
		"ok    opencode (provider.anthropic.options.baseURL): wired to the live service",
		"ok    store: ",
		"ok    fts5: SQLite has FTS5",
		"login service: ",
	})
	// The count is said once: in the error (main prints it on stderr), not on stdout too.
	if !strings.Contains(err.Error(), "1 of ") || strings.Contains(out, "checks failed") {
		t.Errorf("err %v, stdout:\n%s\nwant the count of failed checks in the error only", err, out)
	}
	if strings.Contains(out, "11434") {
		t.Errorf("doctor judged a URL that is not ours:\n%s", out)
	}

	sys, stdout = serviceSystem(t, port, nil)
	writeTestFile(t, filepath.Join(sys.home, ".claude", "settings.json"),
		`{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:`+p+`/claude-code"}}`)
	if err := doctorCmd(ctx, []string{"--json"}, sys); err != nil {
		t.Fatalf("doctor with everything live: %v\n%s", err, stdout)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, stdout)
	}
	if !rep.OK || rep.Failed != 0 {
		t.Errorf("doctor --json: %+v", rep)
	}
	if c := findCheck(t, rep, "codex"); c.Status != checkInfo || !strings.Contains(c.Fix, "install --agents codex") {
		t.Errorf("codex not wired: %+v", c)
	}
	if c := findCheck(t, rep, "login service"); c.Status == checkFail {
		t.Errorf("login service: %+v", c)
	}
}

// TestDoctorDeadPort: nothing answers on the configured port; Claude Code points at it.
func TestDoctorDeadPort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := quietPort(t)
	sys, stdout := serviceSystem(t, port, nil)
	writeTestFile(t, filepath.Join(sys.home, ".claude", "settings.json"),
		`{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:`+strconv.Itoa(port)+`/claude-code"}}`)
	// Codex defines our provider without selecting it.
	writeTestFile(t, filepath.Join(sys.home, ".codex", "config.toml"),
		"model_provider = \"openai\"\n[model_providers.smarter-compact]\nbase_url = \"https://api.example.com/v1\"\n")
	err := doctorCmd(ctx, []string{"--json"}, sys)
	if ExitCode(err) != 1 {
		t.Fatalf("doctor with a dead port: %v, want exit 1", err)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, stdout)
	}
	if rep.OK || rep.Failed != 2 {
		t.Errorf("failed %d, want 2 (port, claude-code): %+v", rep.Failed, rep.Checks)
	}
	if c := findCheck(t, rep, "port"); c.Status != checkFail || !strings.Contains(c.Fix, "'smarter-compact service start'") {
		t.Errorf("port: %+v", c)
	}
	c := findCheck(t, rep, "claude-code")
	if c.Status != checkFail || !strings.Contains(c.Message, "nothing answers there") || !strings.Contains(c.Fix, "'smarter-compact uninstall --agents claude-code'") {
		t.Errorf("claude-code: %+v", c)
	}
	var codexWarn bool
	for _, c := range rep.Checks {
		codexWarn = codexWarn || (c.Name == "codex" && c.Status == checkWarn && strings.Contains(c.Message, `model_provider is "openai"`))
	}
	if !codexWarn {
		t.Errorf("no warning about Codex's unselected provider: %+v", rep.Checks)
	}
}

// TestDoctorStoreModes: a session file open to others fails the store check with the
// command that fixes it; a broken settings.json is named, not fatal.
func TestDoctorStoreModes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("cannot run: Windows has no group/other mode bits")
	}
	ctx := context.Background()
	state := t.TempDir()
	sys, stdout := serviceSystem(t, liveService(t), env{"SMARTER_COMPACT_STATE_DIR": state})
	loose := filepath.Join(state, "context", "sessions", "s1.db")
	writeTestFile(t, loose, "x")
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(sys.home, ".claude", "settings.json"), `{"env": {`)
	err := doctorCmd(ctx, nil, sys)
	if ExitCode(err) != 1 {
		t.Fatalf("doctor with a loose file: %v\n%s", err, stdout)
	}
	out := stdout.String()
	wantIn(t, "doctor output", out, []string{
		"FAIL  store: 1 entries in " + filepath.Join(state, "context") + " are open to group or others, e.g. " + loose + " (644)",
		"→ chmod -R go-rwx " + filepath.Join(state, "context"),
		"warn  claude-code: cannot read " + filepath.Join(sys.home, ".claude", "settings.json"),
	})
	if err := os.Chmod(loose, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := doctor(ctx, sys, "")
	if c := findCheck(t, rep, "store"); c.Status != checkOK || !strings.Contains(c.Message, "folders 700, files 600") {
		t.Errorf("store after chmod: %+v", c)
	}
}

// A service started with serve --port records its address (addrfile.go): status and doctor
// find it there instead of telling the user to start a service that runs, and say that
// agents wired to the configured port do not reach it.
func TestStatusAndDoctorFindServiceOnOtherPort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(svc.Close)
	port := quietPort(t)
	sys, stdout := serviceSystem(t, port, nil)
	remove, err := writeAddrFile(sys.configDir, svc.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)

	if err := doctorCmd(ctx, []string{"--json"}, sys); ExitCode(err) != 1 {
		t.Fatalf("doctor: %v, want exit 1 (the service is not on the configured port)", err)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, stdout)
	}
	c := findCheck(t, rep, "port")
	if c.Status != checkFail || !strings.Contains(c.Message, svc.URL) || !strings.Contains(c.Message, "serve --port") ||
		strings.Contains(c.Fix, "service start") {
		t.Errorf("port check: %+v", c)
	}

	before := len(stdout.String())
	if err := status(ctx, nil, sys); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()[before:]
	if !strings.Contains(out, "Service: running, but the service runs on "+svc.URL) || !strings.Contains(out, "not on the configured port "+strconv.Itoa(port)) {
		t.Errorf("status does not report the service on its other port:\n%s", out)
	}
}
