//go:build e2e

package e2e_test

// The rig of the end-to-end tests, written once for all of them: the real smarter-compact
// binary (built once per test process), free loopback ports, polling waits, `serve` as a
// subprocess, a recording pass-through in front of it, the real agent CLI, read-only access
// to the session database it writes, and a stand-in for the internet. wire_test.go reads
// request bodies in the three API formats for the Codex and OpenCode sessions.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	_ "github.com/mattn/go-sqlite3" // the session databases, opened read-only

	"github.com/smarter-compact/smarter-compact/app/apptest"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// Environment of the end-to-end tests (.ci/run sets them all).
const (
	// envClaude is the path of the Claude Code CLI; unset means `claude` on PATH.
	envClaude = "SMARTER_COMPACT_E2E_CLAUDE"
	// envCodex is the path of the Codex CLI; unset means `codex` on PATH.
	envCodex = "SMARTER_COMPACT_E2E_CODEX"
	// envOpenCode is the path of the OpenCode CLI; unset means `opencode` on PATH.
	envOpenCode = "SMARTER_COMPACT_E2E_OPENCODE"
	// envRequire=1 turns a missing CLI into a failure instead of a skip.
	envRequire = "SMARTER_COMPACT_E2E_REQUIRE"
	// The CLI versions the tests were written against (research/clients.md).
	claudeVersion   = "2.1.332"
	codexVersion    = "0.171.0"
	openCodeVersion = "1.18.33"
)

// agentCLI is an agent's CLI as the tests find it: the variable naming its path, its command
// name, its npm package at the version the tests were written against, and how logs name it.
type agentCLI struct{ env, name, npmPackage, display, version string }

// The agents' CLIs.
var (
	claudeCLI   = agentCLI{envClaude, "claude", "@anthropic-ai/claude-code@" + claudeVersion, "Claude Code", claudeVersion}
	codexCLI    = agentCLI{envCodex, "codex", "@openai/codex@" + codexVersion, "Codex CLI", codexVersion}
	openCodeCLI = agentCLI{envOpenCode, "opencode", "opencode-ai@" + openCodeVersion, "OpenCode", openCodeVersion}
)

// find returns the CLI's path (findCLI: a skip or failure when it is missing).
func (a agentCLI) find(t *testing.T) string {
	t.Helper()
	return findCLI(t, a.env, a.name, a.npmPackage)
}

// logVersion logs the version of the CLI at path (logCLIVersion).
func (a agentCLI) logVersion(t *testing.T, path string) {
	t.Helper()
	logCLIVersion(t, a.display, path, a.version)
}

// findLogged finds the CLI and logs its version.
func (a agentCLI) findLogged(t *testing.T) string {
	t.Helper()
	path := a.find(t)
	a.logVersion(t, path)
	return path
}

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

// The binary is built once per test process, into binDir, which TestMain removes.
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binBuild error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "smarter-compact-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinary returns the module's main package built the way `make build` does (cgo, tag
// sqlite_fts5). The first call builds it; later calls, from any test, return the same file.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		start := time.Now()
		binPath, binBuild = goBuild(binDir)
		if binBuild == nil {
			t.Logf("built %s in %s", binPath, time.Since(start).Round(time.Millisecond))
		}
	})
	if binBuild != nil {
		t.Fatal(binBuild)
	}
	return binPath
}

func goBuild(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH: %v", err)
	}
	bin := filepath.Join(dir, "smarter-compact")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(goBin, "build", "-tags", "sqlite_fts5", "-o", bin, "github.com/smarter-compact/smarter-compact")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// freePort returns a loopback port that was free a moment ago (apptest.FreePort): callers
// retry a start that fails with "in use".
func freePort(t *testing.T) int { t.Helper(); return apptest.FreePort(t) }

// waitFor polls cond every 50 ms until it holds (true) or d has passed (false).
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	return launchServe(t, bin, dir, []string{"serve", "--no-tray"}, []string{"SMARTER_COMPACT_CONFIG=" + config}, env)
}

// launchServe runs bin with args (a serve command) on a free loopback port, with HOME at
// dir/home and the state directory at dir/state; fixed and then env follow PATH, HOME, the
// state directory and the port in its environment. It returns once /healthz answers, and
// stops the process when the test ends.
func launchServe(t *testing.T, bin, dir string, args, fixed, env []string) *serveProc {
	t.Helper()
	// A port from the kernel, released for serve to bind: another process could take it in
	// between, so a failed start is retried on a new port.
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port := freePort(t)
		p := &serveProc{port: port, stateDir: filepath.Join(dir, "state"), log: &syncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, args...)
		p.cmd.Env = append([]string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + filepath.Join(dir, "home"),
		}, fixed...)
		p.cmd.Env = append(p.cmd.Env,
			"SMARTER_COMPACT_STATE_DIR="+p.stateDir,
			"CONTEXT_PROXY_PORT="+strconv.Itoa(port))
		p.cmd.Env = append(p.cmd.Env, env...)
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

