package app

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/store"
)

const serviceUsage = `Usage: smarter-compact service <command> [flags]

The per-user login service: serve starts at login and restarts after a crash
(systemd user unit on Linux, LaunchAgent on macOS, the HKCU Run key on Windows).

Commands:
  install    register it to start at login, then start it (--no-start: register only)
  uninstall  stop it and remove the registration
  start      start it unless it already answers on its port
  stop       ask it to stop
  status     show the registration and whether it answers [--json]

Each takes --config PATH (default: SMARTER_COMPACT_CONFIG, else the user config dir).
`

// Names of the registration: the systemd unit and LaunchAgent label, and the Windows Run value.
const (
	serviceName     = "smarter-compact"
	serviceRunValue = "SmarterCompact"
)

// forceSystemd is ServiceConfig.ForceSystemd for tests in containers without systemd as
// PID 1; never set in production.
var forceSystemd = false

// serviceCmd is the `service` command (DESIGN.md §2 and §8; issue 5 item 7): install,
// uninstall, start, stop and status of the login service through package installer.
// Whether the service runs is always decided by its /healthz, so start is idempotent.
func serviceCmd(ctx context.Context, args []string, sys system) error {
	if len(args) == 0 {
		fmt.Fprint(sys.stderr, serviceUsage)
		return usageError{"service: no command given: run 'smarter-compact service -h'"}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(sys.stdout, serviceUsage)
		return nil
	case "install", "uninstall", "start", "stop", "status":
	default:
		return usageError{fmt.Sprintf("service: unknown command %q%s: run 'smarter-compact service -h'", sub,
			config.DidYouMean(sub, []string{"install", "uninstall", "start", "stop", "status"}))}
	}
	fs := flag.NewFlagSet("service "+sub, flag.ContinueOnError)
	configFlag := fs.String("config", "", "read config.toml from `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir); install passes it to serve")
	noStart := new(bool)
	asJSON := new(bool)
	switch sub {
	case "install":
		noStart = fs.Bool("no-start", false, "register only; do not start the service now")
	case "status":
		asJSON = fs.Bool("json", false, "print JSON")
	}
	if err := parseFlags(fs, rest, sys.stdout); err != nil {
		return err
	}
	// install and start need a config the service can run with; the others only need the
	// port, and work on a broken config with the default one.
	strict := sub == "install" || sub == "start"
	sys = withStableExe(sys) // the copy install made, not a build directory (docs/wiring.md)
	cfg, notes, err := serviceConfig(sys, *configFlag, strict)
	if err != nil {
		return err
	}
	w := sys.stdout
	switch sub {
	case "install":
		return installer.ServiceInstallCmd(ctx, w, cfg, notes, !*noStart)
	case "uninstall":
		return installer.ServiceUninstallCmd(ctx, w, cfg, notes)
	case "start":
		installer.PrintNotes(w, notes)
		return installer.ServiceStartCmd(ctx, w, cfg)
	case "stop":
		installer.PrintNotes(w, notes)
		return installer.ServiceStopCmd(ctx, w, cfg)
	default:
		return installer.ServiceStatusCmd(ctx, w, cfg, notes, *asJSON)
	}
}

// serviceConfig is the login service of this executable and config: serve, with --config
// when the config was named (flag or SMARTER_COMPACT_CONFIG), the state directory variable
// carried over where the manager can hold it, and the port from the config. notes are lines
// for the user about what the service will not see. strict makes a broken config an error;
// otherwise the default port is used with a note.
func serviceConfig(sys system, configFlag string, strict bool) (installer.ServiceConfig, []string, error) {
	var notes []string
	port := fallbackPort
	path, explicit, err := config.Path(configFlag, sys.getenv, sys.configDir)
	if err == nil {
		var c config.Config
		if c, err = config.Load(path, explicit, sys.getenv); err == nil {
			port = c.Port
		}
	}
	if err != nil {
		if strict {
			return installer.ServiceConfig{}, nil, fmt.Errorf("%w\nthe service cannot start with this config: fix it first", err)
		}
		notes = append(notes, fmt.Sprintf("config not read (%v): using port %d", firstLine(err), port))
	}
	exe, err := sys.executable()
	if err != nil {
		return installer.ServiceConfig{}, nil, err
	}
	exe, note := installer.ServiceExe(sys.goos, exe)
	if note != "" {
		notes = append(notes, note)
	}
	args := []string{"serve"}
	if explicit {
		abs, err := filepath.Abs(path)
		if err != nil {
			return installer.ServiceConfig{}, nil, err
		}
		args = append(args, "--config", abs)
	}
	env := map[string]string{}
	if v := strings.TrimSpace(sys.getenv(store.StateDirEnv)); v != "" {
		if sys.goos == "windows" {
			notes = append(notes, fmt.Sprintf("%s is set here, but a logon start cannot carry it: set it in your user environment (setx %s \"%s\") or the service uses the default store", store.StateDirEnv, store.StateDirEnv, v))
		} else {
			env[store.StateDirEnv] = v
		}
	}
	var unseen []string
	for _, k := range config.AllKeys {
		if k.Env != "" && sys.getenv(k.Env) != "" {
			unseen = append(unseen, k.Env)
		}
	}
	if len(unseen) > 0 {
		notes = append(notes, fmt.Sprintf("set in this shell but not seen by the login service: %s; put those settings in config.toml", strings.Join(unseen, ", ")))
	}
	return installer.ServiceConfig{
		Name:         serviceName,
		RunValue:     serviceRunValue,
		DisplayName:  "Smarter Compact",
		Description:  "Smarter Compact: context-trimming proxy for coding agents",
		Exe:          exe,
		Args:         args,
		Env:          env,
		Home:         sys.home,
		Port:         port,
		LogDir:       serviceLogDir(sys.getenv, sys.home, sys.goos),
		GOOS:         sys.goos,
		ForceSystemd: forceSystemd,
	}, notes, nil
}

// serviceLogDir is <state dir>/logs, beside the store's context folder: the LaunchAgent's
// output, and on Windows the log of a service start and of smarter-compact-gui.exe.
func serviceLogDir(getenv func(string) string, home, goos string) string {
	return filepath.Join(filepath.Dir(store.Dir(getenv, home, goos, getenv("LOCALAPPDATA"))), "logs")
}

// fallbackPort is [context_proxy] port's default, for commands that go on without a config.
const fallbackPort = 4100

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// stopOnRequest returns ctx, cancelled as well when `smarter-compact service stop` asks this
// serve to stop. Only Windows needs it (a named event, installer.StopRequests): elsewhere the
// manager or the terminal sends a signal, which main already turns into ctx's cancel. Call
// release when serve returns.
func stopOnRequest(ctx context.Context, port int, sys system) (_ context.Context, release func()) {
	stop, done, err := installer.StopRequests(serviceName, port)
	if err != nil {
		sys.log.Warn("`smarter-compact service stop` cannot reach this process", "err", err)
		return ctx, func() {}
	}
	if stop == nil {
		return ctx, done
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			sys.log.Info("stop requested by `smarter-compact service stop`")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); done() }
}
