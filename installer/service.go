package installer

// The per-user login service (DESIGN.md §8, issue 5 item 7). This file is the portable part:
// the configuration, what gets registered on each OS (rendered in service_files.go, so that every OS's
// file can be checked on any host), the health check and the errors. The OS files do the
// registration:
//
//   - service_linux.go: a systemd user unit through kardianos/service (UserService), with
//     our own unit text (the library's default wants multi-user.target, which the user
//     manager does not have, so the service would never start at login).
//   - service_darwin.go: a LaunchAgent, our own plist, run with launchctl in gui/<uid>.
//   - service_windows.go: the HKCU Run value. kardianos/service installs a machine-wide
//     service in session 0 there, which needs admin rights and cannot show a tray.
//
// Whether the service runs is always decided by GET http://127.0.0.1:<port>/healthz, never
// by a pid file or the manager's opinion alone: a stale pid or a crashed unit cannot make
// start skip, and a `smarter-compact serve` started by hand counts as running.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServiceConfig describes the login service. App fills it from the executable and the
// config; tests point Home and LogDir at temporary directories.
type ServiceConfig struct {
	// Name is the systemd unit (<Name>.service) and the LaunchAgent label and file
	// (<Name>.plist): letters, digits, '.', '_' and '-'.
	Name string
	// RunValue is the Windows HKCU Run value's name; "" means Name.
	RunValue    string
	DisplayName string // "" means Name
	Description string // one line; "" means DisplayName
	// Exe is the absolute path of the executable to run (for GOOS); Args follow it, e.g.
	// ["serve"].
	Exe  string
	Args []string
	// Env is set for the service: systemd Environment= lines, launchd
	// EnvironmentVariables. A Windows Run value cannot carry environment variables, so Env
	// must be empty there (ServiceFile returns an error).
	Env map[string]string
	// Home is the user's home directory. On Linux kardianos/service derives the unit's
	// path from the process's own home ($HOME), and launchd reads LaunchAgents from the
	// account's home on macOS, so Home must be that directory: the functions refuse another one rather than
	// write somewhere the caller did not expect.
	Home string
	// Port is the loopback port of the service: its /healthz decides whether it runs.
	Port int
	// LogDir receives the service's output where no manager keeps it: the LaunchAgent's
	// StandardOutPath/StandardErrorPath (<Name>.out.log, <Name>.err.log) and, on Windows,
	// the output of a process ServiceStart launched (<Name>.log). Created with mode 700.
	// systemd keeps the output in the journal. "" means no log files.
	LogDir string
	// GOOS selects what ServiceFile renders; "" means runtime.GOOS. The other functions
	// act on the running system only and return an error for another GOOS.
	GOOS string
	// Wait bounds how long start and stop wait for /healthz to answer or go quiet; 0 means
	// 15 s (serve takes up to 10 s to drain open streams).
	Wait time.Duration
	// ForceSystemd (Linux, tests) uses kardianos/service's systemd back end even when its
	// detection fails because systemd is not PID 1 (/run/systemd/system is missing, as in
	// containers). systemctl then works on unit files offline: enable and disable work,
	// daemon-reload, start and stop fail for lack of a user manager.
	ForceSystemd bool
}

// ServiceDef is what ServiceInstall registers: a file and its content, or on Windows a
// registry value and its command line.
type ServiceDef struct {
	Manager string // "systemd --user", "launchd (LaunchAgent)", "HKCU Run key"
	// Path is the unit or plist file, or the registry value
	// (HKCU\Software\Microsoft\Windows\CurrentVersion\Run\<RunValue>).
	Path    string
	Content string // the file's bytes, or the Run value's command line
}