// sigterm sends SIGTERM and waits up to 15 s: an error unless serve exited with status 0.
func (s *serveProc) sigterm() (time.Duration, error) {
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-s.done:
		return time.Since(start), s.exitErr()
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return time.Since(start), fmt.Errorf("serve did not exit within 15 s of SIGTERM")
	}
}

func (p *serveProc) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("serve exited: %w", p.err)
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for a process writing and the test reading.
type syncBuffer = apptest.SyncBuffer

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
	at   time.Time     // when the request arrived
	took time.Duration // until the answer was passed back whole
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
		start := time.Now()
		tp.mu.Lock()
		seq := len(tp.sent) + 1
		tp.sent = append(tp.sent, tapped{seq: seq, path: r.URL.RequestURI(), body: body, at: start})
		tp.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.Header.Set(seqHeader, strconv.Itoa(seq))
		rp.ServeHTTP(w, r)
		tp.mu.Lock()
		tp.sent[seq-1].took = time.Since(start)
		tp.mu.Unlock()
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

// timeline says when each request arrived, relative to the first, and how long its answer
// took through serve: where a slow session spends its time.
func (tp *tap) timeline() string {
	var b strings.Builder
	var first time.Time
	for i, r := range tp.requests() {
		if i == 0 {
			first = r.at
		}
		fmt.Fprintf(&b, " #%d +%s (%s, %d bytes)", r.seq, r.at.Sub(first).Round(10*time.Millisecond), r.took.Round(time.Millisecond), len(r.body))
	}
	return strings.TrimSpace(b.String())
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
	// serve queues a request's rows and events; the reply's rows commit them, and what no
	// reply follows (the last usage event) commits after store.HoldWait. Wait until the
	// session's files have been quiet for HoldWait and 300 ms more (at most 10 s) so the
	// reads below see the last request's writes.
	quietSince, last := time.Now(), ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var stamp string
		for _, f := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(f); err == nil {
				stamp += fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
			}
		}
		if stamp != last {
			quietSince, last = time.Now(), stamp
		} else if time.Since(quietSince) > store.HoldWait+300*time.Millisecond {
			break
		}
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

// logCLIVersion logs `bin --version` and says when it is not the version the tests were
// written against; a CLI that cannot print its version fails the test.
func logCLIVersion(t *testing.T, name, bin, want string) {
	t.Helper()
	cmd := exec.Command(bin, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=dumb"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	v := strings.TrimSpace(string(out))
	for _, f := range strings.Fields(v) {
		if f == want {
			t.Logf("%s %s at %s", name, v, bin)
			return
		}
	}
	t.Logf("%s %q at %s; this test was written against %s (research/clients.md)", name, v, bin, want)
}

// outside stands in for the internet. The agents get it as their HTTP(S) proxy, loopback
// excepted, so a call to an outside host (an update check, a plugin install) reaches it
// instead of the network; it refuses the call and records the host. Codex and OpenCode honour
// these variables (research/clients.md caught their outside calls this way).
type outside struct {
	url   string
	mu    sync.Mutex
	tries []string
}

func startOutside(t *testing.T) *outside {
	t.Helper()
	o := &outside{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.tries = append(o.tries, r.Method+" "+r.Host)
		o.mu.Unlock()
		http.Error(w, "smarter-compact e2e: no calls outside 127.0.0.1", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

// env is the proxy environment that sends every outside call to o.
func (o *outside) env() []string {
	var env []string
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+o.url, strings.ToLower(k)+"="+o.url)
	}
	return append(env, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
}

// attempts returns the outside calls refused so far ("CONNECT host:port").
func (o *outside) attempts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.tries)
}

// makeDirs creates each folder with its parents, or fails the test.
func makeDirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// agentDirs creates an agent session's working directory and HOME, each in a temp dir of
// its own (<t.TempDir()>/work and <t.TempDir()>/home), and returns them in that order.
func agentDirs(t *testing.T) (work, home string) {
	t.Helper()
	work = filepath.Join(t.TempDir(), "work")
	home = filepath.Join(t.TempDir(), "home")
	makeDirs(t, work, home)
	return work, home
}

// startRig starts the fake upstream answering with reply, the serve binary bin with
// the environment env builds from the fake's URL, and a tap in front of serve; when
// the test fails, the requests the tap and the fake saw are logged at cleanup.
func startRig(t *testing.T, bin string, reply func(*fakeupstream.Request) fakeupstream.Reply, env func(fakeURL string) []string) (*fakeupstream.Server, *serveProc, *tap) {
	t.Helper()
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: reply, APIKey: "dummy-key"})
	srv := startServe(t, bin, env(fake.URL)...)
	tp := startTap(t, srv.url())
	t.Cleanup(func() {
		if t.Failed() {
			dumpRequests(t, tp, fake)
		}
	})
	return fake, srv, tp
}

