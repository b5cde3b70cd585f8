//go:build linux

package tray

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"fyne.io/systray"
	"github.com/godbus/dbus/v5"

	"github.com/smarter-compact/smarter-compact/assets"
)

// watcherName is the D-Bus name of the tray host's registry (StatusNotifierItem spec).
const watcherName = "org.kde.StatusNotifierWatcher"

// host decides, before fyne.io/systray starts, whether there is a D-Bus session bus
// to show the tray on: DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus, and a test
// dial that authenticates and says Hello. Without one the library would log a dial error,
// panic on Quit, or (with dbus-x11 installed) autolaunch a bus daemon that outlives us
// (research/go-spikes.md §3). getenv is serve's environment; the library reads the
// process's own, so host sets DBUS_SESSION_BUS_ADDRESS there to the bus it tested.
// note says when no tray host (org.kde.StatusNotifierWatcher) runs yet: the item
// registers when one appears.
func host(getenv func(string) string) (ok bool, why, note string) {
	addr := getenv("DBUS_SESSION_BUS_ADDRESS")
	if addr == "autolaunch:" {
		addr = ""
	}
	if addr == "" {
		if dir := getenv("XDG_RUNTIME_DIR"); dir != "" {
			p := filepath.Join(dir, "bus")
			if fi, err := os.Stat(p); err == nil && fi.Mode().Type() == fs.ModeSocket {
				addr = "unix:path=" + dbus.EscapeBusAddressValue(p)
			}
		}
	}
	if addr == "" {
		return false, "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset and there is no $XDG_RUNTIME_DIR/bus)", ""
	}
	hasHost, err := dialBus(addr)
	if err != nil {
		return false, fmt.Sprintf("no D-Bus session bus (%s: %v)", addr, err), ""
	}
	if err := os.Setenv("DBUS_SESSION_BUS_ADDRESS", addr); err != nil {
		return false, fmt.Sprintf("cannot pass the session bus address to the tray library: %v", err), ""
	}
	if !hasHost {
		note = "no tray host is running yet (nothing owns " + watcherName + " on the session bus): the icon appears when one starts"
	}
	return true, "", note
}

// dialBus connects to addr, authenticates, says Hello and asks whether a tray host owns
// watcherName, all within DialTimeout.
func dialBus(addr string) (hasHost bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	type result struct {
		has bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		var has bool
		err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, watcherName).Store(&has)
		done <- result{has: has, err: err}
	}()
	select {
	case r := <-done:
		return r.has, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("no answer within %s", DialTimeout)
	}
}

// needsMainThread: the library runs its loop on any goroutine here.
const needsMainThread = false

// beforeRun sets the title, icon and tooltip before systray.Run: the library then exports
// the item's properties with them, instead of with an empty pixmap that a later SetIcon
// may miss (it drops one made while it exports). It reports that it set icon and tooltip.
// The title is the item's name for the tray host (macOS would show it as text beside the
// icon, so only Linux sets it).
func beforeRun(ic assets.TrayIcon, tooltip string) bool {
	systray.SetTitle(title)
	setIcon(ic)
	systray.SetTooltip(tooltip)
	return true
}

// setIcon shows ic in the encoding the StatusNotifierItem takes: PNG.
func setIcon(ic assets.TrayIcon) { systray.SetIcon(ic.PNG) }
