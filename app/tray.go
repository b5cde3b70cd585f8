package app

// The tray icon (DESIGN.md §9, issue 6 item 4). The menu:
//
//	Today: N requests, M trims     (disabled; every trayRefresh and on every state change)
//	-----
//	Trim Claude Code  [x]          one checkbox per agent: checked = trimming on
//	Trim Codex        [x]
//	Trim OpenCode     [x]
//	Pause all         [ ]
//	-----
//	Open dashboard
//	Start at login    [ ]          the login service of `smarter-compact service`
//	-----
//	Quit
//
// and an icon for the state: active, paused (pause all, or every agent off) and error (a
// fail-open in the last trayErrorWindow, or a config error). This file is the portable
// part: what the menu shows, what a click does, the login service, the browser. The tray
// library's part is in tray_systray.go (Linux and Windows); whether there is a tray host
// at all is decided per OS before the library starts (trayHost in tray_linux.go and
// tray_windows.go), because fyne.io/systray panics on Quit without a session bus
// (research/go-spikes.md §3). Elsewhere (macOS, BSDs) tray_other.go runs headless.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cli/browser"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web"
)

// trayOptions is what serve gives the tray.
type trayOptions struct {
	State        *state
	Root         *store.Root
	DashboardURL string // http://127.0.0.1:<port>/, opened by "Open dashboard"
	Log          *slog.Logger
	// Quit ends serve (cancels its context); serve then calls the stop func of startTray.
	Quit func()
	// Sys and ConfigFlag (serve's --config, "" when not given) give the login service that
	// `smarter-compact service install` would register (serviceConfig). A zero Sys leaves
	// "Start at login" disabled.
	Sys        system
	ConfigFlag string
}

const (
	// trayRefresh is how often the status line, the icon and the store are read again.
	trayRefresh = 5 * time.Second
	// trayLoginRefresh is how often the login service is asked again whether it is
	// registered (systemctl on Linux); a click asks at once.
	trayLoginRefresh = 30 * time.Second
	// trayErrorWindow: a fail-open this recent shows the error icon.
	trayErrorWindow = 10 * time.Minute
	// trayStopWait bounds how long stop waits for the tray library to finish.
	trayStopWait = 5 * time.Second
	// trayLoginTimeout bounds one install, uninstall or status of the login service.
	trayLoginTimeout = 30 * time.Second
)

// trayAgentLabels are the agents' checkbox labels, in configuredAgents order.
var trayAgentLabels = map[string]string{
	agentClaudeCode: "Trim Claude Code",
	agentCodex:      "Trim Codex",
	agentOpenCode:   "Trim OpenCode",
}

// Labels of the other items; the e2e test finds items by these.
const (
	trayLabelPause     = "Pause all"
	trayLabelDashboard = "Open dashboard"
	trayLabelLogin     = "Start at login"
	trayLabelQuit      = "Quit"
	trayTitle          = "Smarter Compact"
)

// trayCheck is one checkbox as the menu shows it.
type trayCheck struct {
	Checked  bool
	Disabled bool
	Tip      string // tooltip: why it is what it is (Windows and macOS show it)
}

// trayView is the whole menu and icon, computed from the state and the store; the tray
// library code only copies it onto the items.
type trayView struct {
	Status  string
	Agents  map[string]trayCheck // by agent name, configuredAgents only
	Pause   trayCheck
	Icon    assets.TrayState
	Tooltip string
}

// trayStats is what the tray reads from the store: today's totals and the newest
// fail-open it knows of.
type trayStats struct {
	Today     store.Day
	TodayErr  error     // Daily failed: the status line says so
	LastError time.Time // newest fail-open seen; zero when none
	// failOpens is the fail-open count of the last two days when LastError was looked up:
	// Status (which reads every session database) runs again only when it changes.
	failOpens int64
	looked    bool
	statusErr string // the last Status error logged, so a lasting one is logged once
}

