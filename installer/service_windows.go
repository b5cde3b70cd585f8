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
// a web page could reach. Beside the event, the running service publishes its process id
// in a small named section, Local\<Name>-pid-<port>, so that stop can hold a handle to the
// process and return only once it has exited (its exe is then free to be replaced or
// removed, which an MSI uninstall needs), not when /healthz goes quiet.
//
// Compiled by the cross-build in .ci/run; run under wine by .ci/test-windows.

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
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// windowsStartupApprovedKey holds Task Manager's Startup-tab switch per Run value (under
// HKEY_CURRENT_USER).
const windowsStartupApprovedKey = `Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run`

func stopEventName(name string, port int) string {
	return `Local\` + name + "-stop-" + strconv.Itoa(port)
}

func pidSectionName(name string, port int) string {
	return `Local\` + name + "-pid-" + strconv.Itoa(port)
}

var procOpenFileMapping = windows.NewLazySystemDLL("kernel32.dll").NewProc("OpenFileMappingW")

// publishPID creates the section Local\<name>-pid-<port> holding this process's id (4
// bytes, little endian). The caller closes the handle when the service exits.
func publishPID(name string, port int) (windows.Handle, error) {
	n, err := windows.UTF16PtrFromString(pidSectionName(name, port))
	if err != nil {
		return 0, err
	}
	h, err := windows.CreateFileMapping(windows.InvalidHandle, nil, windows.PAGE_READWRITE, 0, 4, n)
	if err != nil {
		return 0, fmt.Errorf("pid section %s: %w", pidSectionName(name, port), err)
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_WRITE, 0, 0, 4)
	if err != nil {
		windows.CloseHandle(h)
		return 0, fmt.Errorf("pid section %s: %w", pidSectionName(name, port), err)
	}
	*(*uint32)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))) = uint32(os.Getpid())
	_ = windows.UnmapViewOfFile(addr)
	return h, nil
}

// servicePID reads the process id a running service published, 0 when none did (an older
// version, nothing running).
func servicePID(name string, port int) uint32 {
	n, err := windows.UTF16PtrFromString(pidSectionName(name, port))
	if err != nil {
		return 0
	}
	r, _, _ := procOpenFileMapping.Call(uintptr(windows.FILE_MAP_READ), 0, uintptr(unsafe.Pointer(n)))
	if r == 0 {
		return 0
	}
	h := windows.Handle(r)
	defer windows.CloseHandle(h)
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, 4)
	if err != nil {
		return 0
	}
	defer windows.UnmapViewOfFile(addr)
	return *(*uint32)(*(*unsafe.Pointer)(unsafe.Pointer(&addr)))
}

// waitExit waits until the process behind h has exited, for at most d or until ctx ends.
func waitExit(ctx context.Context, h windows.Handle, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ev, err := windows.WaitForSingleObject(h, 200)
		if err == nil && ev == windows.WAIT_OBJECT_0 {
			return true
		}
		if err != nil || ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
	}
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
	// The process handle is taken before the stop request, so it is the service's even if
	// its id is reused after it exits. Our own id: serve runs in this process (tests).
	var proc windows.Handle
	pid := servicePID(c.Name, c.Port)
	if pid != 0 && pid != uint32(os.Getpid()) {
		proc, _ = windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	}
	if proc != 0 {
		defer windows.CloseHandle(proc)
	}
	if err := windows.SetEvent(h); err != nil {
		return ServiceResult{}, fmt.Errorf("signal %s: %w", stopEventName(c.Name, c.Port), err)
	}
	if proc != 0 && !waitExit(ctx, proc, c.Wait) {
		st, _ := platformStatus(ctx, c, def)
		if ctx.Err() != nil {
			return ServiceResult{Changed: true, State: st}, ctx.Err()
		}
		return ServiceResult{Changed: true, State: st}, fmt.Errorf("smarter-compact (process %d) has not exited %s after the stop request: end it in Task Manager, or try 'smarter-compact service stop' again", pid, c.Wait)
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
	// Without the pid, stop still works; it then waits for /healthz to go quiet only.
	pidSection, _ := publishPID(name, port)
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
		if pidSection != 0 {
			windows.CloseHandle(pidSection)
		}
	})
	return stop, release, nil
}
