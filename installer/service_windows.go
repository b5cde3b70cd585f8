//go:build windows

package installer

// The login service on Windows: the value <RunValue> = "<exe>" serve under
// HKCU\Software\Microsoft\Windows\CurrentVersion\Run, which Explorer runs at logon in the
// user's session (so the tray shows), without admin rights. kardianos/service is not used
// here: it installs a machine-wide LocalSystem service in session 0, which needs admin and
// cannot show a tray (research/go-spikes.md §4).
//
// A Run value is not a manager, so start launches the executable detached, and stop asks
// the running service to quit through a named event that serve waits on (StopRequests):
// Local\<Name>-stop-<port>. The Local namespace is per logon session, so only the user's
// own processes can signal it; no pid file, no port-owner lookup, no network endpoint that
// a web page could reach.
//
// Compiled by the cross-build in .ci/run; not run here (no Windows, and wine cannot run the
// Go 1.26 runtime: research/go-spikes.md §1).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// windowsStartupApprovedKey holds Task Manager's Startup-tab switch per Run value (under
// HKEY_CURRENT_USER).
const windowsStartupApprovedKey = `Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run`

func stopEventName(name string, port int) string {
	return `Local\` + name + "-stop-" + strconv.Itoa(port)
}

// readRunValue returns the Run value, found false when it does not exist.
func readRunValue(name string) (string, bool, error) {
	k, err := registry.OpenKey(registry.CURRENT_USER, WindowsRunKey, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf(`open HKCU\%s: %w`, WindowsRunKey, err)
	}
	defer k.Close()
	v, _, err := k.GetStringValue(name)
	if errors.Is(err, registry.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf(`read HKCU\%s\%s: %w`, WindowsRunKey, name, err)
	}
	return v, true, nil
}

// turnedOff reports whether Task Manager's Startup tab turned the Run value off: its
// StartupApproved entry starts with an odd byte (02 on, 03 off).
func turnedOff(name string) bool {
	k, err := registry.OpenKey(registry.CURRENT_USER, windowsStartupApprovedKey, registry.QUERY_VALUE)
	if err != nil {
		return false
	}
	defer k.Close()
	b, _, err := k.GetBinaryValue(name)
	return err == nil && len(b) > 0 && b[0]&1 == 1
}

func platformInstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	old, found, err := readRunValue(c.RunValue)
	if err != nil {
		return ServiceResult{}, err
	}
	if found && old == def.Content {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	k, _, err := registry.CreateKey(registry.CURRENT_USER, WindowsRunKey, registry.SET_VALUE|registry.QUERY_VALUE)
	if err != nil {
		return ServiceResult{}, fmt.Errorf(`open HKCU\%s: %w`, WindowsRunKey, err)
	}
	defer k.Close()
	if err := k.SetStringValue(c.RunValue, def.Content); err != nil {
		return ServiceResult{}, fmt.Errorf("write %s: %w", def.Path, err)
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformUninstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	_, found, err := readRunValue(c.RunValue)
	if err != nil {
		return ServiceResult{}, err
	}
	if found {
		k, err := registry.OpenKey(registry.CURRENT_USER, WindowsRunKey, registry.SET_VALUE)
		if err != nil {
			return ServiceResult{}, fmt.Errorf(`open HKCU\%s: %w`, WindowsRunKey, err)
		}
		err = k.DeleteValue(c.RunValue)
		k.Close()
		if err != nil && !errors.Is(err, registry.ErrNotExist) {
			return ServiceResult{}, fmt.Errorf("delete %s: %w", def.Path, err)
		}
	}
	// Task Manager's switch for the value would outlive it and turn a later install off.
	if k, err := registry.OpenKey(registry.CURRENT_USER, windowsStartupApprovedKey, registry.SET_VALUE); err == nil {
		_ = k.DeleteValue(c.RunValue)
		k.Close()
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: found, State: st}, err
}

// platformStart launches the executable detached from this console, with its output
// appended to LogDir/<Name>.log, and waits for /healthz.
func platformStart(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	cmd := exec.Command(c.Exe, c.Args...)
	cmd.Dir = c.Home // never the caller's working directory
	logPath := ""
	if c.LogDir != "" {
		if err := os.MkdirAll(c.LogDir, 0o700); err != nil {
			return ServiceResult{}, fmt.Errorf("log folder: %w", err)
		}
		logPath = filepath.Join(c.LogDir, c.Name+".log")
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return ServiceResult{}, fmt.Errorf("log file: %w", err)
		}
		defer f.Close() // the child has its own handle
		cmd.Stdout, cmd.Stderr = f, f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		HideWindow:    true,
		CreationFlags: windows.DETACHED_PROCESS | windows.CREATE_NEW_PROCESS_GROUP,
	}
	if err := cmd.Start(); err != nil {
		return ServiceResult{}, fmt.Errorf("start %s: %w", c.Exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	see := ""
	if logPath != "" {
		see = ": see " + logPath
	}
	deadline := time.Now().Add(c.Wait)
	for ServiceHealth(ctx, c.Port) != nil {
		select {
		case err := <-exited:
			return ServiceResult{}, fmt.Errorf("%s exited before it answered on port %d (%v)%s", c.Exe, c.Port, err, see)
		case <-ctx.Done():
			return ServiceResult{Changed: true}, ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return ServiceResult{Changed: true}, fmt.Errorf("started %s, but http://127.0.0.1:%d/healthz does not answer after %s%s", c.Exe, c.Port, c.Wait, see)
		}
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformStop(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	wasRunning := ServiceHealth(ctx, c.Port) == nil
	name, err := windows.UTF16PtrFromString(stopEventName(c.Name, c.Port))
	if err != nil {
		return ServiceResult{}, err
	}
	h, err := windows.OpenEvent(windows.EVENT_MODIFY_STATE, false, name)
	if err != nil {
		if !wasRunning {
			return stopWait(ctx, c, def, false, false, ServiceResult{})
		}
		st, _ := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, fmt.Errorf("%w: the program on port %d takes no stop request (%v): quit it from its tray icon or in Task Manager", ErrNotOurs, c.Port, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.SetEvent(h); err != nil {
		return ServiceResult{}, fmt.Errorf("signal %s: %w", stopEventName(c.Name, c.Port), err)
	}
	return stopWait(ctx, c, def, wasRunning, true, ServiceResult{})
}

func platformStatus(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceState, error) {
	v, found, err := readRunValue(c.RunValue)
	if err != nil {
		return ServiceState{}, err
	}
	st := registeredState("windows", def, v, found)
	st.Enabled = found && !turnedOff(c.RunValue)
	if found && !st.Enabled {
		st.Detail = "turned off in Task Manager's Startup tab"
	}
	return withHealth(ctx, st, c.Port), nil
}

// StopRequests lets a running service hear ServiceStop: it creates the named event
// Local\<name>-stop-<port> and returns a channel closed when the event is signalled.
// release stops listening and closes the event; call it when the service exits.
func StopRequests(name string, port int) (<-chan struct{}, func(), error) {
	n, err := windows.UTF16PtrFromString(stopEventName(name, port))
	if err != nil {
		return nil, func() {}, err
	}
	ev, err := windows.CreateEvent(nil, 1, 0, n)
	if err != nil && !errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
		return nil, func() {}, fmt.Errorf("stop event %s: %w", stopEventName(name, port), err)
	}
	if err != nil {
		// A stop client still holds the event of a service that exited: start clean.
		_ = windows.ResetEvent(ev)
	}
	quit, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		windows.CloseHandle(ev)
		return nil, func() {}, fmt.Errorf("stop event: %w", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		i, err := windows.WaitForMultipleObjects([]windows.Handle{ev, quit}, false, windows.INFINITE)
		if err == nil && i == windows.WAIT_OBJECT_0 {
			close(stop)
		}
	}()
	release := sync.OnceFunc(func() {
		_ = windows.SetEvent(quit)
		<-done
		windows.CloseHandle(ev)
		windows.CloseHandle(quit)
	})
	return stop, release, nil
}
