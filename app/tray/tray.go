// Package tray owns the tray icon and its menu (DESIGN.md §9, issue 6 item 4): what the menu
// shows, what a click does, and the tray library (fyne.io/systray on Linux, Windows and
// macOS).
// What it needs from the service it declares as App, which package app implements: the
// switches, the login service, the dashboard's URL and quit. It reads the store's totals
// for the status line and never writes anything itself. Only package app imports it.
//
// The menu:
//
//	Today: N requests, M trims, $X saved (P %)   (disabled; every refreshEvery and on every state change)
//	Problem: <what fails>          (disabled; shown only while the health record has one)
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
//	  Wired agents (…) cannot reach their API until the service runs again   (disabled)
//	  Pause all instead                                                      (hidden until
//	  Quit anyway                                                             Quit is clicked)
//
// Quitting stops the proxy the wired agents point at, so while an agent is wired the
// first click on Quit only shows the three items below it (fyne.io/systray has no dialog
// and no notification: the menu is the one place to ask, see docs/decisions.md): the
// warning, "Pause all instead" (every agent passes through untouched, the service keeps
// running) and "Quit anyway". Any other click hides them again. With no agent wired, Quit
// quits at once.
//
// The icon shows the state: active, paused (pause all, or every agent off) or error (a
// problem active in the store's health record, a fail-open in the last errorWindow, or a
// config error; the tooltip says what fails and what to do); on macOS a black template image
// of the same shape. tray.go is the portable part, tray_systray.go the tray library's (Linux,
// Windows, macOS with cgo, whose loop needs the main thread: Options.MainThread) and
// tray_other.go the headless rest. Whether there is a tray host at all is decided per OS
// before the library starts (host; session.go), because fyne.io/systray panics on Quit
// without a session bus (research/go-spikes.md §3) and AppKit fails without a window server.
package tray

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cli/browser"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
	"github.com/smarter-compact/smarter-compact/web"
)

// App is what the tray needs from the service, and all of it (ollama's
// wintray.NewTray(AppCallbacks)). Package app implements it. The methods may be called
// from the tray's goroutines: they must be safe for concurrent use.
type App interface {
	// State is the switches as the dashboard shows them (web.Control).
	State() web.State
	// Changed receives after every change of State and is closed when ctx ends
	// (web.Control).
	Changed(ctx context.Context) <-chan struct{}
	// SetAgent saves one agent's switch (web.Control); the tray sends web.ModeOn or
	// web.ModeOff.
	SetAgent(agent string, mode web.Mode) error
	// SetPaused saves pause all (web.Control).
	SetPaused(paused bool) error
	// SetTray records the tray's own state for web.State.Tray: "running" or
	// "headless: <why>".
	SetTray(status string)
	// LoginStatus asks the login service whether it is registered (at most LoginTimeout).
	LoginStatus(ctx context.Context) Login
	// SetLogin registers the login service when enable, else removes it; the outcome goes
	// to the log.
	SetLogin(ctx context.Context, enable bool)
	// DashboardURL is http://127.0.0.1:<port>/, opened by "Open dashboard".
	DashboardURL() string
	// Quit ends the service; the service then calls the stop func of Start.
	Quit()
}

// Options are what the tray reads besides App.
type Options struct {
	// Agents are the agents with a checkbox, in menu order ([context_proxy.agents] keys).
	Agents []string
	// Root is the store the status line and the error icon read; nil: none.
	Root *store.Root
	// Prices returns the price table of the money saved in the status line; nil: the
	// built-in list prices.
	Prices func() savings.Prices
	Log    *slog.Logger
	// Getenv is the service's environment (the session bus on Linux); nil: the process's.
	Getenv func(string) string
	// MainThread, when set, runs f on the process's main thread and returns at once, true;
	// false when it no longer can (the program is ending). The tray library's loop runs in
	// f until the tray stops. nil: the loop gets a goroutine of its own on Linux and
	// Windows, and the tray runs headless on macOS, whose AppKit loop needs the main thread.
	MainThread func(f func()) bool
}

