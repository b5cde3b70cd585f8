//go:build linux

package installer

// The login service on Linux: a systemd user unit (~/.config/systemd/user/<Name>.service,
// enabled into default.target.wants) through kardianos/service with UserService and our
// unit text (service.go, systemdUnit). kardianos/service discards systemctl's output, so
// after a failure we look at the files and ask systemctl ourselves to say what went wrong.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kardianos/service"
)

// detectedSystem is a kardianos/service system whose detection always succeeds
// (ServiceConfig.ForceSystemd).
type detectedSystem struct{ service.System }

func (detectedSystem) Detect() bool { return true }

const kardianosSystemd = "linux-systemd"

// systemdService is kardianos/service's systemd back end for c, with our unit.
func systemdService(c ServiceConfig, def ServiceDef) (service.Service, error) {
	sys := service.ChosenSystem()
	if c.ForceSystemd {
		for _, s := range service.AvailableSystems() {
			if s.String() == kardianosSystemd {
				sys = detectedSystem{s}
			}
		}
	}
	if sys == nil || sys.String() != kardianosSystemd {
		found := "none"
		if sys != nil {
			found = sys.String()
		}
		return nil, fmt.Errorf("%w: systemd is not running here (no /run/systemd/system and PID 1 is not systemd, as in most containers; detected init: %s)", ErrServiceUnsupported, found)
	}
	return sys.New(kardianosProgram{}, &service.Config{
		Name:        c.Name,
		DisplayName: c.DisplayName,
		Description: c.Description,
		Executable:  c.Exe,
		Arguments:   c.Args,
		EnvVars:     c.Env,
		Option: service.KeyValue{
			"UserService": true,
			// Our unit, rendered already: it holds no template action, so kardianos/service
			// writes it as it is.
			"SystemdScript": def.Content,
		},
	})
}

// sameHome refuses a home other than the one kardianos/service writes under ($HOME).
func sameHome(home string) error {
	h, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("home directory: %w", err)
	}
	if filepath.Clean(h) != filepath.Clean(home) {
		return fmt.Errorf("home %s is not this process's home %s ($HOME), where systemd user units are written", home, h)
	}
	return nil
}

// enableLink is the link `systemctl --user enable` makes for WantedBy=default.target.
func enableLink(unitPath string) string {
	return filepath.Join(filepath.Dir(unitPath), "default.target.wants", filepath.Base(unitPath))
}

func systemdEnabled(unitPath string) bool {
	_, err := os.Lstat(enableLink(unitPath))
	return err == nil
}

// xdgHint explains a unit systemd cannot find: kardianos/service writes user units to
// ~/.config/systemd/user, systemd reads $XDG_CONFIG_HOME/systemd/user when it is set (and
// fails on an empty one).
func xdgHint(home string) string {
	x, set := os.LookupEnv("XDG_CONFIG_HOME")
	if !set || filepath.Clean(x) == filepath.Join(home, ".config") {
		return ""
	}
	return fmt.Sprintf(" (XDG_CONFIG_HOME is %q: systemd looks for user units under it, but they are written to %s; unset it or point it there)",
		x, filepath.Join(home, ".config"))
}

