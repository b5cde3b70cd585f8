package installer

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/installer/installertest"
)

func testServiceConfig(goos, home, exe string, port int) ServiceConfig {
	return ServiceConfig{
		Name:        "smarter-compact",
		RunValue:    "SmarterCompact",
		DisplayName: "Smarter Compact",
		Description: "Smarter Compact: context-trimming proxy for coding agents",
		Exe:         exe,
		Args:        []string{"serve"},
		Home:        home,
		Port:        port,
		GOOS:        goos,
		Wait:        600 * time.Millisecond,
	}
}

func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	cfg := testServiceConfig("linux", "/home/u", "/opt/my apps/100%/smarter-compact", 4100)
	cfg.Args = []string{"serve", "--config", `/home/u/my "$conf"/c\d.toml`}
	cfg.Env = map[string]string{"SMARTER_COMPACT_STATE_DIR": "/data/a b", "A_PCT": "50%"}
	def, err := ServiceFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/home/u/.config/systemd/user/smarter-compact.service"; def.Path != want {
		t.Errorf("path %s, want %s", def.Path, want)
	}
	want := "# Written by `smarter-compact service install`; `smarter-compact service uninstall` removes it.\n" +
		"[Unit]\n" +
		"Description=Smarter Compact: context-trimming proxy for coding agents\n" +
		"ConditionFileIsExecutable=/opt/my apps/100%%/smarter-compact\n" +
		"StartLimitIntervalSec=60\n" +
		"StartLimitBurst=5\n" +
		"\n" +
		"[Service]\n" +
		"Type=simple\n" +
		`ExecStart="/opt/my apps/100%%/smarter-compact" "serve" "--config" "/home/u/my \"$$conf\"/c\\d.toml"` + "\n" +
		"Restart=on-failure\n" +
		"RestartSec=3\n" +
		`Environment="A_PCT=50%%"` + "\n" +
		`Environment="SMARTER_COMPACT_STATE_DIR=/data/a b"` + "\n" +
		"\n" +
		"[Install]\n" +
		"WantedBy=default.target\n"
	if def.Content != want {
		t.Errorf("unit:\n%s\nwant:\n%s", def.Content, want)
	}
	for _, bad := range []string{"multi-user.target", "EnvironmentFile", "RestartSec=120", "{{"} {
		if strings.Contains(def.Content, bad) {
			t.Errorf("unit contains %q", bad)
		}
	}
	line, exe := systemdExec(def.Content)
	if exe != cfg.Exe || !strings.HasPrefix(line, `"/opt/my apps/`) {
		t.Errorf("systemdExec = %q, %q; want the executable %q back", line, exe, cfg.Exe)
	}
	// kardianos/service's own template escapes spaces as \x20.
	if _, exe := systemdExec("[Service]\nExecStart=/opt/my\\x20apps/x \"serve\"\n"); exe != "/opt/my apps/x" {
		t.Errorf("systemdExec of a kardianos unit = %q", exe)
	}
}

// TestSystemdUnitVerify has systemd itself parse the unit, with an executable whose path
// holds a space and a '%': systemd-analyze verify fails when ExecStart's program does not
// exist, so a pass proves the quoting.
func TestSystemdUnitVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("cannot run: systemd-analyze is not installed (%v); TestSystemdUnit checks the text", err)
	}
	dir := filepath.Join(t.TempDir(), "my apps", "100%")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "smarter-compact")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testServiceConfig("linux", "/home/u", exe, 4100)
	def, err := ServiceFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "smarter-compact.service")
	if err := os.WriteFile(unit, []byte(def.Content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, def.Content)
	}
	// The same unit with a missing program must fail, or the pass above proves nothing.
	missing := strings.Replace(def.Content, "/smarter-compact\"", "/absent\"", 1)
	if err := os.WriteFile(unit, []byte(missing), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", unit).CombinedOutput(); err == nil || !strings.Contains(string(out), "absent") {
		t.Errorf("systemd-analyze verify accepted a missing program: %v\n%s", err, out)
	}
}