// Login is the "Start at login" item's view of the login service.
type Login struct {
	Enabled     bool   // registered and starts at login
	Unsupported string // why there is no login service here; "" when there is one
}

const (
	// refreshEvery is how often the status line, the icon and the store are read again.
	refreshEvery = 5 * time.Second
	// loginRefresh is how often the login service is asked again whether it is
	// registered (systemctl on Linux); a click asks at once.
	loginRefresh = 30 * time.Second
	// errorWindow: a fail-open this recent shows the error icon.
	errorWindow = 10 * time.Minute
	// stopWait bounds how long stop waits for the tray library to finish.
	stopWait = 5 * time.Second
	// LoginTimeout bounds one install, uninstall or status of the login service.
	LoginTimeout = 30 * time.Second
	// DialTimeout bounds the test dial of the D-Bus session bus (Linux): the longest the
	// tray looks for its host before it starts or runs headless.
	DialTimeout = 5 * time.Second
)

// agentLabels are the agents' checkbox labels by agent name ([context_proxy.agents] keys).
var agentLabels = map[string]string{
	"claude-code": "Trim Claude Code",
	"codex":       "Trim Codex",
	"opencode":    "Trim OpenCode",
}

// Labels of the other items; the e2e test finds items by these.
const (
	labelPause     = "Pause all"
	labelDashboard = "Open dashboard"
	labelLogin     = "Start at login"
	labelQuit      = "Quit"
	labelQuitPause = "Pause all instead"
	labelQuitSure  = "Quit anyway"
	title          = "Smarter Compact"
)

// check is one checkbox as the menu shows it.
type check struct {
	Checked  bool
	Disabled bool
	Tip      string // tooltip: why it is what it is (Windows and macOS show it)
}

// view is the whole menu and icon, computed from the state and the store; the tray
// library code only copies it onto the items.
type view struct {
	Status  string
	Problem string           // the problem line; "" hides it
	Agents  map[string]check // by agent name, Options.Agents only
	Pause   check
	Icon    assets.TrayState
	Tooltip string
}

// storeStats is what the tray reads from the store: today's totals and the newest
// fail-open it knows of.
type storeStats struct {
	Today     store.Day
	TodayErr  error           // Daily failed: the status line says so
	Saved     *savings.Figure // today's money saved; nil when the savings could not be read
	LastError time.Time       // newest fail-open seen; zero when none
	// failOpens is the fail-open count of the last two days when LastError was looked up:
	// Status (which reads every session database) runs again only when it changes.
	failOpens int64
	looked    bool
	statusErr string // the last Status error logged, so a lasting one is logged once
	// Health is the store's health record (store.Health), read on every refresh: it is in
	// memory, so reading it costs nothing.
	Health store.HealthSnapshot
}

