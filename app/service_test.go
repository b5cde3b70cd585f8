package app

import (
	"context"
	"encoding/json"
	"errors"

	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/app/apptest"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/installer/installertest"
)

// liveService answers GET /healthz like serve does and returns its port.
func liveService(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		healthz(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// quietPort is a loopback port nothing listens on (it was free a moment ago).
func quietPort(t *testing.T) int { t.Helper(); return apptest.FreePort(t) }

// serviceSystem is a test process whose config.toml sets port, with its own state dir.
func serviceSystem(t *testing.T, port int, e env) (system, *syncBuffer) {
	t.Helper()
	if e == nil {
		e = env{}
	}
	if _, ok := e["SMARTER_COMPACT_STATE_DIR"]; !ok {
		e["SMARTER_COMPACT_STATE_DIR"] = t.TempDir()
	}
	sys, stdout, _ := testSystem(t, e)
	sys.exe = "/opt/my apps/smarter-compact"
	dir := filepath.Join(sys.configDir, "smarter-compact")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte("[context_proxy]\nport = "+strconv.Itoa(port)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sys, stdout
}

// TestServiceStartIdempotent: start, status and stop decide by /healthz. A service that
// answers is "already running" and start calls no manager; stop refuses one the login
// service did not start.
func TestServiceStartIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := liveService(t)
	sys, stdout := serviceSystem(t, port, nil)
	url := "http://127.0.0.1:" + strconv.Itoa(port)

	if err := serviceCmd(ctx, []string{"status"}, sys); err != nil {
		t.Fatal(err)
	}
	want := "login service: not installed"
	if runtime.GOOS == "linux" && !installer.SystemdRunning() {
		want = "login service: none on this system (systemd is not running here"
	}
	if out := stdout.String(); !strings.Contains(out, want) || !strings.Contains(out, "service: answering on "+url) {
		t.Errorf("status:\n%s", out)
	}
	for range 2 {
		if err := serviceCmd(ctx, []string{"start"}, sys); err != nil {
			t.Fatalf("start while running: %v", err)
		}
	}
	if n := strings.Count(stdout.String(), "already running: answering on "+url); n != 2 {
		t.Errorf("start twice said already running %d times:\n%s", n, stdout)
	}
	err := serviceCmd(ctx, []string{"stop"}, sys)
	if !errors.Is(err, installer.ErrNotOurs) || !strings.Contains(err.Error(), "stop it where it runs") {
		t.Errorf("stop of a service the login service did not start: %v", err)
	}

	sys, stdout = serviceSystem(t, port, nil)
	if err := serviceCmd(ctx, []string{"status", "--json"}, sys); err != nil {
		t.Fatal(err)
	}
	var rep installer.ServiceReport
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if !rep.Running || rep.Installed || rep.URL != url || (runtime.GOOS == "linux" && rep.Supported != installer.SystemdRunning()) {
		t.Errorf("status --json: %+v", rep)
	}
}

// TestServiceNotRunning: with nothing on the port and nothing installed, start says how to
// install or run it, stop and uninstall have nothing to do.
func TestServiceNotRunning(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skipf("cannot run: on %s start launches the executable without a registration", runtime.GOOS)
	}
	ctx := context.Background()
	sys, stdout := serviceSystem(t, quietPort(t), nil)
	err := serviceCmd(ctx, []string{"start"}, sys)
	if !errors.Is(err, installer.ErrServiceNotInstalled) || !strings.Contains(err.Error(), "'smarter-compact service install'") || !strings.Contains(err.Error(), "'smarter-compact serve'") {
		t.Errorf("start without a registration: %v", err)
	}
	if err := serviceCmd(ctx, []string{"stop"}, sys); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := serviceCmd(ctx, []string{"uninstall"}, sys); err != nil {
		t.Errorf("uninstall: %v", err)
	}
	out := stdout.String()
	wantIn(t, "output", out, []string{"not running: nothing answers on", "login service was not installed"})
}

func TestServiceUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, _ := serviceSystem(t, quietPort(t), nil)
	for _, args := range [][]string{nil, {"restart"}, {"status", "--bogus"}, {"start", "extra"}} {
		var u usageError
		if err := serviceCmd(ctx, args, sys); !errors.As(err, &u) {
			t.Errorf("service %q: %v, want a usage error", args, err)
		}
	}
	// A broken config stops install and start, not status.
	sys, _ = serviceSystem(t, quietPort(t), nil)
	if err := os.WriteFile(filepath.Join(sys.configDir, "smarter-compact", "config.toml"), []byte("[context_proxy]\nport = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serviceCmd(ctx, []string{"install"}, sys); err == nil || !strings.Contains(err.Error(), "fix it first") {
		t.Errorf("install with a broken config: %v", err)
	}
	if err := serviceCmd(ctx, []string{"status"}, sys); err != nil {
		t.Errorf("status with a broken config: %v", err)
	}
}

// TestServiceInstallSystemd runs `service install`, `status` and `uninstall` against a
// temporary HOME with a systemctl shim on PATH (systemd is not PID 1 in CI's container, so
// kardianos/service is told to use its systemd back end anyway).
func TestServiceInstallSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("cannot run: the systemd user unit is Linux-only, this is %s", runtime.GOOS)
	}
	home, calls := installertest.SystemctlShim(t)
	forceSystemd = true
	t.Cleanup(func() { forceSystemd = false })

	ctx := context.Background()
	state := t.TempDir()
	sys, stdout := serviceSystem(t, quietPort(t), env{
		"SMARTER_COMPACT_STATE_DIR": state,
		"CONTEXT_TRIM_AT_TOKENS":    "50000",
	})
	sys.home = home
	configPath := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	sys.getenv = env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_TRIM_AT_TOKENS": "50000", "SMARTER_COMPACT_CONFIG": configPath}.Get

	if err := serviceCmd(ctx, []string{"install", "--no-start"}, sys); err != nil {
		t.Fatalf("install: %v\n%s", err, stdout)
	}
	unitPath := filepath.Join(home, ".config", "systemd", "user", "smarter-compact.service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	wantIn(t, "unit", string(unit), []string{
		`ExecStart="/opt/my apps/smarter-compact" "serve" "--config" "` + configPath + `"`,
		`Environment="SMARTER_COMPACT_STATE_DIR=` + state + `"`,
		"WantedBy=default.target\n",
		"Restart=on-failure\n",
	})
	out := stdout.String()
	wantIn(t, "install output", out, []string{
		"login service installed: " + unitPath + " (systemd --user)",
		"starts at login",
		"not seen by the login service: CONTEXT_TRIM_AT_TOKENS",
		"not started (--no-start)",
	})
	if err := serviceCmd(ctx, []string{"install", "--no-start"}, sys); err != nil || !strings.Contains(stdout.String(), "login service already installed") {
		t.Errorf("second install: %v\n%s", err, stdout)
	}
	if err := serviceCmd(ctx, []string{"status"}, sys); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.Contains(out, "login service: installed, starts at login (systemd --user: "+unitPath+")") ||
		!strings.Contains(out, "systemctl --user is-active: inactive") {
		t.Errorf("status:\n%s", out)
	}
	if err := serviceCmd(ctx, []string{"uninstall"}, sys); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "login service removed: "+unitPath) {
		t.Errorf("uninstall:\n%s", stdout)
	}
	if _, err := os.Stat(unitPath); !os.IsNotExist(err) {
		t.Errorf("unit left behind: %v", err)
	}
	b, _ := os.ReadFile(calls)
	for _, want := range []string{"enable --user smarter-compact.service", "disable --user smarter-compact.service"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("systemctl calls lack %q:\n%s", want, b)
		}
	}
}

// TestStopOnRequest: on Windows `service stop` signals serve's stop event, which cancels its
// context; elsewhere a signal does that and stopOnRequest changes nothing.
func TestStopOnRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := quietPort(t)
	sys, _ := serviceSystem(t, port, nil)
	served, release := stopOnRequest(ctx, port, sys)
	defer release()
	if runtime.GOOS != "windows" {
		if served != ctx {
			t.Error("stopOnRequest wrapped the context on a system where signals stop serve")
		}
		return
	}
	cfg, _, err := serviceConfig(sys, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := installer.ServiceStop(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("service stop did not reach stopOnRequest")
	}
}
