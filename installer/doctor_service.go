package installer

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// The login service's line of `doctor`, beside the agents' (doctor.go).

// NoServiceManager is the one piece of advice on a machine without a login service manager
// (no systemd running, as in most containers; an OS we register nothing with): doctor,
// install, status, service and the tray say it in these words (issue 15, Deliver 3).
const NoServiceManager = "no login service manager here: run 'smarter-compact serve' yourself, from your desktop's autostart or your shell profile (for now: in a terminal)"

// ManagerMissing reports whether this machine has no login service manager we can
// register with: none for the OS (ErrServiceUnsupported), or Linux without a
// running systemd.
func (cfg ServiceConfig) ManagerMissing(ctx context.Context) bool {
	if cfg.SystemdMissing() {
		return true
	}
	_, err := ServiceStatus(ctx, cfg)
	return errors.Is(err, ErrServiceUnsupported)
}

// CheckService is `doctor`'s line about the login service cfg describes: whether it is
// registered, starts at login, runs an executable that still exists and is what this binary
// would register. Each Finding but CheckOK names the command that fixes it.
func CheckService(ctx context.Context, cfg ServiceConfig) Finding {
	c := Finding{Name: "login service"}
	if cfg.ManagerMissing(ctx) {
		c.Status, c.Message, c.Fix = CheckInfo, "none on this system", NoServiceManager
		return c
	}
	st, err := ServiceStatus(ctx, cfg)
	switch {
	case err != nil:
		c.Status, c.Message = CheckWarn, "cannot tell: "+err.Error()
		return c
	case !st.Installed:
		c.Status, c.Message = CheckInfo, fmt.Sprintf("not installed (%s): the service does not start at login", st.Path)
		c.Fix = "'smarter-compact service install'"
		return c
	}
	if st.Exe != "" {
		if _, err := os.Stat(st.Exe); err != nil {
			c.Status, c.Message = CheckFail, fmt.Sprintf("%s runs %s, which does not exist", st.Path, st.Exe)
			c.Fix = fmt.Sprintf("'smarter-compact service install' registers this binary (%s); 'smarter-compact service uninstall' removes it", cfg.Exe)
			return c
		}
	}
	switch {
	case !st.Enabled:
		c.Status, c.Message = CheckWarn, fmt.Sprintf("%s is registered but does not start at login (%s)", st.Path, st.Detail)
		c.Fix = "'smarter-compact service install' enables it (Windows: turn it on in Task Manager, Startup apps)"
	case !st.Current:
		c.Status, c.Message = CheckWarn, fmt.Sprintf("%s runs %s, not what this binary would register", st.Path, st.Command)
		c.Fix = "'smarter-compact service install' updates it"
	default:
		c.Status, c.Message = CheckOK, fmt.Sprintf("installed, starts at login (%s: %s)", st.Manager, st.Path)
	}
	return c
}
