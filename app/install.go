package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// installFlags are the flags install and uninstall share.
type installFlags struct {
	agents  string
	service bool
	dryRun  bool
	config  string
}

// parseInstallFlags parses install's or uninstall's flags and the agents of --agents; -h is
// flag.ErrHelp (parseFlags).
func parseInstallFlags(name string, args []string, sys system) (installFlags, []installer.Agent, error) {
	var f installFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.agents, "agents", "", "only these agents, comma-separated (default: every installed one)")
	fs.BoolVar(&f.service, "service", false, "also "+name+" the login service")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the unified diff of every file it would touch, and write nothing")
	fs.StringVar(&f.config, "config", "", "smarter-compact's config.toml at `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		return f, nil, err
	}
	agents, err := selectAgents(name, f.agents)
	return f, agents, err
}

// install is the `install` command (DESIGN.md §2, §8; issue 5): it wires every installed
// agent (or those of --agents) to the proxy on the configured port, writes the upstreams the
// agents pointed at before into config.toml's [upstream.agents.<agent>] tables, and with --service registers
// the login service first, so the proxy runs before agents point at it. --dry-run prints the
// diffs and writes nothing. An agent that failed (a file that does not parse, a failed write)
// makes the exit status 1; its files are untouched.
func install(ctx context.Context, args []string, sys system) error {
	f, agents, err := parseInstallFlags("install", args, sys)
	if err != nil {
		return err
	}
	cfgPath, cfg, err := installConfig(f.config, sys)
	if err != nil {
		return err
	}
	if _, err := installEnv(sys, cfg.Port); err != nil {
		return err // no home or config directory: nowhere to put the binary either
	}
	w := sys.stdout
	sys, line, err := placeBinary(sys, f.dryRun)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, line)
	env, err := installEnv(sys, cfg.Port)
	if err != nil {
		return err
	}
	if f.service {
		if f.dryRun {
			fmt.Fprintln(w, "service: would register the login service (smarter-compact service install)")
		} else if err := serviceCmd(ctx, serviceArgs("install", f.config), sys); err != nil {
			return fmt.Errorf("login service: %w\nno agent was wired; fix this, or run install without --service", err)
		}
	}
	rep := installer.Install(env, agents, f.dryRun)
	failed := rep.Print(w, "install", f.dryRun)
	lines, err := installer.ChainUpstreams(upstreamConfig(cfgPath, cfg.Port), rep, f.dryRun, installer.UpstreamRecordPath(env))
	printLines(w, lines)
	if err != nil {
		failed = append(failed, err)
	}
	if f.dryRun {
		fmt.Fprintln(w, "dry run: nothing written")
	} else if rep.Wired() {
		if st := probeService(ctx, cfg.Port); !st.Answering {
			fmt.Fprintf(w, "the service does not answer at %s: the wired agents cannot reach their model API until it runs.\n  %s\n",
				st.URL, startAdvice(ctx, sys, f.config))
		}
	}
	return errors.Join(failed...)
}

// uninstall is the `uninstall` command: it puts every agent's files back (the inverse diff,
// else the snapshots; issue 5, Deliver 6) and, with --service, removes the login service
// afterwards. It works with the service down.
func uninstall(ctx context.Context, args []string, sys system) error {
	f, agents, err := parseInstallFlags("uninstall", args, sys)
	if err != nil {
		return err
	}
	// The port only names the proxy in the agents' files; a broken config must not stop
	// anyone from unwiring, so it falls back to the default.
	port := 4100
	if _, cfg, err := installConfig(f.config, sys); err == nil {
		port = cfg.Port
	}
	sys = withStableExe(sys)
	env, err := installEnv(sys, port)
	if err != nil {
		return err
	}
	w := sys.stdout
	rep := installer.Uninstall(env, agents, f.dryRun)
	failed := rep.Print(w, "uninstall", f.dryRun)
	if cfgPath, _, err := config.Path(f.config, sys.getenv, sys.configDir); err == nil {
		var unwired []string
		for _, a := range rep.Agents {
			if a.Err == nil {
				unwired = append(unwired, a.Agent)
			}
		}
		lines, err := installer.UnchainUpstreams(upstreamConfig(cfgPath, port), unwired, installer.UpstreamRecordPath(env), f.dryRun)
		printLines(w, lines)
		if err != nil {
			failed = append(failed, err)
		}
	}
	if f.service {
		if f.dryRun {
			fmt.Fprintln(w, "service: would remove the login service (smarter-compact service uninstall)")
		} else if err := serviceCmd(ctx, serviceArgs("uninstall", f.config), sys); err != nil {
			failed = append(failed, fmt.Errorf("login service: %w", err))
		}
	}
	if copy, err := installer.PerUserExe(sys.home, sys.goos, sys.getenv("LOCALAPPDATA")); err == nil && isRegular(copy) {
		fmt.Fprintf(w, "binary: %s stays (install put it there): delete it once nothing runs it (a registered login service does until 'smarter-compact service uninstall')\n", copy)
	}
	if f.dryRun {
		fmt.Fprintln(w, "dry run: nothing written")
	}
	return errors.Join(failed...)
}