// read refreshes s from root: Daily on every call (cached by the store), Status only
// when the fail-open count moved. Two days, so a fail-open just before midnight UTC still
// counts after it.
func (s *trayStats) read(ctx context.Context, root *store.Root, now time.Time, log *slog.Logger) {
	days, err := root.Daily(ctx, now, 2)
	if err != nil || len(days) == 0 {
		if err == nil {
			err = errors.New("no days returned")
		}
		if s.TodayErr == nil {
			log.Warn("tray: cannot read today's totals", "err", err)
		}
		s.TodayErr = err
		return
	}
	s.Today, s.TodayErr = days[len(days)-1], nil
	var fo int64
	for _, d := range days {
		fo += d.FailOpens
	}
	if s.looked && fo == s.failOpens {
		return
	}
	if fo == 0 {
		s.failOpens, s.looked = 0, true
		return
	}
	st, err := root.Status(ctx, now, 1)
	if err != nil {
		if err.Error() != s.statusErr {
			s.statusErr = err.Error()
			log.Warn("tray: cannot read the newest fail-opens", "err", err)
		}
		return // looked again on the next refresh
	}
	s.failOpens, s.looked, s.statusErr = fo, true, ""
	for _, f := range st.LastErrors {
		if at, err := time.Parse(time.RFC3339Nano, f.At); err == nil && at.After(s.LastError) {
			s.LastError = at
		}
	}
}

