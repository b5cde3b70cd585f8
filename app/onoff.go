package app

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// follow is the `follow` command (issue 15, Deliver 6): the agents named (every agent when
// none is named) go back to following the master switch ([context_proxy] enabled): their
// [context_proxy.agents] key is removed, through the running service like `on` and `off`.
func follow(ctx context.Context, args []string, sys system) error {
	return switchCmd(ctx, web.ModeFollow, args, sys)
}

// onOff is the `on` and `off` command (DESIGN.md §2, §5; seed 001, "Turn it on or off"): it
// turns trimming on or off for the agents named, every agent when none is named.
func onOff(ctx context.Context, on bool, args []string, sys system) error {
	mode := web.ModeOff
	if on {
		mode = web.ModeOn
	}
	return switchCmd(ctx, mode, args, sys)
}

// switchCmd is `on`, `off` and `follow`: it saves mode for the agents named.
//
// When the service runs, the service makes the change: POST /api/agents/<agent> (with the
// API token) saves [context_proxy.agents] <agent> = true|false (or removes the key, for
// follow) in its config.toml and applies it to the next request. The CLI does not write the
// file then: the service is the one writer of its config.toml, so a change made at the same
// moment from the dashboard or the tray is not lost. Only with the service down does the CLI
// save the file itself; the change applies when the service starts.
//
// The service is looked for where it recorded its address (the service-addr file next to
// the API token: a service started with --port), then on the config's port. When the
// service's config.toml is not the one the CLI names (--config, SMARTER_COMPACT_CONFIG), the
// CLI saves the change in its own file as well. When the service answers but does not take
// the change because our token is missing or wrong, or something else answers on the port,
// the CLI saves the file itself and says so.
func switchCmd(ctx context.Context, mode web.Mode, args []string, sys system) error {
	configFlag, agents, err := parseSwitchFlags(mode, args, sys)
	if err != nil {
		return err
	}
	path, _, err := config.Path(configFlag, sys.getenv, sys.configDir)
	if err != nil {
		return err
	}
	// A missing file is fine (even a named one: it is created); an invalid one is an error
	// only where the CLI needs it: for the port, and to save it.
	cfg, cfgErr := config.Load(path, false, sys.getenv)
	bases := switchBases(sys.configDir, cfg, cfgErr)
	// A missing token is sent as none: a service that runs answers 401, which says so.
	token, tokenErr := installer.ReadToken(sys.configDir)

	var notTaken []string // "<base>: why" of listeners that answered but changed nothing
	for _, base := range bases {
		res, err := web.SetAgentModes(ctx, base, token, agents, mode)
		var down *web.ServiceDownError
		switch {
		case errors.As(err, &down):
			continue // nothing listens there: the next address, or the file
		case errors.Is(err, web.ErrNotTaken):
			why := err.Error()
			if tokenErr != nil && strings.Contains(why, "401") {
				why += fmt.Sprintf("; no API token (%v): is the service an older smarter-compact, or run by another user? Restart it: smarter-compact service stop && smarter-compact service start", tokenErr)
			}
			notTaken = append(notTaken, base+": "+why)
			continue
		case err != nil:
			return err
		}
		fmt.Fprintf(sys.stdout, "%s: saved in %s by the running service at %s; the next request follows it", switchDone(mode, agents), orNoneText(res.ConfigPath), base)
		if len(res.Whys) > 0 {
			fmt.Fprintf(sys.stdout, " (%s)", strings.Join(res.Whys, ", "))
		}
		fmt.Fprintln(sys.stdout)
		if res.ConfigPath != "" && !sameConfigFile(res.ConfigPath, path) {
			// The CLI names another config.toml than the service's: save it there too.
			if err := saveSwitch(path, cfgErr, agents, mode, sys); err != nil {
				return fmt.Errorf("the running service switched, but %s (the config named here) was not saved: %w", path, err)
			}
			fmt.Fprintf(sys.stdout, "also saved in %s (the config named here; the service reads %s)\n", path, res.ConfigPath)
		}
		return nil
	}

	// No service took it: the file is the change. A service that runs on it picks it up
	// within a second (its watcher); otherwise it applies when the service starts.
	if len(notTaken) > 0 {
		why := strings.Join(notTaken, "; ")
		if err := saveSwitch(path, cfgErr, agents, mode, sys); err != nil {
			return fmt.Errorf("the running service did not take the change (%s)\nand the config was not saved either: %w", why, err)
		}
		return fmt.Errorf("saved in %s, but the running service did not take the change: %s", path, why)
	}
	if err := saveSwitch(path, cfgErr, agents, mode, sys); err != nil {
		return err
	}
	where := "the service is not running"
	if len(bases) > 0 {
		where += " at " + strings.Join(bases, " or ")
	}
	fmt.Fprintf(sys.stdout, "%s: the change applies when it starts\n", where)
	return nil
}

