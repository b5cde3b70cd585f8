package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/smarter-compact/smarter-compact/app/tray"
	"github.com/smarter-compact/smarter-compact/installer"
)

// trayApp is what the tray asks of the service (tray.App): the switches of st, the login
// service that `smarter-compact service install` would register for this serve, the
// dashboard's URL and quit.
type trayApp struct {
	*state
	dashboard string // http://127.0.0.1:<port>/
	quit      func() // ends serve (cancels its context); serve then stops the tray
	log       *slog.Logger
	// sys and configFlag (serve's --config, "" when not given) give the login service
	// (serviceConfig). A zero sys leaves "Start at login" disabled.
	sys        system
	configFlag string
}

var _ tray.App = (*trayApp)(nil)

// DashboardURL is the dashboard's address (tray.App).
func (a *trayApp) DashboardURL() string { return a.dashboard }

// Quit ends serve (tray.App).
func (a *trayApp) Quit() {
	if a.quit != nil {
		a.quit()
	}
}

// loginConfig is the login service `smarter-compact service install` would register for
// this serve; strict refuses a broken config, as install does.
func (a *trayApp) loginConfig(strict bool) (installer.ServiceConfig, []string, error) {
	if a.sys.getenv == nil {
		return installer.ServiceConfig{}, nil, errors.New("serve did not give the tray its environment")
	}
	return serviceConfig(a.sys, a.configFlag, strict)
}

// LoginStatus asks the login service whether it is registered, with the same rules as
// `smarter-compact service status` (tray.App).
func (a *trayApp) LoginStatus(ctx context.Context) tray.Login {
	ctx, cancel := context.WithTimeout(ctx, tray.LoginTimeout)
	defer cancel()
	cfg, _, err := a.loginConfig(false)
	if err != nil {
		return tray.Login{Unsupported: err.Error()}
	}
	if cfg.SystemdMissing() {
		return tray.Login{Unsupported: "systemd is not running here; " + installer.NoServiceManager}
	}
	st, err := installer.ServiceStatus(ctx, cfg)
	if err != nil {
		if errors.Is(err, installer.ErrServiceUnsupported) {
			return tray.Login{Unsupported: err.Error() + "; " + installer.NoServiceManager}
		}
		a.log.Warn("tray: cannot read the login service", "err", err)
		return tray.Login{Unsupported: firstLine(err)}
	}
	return tray.Login{Enabled: st.Installed && st.Enabled}
}

// SetLogin registers the login service when enable, else removes the registration,
// through the installer calls of `smarter-compact service install|uninstall` (tray.App).
// It neither starts nor stops the service: this process is the running service. The
// outcome or the error with what to do goes to the log.
func (a *trayApp) SetLogin(ctx context.Context, enable bool) {
	ctx, cancel := context.WithTimeout(ctx, tray.LoginTimeout)
	defer cancel()
	cfg, notes, err := a.loginConfig(enable)
	if err != nil {
		a.log.Warn("tray: login service not changed", "err", err)
		return
	}
	for _, n := range notes {
		a.log.Info("tray: login service: " + n)
	}
	if enable {
		res, err := installer.ServiceInstall(ctx, cfg)
		if err != nil {
			a.log.Warn("tray: login service not installed", "err", strings.ReplaceAll(installer.ServiceHelp(err).Error(), "\n", "; "))
			return
		}
		a.log.Info("tray: login service installed: starts at login", "path", res.State.Path, "manager", res.State.Manager, "changed", res.Changed)
		if res.Unreachable != "" {
			a.log.Info("tray: the systemd user manager is not reachable here: the unit is enabled and starts at your next login", "detail", res.Unreachable)
		}
		return
	}
	res, err := installer.ServiceUninstall(ctx, cfg)
	if err != nil {
		a.log.Warn("tray: login service not removed", "err", strings.ReplaceAll(installer.ServiceHelp(err).Error(), "\n", "; "))
		return
	}
	a.log.Info("tray: login service removed: does not start at login", "path", res.State.Path, "changed", res.Changed)
}
