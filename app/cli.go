package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/embedding"
)

// version is the release, set at link time by `make build`
// (-ldflags "-X github.com/smarter-compact/smarter-compact/app.version=…").
var version = "dev"

const usage = `smarter-compact keeps coding-agent sessions inside the model's context window:
a proxy on 127.0.0.1 that stores every message and trims old turns.

Usage:
  smarter-compact <command> [flags]

Commands:
  install    wire the installed agents (Claude Code, Codex, OpenCode) to the proxy
             [--agents a,b] [--service] [--dry-run]
  uninstall  put the agents' config files back as they were [--agents a,b] [--service] [--dry-run]
  serve      run the proxy, the dashboard (http://127.0.0.1:4100/) and the tray icon
             on 127.0.0.1 (port 4100 unless configured) [--no-tray]
  service    the login service: install, uninstall, start, stop, status
  on, off    turn trimming on or off per agent [agent…], on the running service and in config.toml
  follow     set agents [agent…] back to following the master switch ([context_proxy] enabled)
  status     a summary: is the service up, which agents trim, what was trimmed in the last 24 h
             [--verbose] [--json]
  stats      show whether agents use the recall tools: calls per tool and session, after a trim [--json]
  doctor     check the port, the agents' wiring, the store and FTS5, and say what to fix
  mcp        serve the recall tools (smart_compact_*) over stdio, for agents to launch
  hook       called by the agents' hooks (session registration, /smarter-compact)
  version    print the version (also: --version, -v)
  help       print this help

Run 'smarter-compact <command> -h' for a command's flags.
`

// system is what a command takes from the process; tests pass their own, so they can run
// in parallel without touching the real environment or home directory.
type system struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	getenv         func(string) string
	home           string // os.UserHomeDir; "" when unknown
	configDir      string // os.UserConfigDir; "" when unknown
	workdir        string // os.Getwd; "" when unknown
	goos           string
	// exe is the absolute path of this executable as the user invoked it, what install
	// writes into the agents' hooks and MCP entries; "" finds it when needed.
	exe string
	// mainThread runs f on the program's main goroutine (MainThread); nil when the caller
	// is not main.go: the tray then gets a goroutine, or runs headless on macOS.
	mainThread func(f func()) bool
	// openURL opens a URL in the default browser; nil: github.com/cli/browser.
	openURL func(url string) error
}

// executable returns sys.exe, else the path this program was started by, symlinks kept:
// a package manager's link (/usr/local/bin, Homebrew's bin) survives an upgrade, while the
// versioned file behind it does not. os.Executable resolves links on Linux
// (/proc/self/exe), so the link is found from argv[0] first.
func (sys system) executable() (string, error) {
	if sys.exe != "" {
		return sys.exe, nil
	}
	if len(os.Args) > 0 && os.Args[0] != "" {
		if p, err := exec.LookPath(os.Args[0]); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, nil
			}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	return filepath.Abs(exe)
}

// Main runs the command line args (without the program name) until it finishes or ctx is
// cancelled. Logs go to stderr as text. Pass the error to ExitCode. It is for callers
// other than the program's main goroutine (tests, cmd/bench): their serve never waits for
// a main thread; its tray runs on a goroutine on Linux and Windows and headless on macOS.
// main.go calls MainThread.
func Main(ctx context.Context, args []string) error { return mainWith(ctx, args, nil) }

// mainWith is Main with the main goroutine's runner of MainThread (nil: none).
func mainWith(ctx context.Context, args []string, mainThread func(func()) bool) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)
	home, _ := os.UserHomeDir()
	configDir, _ := os.UserConfigDir()
	workdir, _ := os.Getwd()
	return run(ctx, args, system{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		log:       log,
		getenv:    os.Getenv,
		home:      home,
		configDir: configDir,
		workdir:   workdir,
		goos:      runtime.GOOS,

		mainThread: mainThread,
	})
}

// ExitCode maps an error from Main to the process exit code: 0 for nil, 2 for a usage error
// (unknown command, bad flag), 1 otherwise.
func ExitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}

