package app

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/installer"
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
func findCheck(t *testing.T, rep doctorReport, name string) installer.Finding {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, rep.Checks)
	return installer.Finding{}
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
	if c := findCheck(t, rep, "codex"); c.Status != installer.CheckInfo || !strings.Contains(c.Fix, "install --agents codex") {
		t.Errorf("codex not wired: %+v", c)
	}
	if c := findCheck(t, rep, "login service"); c.Status == installer.CheckFail {
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
	if c := findCheck(t, rep, "port"); c.Status != installer.CheckFail || c.Fix != startAdvice(ctx, sys, "") {
		t.Errorf("port: %+v", c)
	}
	c := findCheck(t, rep, "claude-code")
	if c.Status != installer.CheckFail || !strings.Contains(c.Message, "smarter-compact does not answer there") || !strings.Contains(c.Fix, "'smarter-compact uninstall --agents claude-code'") {
		t.Errorf("claude-code: %+v", c)
	}
	var codexWarn bool
	for _, c := range rep.Checks {
		codexWarn = codexWarn || (c.Name == "codex" && c.Status == installer.CheckWarn && strings.Contains(c.Message, `model_provider is "openai"`))
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
	if c := findCheck(t, rep, "store"); c.Status != installer.CheckOK || !strings.Contains(c.Message, "folders 700, files 600") {
		t.Errorf("store after chmod: %+v", c)
	}
}

// A service started with serve --port records its address (installer/addrfile.go): status and doctor
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
	remove, err := installer.WriteAddrFile(sys.configDir, svc.URL)
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
	if c.Status != installer.CheckFail || !strings.Contains(c.Message, svc.URL) || !strings.Contains(c.Message, "serve --port") ||
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

// TestDoctorRot: after a real install against a live service, doctor passes for Claude
// Code; then each way the wiring rots makes Claude Code's check fail with what happened and
// the command that fixes it (issue 15, Show: a doctor test per rot).
func TestDoctorRot(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in binaries are shell scripts")
	}
	for _, tc := range []struct {
		name     string
		rot      func(t *testing.T, sys system, settings string, stop func())
		msg, fix string
	}{
		{"binary removed", func(t *testing.T, sys system, _ string, _ func()) {
			if err := os.Remove(stablePath(sys)); err != nil {
				t.Fatal(err)
			}
		}, "does not exist", "'smarter-compact install --agents claude-code'"},
		{"binary of another version", func(t *testing.T, sys system, _ string, _ func()) {
			fakeBinary(t, stablePath(sys), "0.9.0")
		}, "it is smarter-compact 0.9.0, this is smarter-compact " + version, "'smarter-compact install --agents claude-code'"},
		{"another development build", func(t *testing.T, sys system, _ string, _ func()) {
			if err := os.WriteFile(stablePath(sys), []byte(readText(t, sys.exe)+"# rebuilt\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "another development build than this one", "'smarter-compact install --agents claude-code'"},
		{"JSONC settings.json", func(t *testing.T, _ system, settings string, _ func()) {
			text := strings.Replace(readText(t, settings), "{\n", "{\n  // added by hand\n", 1)
			if err := os.WriteFile(settings, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "Claude Code reads strict JSON and ignores the whole file", "remove the comments and trailing commas from "},
		{"dead port", func(t *testing.T, _ system, _ string, stop func()) { stop() },
			"smarter-compact does not answer there", "'smarter-compact uninstall --agents claude-code'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := httptest.NewServer(http.HandlerFunc(healthz))
			t.Cleanup(srv.Close)
			port := srv.Listener.Addr().(*net.TCPAddr).Port
			sys, stdout, settings, _ := installSystem(t)
			sys.getenv = env{"CONTEXT_PROXY_PORT": strconv.Itoa(port), "SMARTER_COMPACT_STATE_DIR": t.TempDir(), "LOCALAPPDATA": sys.getenv("LOCALAPPDATA")}.Get
			if err := run(ctx, []string{"install", "--agents", "claude-code"}, sys); err != nil {
				t.Fatalf("install: %v\n%s", err, stdout)
			}
			claude := func() []installer.Finding {
				var out []installer.Finding
				for _, c := range doctor(ctx, sys, "").Checks {
					if c.Name == "claude-code" {
						out = append(out, c)
					}
				}
				return out
			}
			before := claude()
			if len(before) != 2 || before[0].Status != installer.CheckOK || before[1].Status != installer.CheckOK ||
				!strings.Contains(before[1].Message, "the hooks (") || !strings.Contains(before[1].Message, "the MCP server") {
				t.Fatalf("before the rot, want the base URL and the binary ok: %+v", before)
			}
			tc.rot(t, sys, settings, srv.Close)
			var failed []installer.Finding
			for _, c := range claude() {
				if c.Status == installer.CheckFail {
					failed = append(failed, c)
				}
			}
			if len(failed) != 1 || !strings.Contains(failed[0].Message, tc.msg) || !strings.Contains(failed[0].Fix, tc.fix) {
				t.Fatalf("after the rot, want one failed claude-code check saying %q, fixed by %q: %+v", tc.msg, tc.fix, claude())
			}
			t.Logf("FAIL  %s: %s\n      → %s", failed[0].Name, failed[0].Message, failed[0].Fix)
			if err := doctorCmd(ctx, nil, sys); ExitCode(err) != 1 {
				t.Errorf("doctor exit %d, want 1", ExitCode(err))
			}
		})
	}
}

// TestNoServiceManagerAdvice: on a machine without a login service manager (Linux without
// a running systemd, as in most containers), install, doctor and service status give the
// same one piece of advice (issue 15, Deliver 3).
func TestNoServiceManagerAdvice(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || installer.SystemdRunning() {
		t.Skip("this machine has a login service manager; the advice for one without is not given here")
	}
	ctx := t.Context()
	sys, stdout, _, _ := installSystem(t)
	if err := run(ctx, []string{"install", "--agents", "claude-code"}, sys); err != nil {
		t.Fatalf("install: %v\n%s", err, stdout)
	}
	wantIn(t, "install", stdout.String(), []string{"the service does not answer at ", "\n  " + installer.NoServiceManager + "\n"})
	rep := doctor(ctx, sys, "")
	for _, name := range []string{"port", "login service"} {
		if c := findCheck(t, rep, name); c.Fix != installer.NoServiceManager {
			t.Errorf("doctor %s: fix %q, want %q", name, c.Fix, installer.NoServiceManager)
		}
	}
	if c := findCheck(t, rep, "claude-code"); !strings.HasPrefix(c.Fix, installer.NoServiceManager+"; ") {
		t.Errorf("doctor claude-code: fix %q, want it to start with %q", c.Fix, installer.NoServiceManager)
	}
	status := new(syncBuffer)
	sys.stdout = status
	if err := serviceCmd(ctx, []string{"status"}, sys); err != nil {
		t.Fatal(err)
	}
	wantIn(t, "service status", status.String(), []string{installer.NoServiceManager})
}
