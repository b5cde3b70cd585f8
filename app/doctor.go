package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/store"
)

// doctorReport is `doctor --json`: a line per check (installer.Finding; CheckFail makes
// doctor exit 1, CheckWarn and CheckInfo only inform).
type doctorReport struct {
	OK     bool                `json:"ok"`
	Failed int                 `json:"failed"`
	Checks []installer.Finding `json:"checks"`
}

// doctorCmd is the `doctor` command (DESIGN.md §2; issue 5 item 8; issue 15, Deliver 3):
// the config, the port, per agent whether it can read its config file, its base URLs and
// the binaries its hooks and MCP entries run (installer.CheckAgents), the store's folder
// and modes, FTS5 and the login service. It reads the agents' files and changes nothing in
// them. A failed check makes it return an error (exit 1); each failing line says what to do.
func doctorCmd(ctx context.Context, args []string, sys system) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	configFlag := fs.String("config", "", "read config.toml from `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		return err
	}
	rep := doctor(ctx, sys, *configFlag)
	if *asJSON {
		if err := installer.WriteJSON(sys.stdout, rep); err != nil {
			return err
		}
	} else {
		writeDoctor(sys.stdout, rep)
	}
	if rep.Failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", rep.Failed, len(rep.Checks))
	}
	return nil
}

func doctor(ctx context.Context, sys system, configFlag string) doctorReport {
	var rep doctorReport
	add := func(c installer.Finding) {
		if c.Status == installer.CheckFail {
			rep.Failed++
		}
		rep.Checks = append(rep.Checks, c)
	}

	port := fallbackPort
	path, explicit, err := config.Path(configFlag, sys.getenv, sys.configDir)
	var cfg config.Config
	if err == nil {
		cfg, err = config.Load(path, explicit, sys.getenv)
	}
	switch {
	case err != nil:
		add(installer.Finding{Name: "config", Status: installer.CheckFail, Message: err.Error(),
			Fix: fmt.Sprintf("fix the config (the service cannot start with it); the checks below use port %d", port)})
	case cfg.Path == "":
		port = cfg.Port
		add(installer.Finding{Name: "config", Status: installer.CheckOK, Message: fmt.Sprintf("none, defaults (port %d)", port)})
	default:
		port = cfg.Port
		add(installer.Finding{Name: "config", Status: installer.CheckOK, Message: fmt.Sprintf("%s (port %d)", cfg.Path, port)})
	}

	self, _ := sys.executable() // the build doctor compares the named binaries with
	sys = withStableExe(sys)
	advice := startAdvice(ctx, sys, configFlag)
	svc, elsewhere := findService(ctx, sys.configDir, port)
	switch {
	case elsewhere:
		add(installer.Finding{Name: "port", Status: installer.CheckFail, Message: svc.Error,
			Fix: "restart the service without --port, or set [context_proxy] port in config.toml to the port it uses and run 'smarter-compact install'"})
	case svc.Answering:
		add(installer.Finding{Name: "port", Status: installer.CheckOK, Message: "smarter-compact answers on " + svc.URL})
	case strings.Contains(svc.Error, "another program"):
		add(installer.Finding{Name: "port", Status: installer.CheckFail, Message: svc.Error,
			Fix: fmt.Sprintf("stop the program on port %d, or give smarter-compact another port ([context_proxy] port in config.toml, then 'smarter-compact install' to rewire the agents)", port)})
	default:
		add(installer.Finding{Name: "port", Status: installer.CheckFail, Message: fmt.Sprintf("nothing answers on %s (%s)", svc.URL, svc.Error),
			Fix: advice})
	}

	for _, c := range agentChecks(ctx, sys, self, port, advice, false) {
		add(c)
	}
	add(storeFinding("store", store.CheckDir(store.Dir(sys.getenv, sys.home, sys.goos, sys.getenv("LOCALAPPDATA")))))
	add(storeFinding("fts5", store.CheckFTS5()))
	add(loginServiceCheck(ctx, sys, configFlag))
	rep.OK = rep.Failed == 0
	return rep
}

func writeDoctor(w io.Writer, rep doctorReport) {
	tags := map[string]string{installer.CheckOK: "ok  ", installer.CheckFail: "FAIL", installer.CheckWarn: "warn", installer.CheckInfo: "--  "}
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "%s  %s: %s\n", tags[c.Status], c.Name, strings.ReplaceAll(c.Message, "\n", "\n      "))
		if c.Fix != "" {
			fmt.Fprintf(w, "      → %s\n", c.Fix)
		}
	}
	if rep.Failed == 0 {
		fmt.Fprintln(w, "all checks passed")
	}
	// Else doctorCmd's error says how many failed, printed once, on stderr.
}

// agentChecks is installer.CheckAgents (the agents' files are the installer's) against
// this build: its version, self (this executable), the configured port, the /healthz
// header and advice, what gets the service running. serving: the caller is the service on
// port (installer.CheckOptions.Serving: nothing is probed or run).
func agentChecks(ctx context.Context, sys system, self string, port int, advice string, serving bool) []installer.Finding {
	env := installer.Env{Home: sys.home, Getenv: sys.getenv}
	return installer.CheckAgents(ctx, env, installer.CheckOptions{
		Port: port, Version: "smarter-compact " + version, Self: self,
		HealthHeader: healthzHeader, StartAdvice: advice, Serving: serving,
	})
}

// startAdvice is what gets the service answering: installer.NoServiceManager without a service
// manager; else 'smarter-compact service start', or 'service install' when the login
// service is not registered (start would refuse).
func startAdvice(ctx context.Context, sys system, configFlag string) string {
	cfg, _, err := serviceConfig(withStableExe(sys), configFlag, false)
	if err != nil {
		return "'smarter-compact serve' in a terminal"
	}
	if cfg.ManagerMissing(ctx) {
		return installer.NoServiceManager
	}
	if st, err := installer.ServiceStatus(ctx, cfg); err == nil && !st.Installed {
		return "'smarter-compact service install' starts it now and at every login (or 'smarter-compact serve' in a terminal)"
	}
	return "'smarter-compact service start' (or 'smarter-compact serve' in a terminal)"
}

// storeFinding is a Finding of store's as the doctor line name.
func storeFinding(name string, f store.Finding) installer.Finding {
	return installer.Finding{Name: name, Status: f.Status, Message: f.Message, Fix: f.Fix}
}

// loginServiceCheck is installer.CheckService for the login service this binary and config
// would register.
func loginServiceCheck(ctx context.Context, sys system, configFlag string) installer.Finding {
	cfg, _, err := serviceConfig(sys, configFlag, false)
	if err != nil {
		return installer.Finding{Name: "login service", Status: installer.CheckWarn, Message: "cannot tell: " + err.Error()}
	}
	return installer.CheckService(ctx, cfg)
}

// routeOf is the route prefix of an agent (DESIGN.md §5).
func routeOf(agent string) string { return "/" + agent }
