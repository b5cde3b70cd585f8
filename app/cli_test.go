package app

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/app/apptest"
	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
)

// syncBuffer is a bytes.Buffer that the server's goroutines and the test can share.
type syncBuffer = apptest.SyncBuffer

// testSystem is a process with e as its environment and fresh home and config directories
// (no config.toml); logs go to the returned buffer.
func testSystem(t *testing.T, e env) (sys system, stdout, stderr *syncBuffer) {
	t.Helper()
	stdout, stderr = new(syncBuffer), new(syncBuffer)
	return system{
		stdout:    stdout,
		stderr:    stderr,
		log:       slog.New(slog.NewTextHandler(stderr, nil)),
		getenv:    e.Get,
		home:      t.TempDir(),
		configDir: t.TempDir(),
		goos:      runtime.GOOS,
	}, stdout, stderr
}

// wantIn fails the test for each of wants that out (named what in the message) lacks.
func wantIn(t *testing.T, what, out string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

// wantPrivate fails the test unless path is 0600 and its folder 0700 (not on Windows, whose
// profile permissions apply instead of modes).
func wantPrivate(t *testing.T, path string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes: file %o, dir %o; want 600 and 700", fi.Mode().Perm(), di.Mode().Perm())
	}
}

func TestRunCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // substring; "" checks nothing
		wantStderr string
		wantErr    string
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "Commands:", wantErr: "no command"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown command "frobnicate": run 'smarter-compact help'`},
		{name: "help", args: []string{"help"}, wantStdout: "serve      run the proxy"},
		{name: "--help", args: []string{"--help"}, wantStdout: "Commands:"},
		{name: "version", args: []string{"version"}, wantStdout: "smarter-compact dev (go"},
		{name: "--version", args: []string{"--version"}, wantStdout: "smarter-compact dev (go"},
		{name: "-v", args: []string{"-v"}, wantStdout: "smarter-compact dev (go"},
		{name: "version with argument", args: []string{"version", "x"}, wantCode: 2, wantErr: "no arguments"},
		{name: "serve -h", args: []string{"serve", "-h"}, wantStdout: "-no-tray"},
		{name: "serve bad flag", args: []string{"serve", "--verbose"}, wantCode: 2, wantErr: "serve: flag provided but not defined: -verbose"},
		{name: "serve argument", args: []string{"serve", "now"}, wantCode: 2, wantErr: `unexpected argument "now"`},
		{name: "serve port out of range", args: []string{"serve", "--port", "70000"}, wantCode: 2, wantErr: "1 to 65535"},
		{name: "serve port not a number", args: []string{"serve", "--port", "http"}, wantCode: 2, wantErr: "-port"},
		{name: "mcp -h", args: []string{"mcp", "-h"}, wantStdout: "Usage: smarter-compact mcp"},
		{name: "mcp argument", args: []string{"mcp", "now"}, wantCode: 2, wantErr: `mcp: unexpected argument "now"`},
		{name: "serve missing explicit config", args: []string{"serve", "--config", "/nonexistent/smarter-compact.toml"}, wantCode: 1, wantErr: "/nonexistent/smarter-compact.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sys, stdout, stderr := testSystem(t, env{})
			err := run(t.Context(), tt.args, sys)
			if got := ExitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (err %v), want %d", got, err, tt.wantCode)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.wantStderr)
			}
		})
	}
}

func TestServeRejectsBadConfig(t *testing.T) {
	t.Parallel()
	path := configtest.WriteConfig(t, "[context_proxy]\nport = 99999\n")
	sys, _, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path})
	err := run(t.Context(), []string{"serve", "--no-tray"}, sys)
	if ExitCode(err) != 1 || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "[context_proxy] port = 99999") {
		t.Fatalf("err = %v, want exit 1 naming %s and the key", err, path)
	}
}

func TestServePortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	sys, _, _ := testSystem(t, env{"CONTEXT_PROXY_PORT": port, "SMARTER_COMPACT_STATE_DIR": t.TempDir()})
	err = run(context.Background(), []string{"serve", "--no-tray"}, sys)
	// A listener that never answers: not smarter-compact, so serve fails and says what to do.
	want := "port " + port + " is in use by another program, not smarter-compact"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
}

// TestConfigFileInUserConfigDir checks the default location end to end: a config.toml under
// the user config dir is read without any flag or variable.
func TestConfigFileInUserConfigDir(t *testing.T) {
	t.Parallel()
	sys, _, _ := testSystem(t, env{})
	path := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	writeTestFile(t, path, "[context_proxy]\nport = 0\n")
	err := run(t.Context(), []string{"serve", "--no-tray"}, sys)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want the error from %s", err, path)
	}
}

// TestMCPCommand runs `mcp` over a stdin that ends after two requests: stdout holds their two
// JSON-RPC answers and nothing else, and the command returns nil at EOF.
func TestMCPCommand(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state})
	sys.workdir = t.TempDir()
	sys.stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`)
	if err := run(t.Context(), []string{"mcp"}, sys); err != nil {
		t.Fatalf("mcp: %v (stderr %s)", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	slices.Sort(lines) // requests are answered concurrently
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"jsonrpc":"2.0","id":1,"result":`) ||
		!strings.HasPrefix(lines[1], `{"jsonrpc":"2.0","id":2,"result":`) || !strings.Contains(lines[1], "smart_compact_search") {
		t.Errorf("stdout:\n%s\nwant the answers to initialize and tools/list only", stdout)
	}
	if _, err := os.Stat(filepath.Join(state, "context", "sessions")); err != nil {
		t.Errorf("the context root was not opened: %v", err)
	}
}
