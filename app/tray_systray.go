//go:build linux || windows

package app

// The tray through fyne.io/systray (Linux: a StatusNotifierItem with a com.canonical.dbusmenu
// menu over the D-Bus session bus; Windows: a notification-area icon). The library holds
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

// trayStarted: fyne.io/systray cannot run twice in one process (its quit channel closes
// once), so a second startTray (in-process tests) runs headless.
var trayStarted atomic.Bool

// startTray shows the tray icon and menu until ctx ends or stop is called, and returns at
// once. Without a tray host (no D-Bus session bus on Linux) it logs that once, reports
// "headless: <why>" through State.SetTray and never starts the library. stop quits the
// library only when it was started, waits for it (at most trayStopWait) and may be called
// more than once.
func startTray(ctx context.Context, o trayOptions) (stop func()) {
	if !trayStarted.CompareAndSwap(false, true) {
		return trayHeadless(o, "the tray already ran in this process")
	}
	getenv := o.Sys.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ok, why, note := trayHost(getenv)
	if !ok {
		return trayHeadless(o, why)
	}
	if ctx.Err() != nil {
		return func() {} // the service stopped while the bus was tested (serve starts the tray in the background)
	}
	if note != "" {
		o.Log.Info("tray: " + note)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &tray{o: o, clicks: make(chan trayItem, 16)}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		// Windows: the tray window and its message loop must stay on one OS thread.
		runtime.LockOSThread()
		defer close(exited)
		defer func() {
			// Should the bus go away between trayHost's dial and Run, the library panics
			// on Quit (after its onExit ran): keep serving.
			if p := recover(); p != nil {
				o.Log.Error("tray: the tray library failed", "panic", p)
			}
		}()
		systray.SetTitle(trayTitle)
		// The icon of the state at start, before the library exports it (trayBeforeRun).
		if o.Root != nil {
			t.stats.read(ctx, o.Root, time.Now(), o.Log)
		}
		v := makeTrayView(o.State.State(), t.stats, time.Now())
		if trayBeforeRun(trayIconBytes(assets.Tray(v.Icon)), v.Tooltip) {
			t.icon, t.iconSet, t.shown.Tooltip = v.Icon, true, v.Tooltip
		}
		systray.Run(func() {
			t.build()
			t.wg.Go(func() { t.run(ctx) }) // before ready: quit waits for it after ready
			o.State.SetTray("running")
			close(ready)
		}, nil)
	}()
	var once sync.Once
	quit := func() {
		once.Do(func() {
			select {
			case <-ready:
			case <-exited:
			case <-time.After(trayStopWait):
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
		case <-time.After(trayStopWait):
			o.Log.Warn("tray: the tray did not stop in time", "waited", trayStopWait)
		}
	}
}

// trayItem names a menu item in the click queue.
type trayItem struct {
	agent string // an agent's checkbox
	other string // one of the trayLabel* of the other items
}

// tray is the running menu. Only the worker (run) touches the items after build.
type tray struct {
	o      trayOptions
	clicks chan trayItem
	wg     sync.WaitGroup

	status, pause, dashboard, login, quit *systray.MenuItem
	agents                                map[string]*systray.MenuItem

	// Owned by the worker.
	shown     trayView
	stats     trayStats
	loginView trayLogin
	loginAt   time.Time
	lastLogin trayCheck
	icon      assets.TrayState
	iconSet   bool
	settled   bool // the first trayRefresh tick set the icon and tooltip again
}

// build creates the items (in the order of the menu in tray.go) and one receiving
// goroutine per clickable item.
func (t *tray) build() {
	t.status = systray.AddMenuItem("Today: …", "Requests and trims today (UTC)")
	t.status.Disable()
	systray.AddSeparator()
	t.agents = map[string]*systray.MenuItem{}
	for _, agent := range configuredAgents {
		it := systray.AddMenuItemCheckbox(trayAgentLabels[agent], "", false)
		t.agents[agent] = it
		t.listen(it, trayItem{agent: agent})
	}
	t.pause = systray.AddMenuItemCheckbox(trayLabelPause, "Pause trimming for every agent", false)
	t.listen(t.pause, trayItem{other: trayLabelPause})
	systray.AddSeparator()
	t.dashboard = systray.AddMenuItem(trayLabelDashboard, t.o.DashboardURL)
	t.listen(t.dashboard, trayItem{other: trayLabelDashboard})
	t.login = systray.AddMenuItemCheckbox(trayLabelLogin, "Start smarter-compact when you log in", false)
	t.login.Disable() // until the login service answered
	t.listen(t.login, trayItem{other: trayLabelLogin})
	systray.AddSeparator()
	t.quit = systray.AddMenuItem(trayLabelQuit, "Stop smarter-compact")
	t.listen(t.quit, trayItem{other: trayLabelQuit})
}

// listen receives its clicks for as long as the process runs (the library never closes
// ClickedCh) and queues them for the worker; a full queue (16 clicks the worker has not
// taken) drops the click.
func (t *tray) listen(it *systray.MenuItem, id trayItem) {
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
// trayRefresh, until ctx ends.
func (t *tray) run(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	changed := t.o.State.Changed(ctx)
	tick := time.NewTicker(trayRefresh)
	defer tick.Stop()
	t.refresh(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-t.clicks:
			t.click(ctx, c)
			t.refresh(ctx, c.other == trayLabelLogin)
		case _, ok := <-changed:
			if !ok {
				changed = nil
				continue
			}
			t.redraw()
		case <-tick.C:
			if !t.settled {
				// fyne.io/systray (Linux) drops a SetIcon or SetTooltip made while it
				// exports the item's properties, which runs alongside the menu's first
				// draw: set both again once.
				t.iconSet, t.shown.Tooltip, t.settled = false, "", true
			}
			t.refresh(ctx, time.Since(t.loginAt) >= trayLoginRefresh)
		}
	}
}

func (t *tray) click(ctx context.Context, c trayItem) {
	log := t.o.Log
	switch {
	case c.agent != "":
		if err := trayClickAgent(t.o.State, c.agent); err != nil {
			log.Warn("tray: agent not switched", "agent", c.agent, "err", err)
		}
	case c.other == trayLabelPause:
		if err := t.o.State.SetPaused(!t.o.State.State().Paused); err != nil {
			log.Warn("tray: pause not switched", "err", err)
		}
	case c.other == trayLabelDashboard:
		openDashboard(t.o.DashboardURL, log)
	case c.other == trayLabelLogin:
		if t.loginView.Unsupported == "" {
			t.o.toggleLogin(ctx, !t.loginView.Enabled)
		}
	case c.other == trayLabelQuit:
		log.Info("tray: quit")
		if t.o.Quit != nil {
			t.o.Quit()
		}
	}
}

// refresh reads the store (and the login service when login) and redraws.
func (t *tray) refresh(ctx context.Context, login bool) {
	if t.o.Root != nil {
		t.stats.read(ctx, t.o.Root, time.Now(), t.o.Log)
	}
	if login {
		t.loginView, t.loginAt = t.o.loginStatus(ctx), time.Now()
	}
	t.redraw()
}

// redraw copies the view of the current state onto the items that changed.
func (t *tray) redraw() {
	v := makeTrayView(t.o.State.State(), t.stats, time.Now())
	old := t.shown
	if v.Status != old.Status {
		t.status.SetTitle(v.Status)
	}
	for agent, it := range t.agents {
		if c, ok := v.Agents[agent]; ok {
			setCheck(it, c, old.Agents[agent], old.Agents == nil)
		}
	}
	setCheck(t.pause, v.Pause, old.Pause, old.Agents == nil)
	lc := trayCheck{Checked: t.loginView.Enabled, Disabled: t.loginView.Unsupported != "", Tip: t.loginView.Unsupported}
	setCheck(t.login, lc, t.lastLogin, old.Agents == nil)
	if !t.iconSet || v.Icon != t.icon {
		systray.SetIcon(trayIconBytes(assets.Tray(v.Icon)))
		t.icon, t.iconSet = v.Icon, true
	}
	if v.Tooltip != old.Tooltip {
		systray.SetTooltip(v.Tooltip)
	}
	t.shown, t.lastLogin = v, lc
}

// setCheck updates it to c where c differs from was (everything when all): every
// library call emits a D-Bus signal.
func setCheck(it *systray.MenuItem, c, was trayCheck, all bool) {
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