// serveWithFake starts the strict fake upstream answering with reply (API key "dummy-key")
// and the serve binary bin with the fake as its Anthropic upstream; env follows (a later
// value of the same variable wins). serve's log is logged when the test fails.
func serveWithFake(t *testing.T, bin string, reply func(*fakeupstream.Request) fakeupstream.Reply, env ...string) (*fakeupstream.Server, *serveProc) {
	t.Helper()
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: reply, APIKey: "dummy-key"})
	srv := startServe(t, bin, append([]string{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC=" + fake.URL}, env...)...)
	logServeOnFailure(t, srv)
	return fake, srv
}

// logServeOnFailure logs serve's output at cleanup when the test has failed.
func logServeOnFailure(t *testing.T, srv *serveProc) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve log:\n%s", srv.log)
		}
	})
}

// openBrowser starts headless Chromium (the executable chromium; no sandbox, as CI runs as
// root; no GPU; a 1280×800 window) with one tab on the dashboard at base, recording its
// console; screenshots go to shots. The browser closes when the test ends. The window of a
// headless Chromium has room for its toolbars: the page gets 1280×800 only with the viewport
// set, which is the caller's step.
func openBrowser(t *testing.T, chromium, base, shots string) *dashBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 800))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // starts the browser, with no deadline
		t.Fatalf("start %s: %v", chromium, err)
	}
	b := &dashBrowser{t: t, ctx: bctx, base: base, shots: shots}
	b.watchConsole()
	return b
}

// resumingAgent is an agent CLI that e2eTurns drives one run per turn, every run after the
// first resuming the conversation of the first by the id its JSON events print.
type resumingAgent struct {
	name      string   // in messages: "codex", "opencode"
	bin, work string   // the executable and the working directory
	env       []string // runAgent's env
	// args are the arguments of turn i (0-based); id is the conversation's, "" on turn 0.
	args func(i int, prompt, id string) []string
	// events reads a run's stdout: the conversation id, the texts printed, the errors.
	events func(stdout string) (id string, texts, errs []string)
	idWord string // "thread", "session"
	idName string // the event that names the conversation: "thread.started", "sessionID"
	keep   string // why the id must not change: "resume should keep the thread"
}

// runResuming runs a through e2eTurns and fails the test at the first turn that fails,
// prints no id or another id than turn 1's, or does not print the fake's final text. Then it
// stops serve, which closes the session database cleanly before the caller reads it. It
// returns the runs, the conversation id and the time all turns took.
func runResuming(t *testing.T, a resumingAgent, fake *fakeupstream.Server, srv *serveProc) (runs []agentRun, id string, took time.Duration) {
	t.Helper()
	start := time.Now()
	for i, turn := range e2eTurns {
		run := runAgent(t, 3*time.Minute, a.bin, a.work, a.env, a.args(i, turn.prompt, id)...)
		runs = append(runs, run)
		evID, texts, errs := a.events(run.stdout)
		if run.err != nil || len(errs) > 0 {
			t.Fatalf("turn %d: %s failed (errors %q):\n%s\n%s", i+1, a.name, errs, run, diagnose(fake, srv))
		}
		switch {
		case evID == "":
			t.Fatalf("turn %d: %s printed no %s:\n%s\n%s", i+1, a.name, a.idName, run, diagnose(fake, srv))
		case id == "":
			id = evID
		case evID != id:
			t.Fatalf("turn %d: %s %s, want %s: %s", i+1, a.idWord, evID, id, a.keep)
		}
		if want := finalText(i+1, turn.steps); !strings.Contains(strings.Join(texts, "\n"), want) {
			t.Fatalf("turn %d: %s did not print the fake's final text %q:\n%s\n%s", i+1, a.name, want, run, diagnose(fake, srv))
		}
	}
	took = time.Since(start)
	if err := srv.stop(); err != nil {
		t.Fatalf("%v\n%s", err, srv.log)
	}
	return runs, id, took
}

// eachJSONLine calls f with every line of an agent's stdout that decodes as JSON into T, and
// the line as printed; other lines are skipped. Lines may be up to 16 MiB.
func eachJSONLine[T any](stdout string, f func(ev T, line string)) {
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev T
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		f(ev, sc.Text())
	}
}