// read refreshes s from root: Daily on every call (cached by the store), Status only
// when the fail-open count moved. Two days, so a fail-open just before midnight UTC still
// counts after it.
func (s *storeStats) read(ctx context.Context, root *store.Root, prices savings.Prices, now time.Time, log *slog.Logger) {
	s.Health = root.Health().Snapshot()
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
	s.readSavings(ctx, root, prices, now)
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

// readSavings sets Saved from today's savings records (a read of files the store caches).
func (s *storeStats) readSavings(ctx context.Context, root *store.Root, prices savings.Prices, now time.Time) {
	groups, err := root.Savings(ctx, now)
	if err != nil {
		s.Saved = nil
		return
	}
	f := savings.Summarize(groups, prices, now).Today
	s.Saved = &f
}

// statusLine is the disabled first item: "Today: 12 requests, 3 trims, $0.42 saved (58.0 %)"
// (the money only once a priced request was recorded today).
func statusLine(s storeStats) string {
	if s.TodayErr != nil {
		return "Today: totals unavailable (see the log)"
	}
	line := fmt.Sprintf("Today: %s, %s", plural(s.Today.Requests, "request"), plural(s.Today.Trims, "trim"))
	if f := s.Saved; f != nil && f.Requests > 0 && f.Percent != nil {
		line += fmt.Sprintf(", %s saved (%s %%)", savings.USD(f.Saved), savings.PercentText(*f.Percent))
	}
	return line
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// makeView computes the menu (but "Start at login") and the icon from the state and
// the store's totals at now.
// An agent's checkbox shows what the proxy does with its next request (AgentSwitch.Trimming);
// while paused, or while CONTEXT_PROXY_ENABLED overrides every switch, a click could not
// change that, so the agents are disabled and their tooltip says why.
func makeView(st web.State, stats storeStats, now time.Time) view {
	v := view{Status: statusLine(stats), Agents: map[string]check{}}
	anyOn := false
	for _, a := range st.Agents {
		if _, ok := agentLabels[a.Agent]; !ok {
			continue
		}
		anyOn = anyOn || a.Trimming
		v.Agents[a.Agent] = check{Checked: a.Trimming, Disabled: st.Paused || st.EnvLock != "", Tip: a.Why}
	}
	v.Pause = check{Checked: st.Paused, Tip: "Every agent passes through untouched while paused"}
	cfgErr := configError(st)
	recent := !stats.LastError.IsZero() && now.Sub(stats.LastError) < errorWindow
	problems := stats.Health.ActiveEntries()
	if len(problems) > 0 {
		v.Problem = problemLine(problems)
	}
	switch {
	case cfgErr != "":
		v.Icon, v.Tooltip = assets.TrayError, title+": config error: "+cfgErr
	case len(problems) > 0:
		p := problems[0]
		v.Icon, v.Tooltip = assets.TrayError, fmt.Sprintf("%s: %s (%s at %s). %s", title, web.HealthTitle(p.Kind, p.Key),
			plural(p.Count, "time"), p.Last.Local().Format("15:04"), p.Hint)
	case recent:
		v.Icon, v.Tooltip = assets.TrayError, fmt.Sprintf("%s: a request failed open at %s (see the dashboard)", title, stats.LastError.Local().Format("15:04"))
	case st.Paused:
		v.Icon, v.Tooltip = assets.TrayPaused, title+": paused"
	case !anyOn:
		v.Icon, v.Tooltip = assets.TrayPaused, title+": trimming is off for every agent"
	default:
		v.Icon, v.Tooltip = assets.TrayActive, title+": trimming"
	}
	v.Tooltip += "\n" + v.Status
	return v
}

// problemLine is the menu's problem line: the newest problem and how many more there are.
func problemLine(problems []store.HealthActive) string {
	s := "Problem: " + web.HealthTitle(problems[0].Kind, problems[0].Key)
	if n := len(problems) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s + ": see the dashboard"
}

// configError returns the state's config error ("" when none), its first line.
func configError(st web.State) string {
	s, _, _ := strings.Cut(st.ConfigError, "\n")
	return s
}

// quitWarning is the line Quit shows before it stops the service: the wired agents, which
// cannot reach their model API while the service is down; "" when no agent is wired, and
// Quit quits at once.
func quitWarning(st web.State) string {
	var wired []string
	for _, a := range st.Agents {
		if a.Wiring == web.WiringWired {
			wired = append(wired, a.Agent)
		}
	}
	if len(wired) == 0 {
		return ""
	}
	return "Wired agents (" + strings.Join(wired, ", ") + ") cannot reach their API until the service runs again"
}

// clickAgent flips one agent: on when its next request would not be trimmed, off when
// it would. The state is read at the click, not from the checkbox, so a click always
// flips what the proxy does even when the menu lagged behind.
func clickAgent(s App, agent string) error {
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

// headless reports a tray that does not run: one log line, and State().Tray.
func headless(app App, o Options, why string) (stop func()) {
	o.Log.Info("tray: " + why + ": running headless")
	app.SetTray("headless: " + why)
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

// prices is Options.Prices, the built-in list prices without it.
func (o Options) prices() savings.Prices {
	if o.Prices != nil {
		if p := o.Prices(); p != nil {
			return p
		}
	}
	return savings.DefaultPrices()
}
