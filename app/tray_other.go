//go:build !linux && !windows

package app

import (
	"context"
	"runtime"
)

// startTray runs headless here. macOS: fyne.io/systray needs cgo and the process's main
// thread, which serve does not give it yet; the BSDs are not supported targets. It logs
// that once and reports it through State.SetTray; stop does nothing.
func startTray(ctx context.Context, o trayOptions) (stop func()) {
	why := "no tray on " + runtime.GOOS + " in this build"
	if runtime.GOOS == "darwin" {
		why = "the macOS tray is not built yet (it needs cgo and the main thread)"
	}
	return trayHeadless(o, why)
}
