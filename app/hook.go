package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/store"
)

const hookUsage = `Usage: smarter-compact hook <event>

Called by the agents' hooks, never by hand. Events:
  session-start            Claude Code SessionStart: registers the session (JSON on stdin)
  prompt-submit            Claude Code UserPromptSubmit: "/smarter-compact" sets the session's
                           force flag and answers {"decision":"block",...}; other prompts pass
                           (and register a session that has no registration) (JSON on stdin)
  opencode-session <sid>   OpenCode plugin: registers an OpenCode session (--cwd DIR, default
                           the working directory)
  force <sid>              sets the force flag of a session (the OpenCode plugin's /smarter-compact)

A hook never fails the agent: on an error it prints one line on stderr and exits 0. Nothing but
the hook protocol goes to stdout.
`

// hook is the `hook <event>` command the agents' hooks run (DESIGN.md §2; contract:
// Location, sessions/<sid>.json and sessions/<sid>.force). It always returns nil: every
// failure is one line on stderr and exit 0, so a broken store never breaks the agent.
func hook(_ context.Context, args []string, sys system) error {
	if len(args) == 0 {
		fmt.Fprint(sys.stderr, hookUsage)
		fmt.Fprintln(sys.stderr, "smarter-compact hook: no event given")
		return nil
	}
	event, rest := args[0], args[1:]
	if event == "-h" || event == "-help" || event == "--help" || event == "help" {
		fmt.Fprint(sys.stdout, hookUsage)
		return nil
	}
	var err error
	switch event {
	case "session-start":
		err = hookSessionStart(rest, sys)
	case "prompt-submit":
		err = hookPromptSubmit(rest, sys)
	case "opencode-session":
		err = hookOpenCodeSession(rest, sys)
	case "force":
		err = hookForce(rest, sys)
	default:
		err = fmt.Errorf("unknown event %q (run 'smarter-compact hook -h')", event)
	}
	if err != nil {
		fmt.Fprintf(sys.stderr, "smarter-compact hook %s: %s\n", event, oneLine(err.Error()))
	}
	return nil
}

// oneLine keeps a hook's error on the single stderr line the agents show.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// hookSID sanitizes an agent's session id (contract: Session id); an empty result means the
// hook writes nothing.
func hookSID(raw string) (string, error) {
	sid, ok := store.SanitizeSID(raw)
	if !ok {
		return "", fmt.Errorf("no session id (got %q): nothing written", raw)
	}
	return sid, nil
}

// claudeHookInput reads the JSON Claude Code sends a hook of event on stdin; the event takes
// no arguments.
func claudeHookInput(event string, args []string, sys system) (installer.ClaudeHookInput, error) {
	if len(args) > 0 {
		return installer.ClaudeHookInput{}, fmt.Errorf("unexpected argument %q: %s reads its input on stdin", strings.Join(args, " "), event)
	}
	return installer.ReadClaudeHookInput(sys.stdin)
}

// hookSessionStart writes Claude Code's registration. SessionStart prints nothing: Claude Code
// adds a SessionStart hook's stdout to the model's context.
func hookSessionStart(args []string, sys system) error {
	in, err := claudeHookInput("session-start", args, sys)
	if err != nil {
		return err
	}
	sid, err := hookSID(in.SessionID)
	if err != nil {
		return err
	}
	return register(sys, store.Registration{SessionID: sid, Agent: config.AgentClaudeCode, Cwd: in.Cwd})
}

// hookPromptSubmit turns the prompt "/smarter-compact" into the session's force flag and
// blocks it, so it never reaches the model; any other prompt passes, with nothing printed.
func hookPromptSubmit(args []string, sys system) error {
	in, err := claudeHookInput("prompt-submit", args, sys)
	if err != nil {
		return err
	}
	sid, sidErr := hookSID(in.SessionID)
	if strings.TrimSpace(in.Prompt) != installer.ForceCommand {
		if sidErr != nil {
			return sidErr
		}
		return registerIfMissing(sys, store.Registration{SessionID: sid, Agent: config.AgentClaudeCode, Cwd: in.Cwd})
	}
	reason := installer.ForceReason
	err = sidErr
	if err == nil {
		err = setForce(sys, sid)
	}
	if err != nil {
		// Still block: sent on, "/smarter-compact" would only puzzle the model.
		reason = "smarter-compact: could not set the force flag, nothing will be trimmed early: " + oneLine(err.Error())
	}
	if werr := installer.WriteClaudeBlock(sys.stdout, reason); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// hookOpenCodeSession registers an OpenCode session; the plugin passes the session id and
// its directory.
func hookOpenCodeSession(args []string, sys system) error {
	fs := flag.NewFlagSet("hook opencode-session", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cwd := fs.String("cwd", sys.workdir, "the session's working directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one argument, the session id: hook opencode-session [--cwd DIR] <sid>")
	}
	sid, err := hookSID(fs.Arg(0))
	if err != nil {
		return err
	}
	return register(sys, store.Registration{SessionID: sid, Agent: config.AgentOpenCode, Cwd: *cwd})
}

// hookForce sets the force flag of the session named on the command line.
func hookForce(args []string, sys system) error {
	if len(args) != 1 {
		return errors.New("want one argument, the session id: hook force <sid>")
	}
	sid, err := hookSID(args[0])
	if err != nil {
		return err
	}
	return setForce(sys, sid)
}

// registerIfMissing registers a session that has no registration yet: one that started
// before install wired the SessionStart hook, or whose SessionStart hook failed. The
// workspace-scoped recall tools find a session only through its registration. It costs one
// stat when the registration exists.
func registerIfMissing(sys system, reg store.Registration) error {
	dir := store.Dir(sys.getenv, sys.home, sys.goos, sys.getenv("LOCALAPPDATA"))
	if _, err := os.Stat(filepath.Join(dir, "sessions", reg.SessionID+".json")); err == nil {
		return nil
	}
	return register(sys, reg)
}

// register writes reg, with the bank of its working directory when config.toml has a
// [memory] table (memoryBank). A config that does not load still registers the session,
// without a bank, and the error is the hook's one line.
func register(sys system, reg store.Registration) error {
	return withStore(sys, func(root *store.Root) error {
		bank, cfgErr := memoryBank(sys, reg.Cwd)
		if reg.Bank == "" {
			reg.Bank = bank
		}
		if err := root.Register(reg); err != nil { // registered_at: now, UTC
			return err
		}
		if cfgErr != nil {
			return fmt.Errorf("registered without a memory bank: %w", cfgErr)
		}
		return nil
	})
}

func setForce(sys system, sid string) error {
	return withStore(sys, func(root *store.Root) error { return root.SetForce(sid) })
}

// memoryBank returns the bank of a session working in cwd under the user's config.toml
// (MemoryConfig.BankFor): "" without a [memory] table.
func memoryBank(sys system, cwd string) (string, error) {
	path, explicit, err := config.Path("", sys.getenv, sys.configDir)
	if err != nil {
		return "", nil // no config directory: no config.toml, so no [memory] table
	}
	cfg, err := config.Load(path, explicit, sys.getenv)
	if err != nil {
		return "", err
	}
	return cfg.Memory.BankFor(cwd), nil
}
