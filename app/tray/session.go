package tray

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// The decisions of the per-OS host checks, apart from the calls that gather their input,
// so that they are tested on every OS.

// aquaSession decides from `launchctl managername` (its output and error) whether this
// process is in a macOS GUI login session, the only one with a menu bar: launchd answers
// "Aqua" there, "Background" over ssh, "LoginWindow" before login, "System" for root's
// daemons. Anything but Aqua, or no answer, is headless: AppKit without a window server
// fails at start.
func aquaSession(out string, err error) (ok bool, why string) {
	name := strings.TrimSpace(out)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return false, fmt.Sprintf("cannot tell whether this is a macOS GUI login session (launchctl managername: %v)", err)
	}
	if name == "Aqua" {
		return true, ""
	}
	if name == "" {
		name = "nothing"
	}
	return false, fmt.Sprintf("not in a macOS GUI login session (launchctl managername says %s, not Aqua: over ssh, say): the menu-bar icon shows when serve starts from the Mac's own login", name)
}

// windowsSession decides from this process's session id (ProcessIdToSessionId) whether it
// has a desktop: session 0 holds the services and none. When the id cannot be read, the
// tray is tried: every session a user logs on to has one.
func windowsSession(id uint32, err error) (ok bool, why string) {
	if err == nil && id == 0 {
		return false, "this process runs in Windows session 0 (services), which has no desktop for a tray icon: start serve from your logon (`smarter-compact service install`)"
	}
	return true, ""
}
