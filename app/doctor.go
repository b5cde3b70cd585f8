package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/store"
)

// Check outcomes: fail makes doctor exit 1; warn and info only inform.
const (
	checkOK   = "ok"
	checkFail = "fail"
	checkWarn = "warn"
	checkInfo = "info"
)

// doctorCheck is one line of `doctor`: what was checked, the outcome, and for anything but
// ok, what to do.
type doctorCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok, fail, warn, info
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// doctorReport is `doctor --json`.
type doctorReport struct {
	OK     bool          `json:"ok"`
	Failed int           `json:"failed"`
	Checks []doctorCheck `json:"checks"`
}

// doctorCmd is the `doctor` command (DESIGN.md §2; issue 5 item 8): the config, the port,
// each wired agent's base URL against the live service, the store's folder and modes, FTS5
// and the login service. It reads the agents' files and changes nothing in them. A failed
// check makes it return an error (exit 1); each failing line says what to do.
func doctorCmd(ctx context.Context, args []string, sys system) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	configFlag := fs.String("config", "", "read config.toml from `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	rep := doctor(ctx, sys, *configFlag)
	if *asJSON {
		if err := writeJSON(sys.stdout, rep); err != nil {
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
	add := func(c doctorCheck) {
		if c.Status == checkFail {
			rep.Failed++
		}
		rep.Checks = append(rep.Checks, c)
	}

	port := fallbackPort
	path, explicit, err := ConfigPath(configFlag, sys.getenv, sys.configDir)
	var cfg Config
	if err == nil {
		cfg, err = LoadConfig(path, explicit, sys.getenv)
	}
	switch {
	case err != nil:
		add(doctorCheck{Name: "config", Status: checkFail, Message: err.Error(),
			Fix: fmt.Sprintf("fix the config (the service cannot start with it); the checks below use port %d", port)})
	case cfg.Path == "":
		port = cfg.Port
		add(doctorCheck{Name: "config", Status: checkOK, Message: fmt.Sprintf("none, defaults (port %d)", port)})
	default:
		port = cfg.Port
		add(doctorCheck{Name: "config", Status: checkOK, Message: fmt.Sprintf("%s (port %d)", cfg.Path, port)})
	}

	svc, elsewhere := findService(ctx, sys.configDir, port)
	switch {
	case elsewhere:
		add(doctorCheck{Name: "port", Status: checkFail, Message: svc.Error,
			Fix: "restart the service without --port, or set [context_proxy] port in config.toml to the port it uses and run 'smarter-compact install'"})
	case svc.Answering:
		add(doctorCheck{Name: "port", Status: checkOK, Message: "smarter-compact answers on " + svc.URL})
	case strings.Contains(svc.Error, "another program"):
		add(doctorCheck{Name: "port", Status: checkFail, Message: svc.Error,
			Fix: fmt.Sprintf("stop the program on port %d, or give smarter-compact another port ([context_proxy] port in config.toml, then 'smarter-compact install' to rewire the agents)", port)})
	default:
		add(doctorCheck{Name: "port", Status: checkFail, Message: fmt.Sprintf("nothing answers on %s (%s)", svc.URL, svc.Error),
			Fix: "'smarter-compact service start' (or 'smarter-compact serve' in a terminal)"})
	}

	for _, c := range agentChecks(sys, port, svc.Answering) {
		add(c)
	}
	add(storeCheck(sys))
	add(fts5Check())
	add(loginServiceCheck(ctx, sys, configFlag))
	rep.OK = rep.Failed == 0
	return rep
}

func writeDoctor(w io.Writer, rep doctorReport) {
	tags := map[string]string{checkOK: "ok  ", checkFail: "FAIL", checkWarn: "warn", checkInfo: "--  "}
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

// agentChecks reads each agent's config (the files the installer edits, read-only:
// installer.ReadWiring) and judges every base URL that goes through smarter-compact: a
// loopback URL on our route, or on our port.
func agentChecks(sys system, port int, answering bool) []doctorCheck {
	var out []doctorCheck
	for _, a := range installer.ReadWiring(installer.Env{Home: sys.home, Getenv: sys.getenv}) {
		fix := fmt.Sprintf("'smarter-compact install --agents %s' routes it through smarter-compact", a.Agent)
		switch {
		case errors.Is(a.Err, fs.ErrNotExist):
			out = append(out, doctorCheck{Name: a.Agent, Status: checkInfo, Message: "not wired (no " + a.File + ")", Fix: fix})
			continue
		case a.Err != nil:
			out = append(out, doctorCheck{Name: a.Agent, Status: checkWarn, Message: fmt.Sprintf("cannot read %s: %v", a.File, a.Err),
				Fix: "fix the file's syntax; the agent cannot read it either"})
			continue
		}
		ours := 0
		for _, u := range a.URLs {
			c, isOurs := judgeAgentURL(a.Agent, a.File, u, port, answering)
			if isOurs {
				ours++
				out = append(out, c)
			}
		}
		if ours == 0 {
			out = append(out, doctorCheck{Name: a.Agent, Status: checkInfo, Message: "not wired (" + a.File + " sends nothing through smarter-compact)", Fix: fix})
		}
		if a.Unselected {
			out = append(out, doctorCheck{Name: agentCodex, Status: checkWarn,
				Message: fmt.Sprintf("%s defines model_providers.%s, but model_provider is %q: Codex does not use it", a.File, serviceName, a.Selected),
				Fix:     "'smarter-compact install --agents codex' selects it; 'smarter-compact uninstall --agents codex' removes it"})
		}
	}
	return out
}

// routeOf is the route prefix of an agent (DESIGN.md §5).
func routeOf(agent string) string { return "/" + agent }

// judgeAgentURL checks one base URL that is ours (installer.AgentURL.Ours): it must use the
// configured port, and the service must answer there.
func judgeAgentURL(agent, file string, u installer.AgentURL, port int, answering bool) (doctorCheck, bool) {
	name := agent
	if agent == agentOpenCode {
		name = agent + " (" + u.Where + ")"
	}
	p, ours := u.Ours(agent, port)
	if !ours {
		return doctorCheck{}, false
	}
	where := fmt.Sprintf("%s %s = %s", file, u.Where, u.URL)
	switch {
	case p != strconv.Itoa(port):
		return doctorCheck{Name: name, Status: checkFail,
			Message: fmt.Sprintf("stale: %s points at port %s, but smarter-compact is configured for port %d", where, p, port),
			Fix:     fmt.Sprintf("'smarter-compact install --agents %s' points it at port %d; 'smarter-compact uninstall --agents %s' removes the wiring", agent, port, agent),
		}, true
	case !answering:
		return doctorCheck{Name: name, Status: checkFail,
			Message: fmt.Sprintf("%s, but nothing answers there: the agent's requests fail", where),
			Fix:     fmt.Sprintf("'smarter-compact service start' (or 'smarter-compact serve'); or 'smarter-compact uninstall --agents %s' to stop routing it through smarter-compact", agent),
		}, true
	}
	return doctorCheck{Name: name, Status: checkOK, Message: "wired to the live service: " + where}, true
}

// storeCheck: the context store's folder exists or can be made, is writable, and nothing
// in it is open to group or others (folders 700, files 600; store.Open tightens the
// folders, the session files are tightened when opened).
func storeCheck(sys system) doctorCheck {
	dir := store.Dir(sys.getenv, sys.home, sys.goos, sys.getenv("LOCALAPPDATA"))
	c := doctorCheck{Name: "store"}
	if !filepath.IsAbs(dir) {
		c.Status, c.Message = checkFail, fmt.Sprintf("context store directory %q is not an absolute path", dir)
		c.Fix = "set " + store.StateDirEnv + " to an absolute path (or HOME)"
		return c
	}
	root, err := store.Open(dir)
	if err == nil {
		root.Close()
	} else if !strings.Contains(err.Error(), "fts5") { // the fts5 check reports that one
		c.Status, c.Message = checkFail, err.Error()
		c.Fix = fmt.Sprintf("make %s a folder you own (mkdir -p, chmod 700), or set %s to one", dir, store.StateDirEnv)
		return c
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		c.Status, c.Message = checkFail, fmt.Sprintf("%s is not writable: %v", dir, err)
		c.Fix = fmt.Sprintf("give yourself write access (chmod u+rwx %s), or set %s to a folder you own", dir, store.StateDirEnv)
		return c
	}
	f.Close()
	os.Remove(f.Name())
	if runtime.GOOS == "windows" {
		c.Status, c.Message = checkOK, dir+" is writable (Windows: your profile's permissions apply, not modes)"
		return c
	}
	loose := store.OpenToOthers(dir)
	if len(loose) > 0 {
		shown := loose[:min(3, len(loose))]
		c.Status = checkFail
		c.Message = fmt.Sprintf("%d entries in %s are open to group or others, e.g. %s", len(loose), dir, strings.Join(shown, ", "))
		c.Fix = fmt.Sprintf("chmod -R go-rwx %s", shellQuote(dir))
		return c
	}
	c.Status, c.Message = checkOK, dir+" is writable; folders 700, files 600"
	return c
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if !strings.ContainsAny(p, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// fts5Check opens a throwaway store, which fails without SQLite's FTS5 (store.Open probes
// it), so a broken store folder cannot hide the build's problem or the other way round.
func fts5Check() doctorCheck {
	c := doctorCheck{Name: "fts5"}
	tmp, err := os.MkdirTemp("", "smarter-compact-doctor-")
	if err != nil {
		c.Status, c.Message = checkWarn, "cannot tell: "+err.Error()
		return c
	}
	defer os.RemoveAll(tmp)
	root, err := store.Open(filepath.Join(tmp, "context"))
	if err != nil {
		c.Status, c.Message = checkFail, err.Error()
		c.Fix = "use a release build, or rebuild with cgo and the FTS5 tag: CGO_ENABLED=1 go build -tags sqlite_fts5 (make build)"
		return c
	}
	root.Close()
	c.Status, c.Message = checkOK, "SQLite has FTS5"
	return c
}

// loginServiceCheck: whether the login service is registered, starts at login, and runs an
// executable that still exists.
func loginServiceCheck(ctx context.Context, sys system, configFlag string) doctorCheck {
	c := doctorCheck{Name: "login service"}
	cfg, _, err := serviceConfig(sys, configFlag, false)
	if err != nil {
		c.Status, c.Message = checkWarn, "cannot tell: "+err.Error()
		return c
	}
	st, err := installer.ServiceStatus(ctx, cfg)
	switch {
	case errors.Is(err, installer.ErrServiceUnsupported):
		c.Status, c.Message = checkInfo, "none on this system: "+err.Error()
		c.Fix = "start 'smarter-compact serve' from your session's autostart"
		return c
	case err != nil:
		c.Status, c.Message = checkWarn, "cannot tell: "+err.Error()
		return c
	case !st.Installed:
		c.Status, c.Message = checkInfo, fmt.Sprintf("not installed (%s): the service does not start at login", st.Path)
		c.Fix = "'smarter-compact service install'"
		return c
	}
	if st.Exe != "" {
		if _, err := os.Stat(st.Exe); err != nil {
			c.Status, c.Message = checkFail, fmt.Sprintf("%s runs %s, which does not exist", st.Path, st.Exe)
			c.Fix = fmt.Sprintf("'smarter-compact service install' registers this binary (%s); 'smarter-compact service uninstall' removes it", cfg.Exe)
			return c
		}
	}
	switch {
	case !st.Enabled:
		c.Status, c.Message = checkWarn, fmt.Sprintf("%s is registered but does not start at login (%s)", st.Path, st.Detail)
		c.Fix = "'smarter-compact service install' enables it (Windows: turn it on in Task Manager, Startup apps)"
	case !st.Current:
		c.Status, c.Message = checkWarn, fmt.Sprintf("%s runs %s, not what this binary would register", st.Path, st.Command)
		c.Fix = "'smarter-compact service install' updates it"
	default:
		c.Status, c.Message = checkOK, fmt.Sprintf("installed, starts at login (%s: %s)", st.Manager, st.Path)
	}
	return c
}
