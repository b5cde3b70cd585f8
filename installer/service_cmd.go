package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The service command's reports: what `smarter-compact service install|uninstall|start|stop|status`
// print for the ServiceConfig app builds (DESIGN.md §2 and §8; issue 5 item 7), and the
// advice attached to this package's errors. Whether the service runs is always decided by its
// /healthz, so start is idempotent.

// PrintNotes writes each note as a "note: …" line.
func PrintNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// WriteJSON writes v as indented JSON without HTML escaping, in one write: the form of every
// --json report of the command line (service status here; status, stats and doctor in app).
func WriteJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ServiceHelp turns the installer's errors into what to do.
func ServiceHelp(err error) error {
	switch {
	case errors.Is(err, ErrServiceNotInstalled):
		return fmt.Errorf("%w\nregister it with 'smarter-compact service install' (it then starts at login), or run 'smarter-compact serve' in a terminal", err)
	case errors.Is(err, ErrNoUserManager):
		return fmt.Errorf("%w\nuntil then run 'smarter-compact serve' (or 'loginctl enable-linger $USER' and log in again, to run user services without a login session)", err)
	case errors.Is(err, ErrServiceUnsupported):
		return fmt.Errorf("%w\n%s", err, NoServiceManager)
	case errors.Is(err, ErrNotOurs):
		return fmt.Errorf("%w\nit was not started by the login service: stop it where it runs (Ctrl-C in its terminal), then 'smarter-compact service start'", err)
	}
	return err
}

// ServiceInstallCmd is `service install`: it registers cfg (ServiceInstall), reports the
// registration and notes to w, then starts the service unless start is false.
func ServiceInstallCmd(ctx context.Context, w io.Writer, cfg ServiceConfig, notes []string, start bool) error {
	res, err := ServiceInstall(ctx, cfg)
	if err != nil {
		return ServiceHelp(err)
	}
	st := res.State
	if res.Changed {
		fmt.Fprintf(w, "login service installed: %s (%s)\n", st.Path, st.Manager)
	} else {
		fmt.Fprintf(w, "login service already installed: %s (%s)\n", st.Path, st.Manager)
	}
	fmt.Fprintf(w, "  runs: %s\n", st.Command)
	if st.Enabled {
		fmt.Fprintln(w, "  starts at login")
	} else {
		fmt.Fprintf(w, "  does not start at login: %s\n", st.Detail)
	}
	PrintNotes(w, notes)
	if res.Unreachable != "" {
		fmt.Fprintf(w, "the systemd user manager is not reachable here (%s): the unit is enabled and starts at your next login, but it cannot start now.\n"+
			"  run 'smarter-compact serve' meanwhile (or 'loginctl enable-linger $USER' and log in again, to run it without a login session)\n", res.Unreachable)
		return nil
	}
	if !start {
		fmt.Fprintln(w, "not started (--no-start): 'smarter-compact service start' starts it now")
		return nil
	}
	if res.Changed && st.Running {
		fmt.Fprintf(w, "note: a service already answers on %s and keeps its old settings until restarted: 'smarter-compact service stop', then 'smarter-compact service start'\n", st.URL)
	}
	return ServiceStartCmd(ctx, w, cfg)
}

// ServiceStartCmd is `service start`: ServiceStart, reported to w.
func ServiceStartCmd(ctx context.Context, w io.Writer, cfg ServiceConfig) error {
	res, err := ServiceStart(ctx, cfg)
	if err != nil {
		return ServiceHelp(err)
	}
	if res.Changed {
		fmt.Fprintf(w, "started: answering on %s\n", res.State.URL)
	} else {
		fmt.Fprintf(w, "already running: answering on %s\n", res.State.URL)
	}
	return nil
}

// ServiceStopCmd is `service stop`: ServiceStop, reported to w.
func ServiceStopCmd(ctx context.Context, w io.Writer, cfg ServiceConfig) error {
	res, err := ServiceStop(ctx, cfg)
	if res.Unreachable != "" {
		fmt.Fprintf(w, "note: the systemd user manager is not reachable here (%s)\n", res.Unreachable)
	}
	if err != nil {
		return ServiceHelp(err)
	}
	if res.Changed {
		fmt.Fprintf(w, "stopped: nothing answers on %s now\n", res.State.URL)
	} else {
		fmt.Fprintf(w, "not running: nothing answers on %s\n", res.State.URL)
	}
	return nil
}

