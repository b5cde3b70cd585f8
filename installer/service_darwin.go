//go:build darwin

package installer

// The login service on macOS: a LaunchAgent (~/Library/LaunchAgents/<Name>.plist) through
// kardianos/service with UserService and our plist (service.go, launchdPlist: RunAtLoad,
// KeepAlive on failure, logs in LogDir). kardianos/service loads and unloads it with the
// legacy `launchctl load`/`unload`, which current macOS still honours. Not run on a Mac
// here: it compiles (GOOS=darwin CGO_ENABLED=0 go vet ./installer/).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kardianos/service"
)

func launchdService(c ServiceConfig, def ServiceDef) (service.Service, error) {
	return service.New(kardianosProgram{}, &service.Config{
		Name:        c.Name,
		DisplayName: c.DisplayName,
		Description: c.Description,
		Executable:  c.Exe,
		Arguments:   c.Args,
		EnvVars:     c.Env,
		Option: service.KeyValue{
			"UserService": true,
			// What our plist says too; kardianos/service reads these only for its own
			// template, which LaunchdConfig replaces (it holds no template action).
			"RunAtLoad":     true,
			"KeepAlive":     true,
			"LogDirectory":  c.LogDir,
			"LaunchdConfig": def.Content,
		},
	})
}

// sameHome refuses a home other than the one kardianos/service writes under (the
// account's home from the user database, else $HOME).
func sameHome(home string) error {
	h := os.Getenv("HOME")
	if u, err := user.Current(); err == nil {
		h = u.HomeDir
	}
	if h == "" {
		return errors.New("home directory: not found")
	}
	if filepath.Clean(h) != filepath.Clean(home) {
		return fmt.Errorf("home %s is not this account's home %s, where LaunchAgents are written", home, h)
	}
	return nil
}

func platformInstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	if err := sameHome(c.Home); err != nil {
		return ServiceResult{}, err
	}
	svc, err := launchdService(c, def)
	if err != nil {
		return ServiceResult{}, err
	}
	old, readErr := os.ReadFile(def.Path)
	if readErr == nil && string(old) == def.Content {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	if c.LogDir != "" {
		// launchd creates the log files, not their folder.
		if err := os.MkdirAll(c.LogDir, 0o700); err != nil {
			return ServiceResult{}, fmt.Errorf("log folder: %w", err)
		}
	}
	if readErr == nil {
		// Unload the old job before its plist changes; kardianos/service refuses to
		// overwrite ("Init already exists").
		_ = svc.Stop()
		if err := os.Remove(def.Path); err != nil {
			return ServiceResult{}, fmt.Errorf("replace %s: %w", def.Path, err)
		}
	}
	if err := svc.Install(); err != nil {
		return ServiceResult{}, fmt.Errorf("write %s: %w", def.Path, err)
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformUninstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	if _, err := os.Stat(def.Path); errors.Is(err, fs.ErrNotExist) {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	if err := sameHome(c.Home); err != nil {
		return ServiceResult{}, err
	}
	svc, err := launchdService(c, def)
	if err != nil {
		return ServiceResult{}, err
	}
	if err := svc.Uninstall(); err != nil { // launchctl unload, then remove the plist
		return ServiceResult{}, fmt.Errorf("remove %s: %w", def.Path, err)
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformStart(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	svc, err := registeredService(c, def, launchdService)
	if err != nil {
		return ServiceResult{}, err
	}
	if err := svc.Start(); err != nil {
		// Loaded but not running (it exited, or launchd gave up): load it afresh.
		_ = svc.Stop()
		if err := svc.Start(); err != nil {
			return ServiceResult{}, fmt.Errorf("launchctl load %s: %w", def.Path, err)
		}
	}
	if !waitHealth(ctx, c.Port, true, c.Wait) {
		return ServiceResult{Changed: true}, fmt.Errorf("launchd loaded %s, but http://127.0.0.1:%d/healthz does not answer after %s: see %s",
			c.Name, c.Port, c.Wait, filepath.Join(c.LogDir, c.Name+".err.log"))
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformStop(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	wasRunning := ServiceHealth(ctx, c.Port) == nil
	var unloadErr error
	installed := false
	pid := 0
	if _, err := os.Stat(def.Path); err == nil {
		if err := sameHome(c.Home); err != nil {
			return ServiceResult{}, err
		}
		installed = true
		// launchctl unload sends SIGTERM and returns at once: note the job's process first,
		// to wait for it to exit below.
		pid = launchdPID(ctx, c.Name)
		svc, err := launchdService(c, def)
		if err == nil {
			err = svc.Stop() // launchctl unload: KeepAlive does not bring it back
		}
		unloadErr = err // "not loaded" is fine when nothing answers
	}
	res, err := stopWait(ctx, c, def, wasRunning, installed, ServiceResult{})
	if err != nil && unloadErr != nil {
		err = fmt.Errorf("%w (launchctl unload: %v)", err, unloadErr)
	}
	if err == nil && pid > 0 && !waitPIDExit(ctx, pid, c.Wait) {
		err = fmt.Errorf("smarter-compact (process %d) has not exited %s after launchctl unload: `kill %d`, or try 'smarter-compact service stop' again", pid, c.Wait, pid)
	}
	return res, err
}

// launchdPID is the process id of the loaded job label (`launchctl list <label>`), 0 when
// it is not loaded or not running.
func launchdPID(ctx context.Context, label string) int {
	out, err := exec.CommandContext(ctx, "launchctl", "list", label).Output()
	if err != nil {
		return 0
	}
	return launchctlListPID(string(out))
}

// waitPIDExit polls until process pid no longer exists (launchd reaps its jobs), for at most
// d or until ctx ends.
func waitPIDExit(ctx context.Context, pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func platformStatus(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceState, error) {
	st, err := registeredFile("darwin", def)
	if err != nil {
		return ServiceState{}, err
	}
	st.Enabled = st.Installed // the plist has RunAtLoad: launchd loads it at login
	st = withHealth(ctx, st, c.Port)
	if st.Installed {
		if svc, err := launchdService(c, def); err == nil {
			switch s, err := svc.Status(); {
			case err != nil:
				st.Detail = "launchctl list: " + err.Error()
			case s == service.StatusRunning:
				st.Detail = "launchctl list: running"
			default:
				st.Detail = "launchctl list: not running"
			}
		}
	}
	return st, nil
}

// StopRequests is Windows-only (service_windows.go): elsewhere the manager or the terminal
// stops the service with a signal, so it returns a nil channel, which never fires.
func StopRequests(name string, port int) (<-chan struct{}, func(), error) {
	return nil, func() {}, nil
}
