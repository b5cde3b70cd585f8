//go:build !linux && !windows && !(darwin && cgo)

package tray

import (
	"context"
	"runtime"
)

// Start runs headless here: macOS without cgo (fyne.io/systray's menu bar is Objective-C)
// and the BSDs, which are not supported targets. It logs that once and reports it through
// App.SetTray; stop does nothing.
func Start(ctx context.Context, app App, o Options) (stop func()) {
	why := "no tray on " + runtime.GOOS + " in this build"
	if runtime.GOOS == "darwin" {
		why = "this build has no cgo, which the macOS menu-bar icon needs"
	}
	return headless(app, o, why)
}
