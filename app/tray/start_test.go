//go:build linux || windows || (darwin && cgo)

package tray

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/smarter-compact/smarter-compact/web"
)

// fakeApp records SetTray; the tray must call nothing else when it runs headless.
type fakeApp struct {
	mu   sync.Mutex
	tray []string
}

func (a *fakeApp) State() web.State                            { panic("headless tray read the state") }
func (a *fakeApp) Changed(ctx context.Context) <-chan struct{} { panic("headless tray watched") }
func (a *fakeApp) SetAgent(string, web.Mode) error             { panic("headless tray set an agent") }
func (a *fakeApp) SetPaused(bool) error                        { panic("headless tray paused") }
func (a *fakeApp) LoginStatus(context.Context) Login           { panic("headless tray asked login") }
func (a *fakeApp) SetLogin(context.Context, bool)              { panic("headless tray set login") }
func (a *fakeApp) DashboardURL() string                        { return "http://127.0.0.1:1/" }
func (a *fakeApp) Quit()                                       {}
func (a *fakeApp) SetTray(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tray = append(a.tray, s)
}

// TestStartWithoutMainThread is macOS's rule, on any OS: a caller that gives the tray no
// main thread (serve in process, not the program's main goroutine) gets a headless tray at
// once, with one log line saying why, and the library is never started, so nothing waits
// for a main thread nobody serves.
func TestStartWithoutMainThread(t *testing.T) {
	mainThreadOnly = true
	defer func() { mainThreadOnly = needsMainThread }()
	var logs bytes.Buffer
	app := &fakeApp{}
	stop := Start(t.Context(), app, Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Getenv: func(string) string { return "" }})
	stop()
	stop()
	if len(app.tray) != 1 || !strings.HasPrefix(app.tray[0], "headless: ") || !strings.Contains(app.tray[0], "main thread") {
		t.Errorf("SetTray calls %q, want one headless naming the main thread", app.tray)
	}
	if n := strings.Count(logs.String(), "running headless"); n != 1 || !strings.Contains(logs.String(), "main thread") {
		t.Errorf("want one log line naming the main thread, got:\n%s", logs.String())
	}
	if started.Load() {
		t.Error("the tray library was marked started")
	}
}
