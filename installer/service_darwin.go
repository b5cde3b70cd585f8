//go:build darwin

package installer

// The login service on macOS: a LaunchAgent, ~/Library/LaunchAgents/<Name>.plist (our
// plist: service.go, launchdPlist), managed with launchctl's current verbs in the user's GUI
// domain, gui/<uid>:
//
//   - install writes the plist (0600) and does not start it; launchd loads it at the next
//     login (RunAtLoad), in the Aqua session only (LimitLoadToSessionType);
//   - start: `launchctl bootstrap gui/<uid> <plist>` when the job is not loaded, else
//     `launchctl kickstart gui/<uid>/<Name>`;
//   - stop and uninstall: `launchctl bootout gui/<uid>/<Name>` (KeepAlive cannot bring a
//     booted-out job back; the plist loads again at the next login unless uninstalled);
//   - status: `launchctl print gui/<uid>/<Name>` (loaded, running, pid, last exit) and
//     `launchctl print-disabled gui/<uid>`: on macOS 13 and later, switching the agent off
//     in System Settings → General → Login Items disables it there, so status reports it as
//     not starting at login. Start refuses a disabled agent rather than override the user.
//
// kardianos/service is not used here: it knows only the legacy `launchctl load`/`unload`,
// which act on the caller's session (from ssh that is not the GUI one, where an
// Aqua-limited agent must live) and cannot see the Login Items switch. The parsers are in
// launchd.go and tested on every host; this file runs only on a Mac and has not been run
// by the project's CI (it is type-checked there by .ci/darwincheck).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// launchctlTimeout bounds one launchctl call.
const launchctlTimeout = 10 * time.Second

// launchctl runs /bin/launchctl with args and returns its output (stdout and stderr) and
// exit status (-1 when it did not run).
func launchctl(ctx context.Context, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, launchctlTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/launchctl", args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0, nil
	case errors.As(err, &exit):
		return string(out), exit.ExitCode(), fmt.Errorf("launchctl %s: %s (exit status %d)", strings.Join(args, " "), strings.TrimSpace(string(out)), exit.ExitCode())
	}
	return string(out), -1, fmt.Errorf("launchctl %s: %w", strings.Join(args, " "), err)
}

// guiDomain is this user's GUI login domain, gui/<uid>.
func guiDomain() string { return "gui/" + strconv.Itoa(os.Getuid()) }

// sameHome refuses a home other than this account's (from the user database, else
// $HOME): launchd reads LaunchAgents from there.
func sameHome(home string) error {
	h := os.Getenv("HOME")
	if u, err := user.Current(); err == nil {
		h = u.HomeDir
	}
	if h == "" {
		return errors.New("home directory: not found")
	}
	if filepath.Clean(h) != filepath.Clean(home) {
		return fmt.Errorf("home %s is not this account's home %s, where LaunchAgents are read", home, h)
	}
	return nil
}

// loadedJob asks launchctl print about the job: errLaunchdNoJob when it is not loaded.
func loadedJob(ctx context.Context, name string) (launchdJob, error) {
	out, code, err := launchctl(ctx, "print", guiDomain()+"/"+name)
	job, perr := parseLaunchctlPrint(out)
	if perr == nil || errors.Is(perr, errLaunchdNoJob) {
		return job, perr
	}
	if err != nil && code != 0 {
		return job, err
	}
	return job, perr
}

// loginItemsOff reports whether the agent is disabled in the GUI domain (switched off
// in Login Items, or `launchctl disable`).
func loginItemsOff(ctx context.Context, name string) (bool, error) {
	out, _, err := launchctl(ctx, "print-disabled", guiDomain())
	if err != nil {
		return false, err
	}
	return parseLaunchdDisabled(out, name)
}

// bootout removes the job from the GUI domain; a job that is not loaded is fine.
func bootout(ctx context.Context, name string) error {
	if _, err := loadedJob(ctx, name); errors.Is(err, errLaunchdNoJob) {
		return nil
	}
	_, _, err := launchctl(ctx, "bootout", guiDomain()+"/"+name)
	if err != nil {
		if _, perr := loadedJob(ctx, name); errors.Is(perr, errLaunchdNoJob) {
			return nil // it went away meanwhile
		}
	}
	return err
}

func platformInstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	c, def = bundled(c, def)
	if err := sameHome(c.Home); err != nil {
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
		// A loaded job keeps the definition it was bootstrapped with: take the old one out
		// before its plist changes.
		if err := bootout(ctx, c.Name); err != nil {
			return ServiceResult{}, fmt.Errorf("replace %s: %w", def.Path, err)
		}
	}
	if err := writeFileAtomic(def.Path, []byte(def.Content), 0o600); err != nil {
		return ServiceResult{}, err
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformUninstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	c, def = bundled(c, def)
	if _, err := os.Stat(def.Path); errors.Is(err, fs.ErrNotExist) {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	if err := sameHome(c.Home); err != nil {
		return ServiceResult{}, err
	}
	if err := bootout(ctx, c.Name); err != nil {
		return ServiceResult{}, fmt.Errorf("remove %s: %w", def.Path, err)
	}
	if err := os.Remove(def.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ServiceResult{}, fmt.Errorf("remove %s: %w", def.Path, err)
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformStart(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	c, def = bundled(c, def)
	if _, err := os.Stat(def.Path); err != nil {
		return ServiceResult{}, fmt.Errorf("%w (no %s)", ErrServiceNotInstalled, def.Path)
	}
	if err := sameHome(c.Home); err != nil {
		return ServiceResult{}, err
	}
	if off, err := loginItemsOff(ctx, c.Name); err == nil && off {
		return ServiceResult{}, fmt.Errorf("%s is switched off in System Settings → General → Login Items: turn it on there (or run `launchctl enable %s/%s`), then start it again",
			c.Name, guiDomain(), c.Name)
	}
	_, err := loadedJob(ctx, c.Name)
	switch {
	case errors.Is(err, errLaunchdNoJob):
		if _, _, err := launchctl(ctx, "bootstrap", guiDomain(), def.Path); err != nil {
			return ServiceResult{}, fmt.Errorf("%w\n(no GUI login session for this user, e.g. over ssh? the agent starts at the next login at the Mac)", err)
		}
	case err != nil:
		return ServiceResult{}, err
	default:
		// Loaded but not running (it exited, or launchd gave up): start it now.
		if _, _, err := launchctl(ctx, "kickstart", guiDomain()+"/"+c.Name); err != nil {
			return ServiceResult{}, err
		}
	}
	if !waitHealth(ctx, c.Port, true, c.Wait) {
		return ServiceResult{Changed: true}, fmt.Errorf("launchd started %s, but http://127.0.0.1:%d/healthz does not answer after %s: see %s",
			c.Name, c.Port, c.Wait, filepath.Join(c.LogDir, c.Name+".err.log"))
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformStop(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	c, def = bundled(c, def)
	wasRunning := ServiceHealth(ctx, c.Port) == nil
	var bootoutErr error
	installed := false
	pid := 0
	if _, err := os.Stat(def.Path); err == nil {
		if err := sameHome(c.Home); err != nil {
			return ServiceResult{}, err
		}
		installed = true
		// Note the job's process before bootout, to wait below for it to exit: files of a
		// running process must not be replaced or removed under it.
		pid = launchdPID(ctx, c.Name)
		bootoutErr = bootout(ctx, c.Name)
	}
	res, err := stopWait(ctx, c, def, wasRunning, installed, ServiceResult{})
	if err != nil && bootoutErr != nil {
		err = fmt.Errorf("%w (%v)", err, bootoutErr)
	}
	if err == nil && pid > 0 && !waitPIDExit(ctx, pid, c.Wait) {
		err = fmt.Errorf("smarter-compact (process %d) has not exited %s after launchctl bootout: `kill %d`, or try 'smarter-compact service stop' again", pid, c.Wait, pid)
	}
	return res, err
}

// launchdPID is the process id of the loaded job label (`launchctl list <label>`), 0 when
// it is not loaded or not running.
func launchdPID(ctx context.Context, label string) int {
	out, _, err := launchctl(ctx, "list", label)
	if err != nil {
		return 0
	}
	return launchctlListPID(out)
}

// waitPIDExit polls until process pid no longer exists (launchd reaps its jobs), for at most
// d or until ctx ends.
func waitPIDExit(ctx context.Context, pid int, d time.Duration) bool {
	return pollUntil(ctx, d, 100*time.Millisecond, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
}

func platformStatus(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceState, error) {
	c, def = bundled(c, def)
	st, err := registeredFile("darwin", def)
	if err != nil {
		return ServiceState{}, err
	}
	st.Enabled = st.Installed // the plist has RunAtLoad: launchd loads it at login
	st = withHealth(ctx, st, c.Port)
	if !st.Installed {
		return st, nil
	}
	var detail []string
	switch off, err := loginItemsOff(ctx, c.Name); {
	case err != nil:
		detail = append(detail, "Login Items state unknown: "+err.Error())
	case off:
		st.Enabled = false
		detail = append(detail, "switched off in System Settings → General → Login Items (launchctl print-disabled: disabled); turn it on there")
	}
	switch job, err := loadedJob(ctx, c.Name); {
	case errors.Is(err, errLaunchdNoJob):
		detail = append(detail, "launchctl print: not loaded")
	case err != nil:
		detail = append(detail, err.Error())
	default:
		detail = append(detail, "launchctl print: "+job.String())
	}
	st.Detail = strings.Join(detail, "; ")
	return st, nil
}

// StopRequests is Windows-only (service_windows.go): elsewhere the manager or the terminal
// stops the service with a signal, so it returns a nil channel, which never fires.
func StopRequests(name string, port int) (<-chan struct{}, func(), error) {
	return nil, func() {}, nil
}
