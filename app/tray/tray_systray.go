//go:build linux || windows || (darwin && cgo)

package tray

// The tray through fyne.io/systray (Linux: a StatusNotifierItem with a com.canonical.dbusmenu
// menu over the D-Bus session bus; Windows: a notification-area icon; macOS: an
// NSStatusItem in the menu bar, whose [NSApp run] loop must own the process's main
// thread, so it runs only on Options.MainThread). The library holds
// process-wide state, runs once per process, and drops a click when no goroutine waits on
// the item's ClickedCh (research/go-spikes.md §3): each item has a goroutine that only
// receives and queues, and one worker owns every menu change.

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/systray"

	"github.com/smarter-compact/smarter-compact/assets"
)

// started: fyne.io/systray cannot run twice in one process (its quit channel closes
// once), so a second Start (in-process tests) runs headless.
var started atomic.Bool

// mainThreadOnly is needsMainThread, which tests turn on to see macOS's rule on any OS.
var mainThreadOnly = needsMainThread

// Start shows the tray icon and menu until ctx ends or stop is called, and returns at
// once. The library's loop runs on Options.MainThread when given; without it, on a
// goroutine of its own locked to its OS thread (Linux, Windows), and on macOS not at all:
// the tray runs headless there, since AppKit's loop would wait forever for a main thread
// nobody serves. Without a tray host (no D-Bus session bus on Linux, no GUI login session
// on macOS, session 0 on Windows) it logs that once, reports "headless: <why>" through
// App.SetTray and never starts the library. stop quits the library only when it was
// started, waits for it (at most stopWait) and may be called more than once.
func Start(ctx context.Context, app App, o Options) (stop func()) {
	if mainThreadOnly && o.MainThread == nil {
		return headless(app, o, "the macOS menu-bar icon needs the process's main thread, which only the smarter-compact program gives it, not a caller of serve in process")
	}
	if !started.CompareAndSwap(false, true) {
		return headless(app, o, "the tray already ran in this process")
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ok, why, note := host(getenv)
	if !ok {
		return headless(app, o, why)
	}
	if ctx.Err() != nil {
		return func() {} // the service stopped while the bus was tested (serve starts the tray in the background)
	}
	if note != "" {
		o.Log.Info("tray: " + note)
	}
	spawn := func(loop func()) bool {
		go func() {
			// Windows: the tray window and its message loop must stay on one OS thread.
			runtime.LockOSThread()
			loop()
		}()
		return true
	}
	if o.MainThread != nil {
		spawn = o.MainThread
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &tray{app: app, o: o, clicks: make(chan menuItem, 16)}
	ready := make(chan struct{})
	exited := make(chan struct{})
	spawned := spawn(func() {
		defer close(exited)
		defer func() {
			// Should the bus go away between host's dial and Run, the library panics
			// on Quit (after its onExit ran): keep serving.
			if p := recover(); p != nil {
				o.Log.Error("tray: the tray library failed", "panic", p)
			}
		}()
		// The icon of the state at start, before the library exports it (beforeRun).
		if o.Root != nil {
			t.stats.read(ctx, o.Root, time.Now(), o.Log)
		}
		v := makeView(app.State(), t.stats, time.Now())
		if beforeRun(assets.Tray(v.Icon), v.Tooltip) {
			t.icon, t.iconSet, t.shown.Tooltip = v.Icon, true, v.Tooltip
		}
		systray.Run(func() {
			t.build()
			t.wg.Go(func() { t.run(ctx) }) // before ready: quit waits for it after ready
			app.SetTray("running")
			close(ready)
		}, nil)
	})
	if !spawned {
		cancel()
		return headless(app, o, "the main thread takes no more work (the program is ending)")
	}
	var once sync.Once
	quit := func() {
		once.Do(func() {
			select {
			case <-ready:
			case <-exited:
			case <-time.After(stopWait):
				// Never ready: quit anyway.
			}
			cancel()
			t.wg.Wait() // no menu change after the library quit
			select {
			case <-exited:
			default:
				systray.Quit()
			}
		})
	}
	go func() {
		<-ctx.Done()
		quit()
	}()
	return func() {
		quit()
		select {
		case <-exited:
		case <-time.After(stopWait):
			o.Log.Warn("tray: the tray did not stop in time", "waited", stopWait)
		}
	}
}

// menuItem names a menu item in the click queue.
type menuItem struct {
	agent string // an agent's checkbox
	other string // one of the label* of the other items
}

// tray is the running menu. Only the worker (run) touches the items after build.
type tray struct {
	app    App
	o      Options
	clicks chan menuItem
	wg     sync.WaitGroup

	status, problem, pause, dashboard, login, quit *systray.MenuItem
	agents                                         map[string]*systray.MenuItem
	// The confirmation of Quit (tray.go), hidden until Quit is clicked.
	quitWarn, quitPause, quitSure *systray.MenuItem

	// Owned by the worker.
	shown     view
	stats     storeStats
	loginView Login
	loginAt   time.Time
	lastLogin check
	icon      assets.TrayState
	iconSet   bool
	settled   bool // the first refreshEvery tick set the icon and tooltip again
	asking    bool // the confirmation of Quit is shown
}

// build creates the items (in the order of the menu in tray.go) and one receiving
// goroutine per clickable item.
func (t *tray) build() {
	t.status = systray.AddMenuItem("Today: …", "Requests and trims today (UTC)")
	t.status.Disable()
	t.problem = systray.AddMenuItem("Problem", "What fails now: the dashboard says what to do")
	t.problem.Disable()
	t.problem.Hide()
	systray.AddSeparator()
	t.agents = map[string]*systray.MenuItem{}
	for _, agent := range t.o.Agents {
		it := systray.AddMenuItemCheckbox(agentLabels[agent], "", false)
		t.agents[agent] = it
		t.listen(it, menuItem{agent: agent})
	}
	t.pause = systray.AddMenuItemCheckbox(labelPause, "Pause trimming for every agent", false)
	t.listen(t.pause, menuItem{other: labelPause})
	systray.AddSeparator()
	t.dashboard = systray.AddMenuItem(labelDashboard, t.app.DashboardURL())
	t.listen(t.dashboard, menuItem{other: labelDashboard})
	t.login = systray.AddMenuItemCheckbox(labelLogin, "Start smarter-compact when you log in", false)
	t.login.Disable() // until the login service answered
	t.listen(t.login, menuItem{other: labelLogin})
	systray.AddSeparator()
	t.quit = systray.AddMenuItem(labelQuit, "Stop smarter-compact")
	t.listen(t.quit, menuItem{other: labelQuit})
	t.quitWarn = systray.AddMenuItem("", "")
	t.quitWarn.Disable()
	t.quitWarn.Hide()
	t.quitPause = systray.AddMenuItem(labelQuitPause, "Keep the service running; every agent's requests pass through untouched")
	t.quitPause.Hide()
	t.listen(t.quitPause, menuItem{other: labelQuitPause})
	t.quitSure = systray.AddMenuItem(labelQuitSure, "Stop smarter-compact")
	t.quitSure.Hide()
	t.listen(t.quitSure, menuItem{other: labelQuitSure})
}

// askQuit shows (or hides) the confirmation of Quit.
func (t *tray) askQuit(ask bool, warning string) {
	if ask == t.asking {
		return
	}
	t.asking = ask
	if !ask {
		t.quitWarn.Hide()
		t.quitPause.Hide()
		t.quitSure.Hide()
		return
	}
	t.quitWarn.SetTitle(warning)
	t.quitWarn.Show()
	t.quitPause.Show()
	t.quitSure.Show()
}

// listen receives its clicks for as long as the process runs (the library never closes
// ClickedCh) and queues them for the worker; a full queue (16 clicks the worker has not
// taken) drops the click.
func (t *tray) listen(it *systray.MenuItem, id menuItem) {
	go func() {
		for range it.ClickedCh {
			select {
			case t.clicks <- id:
			default:
				t.o.Log.Warn("tray: click dropped: too many clicks queued")
			}
		}
	}()
}

// run is the worker: it applies clicks, and redraws on every state change and every
// refreshEvery, until ctx ends.
func (t *tray) run(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	changed := t.app.Changed(ctx)
	var health <-chan struct{} // a new problem shows at once, not at the next tick
	if t.o.Root != nil {
		health = t.o.Root.Health().Changed(ctx)
	}
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	t.refresh(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-t.clicks:
			t.click(ctx, c)
			t.refresh(ctx, c.other == labelLogin)
		case _, ok := <-changed:
			if !ok {
				changed = nil
				continue
			}
			t.redraw()
		case _, ok := <-health:
			if !ok {
				health = nil
				continue
			}
			t.stats.Health = t.o.Root.Health().Snapshot()
			t.redraw()
		case <-tick.C:
			if !t.settled {
				// fyne.io/systray (Linux) drops a SetIcon or SetTooltip made while it
				// exports the item's properties, which runs alongside the menu's first
				// draw: set both again once.
				t.iconSet, t.shown.Tooltip, t.settled = false, "", true
			}
			t.refresh(ctx, time.Since(t.loginAt) >= loginRefresh)
		}
	}
}

func (t *tray) click(ctx context.Context, c menuItem) {
	log := t.o.Log
	if c.other != labelQuit {
		t.askQuit(false, "")
	}
	switch {
	case c.agent != "":
		if err := clickAgent(t.app, c.agent); err != nil {
			log.Warn("tray: agent not switched", "agent", c.agent, "err", err)
		}
	case c.other == labelPause:
		if err := t.app.SetPaused(!t.app.State().Paused); err != nil {
			log.Warn("tray: pause not switched", "err", err)
		}
	case c.other == labelDashboard:
		openDashboard(t.app.DashboardURL(), log)
	case c.other == labelLogin:
		if t.loginView.Unsupported == "" {
			t.app.SetLogin(ctx, !t.loginView.Enabled)
		}
	case c.other == labelQuit:
		if w := quitWarning(t.app.State()); w != "" && !t.asking {
			t.askQuit(true, w)
			return
		}
		log.Info("tray: quit")
		t.app.Quit()
	case c.other == labelQuitSure:
		log.Info("tray: quit")
		t.app.Quit()
	case c.other == labelQuitPause:
		if err := t.app.SetPaused(true); err != nil {
			log.Warn("tray: pause not switched", "err", err)
		}
	}
}

// refresh reads the store (and the login service when login) and redraws.
func (t *tray) refresh(ctx context.Context, login bool) {
	if t.o.Root != nil {
		t.stats.read(ctx, t.o.Root, time.Now(), t.o.Log)
	}
	if login {
		t.loginView, t.loginAt = t.app.LoginStatus(ctx), time.Now()
	}
	t.redraw()
}

// redraw copies the view of the current state onto the items that changed.
func (t *tray) redraw() {
	v := makeView(t.app.State(), t.stats, time.Now())
	old := t.shown
	if v.Status != old.Status {
		t.status.SetTitle(v.Status)
	}
	if v.Problem != old.Problem {
		if v.Problem == "" {
			t.problem.Hide()
		} else {
			t.problem.SetTitle(v.Problem)
			t.problem.Show()
		}
	}
	for agent, it := range t.agents {
		if c, ok := v.Agents[agent]; ok {
			setCheck(it, c, old.Agents[agent], old.Agents == nil)
		}
	}
	setCheck(t.pause, v.Pause, old.Pause, old.Agents == nil)
	lc := check{Checked: t.loginView.Enabled, Disabled: t.loginView.Unsupported != "", Tip: t.loginView.Unsupported}
	setCheck(t.login, lc, t.lastLogin, old.Agents == nil)
	if !t.iconSet || v.Icon != t.icon {
		setIcon(assets.Tray(v.Icon))
		t.icon, t.iconSet = v.Icon, true
	}
	if v.Tooltip != old.Tooltip {
		systray.SetTooltip(v.Tooltip)
	}
	t.shown, t.lastLogin = v, lc
}

// setCheck updates it to c where c differs from was (everything when all): every
// library call emits a D-Bus signal.
func setCheck(it *systray.MenuItem, c, was check, all bool) {
	if all || c.Checked != was.Checked {
		if c.Checked {
			it.Check()
		} else {
			it.Uncheck()
		}
	}
	if all || c.Disabled != was.Disabled {
		if c.Disabled {
			it.Disable()
		} else {
			it.Enable()
		}
	}
	if all || c.Tip != was.Tip {
		it.SetTooltip(c.Tip)
	}
}