// parseSwitchFlags parses the flags and agents of `on`, `off` and `follow`; -h prints the
// usage and is flag.ErrHelp (parseFlags).
func parseSwitchFlags(mode web.Mode, args []string, sys system) (configFlag string, agents []string, err error) {
	name := string(mode)
	what := "turns trimming " + name + " for"
	if mode == web.ModeFollow {
		what = "sets back to following the master switch ([context_proxy] enabled)"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&configFlag, "config", "", "edit config.toml at `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(sys.stdout, "Usage: smarter-compact %s [flags] [agent…]\n\n%s the agents named (%s), every agent when none is named.\n\nFlags:\n",
			name, strings.ToUpper(what[:1])+what[1:], strings.Join(config.ConfiguredAgents, ", "))
		fs.SetOutput(sys.stdout)
		fs.PrintDefaults()
		return "", nil, err
	}
	if err != nil {
		return "", nil, usageError{fmt.Sprintf("%s: %v%s: run 'smarter-compact %s -h'", name, err, flagSuggestion(fs, err), name)}
	}
	agents, err = pickAgents(name, fs.Args())
	return configFlag, agents, err
}

// switchBases are where a running service may listen: the address it recorded
// (installer.ReadAddrFile), then the config's port when the config loads (cfgErr nil).
func switchBases(configDir string, cfg config.Config, cfgErr error) []string {
	var bases []string
	if b := installer.ReadAddrFile(configDir); b != "" {
		bases = append(bases, b)
	}
	if cfgErr == nil {
		if b := "http://127.0.0.1:" + strconv.Itoa(cfg.Port); !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	return bases
}

// saveSwitch saves [context_proxy.agents] <agent> = true|false (on, off) or removes the key
// (follow) for agents in the config.toml at path, which must load (cfgErr is config.Load's
// error), and says so on stdout.
func saveSwitch(path string, cfgErr error, agents []string, mode web.Mode, sys system) error {
	if cfgErr != nil {
		return fmt.Errorf("%w\nnothing changed: fix the config first", cfgErr)
	}
	old, err := config.ReadText(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	text, err := switchText(old, agents, mode)
	switch {
	case err != nil && mode == web.ModeFollow:
		return fmt.Errorf("config %s: %v; remove the lines %s under [context_proxy.agents] by hand", path, err, strings.Join(agents, ", "))
	case err != nil:
		var lines strings.Builder
		for _, a := range agents {
			fmt.Fprintf(&lines, "\n  %s = %s", a, installer.TOMLBool(mode == web.ModeOn))
		}
		return fmt.Errorf("config %s: %v; under [context_proxy.agents] put:%s", path, err, lines.String())
	}
	if !bytes.Equal(text, old) {
		if err := checkWritable(path); err != nil {
			return err
		}
		if err := installer.ReplaceFile(path, text); err != nil {
			return fmt.Errorf("save config: %w", err)
		}
	}
	fmt.Fprintf(sys.stdout, "%s: saved in %s\n", switchDone(mode, agents), path)
	if v, ok := config.EnvOverride(config.KeyEnabled, sys.getenv); ok {
		fmt.Fprintf(sys.stdout, "note: %s=%s is set here; where it is set for the service, it overrides [context_proxy.agents]\n", config.KeyEnabled.Env, v)
	}
	return nil
}

// switchDone is the start of the line that reports a saved switch.
func switchDone(mode web.Mode, agents []string) string {
	if mode == web.ModeFollow {
		return strings.Join(agents, ", ") + " follow the master switch ([context_proxy] enabled)"
	}
	return fmt.Sprintf("trimming %s for %s", mode, strings.Join(agents, ", "))
}

func orNoneText(s string) string {
	if s == "" {
		return "its config.toml"
	}
	return s
}

// sameConfigFile reports whether a and b name the same config.toml: the same file when both
// exist, else the same absolute path.
func sameConfigFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

func onOffWord(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// pickAgents validates the agents named on the command line, in display order without
// duplicates; none means all.
func pickAgents(cmd string, names []string) ([]string, error) {
	if len(names) == 0 {
		return slices.Clone(config.ConfiguredAgents), nil
	}
	return knownAgents(cmd, names, config.ConfiguredAgents)
}