// stableExe is where the agents and the login service run smarter-compact from
// (installer.StableExe, docs/wiring.md): this executable when it is installed by a package,
// else the per-user copy install makes.
func stableExe(sys system) (target string, inPlace bool, err error) {
	exe, err := sys.executable()
	if err != nil {
		return "", false, err
	}
	return installer.StableExe(exe, sys.home, sys.goos, sys.getenv("LOCALAPPDATA"))
}

// placeBinary puts this executable where it will stay (installer.PlaceBinary; dryRun only
// says what it would do) and returns sys naming that path as the executable, so that the
// agents' files and the login service get it, with one line for the user.
func placeBinary(sys system, dryRun bool) (system, string, error) {
	exe, err := sys.executable()
	if err != nil {
		return sys, "", err
	}
	target, inPlace, err := stableExe(sys)
	if err != nil {
		return sys, "", fmt.Errorf("%w\nnothing was wired", err)
	}
	if inPlace {
		return sys, fmt.Sprintf("binary: %s, where a package (or an earlier install) put it; the agents and the login service run it", exe), nil
	}
	line, err := installer.PlaceBinary(exe, target, sys.goos, dryRun)
	if err != nil {
		return sys, "", err
	}
	sys.exe = target
	return sys, line, nil
}

// withStableExe is sys naming the stable executable when there is one (a package's, or the
// copy install made), else sys as it is: what `service` registers and `doctor` compares
// with, so neither points the login service back at a build directory install left.
func withStableExe(sys system) system {
	if target, inPlace, err := stableExe(sys); err == nil && !inPlace && isRegular(target) {
		sys.exe = target
	}
	return sys
}

func isRegular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// serviceArgs is the `service` command line for install and uninstall --service, with the
// config they were given.
func serviceArgs(sub, config string) []string {
	if config != "" {
		return []string{sub, "--config", config}
	}
	return []string{sub}
}

// selectAgents returns installer's agents, only those named in list (comma-separated) when
// it is not empty.
func selectAgents(cmd, list string) ([]installer.Agent, error) {
	all := installer.Agents(assets.OpenCodePlugin())
	var names []string
	for _, a := range all {
		names = append(names, a.Name())
	}
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var want []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want = append(want, n)
		}
	}
	if len(want) == 0 {
		return nil, usageError{fmt.Sprintf("%s: --agents names no agent: use %s", cmd, strings.Join(names, ", "))}
	}
	want, err := knownAgents(cmd+": --agents", want, names)
	if err != nil {
		return nil, err
	}
	var out []installer.Agent
	for _, a := range all {
		if slices.Contains(want, a.Name()) {
			out = append(out, a)
		}
	}
	return out, nil
}

// knownAgents returns the agents of all that names holds, in all's order without
// duplicates; a name not in all is a usage error that starts with what and suggests one.
func knownAgents(what string, names, all []string) ([]string, error) {
	for _, n := range names {
		if !slices.Contains(all, n) {
			return nil, usageError{fmt.Sprintf("%s: unknown agent %q%s: use %s", what, n, config.DidYouMean(n, all), strings.Join(all, ", "))}
		}
	}
	var out []string
	for _, a := range all {
		if slices.Contains(names, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// installConfig reads smarter-compact's own config: the port the agents are pointed at, and
// the file the chained upstreams go to. A missing file is fine (defaults), even one named.
func installConfig(flagPath string, sys system) (string, config.Config, error) {
	path, _, err := config.Path(flagPath, sys.getenv, sys.configDir)
	if err != nil {
		return "", config.Config{}, err
	}
	cfg, err := config.Load(path, false, sys.getenv)
	if err != nil {
		return "", config.Config{}, fmt.Errorf("%w\nnothing changed: fix the config first (the port the agents are pointed at comes from it)", err)
	}
	return path, cfg, nil
}

// installEnv is the installer's view of this machine (installer.Env).
func installEnv(sys system, port int) (installer.Env, error) {
	if sys.home == "" || !filepath.IsAbs(sys.home) {
		return installer.Env{}, errors.New("cannot find your home directory: set HOME (USERPROFILE on Windows)")
	}
	if sys.configDir == "" || !filepath.IsAbs(sys.configDir) {
		return installer.Env{}, errors.New("cannot find the user config directory: set XDG_CONFIG_HOME or HOME (APPDATA on Windows)")
	}
	exe, err := sys.executable()
	if err != nil {
		return installer.Env{}, err
	}
	return installer.Env{
		Home:      sys.home,
		ConfigDir: sys.configDir,
		Getenv:    sys.getenv,
		Port:      port,
		Exe:       exe,
		StateDir:  filepath.Join(sys.configDir, "smarter-compact", "install"),
		Now:       time.Now,
	}, nil
}

// upstreamConfig is config.toml at path as installer.ChainUpstreams and UnchainUpstreams
// read it: the families' upstreams in effect and the [upstream.agents.<agent>] keys
// (config.UpstreamsIn).
func upstreamConfig(path string, port int) installer.UpstreamConfig {
	return installer.UpstreamConfig{Path: path, Port: port, Families: config.UpstreamFamilies, Agents: config.ConfiguredAgents,
		Parse: func(b []byte) (installer.Upstreams, error) {
			family, agents, err := config.UpstreamsIn(path, b)
			if err != nil {
				return installer.Upstreams{}, err
			}
			return installer.Upstreams{Family: family, Agents: agents}, nil
		}}
}

// printLines prints what installer.ChainUpstreams or UnchainUpstreams reports, one a line.
func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
