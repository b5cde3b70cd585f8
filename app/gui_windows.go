//go:build windows

package app

// smarter-compact-gui.exe: the same main as smarter-compact.exe, linked with
// -ldflags "-H windowsgui -X github.com/smarter-compact/smarter-compact/app.subsystem=windowsgui".
// Windows starts a windowsgui exe without a console, so the Run value, the Start-menu
// shortcut and a double-click open no console window (and closing one cannot end serve).
//
// The process knows it is the GUI build from that link-time value, not by guessing from its
// handles: "no arguments means serve" must be a property of the file a user double-clicks,
// and the console exe run with no arguments must keep printing its usage. The handles then
// decide where output goes: a stream the caller gave us (`service start` hands the child its
// log file; `> out.txt`) is kept; a missing one (Explorer's logon start, a double-click)
// goes to <state dir>\logs\smarter-compact.log, the file `service start` writes too. Nothing
// is written to a handle that does not exist.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sys/windows"
)

// subsystem is "windowsgui" in smarter-compact-gui.exe (set with -X at link time) and
// "console" otherwise.
var subsystem = "console"

// guiLogMax is the size in bytes at which the GUI log is rotated when a process starts: it
// becomes smarter-compact.log.1 (replacing an older one) and a new file begins. serve writes
// a few lines at start and per warning, so 5 MiB is months of output.
const guiLogMax = 5 << 20

func init() {
	if subsystem != "windowsgui" {
		return
	}
	if len(os.Args) == 1 {
		// a double-click or the Start menu: run the service with its tray
		os.Args = append(os.Args, "serve")
	}
	home, _ := os.UserHomeDir()
	if err := guiOutput(serviceLogDir(os.Getenv, home, "windows")); err != nil {
		// no console and no log file: the one place left a user sees
		msg, _ := windows.UTF16PtrFromString("Smarter Compact cannot write its log: " + err.Error())
		title, _ := windows.UTF16PtrFromString("Smarter Compact")
		_, _ = windows.MessageBox(0, msg, title, windows.MB_OK|windows.MB_ICONWARNING)
	}
}

// stdHandleMissing reports whether the standard handle std (windows.STD_OUTPUT_HANDLE, …)
// leads nowhere, as in a windowsgui process that nobody gave handles.
func stdHandleMissing(std uint32) bool {
	h, err := windows.GetStdHandle(std)
	if err != nil || h == 0 || h == windows.InvalidHandle {
		return true
	}
	_, err = windows.GetFileType(h)
	return err != nil
}

// guiOutput points stdout and stderr, where they lead nowhere, at the GUI log in dir (see
// openGUILog), for this process's own writes (os.Stdout, os.Stderr, the slog handler Main
// makes) and for the runtime's (SetStdHandle, a fatal error's crash output).
func guiOutput(dir string) error {
	outMissing := stdHandleMissing(windows.STD_OUTPUT_HANDLE)
	errMissing := stdHandleMissing(windows.STD_ERROR_HANDLE)
	if !outMissing && !errMissing {
		return nil
	}
	f, err := openGUILog(dir, guiLogMax)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "%s smarter-compact-gui %s started: pid %d, %s\n",
		time.Now().Format(time.RFC3339), version, os.Getpid(), strings.Join(os.Args[1:], " "))
	if outMissing {
		os.Stdout = f
		_ = windows.SetStdHandle(windows.STD_OUTPUT_HANDLE, windows.Handle(f.Fd()))
	}
	if errMissing {
		os.Stderr = f
		_ = windows.SetStdHandle(windows.STD_ERROR_HANDLE, windows.Handle(f.Fd()))
		_ = debug.SetCrashOutput(f, debug.CrashOptions{})
	}
	return nil
}

// openGUILog opens dir\smarter-compact.log for appending (folder 0700, file 0600 as far as
// Windows keeps modes), first rotating it to smarter-compact.log.1 when it holds max bytes
// or more. A rotation that fails (another process has the file open: a running service's
// log) is skipped and the file appended to. Errors name the path.
func openGUILog(dir string, max int64) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("log folder: %w", err)
	}
	path := filepath.Join(dir, serviceName+".log")
	if fi, err := os.Stat(path); err == nil && fi.Size() >= max {
		_ = os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}