// ServiceUninstallCmd is `service uninstall`: it stops the service if it runs, then removes the registration. A service
// the login service did not start keeps running; that is said, not an error.
func ServiceUninstallCmd(ctx context.Context, w io.Writer, cfg ServiceConfig, notes []string) error {
	PrintNotes(w, notes)
	st, err := ServiceStatus(ctx, cfg)
	if err != nil {
		return ServiceHelp(err)
	}
	if st.Installed && st.Running {
		if res, err := ServiceStop(ctx, cfg); err != nil {
			fmt.Fprintf(w, "note: %v\n", strings.ReplaceAll(ServiceHelp(err).Error(), "\n", "; "))
		} else if res.Changed {
			fmt.Fprintln(w, "stopped")
		}
	}
	res, err := ServiceUninstall(ctx, cfg)
	if err != nil {
		return ServiceHelp(err)
	}
	if res.Changed {
		fmt.Fprintf(w, "login service removed: %s\n", res.State.Path)
	} else {
		fmt.Fprintf(w, "login service was not installed (%s)\n", res.State.Path)
	}
	if res.Unreachable != "" {
		fmt.Fprintf(w, "note: the systemd user manager is not reachable here (%s); it reloads its units at your next login\n", res.Unreachable)
	}
	if res.State.Running {
		fmt.Fprintf(w, "note: a smarter-compact still answers on %s (not started by the login service): stop it where it runs\n", res.State.URL)
	}
	return nil
}

// ServiceReport is `service status --json`: the ServiceState and whether this system has a
// login service at all.
type ServiceReport struct {
	ServiceState
	Supported bool     `json:"supported"` // false: no login service on this system (Problem says why)
	Problem   string   `json:"problem,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// ServiceStatusCmd is `service status`: the registration and whether the service answers
// on cfg.Port, as text or (asJSON) as ServiceReport, written to w. Without a service manager
// it still says whether something of ours answers.
func ServiceStatusCmd(ctx context.Context, w io.Writer, cfg ServiceConfig, notes []string, asJSON bool) error {
	rep := ServiceReport{Supported: true, Notes: notes}
	st, err := ServiceStatus(ctx, cfg)
	if err != nil {
		if !errors.Is(err, ErrServiceUnsupported) {
			return err
		}
		h, err := ProbeHealth(ctx, cfg.Port)
		problem := HealthProblem(h, err)
		st = ServiceState{URL: h.URL, Running: problem == "", Health: problem}
		rep.Supported, rep.Problem = false, err.Error()
	} else if cfg.SystemdMissing() {
		// the unit can be written but nothing would start it: say so instead of advising
		// an install that fails
		rep.Supported, rep.Problem = false, "systemd is not running here (as in most containers)"
	}
	rep.ServiceState = st
	if asJSON {
		return WriteJSON(w, rep)
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	switch {
	case !rep.Supported:
		p("login service: none on this system (%s)\n  %s", rep.Problem, NoServiceManager)
	case !st.Installed:
		p("login service: not installed (%s: %s): 'smarter-compact service install' starts it at login", st.Manager, st.Path)
	default:
		when := "starts at login"
		if !st.Enabled {
			when = "does not start at login"
		}
		p("login service: installed, %s (%s: %s)", when, st.Manager, st.Path)
		p("  runs: %s", st.Command)
		if st.Detail != "" {
			p("  %s", st.Detail)
		}
		if !st.Current {
			p("  registered differently from what 'smarter-compact service install' would write now (another executable, arguments or environment): run it to update")
		}
	}
	if st.Running {
		p("service: answering on %s", st.URL)
	} else {
		p("service: not answering on %s (%s): 'smarter-compact service start' (or 'smarter-compact serve')", st.URL, st.Health)
	}
	PrintNotes(w, notes)
	return nil
}