// ServiceState is the login service as found: registration, the manager's view, and
// whether /healthz answers.
type ServiceState struct {
	Manager   string `json:"manager"`
	Path      string `json:"path"`
	Installed bool   `json:"installed"` // the unit, plist or Run value exists
	// Enabled: it starts at login. systemd: the default.target.wants link exists; launchd:
	// the plist is there (it has RunAtLoad); Windows: the Run value exists and is not turned
	// off in Task Manager's Startup tab.
	Enabled bool `json:"enabled"`
	// Current: the registration is byte for byte what ServiceInstall would write now. When
	// false while installed, another executable, arguments or environment are registered:
	// ServiceInstall rewrites it.
	Current bool   `json:"current"`
	Exe     string `json:"exe,omitempty"`     // the executable the registration runs
	Command string `json:"command,omitempty"` // ExecStart, the program arguments or the Run value
	Running bool   `json:"running"`           // GET /healthz answered smarter-compact's "ok"
	URL     string `json:"url"`               // http://127.0.0.1:<port>
	Health  string `json:"health,omitempty"`  // why /healthz did not answer
	// Detail is the manager's own view ("systemctl --user is-active: inactive",
	// "launchctl print: state = running") or why it could not be asked.
	Detail string `json:"detail,omitempty"`
}

// ServiceResult is what Install, Uninstall, Start or Stop did.
type ServiceResult struct {
	// Changed is false when there was nothing to do: already installed with the same
	// content, not installed, already running, not running.
	Changed bool
	State   ServiceState
	// Unreachable is set (Linux) when the systemd user manager could not be asked, with its
	// error: the unit was written and enabled (or removed) on disk, but nothing could be
	// started, stopped or reloaded now. It starts at the next login.
	Unreachable string
}

var (
	// ErrServiceUnsupported: this system has no per-user service manager we register with
	// (Linux without systemd as init, BSDs). The error says what was looked for.
	ErrServiceUnsupported = errors.New("no per-user login service manager here")
	// ErrServiceNotInstalled: start or stop through the manager, but nothing is registered.
	ErrServiceNotInstalled = errors.New("the login service is not installed")
	// ErrNoUserManager: the systemd user manager is not reachable (no login session, e.g.
	// ssh without lingering, or a container), so the unit cannot be started now.
	ErrNoUserManager = errors.New("the systemd user manager is not reachable")
	// ErrNotOurs: stop asked the manager, but the service on the port still answers: it was
	// started another way (`serve` in a terminal).
	ErrNotOurs = errors.New("still answering: not run by the login service")
)

const (
	defaultServiceWait = 15 * time.Second
	healthTimeout      = 1500 * time.Millisecond
	// WindowsRunKey is the registry key under HKEY_CURRENT_USER that holds the logon start.
	WindowsRunKey = `Software\Microsoft\Windows\CurrentVersion\Run`
)

var serviceNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// normalize fills the defaults and checks every field that ends up in a file.
func (c ServiceConfig) normalize() (ServiceConfig, error) {
	if c.GOOS == "" {
		c.GOOS = runtime.GOOS
	}
	if c.RunValue == "" {
		c.RunValue = c.Name
	}
	if c.DisplayName == "" {
		c.DisplayName = c.Name
	}
	if c.Description == "" {
		c.Description = c.DisplayName
	}
	if c.Wait <= 0 {
		c.Wait = defaultServiceWait
	}
	if !serviceNameRE.MatchString(c.Name) || !serviceNameRE.MatchString(c.RunValue) {
		return c, fmt.Errorf("service name %q (Run value %q): use letters, digits, '.', '_' and '-'", c.Name, c.RunValue)
	}
	if c.Port < 1 || c.Port > 65535 {
		return c, fmt.Errorf("service port %d: must be from 1 to 65535", c.Port)
	}
	if !absFor(c.GOOS, c.Exe) {
		return c, fmt.Errorf("service executable %q is not an absolute path", c.Exe)
	}
	if c.Home == "" || !absFor(c.GOOS, c.Home) {
		return c, fmt.Errorf("home directory %q is not an absolute path", c.Home)
	}
	fields := append([]string{c.Exe, c.DisplayName, c.Description, c.LogDir}, c.Args...)
	for k, v := range c.Env {
		if !envNameRE.MatchString(k) {
			return c, fmt.Errorf("service environment variable %q: not a valid name", k)
		}
		fields = append(fields, v)
	}
	for _, f := range fields {
		if strings.ContainsFunc(f, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return c, fmt.Errorf("service setting %q holds a control character (a newline?)", f)
		}
	}
	if strings.Contains(strings.Join(fields, "\x00"), "{{") {
		// kardianos/service renders the file we hand it as a template.
		return c, fmt.Errorf("service settings must not contain %q", "{{")
	}
	return c, nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// absFor is filepath.IsAbs for goos, so that the Windows rules hold on any host.
func absFor(goos, p string) bool {
	if goos != "windows" {
		return strings.HasPrefix(p, "/")
	}
	if strings.HasPrefix(p, `\\`) {
		return true // UNC
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		(p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z')
}

// ServiceFile returns what ServiceInstall registers for cfg.GOOS, without touching
// anything (the unit and plist paths are joined with '/' whatever the host, since they are
// for a Linux or macOS target): the systemd user unit (linux), the LaunchAgent plist (darwin) or the Run value
// (windows). Other systems return ErrServiceUnsupported.
func ServiceFile(cfg ServiceConfig) (ServiceDef, error) {
	c, err := cfg.normalize()
	if err != nil {
		return ServiceDef{}, err
	}
	switch c.GOOS {
	case "linux":
		return ServiceDef{
			Manager: "systemd --user",
			Path:    path.Join(c.Home, ".config", "systemd", "user", c.Name+".service"),
			Content: systemdUnit(c),
		}, nil
	case "darwin":
		return ServiceDef{
			Manager: "launchd (LaunchAgent)",
			Path:    path.Join(c.Home, "Library", "LaunchAgents", c.Name+".plist"),
			Content: launchdPlist(c),
		}, nil
	case "windows":
		if len(c.Env) > 0 {
			return ServiceDef{}, fmt.Errorf("a Windows logon start (HKCU Run value) cannot carry environment variables (%s): set them in your user environment instead",
				strings.Join(slices.Sorted(maps.Keys(c.Env)), ", "))
		}
		if strings.Contains(c.Exe, `"`) {
			return ServiceDef{}, fmt.Errorf("executable path %q contains a quote", c.Exe)
		}
		return ServiceDef{
			Manager: "HKCU Run key",
			Path:    `HKCU\` + WindowsRunKey + `\` + c.RunValue,
			Content: windowsCommandLine(c.Exe, c.Args),
		}, nil
	}
	return ServiceDef{}, fmt.Errorf("%w: no login service for %s; start `%s` yourself", ErrServiceUnsupported, c.GOOS, strings.Join(append([]string{c.Exe}, c.Args...), " "))
}

// registeredState fills the registration part of a ServiceState from what is registered
// now (found false: nothing). The caller adds Enabled, the health and the manager's view.
func registeredState(goos string, def ServiceDef, registered string, found bool) ServiceState {
	st := ServiceState{Manager: def.Manager, Path: def.Path, Installed: found}
	if !found {
		return st
	}
	st.Current = registered == def.Content
	switch goos {
	case "linux":
		st.Command, st.Exe = systemdExec(registered)
	case "darwin":
		st.Exe = plistProgram(registered)
		st.Command = st.Exe
	case "windows":
		st.Command = registered
		st.Exe = windowsProgram(registered)
	}
	return st
}

// HealthBuildHeader carries the running service's build on GET /healthz (proxy.CodeVersion),
// so `status` can compare it with the installed binary (the seed's proxy_stale).
const HealthBuildHeader = "X-Smarter-Compact-Build"

// Health is what GET /healthz on a loopback port answered.
type Health struct {
	// URL is http://127.0.0.1:<port>, without /healthz.
	URL string
	// Build is HealthBuildHeader's value ("" from a release older than the header).
	Build string
	// Status is the HTTP status line of an answer that is not smarter-compact's 200 "ok";
	// "" when it is.
	Status string
}

// ProbeHealth asks GET /healthz on the loopback port, within 1.5 s, through no proxy and
// following no redirect. err is a failure to get an answer at all; an answer that is not
// ours is Health.Status.
func ProbeHealth(ctx context.Context, port int) (Health, error) {
	h := Health{URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+"/healthz", nil)
	if err != nil {
		return h, err
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		h.Status = resp.Status
		return h, nil
	}
	h.Build = resp.Header.Get(HealthBuildHeader)
	return h, nil
}

// HealthProblem is why h and err of ProbeHealth are not smarter-compact answering: err's
// text, or the status line another program answered with; "" when it is ours.
func HealthProblem(h Health, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case h.Status != "":
		return fmt.Sprintf("GET /healthz answered %s, not smarter-compact's ok: another program on this port?", h.Status)
	}
	return ""
}

// ServiceHealth asks GET http://127.0.0.1:<port>/healthz (no proxy, no redirects, a short
// timeout) and returns nil when it answers smarter-compact's 200 "ok".
func ServiceHealth(ctx context.Context, port int) error {
	h, err := ProbeHealth(ctx, port)
	if err != nil {
		return err
	}
	if h.Status != "" {
		return fmt.Errorf("GET %s/healthz answered %s, not smarter-compact's ok: another program on port %d?", h.URL, h.Status, port)
	}
	return nil
}

// withHealth adds whether /healthz answers.
func withHealth(ctx context.Context, st ServiceState, port int) ServiceState {
	st.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	st.Running, st.Health = true, ""
	if err := ServiceHealth(ctx, port); err != nil {
		st.Running, st.Health = false, err.Error()
	}
	return st
}

// waitHealth polls /healthz until it answers (up true) or stops answering (up false), for
// at most d.
func waitHealth(ctx context.Context, port int, up bool, d time.Duration) bool {
	return pollUntil(ctx, d, 150*time.Millisecond, func() bool { return (ServiceHealth(ctx, port) == nil) == up })
}

// pollUntil calls done every interval until it reports true (then true), d has passed or
// ctx ends (then false). done is called at least once.
func pollUntil(ctx context.Context, d, interval time.Duration, done func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if done() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(interval):
		}
	}
}

// prepare normalizes cfg for the running system and renders its registration.
func prepare(cfg ServiceConfig) (ServiceConfig, ServiceDef, error) {
	c, err := cfg.normalize()
	if err != nil {
		return c, ServiceDef{}, err
	}
	if c.GOOS != runtime.GOOS {
		return c, ServiceDef{}, fmt.Errorf("service config is for %s, this is %s", c.GOOS, runtime.GOOS)
	}
	def, err := ServiceFile(c)
	return c, def, err
}

// ServiceInstall registers the login service (see ServiceFile) so that it starts at login;
// it does not start it now. It is idempotent: the same registration again changes nothing
// (Changed false), another one (a moved executable, new arguments) is replaced. On Linux
// with a systemd that cannot reach the user manager, the unit is still written and enabled
// and Result.Unreachable says why it cannot be reloaded or started now. Errors:
// ErrServiceUnsupported (wrapped) where there is no manager, a home other than the
// process's (Linux, macOS), or the manager's failure with its output.
func ServiceInstall(ctx context.Context, cfg ServiceConfig) (ServiceResult, error) {
	return prepared(ctx, cfg, platformInstall)
}

// ServiceUninstall removes the registration (unit and its enable link, plist, Run value).
// It does not stop a running service, except on macOS where booting the LaunchAgent out
// does; call ServiceStop first. Nothing registered: Changed false, no error.
func ServiceUninstall(ctx context.Context, cfg ServiceConfig) (ServiceResult, error) {
	return prepared(ctx, cfg, platformUninstall)
}

// ServiceStart starts the service and waits until /healthz answers. It is idempotent: when
// /healthz already answers it does nothing (Changed false), whoever started it. Linux and
// macOS start the registered service through the manager (ErrServiceNotInstalled when
// there is none; ErrNoUserManager wrapped when systemd's user manager is unreachable);
// Windows launches cfg.Exe with cfg.Args detached, its output in LogDir/<Name>.log, since
// a Run value is not a manager. An error names where the output went when the service
// started but never answered.
func ServiceStart(ctx context.Context, cfg ServiceConfig) (ServiceResult, error) {
	c, def, err := prepare(cfg)
	if err != nil {
		return ServiceResult{}, err
	}
	if ServiceHealth(ctx, c.Port) == nil {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	return platformStart(ctx, c, def)
}

// ServiceStop stops the service and returns once its process has exited, within c.Wait
// (an error names the process otherwise), so that its executable can be replaced or removed
// right after. Linux asks systemctl --user stop, which itself waits for the unit's
// processes; macOS runs launchctl bootout (which only sends SIGTERM) and waits for the job's
// process; Windows signals the running service's stop event (see StopRequests) and waits on
// the process it published. It also waits until /healthz no longer answers, which is all
// it can wait for with a service too old to publish its process. Changed is false when
// nothing answered.
// ErrNotOurs (wrapped) when the port answers but no stop request could go out (nothing
// registered, no manager to ask, no stop event), or it still answers afterwards: that
// service was started another way and must be stopped there.
func ServiceStop(ctx context.Context, cfg ServiceConfig) (ServiceResult, error) {
	return prepared(ctx, cfg, platformStop)
}

// prepared runs step with cfg as prepare completes it and its service definition, or
// returns prepare's error.
func prepared(ctx context.Context, cfg ServiceConfig, step func(context.Context, ServiceConfig, ServiceDef) (ServiceResult, error)) (ServiceResult, error) {
	c, def, err := prepare(cfg)
	if err != nil {
		return ServiceResult{}, err
	}
	return step(ctx, c, def)
}

// ServiceStatus reports the registration, the manager's view and the health check. It
// changes nothing and needs no manager: what cannot be asked ends up in Detail.
func ServiceStatus(ctx context.Context, cfg ServiceConfig) (ServiceState, error) {
	c, def, err := prepare(cfg)
	if err != nil {
		return ServiceState{}, err
	}
	return platformStatus(ctx, c, def)
}

// stopWait is the common end of platformStop: wait until /healthz goes quiet. requested
// says whether a stop request went out; without one, a service that answers is not ours.
func stopWait(ctx context.Context, c ServiceConfig, def ServiceDef, wasRunning, requested bool, res ServiceResult) (ServiceResult, error) {
	if wasRunning && !requested {
		st, _ := platformStatus(ctx, c, def)
		res.State = st
		return res, fmt.Errorf("%w: smarter-compact answers on port %d, and no login service manager could be asked to stop it", ErrNotOurs, c.Port)
	}
	res.Changed = wasRunning
	if wasRunning && !waitHealth(ctx, c.Port, false, c.Wait) {
		st, _ := platformStatus(ctx, c, def)
		res.State = st
		return res, fmt.Errorf("%w: smarter-compact on port %d still answers %s after the stop request", ErrNotOurs, c.Port, c.Wait)
	}
	st, err := platformStatus(ctx, c, def)
	res.State = st
	return res, err
}

// SystemdRunning reports whether systemd manages this machine (sd_booted's test).
func SystemdRunning() bool {
	fi, err := os.Stat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// SystemdMissing reports whether c is a Linux service with no running systemd to start it
// (as in most containers): the unit could be written, but nothing would run it.
// ForceSystemd (tests) says systemd is there.
func (c ServiceConfig) SystemdMissing() bool {
	return c.GOOS == "linux" && !c.ForceSystemd && !SystemdRunning()
}