// systemctlUser runs `systemctl --user args…` and returns its output. offline makes
// systemctl edit unit files and links without the manager (SYSTEMD_OFFLINE=1); it is only
// right for enable and disable, since start and stop then do nothing and say so.
func systemctlUser(offline bool, args ...string) (string, error) {
	cmd := exec.Command("systemctl", append([]string{"--user"}, args...)...)
	if offline {
		cmd.Env = append(os.Environ(), "SYSTEMD_OFFLINE=1")
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// managerProblem returns why the systemd user manager cannot be reached, or "" when it
// answers.
func managerProblem() string {
	out, err := systemctlUser(false, "show-environment")
	if err == nil {
		return ""
	}
	if line, _, _ := strings.Cut(out, "\n"); line != "" && !strings.Contains(line, "=") {
		return line
	}
	return err.Error()
}

func platformInstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	if err := sameHome(c.Home); err != nil {
		return ServiceResult{}, err
	}
	svc, err := systemdService(c, def)
	if err != nil {
		return ServiceResult{}, err
	}
	unit := filepath.Base(def.Path)
	old, readErr := os.ReadFile(def.Path)
	if readErr == nil && string(old) == def.Content && systemdEnabled(def.Path) {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	if readErr == nil {
		// kardianos/service refuses to overwrite ("Init already exists").
		if err := os.Remove(def.Path); err != nil {
			return ServiceResult{}, fmt.Errorf("replace %s: %w", def.Path, err)
		}
	}
	res := ServiceResult{Changed: true}
	if err := svc.Install(); err != nil {
		// Install writes the unit, then runs enable and daemon-reload; find the failed step.
		if b, rerr := os.ReadFile(def.Path); rerr != nil || string(b) != def.Content {
			return res, fmt.Errorf("write %s: %w", def.Path, err)
		}
		if !systemdEnabled(def.Path) {
			// A running systemd whose user manager is unreachable refuses enable; offline,
			// systemctl makes the same link itself.
			if out, err := systemctlUser(true, "enable", unit); err != nil {
				return res, fmt.Errorf("systemctl --user enable %s: %v: %s%s", unit, err, out, xdgHint(c.Home))
			}
			if !systemdEnabled(def.Path) {
				return res, fmt.Errorf("systemctl --user enable %s did not create %s", unit, enableLink(def.Path))
			}
		}
		if err := reloadIfReachable(&res); err != nil {
			return res, err
		}
	}
	return withStatus(ctx, c, def, res)
}

// reloadIfReachable records in res why the user manager is unreachable, or runs
// daemon-reload when it is reachable; the error names the failed systemctl call.
func reloadIfReachable(res *ServiceResult) error {
	if res.Unreachable = managerProblem(); res.Unreachable == "" {
		if out, err := systemctlUser(false, "daemon-reload"); err != nil {
			return fmt.Errorf("systemctl --user daemon-reload: %v: %s", err, out)
		}
	}
	return nil
}

// withStatus returns res with the unit's state as platformStatus reads it now.
func withStatus(ctx context.Context, c ServiceConfig, def ServiceDef, res ServiceResult) (ServiceResult, error) {
	st, err := platformStatus(ctx, c, def)
	res.State = st
	return res, err
}

func platformUninstall(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	unit := filepath.Base(def.Path)
	_, statErr := os.Lstat(def.Path)
	if errors.Is(statErr, fs.ErrNotExist) && !systemdEnabled(def.Path) {
		st, err := platformStatus(ctx, c, def)
		return ServiceResult{State: st}, err
	}
	if err := sameHome(c.Home); err != nil {
		return ServiceResult{}, err
	}
	res := ServiceResult{Changed: true}
	svc, err := systemdService(c, def)
	if err == nil {
		err = svc.Uninstall() // disable, remove the unit, daemon-reload
	}
	if err != nil {
		// kardianos/service stops at the first failed step; finish by hand.
		if systemdEnabled(def.Path) {
			_, _ = systemctlUser(true, "disable", unit)
		}
		if systemdEnabled(def.Path) {
			if err := os.Remove(enableLink(def.Path)); err != nil {
				return res, fmt.Errorf("disable %s: %w", unit, err)
			}
		}
		if err := os.Remove(def.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("remove %s: %w", def.Path, err)
		}
		if err := reloadIfReachable(&res); err != nil {
			return res, err
		}
	}
	return withStatus(ctx, c, def, res)
}

func platformStart(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	unit := filepath.Base(def.Path)
	svc, err := registeredService(c, def, systemdService)
	if err != nil {
		return ServiceResult{}, err
	}
	if err := svc.Start(); err != nil {
		if p := managerProblem(); p != "" {
			return ServiceResult{Unreachable: p}, fmt.Errorf("%w (%s): %s is installed and starts at your next login", ErrNoUserManager, p, unit)
		}
		return ServiceResult{}, fmt.Errorf("systemctl --user start %s: %v: see `systemctl --user status %s` and `journalctl --user -u %s`", unit, err, unit, c.Name)
	}
	if !waitHealth(ctx, c.Port, true, c.Wait) {
		return ServiceResult{Changed: true}, fmt.Errorf("systemd started %s, but http://127.0.0.1:%d/healthz does not answer after %s: see `journalctl --user -u %s`", unit, c.Port, c.Wait, c.Name)
	}
	st, err := platformStatus(ctx, c, def)
	return ServiceResult{Changed: true, State: st}, err
}

func platformStop(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceResult, error) {
	wasRunning := ServiceHealth(ctx, c.Port) == nil
	var res ServiceResult
	requested := false
	if _, err := os.Stat(def.Path); err == nil {
		if err := sameHome(c.Home); err != nil {
			return ServiceResult{}, err
		}
		svc, err := systemdService(c, def)
		if err == nil {
			err = svc.Stop()
		}
		switch {
		case err == nil:
			requested = true
		case errors.Is(err, ErrServiceUnsupported):
			// Without systemd nothing was started through the unit.
		default:
			if res.Unreachable = managerProblem(); res.Unreachable == "" {
				return res, fmt.Errorf("systemctl --user stop %s: %v: see `systemctl --user status %s`", filepath.Base(def.Path), err, filepath.Base(def.Path))
			}
		}
	}
	return stopWait(ctx, c, def, wasRunning, requested, res)
}

func platformStatus(ctx context.Context, c ServiceConfig, def ServiceDef) (ServiceState, error) {
	st, err := registeredFile("linux", def)
	if err != nil {
		return ServiceState{}, err
	}
	st.Enabled = systemdEnabled(def.Path)
	st = withHealth(ctx, st, c.Port)
	if st.Installed {
		out, err := systemctlUser(false, "is-active", filepath.Base(def.Path))
		switch out {
		case "active", "inactive", "failed", "activating", "deactivating", "reloading":
			st.Detail = "systemctl --user is-active: " + out
		default:
			if out == "" && err != nil {
				out = err.Error()
			}
			st.Detail = "systemctl --user is-active failed: " + out
		}
	}
	return st, nil
}

// StopRequests is Windows-only (service_windows.go): elsewhere the manager or the terminal
// stops the service with a signal, so it returns a nil channel, which never fires.
func StopRequests(name string, port int) (<-chan struct{}, func(), error) {
	return nil, func() {}, nil
}
