//go:build darwin && cgo

package tray

import (
	"context"
	"os/exec"

	"fyne.io/systray"

	"github.com/smarter-compact/smarter-compact/assets"
)

// needsMainThread: fyne.io/systray's loop is [NSApp run], which AppKit runs on the
// process's main thread only; the library's init locks the main goroutine to it.
const needsMainThread = true

// host asks launchd which session this process belongs to (aquaSession): "Aqua" is a GUI
// login session with a menu bar; ssh gives "Background", where AppKit has no window server
// to talk to.
func host(getenv func(string) string) (ok bool, why, note string) {
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/launchctl", "managername").Output()
	ok, why = aquaSession(string(out), err)
	return ok, why, ""
}

// beforeRun does nothing here: the library's setters go to its app delegate on the main
// thread, which exists once systray.Run started; the menu's first draw sets them.
func beforeRun(ic assets.TrayIcon, tooltip string) bool { return false }

// setIcon shows ic as a menu-bar template image: black and alpha, which macOS tints for
// a light or dark menu bar.
func setIcon(ic assets.TrayIcon) { systray.SetTemplateIcon(ic.Template, ic.PNG) }
