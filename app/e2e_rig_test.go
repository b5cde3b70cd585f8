//go:build e2e

package app_test

// The rig of the end-to-end tests: the real smarter-compact binary as a subprocess, a
// recording pass-through in front of it, the real agent CLI, and read-only access to the
// session database it writes.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the session databases, opened read-only
)

// Environment of the end-to-end tests (.ci/run sets both).
const (
	// envClaude is the path of the Claude Code CLI; unset means `claude` on PATH.
	envClaude = "SMARTER_COMPACT_E2E_CLAUDE"
	// envRequire=1 turns a missing CLI into a failure instead of a skip.
	envRequire = "SMARTER_COMPACT_E2E_REQUIRE"
	// claudeVersion is the CLI the tests were written against (research/clients.md).
	claudeVersion = "2.1.332"
)

// findCLI returns the agent CLI named by env, else name on PATH. Without either it fails
// when SMARTER_COMPACT_E2E_REQUIRE=1 and skips otherwise, saying how to enable the test.
func findCLI(t *testing.T, env, name, npmPackage string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("%s=%q: %v (install it with `npm install --prefix DIR %s` and point %s at DIR/node_modules/.bin/%s)",
				env, p, err, npmPackage, env, name)
		}
		return abs
	}
	if p, err := exec.LookPath(name); err == nil {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	why := fmt.Sprintf("the %s CLI is not installed: %s is unset and there is no %q on PATH. "+
		"Install it with `npm install --no-audit --no-fund --prefix DIR %s` and set %s=DIR/node_modules/.bin/%s "+
		"(bash .ci/run does both)", name, env, name, npmPackage, env, name)
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s=1 but %s", envRequire, why)
	}
	t.Skipf("skipping: %s; set %s=1 to make this a failure", why, envRequire)
	return ""
}

// buildBinary builds the module's main package into dir, the way `make build` does.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	bin := filepath.Join(dir, "smarter-compact")
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-tags", "sqlite_fts5", "-o", bin, "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// serveProc is `smarter-compact serve --no-tray` running as a subprocess.
type serveProc struct {
	cmd      *exec.Cmd
	port     int
	stateDir string
	log      *syncBuffer
	done     chan struct{}
	err      error // of cmd.Wait, once done is closed
}

// startServe runs the binary's serve command on a free loopback port with its own state
// directory and an empty config file; env adds variables (CONTEXT_TRIM_AT_TOKENS, …). It
// returns once /healthz answers, and stops the process when the test ends.
func startServe(t *testing.T, bin string, env ...string) *serveProc {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A port from the kernel, released for serve to bind: another process could take it in
	// between, so a failed start is retried on a new port.
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port := freePort(t)
		p := &serveProc{port: port, stateDir: filepath.Join(dir, "state"), log: &syncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "serve", "--no-tray")
		p.cmd.Env = append([]string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + filepath.Join(dir, "home"),
			"SMARTER_COMPACT_CONFIG=" + config,
			"SMARTER_COMPACT_STATE_DIR=" + p.stateDir,
			"CONTEXT_PROXY_PORT=" + strconv.Itoa(port),
		}, env...)
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start serve: %v", err)
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		if last = p.waitHealthy(15 * time.Second); last == nil {
			t.Cleanup(func() {
				if err := p.stop(); err != nil {
					t.Errorf("serve: %v\n%s", err, p.log)
				}
			})
			return p
		}
		p.cmd.Process.Kill()
		<-p.done
		if !strings.Contains(p.log.String(), "in use") {
			break
		}
	}
	t.Fatalf("serve did not start: %v", last)
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (p *serveProc) url() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

func (p *serveProc) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("serve exited (%v) before answering /healthz:\n%s", p.err, p.log)
		default:
		}
		resp, err := http.Get(p.url() + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "ok" {
				return nil
			}
			err = fmt.Errorf("GET /healthz: %s %q", resp.Status, b)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve did not answer /healthz within %s: %v\n%s", limit, err, p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop interrupts serve (its graceful shutdown closes the databases) and waits for it.
func (p *serveProc) stop() error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("interrupt: %w", err)
	}
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("serve did not stop within 20 s of an interrupt")
	}
}

func (p *serveProc) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("serve exited: %w", p.err)
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for a process writing and the test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tap is a pass-through in front of serve that records each request body as the agent
// sent it, so the test can compare what the agent sent with what reached the model. It
// forwards every byte unchanged, streams the answer back as it arrives, and adds one
// header, X-E2e-Seq, that serve passes upstream, to pair the two records.
type tap struct {
	URL  string
	mu   sync.Mutex
	sent []tapped
}

type tapped struct {
	seq  int
	path string
	body []byte
}

const seqHeader = "X-E2e-Seq"

func startTap(t *testing.T, target string) *tap {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tp.mu.Lock()
		seq := len(tp.sent) + 1
		tp.sent = append(tp.sent, tapped{seq: seq, path: r.URL.RequestURI(), body: body})
		tp.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.Header.Set(seqHeader, strconv.Itoa(seq))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tp.URL = srv.URL
	return tp
}

func (tp *tap) requests() []tapped {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tapped(nil), tp.sent...)
}

// agentRun is one finished CLI invocation.
type agentRun struct {
	args           []string
	stdout, stderr string
	err            error
	took           time.Duration
}

func (r agentRun) String() string {
	return fmt.Sprintf("args %q\nexit: %v (after %s)\nstdout:\n%s\nstderr:\n%s", r.args, r.err, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// runAgent runs bin with args in cwd under a minimal environment (env -i style: PATH,
// TERM=dumb, plus env), bounded by limit.
func runAgent(t *testing.T, limit time.Duration, bin, cwd string, env []string, args ...string) agentRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = cwd
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TERM=dumb"}, env...)
	cmd.Stdin = nil // /dev/null
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // a leftover child holding the pipes cannot hang the test
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (killed after the %s limit)", err, limit)
	}
	return agentRun{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err, took: time.Since(start)}
}

// openSessionDB opens <state>/context/sessions/<sid>.db read-only.
func openSessionDB(t *testing.T, stateDir, sid string) *sql.DB {
	t.Helper()
	path := filepath.Join(stateDir, "context", "sessions", sid+".db")
	if _, err := os.Stat(path); err != nil {
		entries, _ := os.ReadDir(filepath.Dir(path))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("session database: %v (sessions/ holds %q)", err, names)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("open %s read-only: %v", path, err)
	}
	return db
}