// usageError is a command line the program does not understand.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, sys system) error {
	if len(args) == 0 {
		fmt.Fprint(sys.stderr, usage)
		return usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	// the commands that take the rest of the line; version and help are answered below
	commandFuncs := map[string]func(context.Context, []string, system) error{
		"serve": serve, "mcp": mcpStdio, "status": status, "stats": stats,
		"install": install, "uninstall": uninstall,
		"on":     func(ctx context.Context, rest []string, sys system) error { return onOff(ctx, true, rest, sys) },
		"off":    func(ctx context.Context, rest []string, sys system) error { return onOff(ctx, false, rest, sys) },
		"follow": follow, "hook": hook, "service": serviceCmd, "doctor": doctorCmd,
	}
	if f, ok := commandFuncs[cmd]; ok {
		if err := f(ctx, rest, sys); !errors.Is(err, flag.ErrHelp) {
			return err
		}
		return nil // -h printed the command's usage
	}
	switch cmd {
	case "version", "--version", "-version", "-v":
		if len(rest) > 0 {
			return usageError{"version takes no arguments"}
		}
		fmt.Fprintf(sys.stdout, "smarter-compact %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(sys.stdout, usage)
		return nil
	}
	if strings.HasPrefix(cmd, "-") {
		return usageError{fmt.Sprintf("unknown flag %q before a command%s: run 'smarter-compact help'", cmd, config.DidYouMean(cmd, []string{"--help", "--version"}))}
	}
	return usageError{fmt.Sprintf("unknown command %q%s: run 'smarter-compact help'", cmd, config.DidYouMean(cmd, commands))}
}

// commands are the commands of usage, for "did you mean".
var commands = []string{"install", "uninstall", "serve", "service", "on", "off", "follow", "status", "doctor", "mcp", "hook", "version", "help"}

// parseFlags parses a subcommand's flags. -h prints the flags to stdout and returns
// flag.ErrHelp, which the command returns and run turns into a clean exit.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "Usage: smarter-compact %s [flags]\n\nFlags:\n", fs.Name())
		fs.PrintDefaults()
		return err
	case err != nil:
		return usageError{fmt.Sprintf("%s: %v%s: run 'smarter-compact %s -h'", fs.Name(), err, flagSuggestion(fs, err), fs.Name())}
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("%s: unexpected argument %q: run 'smarter-compact %s -h'", fs.Name(), strings.Join(fs.Args(), " "), fs.Name())}
	}
	return nil
}

// flagSuggestion is ` (did you mean "--x"?)` for a flag fs does not define (flag's error
// "flag provided but not defined: -name"), or "".
func flagSuggestion(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(strings.TrimLeft(name, "-"), "=")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := config.Suggest(name, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", "--"+s)
	}
	return ""
}

// mcpStdio is the `mcp` command (DESIGN.md §2): the recall tools over stdin and stdout,
// reading the context store directly, so it works while serve is down. stdout carries
// JSON-RPC only; logs go to stderr. It returns nil when stdin ends.
func mcpStdio(ctx context.Context, args []string, sys system) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		return err
	}
	return withStore(sys, func(root *store.Root) error {
		// The embedding settings come from the same config as serve's. Recall must work while
		// that config is broken, so an error only turns hybrid search off.
		var cfg config.Config
		if path, explicit, err := config.Path("", sys.getenv, sys.configDir); err != nil {
			sys.log.Warn("mcp: config not read, hybrid search off", "err", err)
		} else if cfg, err = config.Load(path, explicit, sys.getenv); err != nil {
			sys.log.Warn("mcp: config not read, hybrid search off", "err", err)
			cfg = config.Config{}
		}
		srv := mcp.New(root, mcpOptions(cfg, sys))
		sys.log.Debug("mcp: serving stdio", "store", root.Dir(), "workspace", sys.workdir)
		return srv.ServeStdio(ctx, sys.stdin, sys.stdout)
	})
}

// embedConfig is the background embedder's configuration ([context_store] embedding_*; the
// API key only from CONTEXT_EMBEDDING_API_KEY, never from the config file).
func embedConfig(cfg config.Config, getenv func(string) string) embedding.Config {
	return embedding.Config{
		Model:    cfg.EmbeddingModel,
		URL:      cfg.EmbeddingURL,
		APIKey:   getenv("CONTEXT_EMBEDDING_API_KEY"),
		Timeout:  cfg.EmbeddingTimeout,
		MaxChars: cfg.EmbeddingMaxChars,
	}
}

// mcpOptions are the recall tools' options for serve and mcp: hybrid search embeds queries
// at embedding_url, also when embedding_model is empty but a session has vectors.
func mcpOptions(cfg config.Config, sys system) mcp.Options {
	opts := mcp.Options{Workspace: sys.workdir, Log: sys.log, Version: version,
		EmbeddingModel: cfg.EmbeddingModel, EmbeddingTimeout: cfg.EmbeddingTimeout}
	if cfg.EmbeddingURL != "" {
		opts.Embedding = embedding.NewClient(cfg.EmbeddingURL, sys.getenv("CONTEXT_EMBEDDING_API_KEY"), nil)
	}
	return opts
}

// openStore opens the context root the way serve and mcp share: store.Dir, which must be
// absolute. It creates the root's folders when missing but no session database.
func openStore(sys system) (*store.Root, error) {
	dir := store.Dir(sys.getenv, sys.home, sys.goos, sys.getenv("LOCALAPPDATA"))
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("context store directory %q is not an absolute path: set SMARTER_COMPACT_STATE_DIR to one (is HOME set?)", dir)
	}
	root, err := store.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open context store: %w", err)
	}
	return root, nil
}

// withStore runs f on the context store (openStore), closed when f returns.
func withStore(sys system, f func(*store.Root) error) error {
	root, err := openStore(sys)
	if err != nil {
		return err
	}
	defer root.Close()
	return f(root)
}