func TestLaunchdPlist(t *testing.T) {
	t.Parallel()
	cfg := testServiceConfig("darwin", "/Users/u", "/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact", 4100)
	cfg.LogDir = "/Users/u/.local/share/smarter-compact/logs"
	cfg.Env = map[string]string{"SMARTER_COMPACT_STATE_DIR": "/tmp/a&b"}
	def, err := ServiceFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/Users/u/Library/LaunchAgents/smarter-compact.plist"; def.Path != want {
		t.Errorf("path %s, want %s", def.Path, want)
	}
	for _, want := range []string{
		"<key>Label</key>\n\t<string>smarter-compact</string>",
		"<string>/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact</string>\n\t\t<string>serve</string>",
		"<key>RunAtLoad</key>\n\t<true/>",
		"<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>",
		"<string>/tmp/a&amp;b</string>",
		"<string>/Users/u/.local/share/smarter-compact/logs/smarter-compact.err.log</string>",
	} {
		if !strings.Contains(def.Content, want) {
			t.Errorf("plist lacks %q:\n%s", want, def.Content)
		}
	}
	// Well-formed XML.
	d := xml.NewDecoder(strings.NewReader(def.Content))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("plist is not well-formed XML: %v\n%s", err, def.Content)
		}
	}
	if exe := plistProgram(def.Content); exe != cfg.Exe {
		t.Errorf("plistProgram = %q, want %q", exe, cfg.Exe)
	}
}

