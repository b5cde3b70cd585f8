//go:build windows

package tray

import "github.com/smarter-compact/smarter-compact/assets"

// host: Windows always has a notification area in a user's session. A logon start
// (the HKCU Run value) runs in that session too.
func host(getenv func(string) string) (ok bool, why, note string) { return true, "", "" }

// beforeRun does nothing here: SetIcon and SetTooltip need the tray window, which
// systray.Run creates; the menu's first draw sets them.
func beforeRun(icon []byte, tooltip string) bool { return false }

// iconBytes is the icon encoding systray.SetIcon takes here: it loads the bytes as an
// .ico file.
func iconBytes(ic assets.TrayIcon) []byte { return ic.ICO }
