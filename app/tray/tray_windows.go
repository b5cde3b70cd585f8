//go:build windows

package tray

import (
	"fyne.io/systray"
	"golang.org/x/sys/windows"

	"github.com/smarter-compact/smarter-compact/assets"
)

// needsMainThread: the library's window and message loop need one OS thread, any one.
const needsMainThread = false

// host: a user's logon session has a notification area, and a logon start (the HKCU Run
// value) runs in that session too. Session 0 is the services' session, which has no
// desktop: there the tray would never show (windowsSession).
func host(getenv func(string) string) (ok bool, why, note string) {
	var id uint32
	err := windows.ProcessIdToSessionId(windows.GetCurrentProcessId(), &id)
	ok, why = windowsSession(id, err)
	return ok, why, ""
}

// beforeRun does nothing here: SetIcon and SetTooltip need the tray window, which
// systray.Run creates; the menu's first draw sets them.
func beforeRun(ic assets.TrayIcon, tooltip string) bool { return false }

// setIcon shows ic in the encoding systray.SetIcon takes here: it loads the bytes as an
// .ico file.
func setIcon(ic assets.TrayIcon) { systray.SetIcon(ic.ICO) }