func TestWindowsRunValue(t *testing.T) {
	t.Parallel()
	cfg := testServiceConfig("windows", `C:\Users\u`, `C:\Program Files\Smarter Compact\smarter-compact.exe`, 4100)
	def, err := ServiceFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"C:\Program Files\Smarter Compact\smarter-compact.exe" serve`; def.Content != want {
		t.Errorf("Run value %s, want %s", def.Content, want)
	}
	if want := `HKCU\Software\Microsoft\Windows\CurrentVersion\Run\SmarterCompact`; def.Path != want {
		t.Errorf("path %s, want %s", def.Path, want)
	}
	if exe := windowsProgram(def.Content); exe != cfg.Exe {
		t.Errorf("windowsProgram = %q", exe)
	}
	// Arguments as CommandLineToArgvW reads them back (syscall.EscapeArg's cases).
	for in, want := range map[string]string{
		"":               `""`,
		"serve":          `serve`,
		`a b`:            `"a b"`,
		`C:\a b\`:        `"C:\a b\\"`,
		`x"y`:            `x\"y`,
		`C:\dir\c.toml`:  `C:\dir\c.toml`,
		`\\srv\a b\"q"\`: `"\\srv\a b\\\"q\"\\"`,
	} {
		if got := windowsEscapeArg(in); got != want {
			t.Errorf("windowsEscapeArg(%q) = %s, want %s", in, got, want)
		}
	}
	cfg.Env = map[string]string{"SMARTER_COMPACT_STATE_DIR": `D:\state`}
	if _, err := ServiceFile(cfg); err == nil || !strings.Contains(err.Error(), "environment") {
		t.Errorf("a Run value with Env: err %v, want one about environment variables", err)
	}
}

func TestServiceFileRefuses(t *testing.T) {
	t.Parallel()
	ok := testServiceConfig("linux", "/home/u", "/usr/bin/smarter-compact", 4100)
	for name, mod := range map[string]func(*ServiceConfig){
		"relative exe":      func(c *ServiceConfig) { c.Exe = "bin/smarter-compact" },
		"windows relative":  func(c *ServiceConfig) { c.GOOS, c.Home, c.Exe = "windows", `C:\Users\u`, `smarter-compact.exe` },
		"newline in arg":    func(c *ServiceConfig) { c.Args = []string{"serve\nExecStartPre=/bin/evil"} },
		"template action":   func(c *ServiceConfig) { c.Description = "{{Path}}" },
		"bad name":          func(c *ServiceConfig) { c.Name = "smarter compact" },
		"bad env name":      func(c *ServiceConfig) { c.Env = map[string]string{"A=B": "c"} },
		"port out of range": func(c *ServiceConfig) { c.Port = 70000 },
		"no home":           func(c *ServiceConfig) { c.Home = "" },
	} {
		c := ok
		mod(&c)
		if _, err := ServiceFile(c); err == nil {
			t.Errorf("%s: ServiceFile accepted %+v", name, c)
		}
	}
	c := ok
	c.GOOS = "plan9"
	if _, err := ServiceFile(c); !errors.Is(err, ErrServiceUnsupported) {
		t.Errorf("plan9: err %v, want ErrServiceUnsupported", err)
	}
}

// healthServer answers GET /healthz like serve does and returns its port.
func healthServer(t *testing.T, body string) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	n, _ := strconv.Atoi(port)
	return n
}

// deadPort is a loopback port nothing listens on (it was free a moment ago).
func deadPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestServiceHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := ServiceHealth(ctx, healthServer(t, "ok")); err != nil {
		t.Errorf("live service: %v", err)
	}
	if err := ServiceHealth(ctx, healthServer(t, "something else")); err == nil || !strings.Contains(err.Error(), "another program") {
		t.Errorf("foreign service: %v", err)
	}
	if err := ServiceHealth(ctx, deadPort(t)); err == nil {
		t.Error("dead port answered")
	}
}

func readCalls(t *testing.T, logFile string) string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestServiceSystemdShim drives install, status, start, stop and uninstall against a
// temporary HOME with a systemctl shim that logs what kardianos/service and we call.
func TestServiceSystemdShim(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("cannot run: the systemd back end is Linux-only, this is %s", runtime.GOOS)
	}
	home, calls := installertest.SystemctlShim(t)
	ctx := context.Background()
	cfg := testServiceConfig("", home, "/opt/my apps/smarter-compact", deadPort(t))
	cfg.ForceSystemd = true
	unit := filepath.Join(home, ".config", "systemd", "user", "smarter-compact.service")
	link := filepath.Join(home, ".config", "systemd", "user", "default.target.wants", "smarter-compact.service")

	res, err := ServiceInstall(ctx, cfg)
	if err != nil {
		t.Fatalf("install: %v\ncalls:\n%s", err, readCalls(t, calls))
	}
	def, _ := ServiceFile(cfg)
	if b, err := os.ReadFile(unit); err != nil || string(b) != def.Content {
		t.Fatalf("unit file %v:\n%s\nwant:\n%s", err, b, def.Content)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("not enabled: %v", err)
	}
	got := readCalls(t, calls)
	for _, want := range []string{"enable --user smarter-compact.service\n", "daemon-reload --user\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("systemctl calls lack %q:\n%s", want, got)
		}
	}
	st := res.State
	if !res.Changed || !st.Installed || !st.Enabled || !st.Current || st.Running || st.Exe != cfg.Exe || res.Unreachable != "" {
		t.Errorf("after install: %+v", res)
	}
	if st.Detail != "systemctl --user is-active: inactive" {
		t.Errorf("detail %q", st.Detail)
	}

	// Idempotent: the same unit again runs no systemctl that changes anything.
	before := readCalls(t, calls)
	res, err = ServiceInstall(ctx, cfg)
	if err != nil || res.Changed {
		t.Fatalf("second install: changed %v, err %v", res.Changed, err)
	}
	if extra := strings.TrimPrefix(readCalls(t, calls), before); strings.Contains(extra, "enable") || strings.Contains(extra, "daemon-reload") {
		t.Errorf("second install called systemctl:\n%s", extra)
	}

	// A new executable rewrites the unit; status before that reports it stale.
	moved := cfg
	moved.Exe = "/usr/local/bin/smarter-compact"
	if st, err := ServiceStatus(ctx, moved); err != nil || !st.Installed || st.Current || st.Exe != cfg.Exe {
		t.Errorf("status with another exe: %+v, %v; want installed, not current, exe %s", st, err, cfg.Exe)
	}
	if res, err := ServiceInstall(ctx, moved); err != nil || !res.Changed || !res.State.Current {
		t.Fatalf("install with another exe: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(unit); !strings.Contains(string(b), `ExecStart="/usr/local/bin/smarter-compact" "serve"`) {
		t.Errorf("unit not rewritten:\n%s", b)
	}

	// Start is idempotent through the health check: a live service means no systemctl start.
	live := moved
	live.Port = healthServer(t, "ok")
	before = readCalls(t, calls)
	res, err = ServiceStart(ctx, live)
	if err != nil || res.Changed || !res.State.Running {
		t.Errorf("start while running: %+v, %v; want unchanged and running", res, err)
	}
	if extra := strings.TrimPrefix(readCalls(t, calls), before); strings.Contains(extra, "start") {
		t.Errorf("start while running called systemctl start:\n%s", extra)
	}
	// The shim starts nothing: start must say /healthz never answered.
	res, err = ServiceStart(ctx, moved)
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "journalctl --user -u smarter-compact") {
		t.Errorf("start without an answer: %v", err)
	}
	if !strings.Contains(readCalls(t, calls), "start --user smarter-compact.service\n") {
		t.Errorf("no systemctl start:\n%s", readCalls(t, calls))
	}
	// Stop of a service that does not answer: systemctl stop, unchanged.
	res, err = ServiceStop(ctx, moved)
	if err != nil || res.Changed {
		t.Errorf("stop while not running: %+v, %v", res, err)
	}
	if !strings.Contains(readCalls(t, calls), "stop --user smarter-compact.service\n") {
		t.Errorf("no systemctl stop:\n%s", readCalls(t, calls))
	}
	// Something that still answers after the stop was not started by the unit.
	if _, err := ServiceStop(ctx, live); !errors.Is(err, ErrNotOurs) {
		t.Errorf("stop of a service the unit does not run: %v, want ErrNotOurs", err)
	}

	res, err = ServiceUninstall(ctx, moved)
	if err != nil || !res.Changed || res.State.Installed || res.State.Enabled {
		t.Fatalf("uninstall: %+v, %v", res, err)
	}
	for _, p := range []string{unit, link} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	if !strings.Contains(readCalls(t, calls), "disable --user smarter-compact.service\n") {
		t.Errorf("no systemctl disable:\n%s", readCalls(t, calls))
	}
	if res, err := ServiceUninstall(ctx, moved); err != nil || res.Changed {
		t.Errorf("second uninstall: %+v, %v", res, err)
	}
	// Start without a unit says so.
	if _, err := ServiceStart(ctx, moved); !errors.Is(err, ErrServiceNotInstalled) {
		t.Errorf("start without a unit: %v, want ErrServiceNotInstalled", err)
	}
}

// TestServiceSystemdNoUserManager: systemd runs, but the user manager cannot be reached
// (ssh without lingering, root in a systemd container): systemctl --user enable fails, so
// install enables offline, and start says what is wrong.
func TestServiceSystemdNoUserManager(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("cannot run: the systemd back end is Linux-only, this is %s", runtime.GOOS)
	}
	home, calls := installertest.SystemctlShim(t)
	t.Setenv("SHIM_NO_MANAGER", "1")
	ctx := context.Background()
	cfg := testServiceConfig("", home, "/usr/bin/smarter-compact", deadPort(t))
	cfg.ForceSystemd = true
	res, err := ServiceInstall(ctx, cfg)
	if err != nil {
		t.Fatalf("install: %v\ncalls:\n%s", err, readCalls(t, calls))
	}
	if !res.Changed || !res.State.Enabled || res.Unreachable != "Failed to connect to bus: No such file or directory" {
		t.Errorf("install: %+v", res)
	}
	if !strings.Contains(res.State.Detail, "is-active failed: Failed to connect to bus") {
		t.Errorf("detail %q", res.State.Detail)
	}
	if _, err := ServiceStart(ctx, cfg); !errors.Is(err, ErrNoUserManager) || !strings.Contains(err.Error(), "next login") {
		t.Errorf("start: %v, want ErrNoUserManager", err)
	}
	// Stop with nothing answering: the manager's silence is reported, not an error.
	if res, err := ServiceStop(ctx, cfg); err != nil || res.Changed || res.Unreachable == "" {
		t.Errorf("stop: %+v, %v", res, err)
	}
	res, err = ServiceUninstall(ctx, cfg)
	if err != nil || !res.Changed || res.State.Installed || res.State.Enabled || res.Unreachable == "" {
		t.Errorf("uninstall: %+v, %v\ncalls:\n%s", res, err, readCalls(t, calls))
	}
}

// TestServiceSystemdReal uses the real systemctl with a temporary HOME. Without a user
// manager (this container: systemd is not PID 1), enable and disable still work on the
// files; daemon-reload and start fail, which install reports in Unreachable and start as
// ErrNoUserManager. On a host where systemd runs, SYSTEMD_OFFLINE=1 keeps systemctl away
// from the real user manager.
func TestServiceSystemdReal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("cannot run: systemd is Linux-only, this is %s", runtime.GOOS)
	}
	systemctl, err := exec.LookPath("systemctl")
	if err != nil {
		t.Skipf("cannot run: no systemctl on PATH (%v); TestServiceSystemdShim covers the calls", err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config")) // an empty one breaks systemctl
	offline := false
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Setenv("SYSTEMD_OFFLINE", "1")
		offline = true
		t.Log("systemd runs on this host: SYSTEMD_OFFLINE=1 keeps the test off the real user manager")
	}
	ctx := context.Background()
	cfg := testServiceConfig("", home, "/opt/my apps/smarter-compact", deadPort(t))
	cfg.ForceSystemd = true

	res, err := ServiceInstall(ctx, cfg)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	t.Logf("install: changed %v, unreachable %q, detail %q", res.Changed, res.Unreachable, res.State.Detail)
	out, err := exec.Command(systemctl, "--user", "is-enabled", "smarter-compact.service").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "enabled" {
		t.Errorf("systemctl --user is-enabled: %v: %s", err, out)
	}
	link := filepath.Join(home, ".config", "systemd", "user", "default.target.wants", "smarter-compact.service")
	if target, err := os.Readlink(link); err != nil || !strings.HasSuffix(target, "/systemd/user/smarter-compact.service") {
		t.Errorf("enable link %s -> %q, %v", link, target, err)
	}
	if !offline {
		if res.Unreachable == "" {
			t.Errorf("install without a user manager: Unreachable is empty")
		}
		_, err := ServiceStart(ctx, cfg)
		if !errors.Is(err, ErrNoUserManager) {
			t.Errorf("start without a user manager: %v, want ErrNoUserManager", err)
		}
		t.Logf("start: %v", err)
	}
	res, err = ServiceUninstall(ctx, cfg)
	if err != nil || !res.Changed || res.State.Installed || res.State.Enabled {
		t.Fatalf("uninstall: %+v, %v", res, err)
	}
	if out, _ := exec.Command(systemctl, "--user", "is-enabled", "smarter-compact.service").CombinedOutput(); strings.TrimSpace(string(out)) == "enabled" {
		t.Errorf("still enabled after uninstall: %s", out)
	}
}

// TestServiceRefusesOtherHome: kardianos/service writes under $HOME, so another home is an
// error before anything is written.
func TestServiceRefusesOtherHome(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skipf("cannot run: only Linux and macOS derive the path from the home, this is %s", runtime.GOOS)
	}
	t.Setenv("HOME", t.TempDir())
	other := t.TempDir()
	cfg := testServiceConfig("", other, "/usr/bin/smarter-compact", deadPort(t))
	cfg.ForceSystemd = true
	if _, err := ServiceInstall(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "not this") {
		t.Errorf("install into another home: %v", err)
	}
	if entries, _ := os.ReadDir(other); len(entries) > 0 {
		t.Errorf("wrote into the other home: %v", entries)
	}
}

// TestServiceNoSystemd: without ForceSystemd, a Linux whose init is not systemd (this
// container) has no login service, and says so.
func TestServiceNoSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("cannot run: Linux only, this is %s", runtime.GOOS)
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("cannot run: systemd is the init here, so the unsupported path is not taken")
	}
	if b, _ := os.ReadFile("/proc/1/comm"); strings.TrimSpace(string(b)) == "systemd" {
		t.Skip("cannot run: PID 1 is systemd")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := testServiceConfig("", home, "/usr/bin/smarter-compact", deadPort(t))
	_, err := ServiceInstall(context.Background(), cfg)
	if !errors.Is(err, ErrServiceUnsupported) || !strings.Contains(err.Error(), "systemd is not running") {
		t.Errorf("install without systemd: %v", err)
	}
	// Status still works: nothing installed, not running.
	st, err := ServiceStatus(context.Background(), cfg)
	if err != nil || st.Installed || st.Running || st.Health == "" {
		t.Errorf("status: %+v, %v", st, err)
	}
}

// TestServiceSystemdXDGHint: systemd reads user units from $XDG_CONFIG_HOME when it is set
// (an empty one breaks systemctl), while they are written to ~/.config: enable fails, and
// the error says why.
func TestServiceSystemdXDGHint(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("cannot run: systemd is Linux-only, this is %s", runtime.GOOS)
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skipf("cannot run: no systemctl on PATH (%v)", err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Setenv("SYSTEMD_OFFLINE", "1")
	}
	cfg := testServiceConfig("", home, "/usr/bin/smarter-compact", deadPort(t))
	cfg.ForceSystemd = true
	_, err := ServiceInstall(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), `XDG_CONFIG_HOME is ""`) {
		t.Errorf("install with an empty XDG_CONFIG_HOME: %v, want the XDG hint", err)
	}
	t.Logf("install: %v", err)
}

// TestLaunchctlListPID reads the process of `launchctl list <label>` (macOS's output shape).
func TestLaunchctlListPID(t *testing.T) {
	running := "{\n\t\"LimitLoadToSessionType\" = \"Aqua\";\n\t\"Label\" = \"smarter-compact\";\n\t\"OnDemand\" = false;\n\t\"LastExitStatus\" = 0;\n\t\"PID\" = 4242;\n\t\"Program\" = \"/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact\";\n};\n"
	stopped := "{\n\t\"Label\" = \"smarter-compact\";\n\t\"LastExitStatus\" = 256;\n};\n"
	if got := launchctlListPID(running); got != 4242 {
		t.Errorf("running: %d, want 4242", got)
	}
	if got := launchctlListPID(stopped); got != 0 {
		t.Errorf("loaded, not running: %d, want 0", got)
	}
}