// trayStatusLine is the disabled first item: "Today: 12 requests, 3 trims".
func trayStatusLine(s trayStats) string {
	if s.TodayErr != nil {
		return "Today: totals unavailable (see the log)"
	}
	return fmt.Sprintf("Today: %s, %s", plural(s.Today.Requests, "request"), plural(s.Today.Trims, "trim"))
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// makeTrayView computes the menu (but "Start at login") and the icon from the state and
// the store's totals at now.
// An agent's checkbox shows what the proxy does with its next request (AgentSwitch.Trimming);
// while paused, or while CONTEXT_PROXY_ENABLED overrides every switch, a click could not
// change that, so the agents are disabled and their tooltip says why.
func makeTrayView(st web.State, stats trayStats, now time.Time) trayView {
	v := trayView{Status: trayStatusLine(stats), Agents: map[string]trayCheck{}}
	anyOn := false
	for _, a := range st.Agents {
		if _, ok := trayAgentLabels[a.Agent]; !ok {
			continue
		}
		anyOn = anyOn || a.Trimming
		v.Agents[a.Agent] = trayCheck{Checked: a.Trimming, Disabled: st.Paused || st.EnvLock != "", Tip: a.Why}
	}
	v.Pause = trayCheck{Checked: st.Paused, Tip: "Every agent passes through untouched while paused"}
	cfgErr := trayConfigError(st)
	recent := !stats.LastError.IsZero() && now.Sub(stats.LastError) < trayErrorWindow
	switch {
	case cfgErr != "":
		v.Icon, v.Tooltip = assets.TrayError, trayTitle+": config error: "+cfgErr
	case recent:
		v.Icon, v.Tooltip = assets.TrayError, fmt.Sprintf("%s: a request failed open at %s (see the dashboard)", trayTitle, stats.LastError.Local().Format("15:04"))
	case st.Paused:
		v.Icon, v.Tooltip = assets.TrayPaused, trayTitle+": paused"
	case !anyOn:
		v.Icon, v.Tooltip = assets.TrayPaused, trayTitle+": trimming is off for every agent"
	default:
		v.Icon, v.Tooltip = assets.TrayActive, trayTitle+": trimming"
	}
	v.Tooltip += "\n" + v.Status
	return v
}

// trayConfigError returns the state's config error ("" when none), its first line.
func trayConfigError(st web.State) string {
	s, _, _ := strings.Cut(st.ConfigError, "\n")
	return s
}

// trayClickAgent flips one agent: on when its next request would not be trimmed, off when
// it would. The state is read at the click, not from the checkbox, so a click always
// flips what the proxy does even when the menu lagged behind.
func trayClickAgent(s *state, agent string) error {
	for _, a := range s.State().Agents {
		if a.Agent == agent {
			mode := web.ModeOn
			if a.Trimming {
				mode = web.ModeOff
			}
			return s.SetAgent(agent, mode)
		}
	}
	return fmt.Errorf("no agent %q in the state", agent)
}

// trayHeadless reports a tray that does not run: one log line, and State().Tray.
func trayHeadless(o trayOptions, why string) (stop func()) {
	o.Log.Info("tray: " + why + ": running headless")
	o.State.SetTray("headless: " + why)
	return func() {}
}

// openDashboard opens url in the default browser (xdg-open and friends, open, or
// ShellExecute: github.com/cli/browser) without blocking the caller; a failure is logged
// with what to do instead.
func openDashboard(url string, log *slog.Logger) {
	go func() {
		if err := browser.OpenURL(url); err != nil {
			log.Warn("tray: cannot open the browser: open the dashboard yourself", "url", url, "err", err)
		}
	}()
}

// trayLogin is the "Start at login" item's view of the login service.
type trayLogin struct {
	Enabled     bool   // registered and starts at login
	Unsupported string // why there is no login service here; "" when there is one
}

// loginConfig is the login service `smarter-compact service install` would register for
// this serve; strict refuses a broken config, as install does.
func (o trayOptions) loginConfig(strict bool) (installer.ServiceConfig, []string, error) {
	if o.Sys.getenv == nil {
		return installer.ServiceConfig{}, nil, errors.New("serve did not give the tray its environment")
	}
	return serviceConfig(o.Sys, o.ConfigFlag, strict)
}

// loginStatus asks the login service whether it is registered, with the same rules as
// `smarter-compact service status`.
func (o trayOptions) loginStatus(ctx context.Context) trayLogin {
	ctx, cancel := context.WithTimeout(ctx, trayLoginTimeout)
	defer cancel()
	cfg, _, err := o.loginConfig(false)
	if err != nil {
		return trayLogin{Unsupported: err.Error()}
	}
	if cfg.GOOS == "linux" && !cfg.ForceSystemd && !systemdRunning() {
		return trayLogin{Unsupported: "systemd is not running here: start `smarter-compact serve` yourself"}
	}
	st, err := installer.ServiceStatus(ctx, cfg)
	if err != nil {
		if errors.Is(err, installer.ErrServiceUnsupported) {
			return trayLogin{Unsupported: err.Error()}
		}
		o.Log.Warn("tray: cannot read the login service", "err", err)
		return trayLogin{Unsupported: firstLine(err)}
	}
	return trayLogin{Enabled: st.Installed && st.Enabled}
}

// toggleLogin registers the login service when enable, else removes the registration,
// through the installer calls of `smarter-compact service install|uninstall`. It neither
// starts nor stops the service: this process is the running service. The outcome or the
// error with what to do goes to the log.
func (o trayOptions) toggleLogin(ctx context.Context, enable bool) {
	ctx, cancel := context.WithTimeout(ctx, trayLoginTimeout)
	defer cancel()
	cfg, notes, err := o.loginConfig(enable)
	if err != nil {
		o.Log.Warn("tray: login service not changed", "err", err)
		return
	}
	for _, n := range notes {
		o.Log.Info("tray: login service: " + n)
	}
	if enable {
		res, err := installer.ServiceInstall(ctx, cfg)
		if err != nil {
			o.Log.Warn("tray: login service not installed", "err", strings.ReplaceAll(serviceHelp(err).Error(), "\n", "; "))
			return
		}
		o.Log.Info("tray: login service installed: starts at login", "path", res.State.Path, "manager", res.State.Manager, "changed", res.Changed)
		if res.Unreachable != "" {
			o.Log.Info("tray: the systemd user manager is not reachable here: the unit is enabled and starts at your next login", "detail", res.Unreachable)
		}
		return
	}
	res, err := installer.ServiceUninstall(ctx, cfg)
	if err != nil {
		o.Log.Warn("tray: login service not removed", "err", strings.ReplaceAll(serviceHelp(err).Error(), "\n", "; "))
		return
	}
	o.Log.Info("tray: login service removed: does not start at login", "path", res.State.Path, "changed", res.Changed)
}
