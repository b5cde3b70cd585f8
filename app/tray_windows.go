//go:build windows

package app

import "github.com/smarter-compact/smarter-compact/assets"

// trayHost: Windows always has a notification area in a user's session. A logon start
// (the HKCU Run value) runs in that session too.
func trayHost(getenv func(string) string) (ok bool, why, note string) { return true, "", "" }

// trayBeforeRun does nothing here: SetIcon and SetTooltip need the tray window, which
// systray.Run creates; the menu's first draw sets them.
func trayBeforeRun(icon []byte, tooltip string) bool { return false }

// trayIconBytes is the icon encoding systray.SetIcon takes here: it loads the bytes as an
// .ico file.
func trayIconBytes(ic assets.TrayIcon) []byte { return ic.ICO }
