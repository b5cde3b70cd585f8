//go:build !linux && !windows

package tray

import (
	"context"
	"runtime"
)

// Start runs headless here. macOS: fyne.io/systray needs cgo and the process's main
// thread, which serve does not give it yet; the BSDs are not supported targets. It logs
// that once and reports it through App.SetTray; stop does nothing.
func Start(ctx context.Context, app App, o Options) (stop func()) {
	why := "no tray on " + runtime.GOOS + " in this build"
	if runtime.GOOS == "darwin" {
		why = "the macOS tray is not built yet (it needs cgo and the main thread)"
	}
	return headless(app, o, why)
}

// Run is Start that blocks until ctx ends.
func Run(ctx context.Context, app App, o Options) {
	Start(ctx, app, o)
	<-ctx.Done()
}
