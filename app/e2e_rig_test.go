//go:build e2e

package app_test

// The rig of the end-to-end tests: the real smarter-compact binary as a subprocess, a
// recording pass-through in front of it, the real agent CLI, and read-only access to the
// session database it writes. For the Codex and OpenCode sessions also: a stand-in for the
// internet, a reading of request bodies in the three API formats, the scripted model of
// their tool loops, and the checks their sessions share.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the session databases, opened read-only

	"github.com/smarter-compact/smarter-compact/proxy"
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
	// serve queues a request's rows and events and writes them right after forwarding it;
	// wait until the session's files have been quiet for 300 ms (at most 10 s) so the reads
	// below see the last request's writes.
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
		} else if time.Since(quietSince) > 300*time.Millisecond {
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

// The sessions of the Codex and OpenCode tests go through three API formats. wireBody is a
// request body in any of them, reduced to what the tests check: the messages as roles and
// parts, the system prompt, the tools offered.

const (
	formatAnthropic = "anthropic" // …/v1/messages
	formatChat      = "chat"      // …/chat/completions
	formatResponses = "responses" // …/responses
)

// wirePart is a piece of a message: kind "text", "thinking", "tool_use" (text is the input or
// the arguments as sent), "tool_result" (text is the output's text) or "other" (text is the
// type).
type wirePart struct {
	kind, text, name string
}

// wireMsg is an Anthropic or Chat message, or a Responses input item: a message keeps its
// role, a function_call is an "assistant" tool_use, a function_call_output a "tool"
// tool_result, a reasoning item an "assistant" thinking part.
type wireMsg struct {
	role  string
	parts []wirePart
}

type wireBody struct {
	format         string
	model          string
	system         []string // Anthropic system blocks (non-text blocks as "")
	instructions   string   // Responses
	promptCacheKey string   // Responses
	msgs           []wireMsg
	tools          []string // Responses namespace tools as namespace__name
	raw            string

	seq            int // the tap's number of the request as the agent sent it
	sent, received int // bytes from the agent, bytes to the model
}

// formatOf returns the format of a model call from its path, "" for other calls.
func formatOf(method, path string) string {
	p, _, _ := strings.Cut(path, "?")
	switch {
	case method != http.MethodPost:
		return ""
	case strings.HasSuffix(p, "/v1/messages"):
		return formatAnthropic
	case strings.HasSuffix(p, "/chat/completions"):
		return formatChat
	case strings.HasSuffix(p, "/responses"):
		return formatResponses
	}
	return ""
}

func parseWire(format string, body []byte) (*wireBody, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s body: %w", format, err)
	}
	b := &wireBody{format: format, raw: string(body)}
	b.model, _ = doc["model"].(string)
	switch format {
	case formatAnthropic:
		if s, ok := doc["system"].(string); ok {
			b.system = []string{s}
		}
		for _, blk := range wireList(doc["system"]) {
			text, _ := blk["text"].(string)
			b.system = append(b.system, text)
		}
		for _, m := range wireList(doc["messages"]) {
			msg := wireMsg{role: wireStr(m, "role")}
			if s, ok := m["content"].(string); ok {
				msg.parts = append(msg.parts, wirePart{kind: "text", text: s})
			}
			for _, blk := range wireList(m["content"]) {
				switch typ := wireStr(blk, "type"); typ {
				case "text":
					msg.parts = append(msg.parts, wirePart{kind: "text", text: wireStr(blk, "text")})
				case "thinking", "redacted_thinking":
					msg.parts = append(msg.parts, wirePart{kind: "thinking", text: wireStr(blk, "thinking")})
				case "tool_use":
					in, _ := json.Marshal(blk["input"])
					msg.parts = append(msg.parts, wirePart{kind: "tool_use", text: string(in), name: wireStr(blk, "name")})
				case "tool_result":
					msg.parts = append(msg.parts, wirePart{kind: "tool_result", text: wireText(blk["content"])})
				default:
					msg.parts = append(msg.parts, wirePart{kind: "other", text: typ})
				}
			}
			b.msgs = append(b.msgs, msg)
		}
		for _, tl := range wireList(doc["tools"]) {
			b.tools = append(b.tools, wireStr(tl, "name"))
		}
	case formatChat:
		for _, m := range wireList(doc["messages"]) {
			msg := wireMsg{role: wireStr(m, "role")}
			kind := "text"
			if msg.role == "tool" {
				kind = "tool_result"
			}
			if m["content"] != nil {
				msg.parts = append(msg.parts, wirePart{kind: kind, text: wireText(m["content"])})
			}
			if r := wireStr(m, "reasoning_content"); r != "" {
				msg.parts = append(msg.parts, wirePart{kind: "thinking", text: r})
			}
			for _, c := range wireList(m["tool_calls"]) {
				fn, _ := c["function"].(map[string]any)
				msg.parts = append(msg.parts, wirePart{kind: "tool_use", text: wireStr(fn, "arguments"), name: wireStr(fn, "name")})
			}
			b.msgs = append(b.msgs, msg)
		}
		for _, tl := range wireList(doc["tools"]) {
			if fn, ok := tl["function"].(map[string]any); ok {
				b.tools = append(b.tools, wireStr(fn, "name"))
			} else {
				b.tools = append(b.tools, wireStr(tl, "name"))
			}
		}
	case formatResponses:
		b.instructions, _ = doc["instructions"].(string)
		b.promptCacheKey, _ = doc["prompt_cache_key"].(string)
		if s, ok := doc["input"].(string); ok {
			b.msgs = append(b.msgs, wireMsg{role: "user", parts: []wirePart{{kind: "text", text: s}}})
		}
		for _, it := range wireList(doc["input"]) {
			switch typ := wireStr(it, "type"); {
			case typ == "message" || typ == "" && wireStr(it, "role") != "":
				msg := wireMsg{role: wireStr(it, "role")}
				if s, ok := it["content"].(string); ok {
					msg.parts = append(msg.parts, wirePart{kind: "text", text: s})
				}
				for _, c := range wireList(it["content"]) {
					switch ct := wireStr(c, "type"); ct {
					case "input_text", "output_text", "text":
						msg.parts = append(msg.parts, wirePart{kind: "text", text: wireStr(c, "text")})
					default:
						msg.parts = append(msg.parts, wirePart{kind: "other", text: ct})
					}
				}
				b.msgs = append(b.msgs, msg)
			case typ == "function_call" || typ == "custom_tool_call":
				name := wireStr(it, "name")
				if ns := wireStr(it, "namespace"); ns != "" {
					name = ns + "__" + name
				}
				args := wireStr(it, "arguments")
				if typ == "custom_tool_call" {
					args = wireStr(it, "input")
				}
				b.msgs = append(b.msgs, wireMsg{role: "assistant", parts: []wirePart{{kind: "tool_use", text: args, name: name}}})
			case typ == "function_call_output" || typ == "custom_tool_call_output":
				b.msgs = append(b.msgs, wireMsg{role: "tool", parts: []wirePart{{kind: "tool_result", text: wireText(it["output"])}}})
			case typ == "reasoning":
				var sum []string
				for _, s := range wireList(it["summary"]) {
					sum = append(sum, wireStr(s, "text"))
				}
				b.msgs = append(b.msgs, wireMsg{role: "assistant", parts: []wirePart{{kind: "thinking", text: strings.Join(sum, "\n")}}})
			default:
				b.msgs = append(b.msgs, wireMsg{parts: []wirePart{{kind: "other", text: typ}}})
			}
		}
		for _, tl := range wireList(doc["tools"]) {
			if wireStr(tl, "type") == "namespace" {
				for _, sub := range wireList(tl["tools"]) {
					b.tools = append(b.tools, wireStr(tl, "name")+"__"+wireStr(sub, "name"))
				}
				continue
			}
			b.tools = append(b.tools, wireStr(tl, "name"))
		}
	default:
		return nil, fmt.Errorf("unknown format %q", format)
	}
	return b, nil
}

func wireStr(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// wireList returns v's elements that are objects; nil when v is not an array.
func wireList(v any) []map[string]any {
	arr, _ := v.([]any)
	var out []map[string]any
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// wireText is the text of a content value: a string, or its text parts joined by newlines.
func wireText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var texts []string
	for _, p := range wireList(v) {
		if t, ok := p["text"].(string); ok {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n")
}

// offers reports whether the request offers a tool named name.
func (b *wireBody) offers(name string) bool { return slices.Contains(b.tools, name) }

// instructionRole reports whether a message of this role is part of the system prompt.
func instructionRole(role string) bool { return role == "system" || role == "developer" }

// endsWithToolResults reports whether the last message (instruction messages aside) holds
// only tool results: the model is in the middle of a tool loop.
func (b *wireBody) endsWithToolResults() bool {
	for i := len(b.msgs) - 1; i >= 0; i-- {
		m := b.msgs[i]
		if instructionRole(m.role) {
			continue
		}
		if len(m.parts) == 0 {
			return false
		}
		for _, p := range m.parts {
			if p.kind != "tool_result" {
				return false
			}
		}
		return true
	}
	return false
}

// lastToolOutput returns the text of the last tool result.
func (b *wireBody) lastToolOutput() string {
	for _, m := range slices.Backward(b.msgs) {
		for _, p := range slices.Backward(m.parts) {
			if p.kind == "tool_result" {
				return p.text
			}
		}
	}
	return ""
}

// lastUserTexts returns the text parts of the last user message that has any.
func (b *wireBody) lastUserTexts() []string {
	for _, m := range slices.Backward(b.msgs) {
		if m.role != "user" {
			continue
		}
		var out []string
		for _, p := range m.parts {
			if p.kind == "text" {
				out = append(out, p.text)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// standingInstruction checks that the request carries the standing instruction once, where
// the proxy places it for the format: the last system block (Anthropic), or a system
// (Chat) or developer (Responses) message right after the leading instruction messages.
func (b *wireBody) standingInstruction() error {
	si := proxy.StandingInstruction
	if b.format == formatAnthropic {
		n := 0
		for _, s := range b.system {
			if s == si {
				n++
			}
		}
		switch {
		case n != 1:
			return fmt.Errorf("system carries the standing instruction %d times, want 1 (%d system blocks)", n, len(b.system))
		case b.system[len(b.system)-1] != si:
			return fmt.Errorf("the standing instruction is not the last of the %d system blocks", len(b.system))
		}
		return nil
	}
	if strings.Contains(b.instructions, si) {
		return errors.New("the standing instruction is in instructions, want a developer message item")
	}
	role := "system"
	if b.format == formatResponses {
		role = "developer"
	}
	at := -1
	for i, m := range b.msgs {
		if instructionRole(m.role) && len(m.parts) == 1 && m.parts[0].text == si {
			if at >= 0 {
				return fmt.Errorf("the standing instruction is in messages %d and %d, want it once", at, i)
			}
			at = i
		}
	}
	if at < 0 {
		n := strings.Count(b.raw, jsonQuoteInner(si))
		return fmt.Errorf("no %s message holds the standing instruction alone (the body holds its text %d times)", role, n)
	}
	if r := b.msgs[at].role; r != role {
		return fmt.Errorf("the standing instruction is a %s message, want %s", r, role)
	}
	for i := range at {
		if !instructionRole(b.msgs[i].role) {
			return fmt.Errorf("the standing instruction is message %d, after a %s message (%d): want it right after the leading system/developer messages", at, b.msgs[i].role, i)
		}
	}
	if at+1 < len(b.msgs) && instructionRole(b.msgs[at+1].role) {
		return fmt.Errorf("the standing instruction is message %d, before another %s message: want it after all the leading ones", at, b.msgs[at+1].role)
	}
	return nil
}

func jsonQuoteInner(s string) string {
	q, _ := json.Marshal(s)
	return string(q[1 : len(q)-1])
}

// pointer returns the pointer for sid in the user messages (a text part starting with its
// head; in a Chat string content the prompt may follow it), the dropped count it states, and
// how many parts start with it.
func (b *wireBody) pointer(sid string) (text string, dropped, count int) {
	head := "[smarter-compact: continuing session " + sid + "; "
	for _, m := range b.msgs {
		if m.role != "user" {
			continue
		}
		for _, p := range m.parts {
			if p.kind != "text" || !strings.HasPrefix(p.text, head) {
				continue
			}
			count++
			n, _, _ := strings.Cut(strings.TrimPrefix(p.text, head), " ")
			dropped, _ = strconv.Atoi(n)
			text = p.text
		}
	}
	return text, dropped, count
}

// pointerWith reports whether the pointer for sid is in the user message holding prompt.
func (b *wireBody) pointerWith(sid, prompt string) bool {
	head := "[smarter-compact: continuing session " + sid + "; "
	for _, m := range b.msgs {
		ptr, txt := false, false
		for _, p := range m.parts {
			ptr = ptr || p.kind == "text" && strings.HasPrefix(p.text, head)
			txt = txt || p.kind == "text" && strings.Contains(p.text, prompt)
		}
		if m.role == "user" && ptr && txt {
			return true
		}
	}
	return false
}

// toolScript is the fake model's side of a Codex or OpenCode session: the turns of e2eTurns,
// each step a call of the agent's shell tool that prints the step's data file (script.file),
// then finalText. It reads its position from the request alone, so a trimmed history does
// not confuse it: after tool results, the step after the one whose marker the last output
// shows; after a prompt, step 1 of the turn it names. A request that does not offer the tool
// (OpenCode's title request) gets a title.
type toolScript struct {
	files script
	tool  string
	input func(path string) any // the tool's input for printing a file
	// thinking starts every reply with a thinking block (Responses: a reasoning item, which
	// Codex sends back with the calls that follow it). Anthropic requests that turn thinking
	// on get one regardless.
	thinking bool
}

var stepOut = regexp.MustCompile(`E2E-OUT t=(\d+) s=(\d+)`)

const titleText = "E2E data files"

func (sc *toolScript) reply(req *fakeupstream.Request) fakeupstream.Reply {
	text := func(blocks []fakeupstream.Block, s string) fakeupstream.Reply {
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text(s))}
	}
	b, err := parseWire(formatOf(req.Method, req.Path), req.Body)
	if err != nil {
		return text(nil, "E2E fake: "+err.Error())
	}
	var blocks []fakeupstream.Block
	if sc.thinking || req.ThinkingEnabled() {
		blocks = append(blocks, fakeupstream.Thinking(fmt.Sprintf("Planning the next step after %d messages.", len(b.msgs))))
	}
	if !b.offers(sc.tool) {
		return text(blocks, titleText)
	}
	turn, step := sc.position(b)
	switch {
	case turn < 1 || turn > len(e2eTurns):
		return text(blocks, "E2E fake: this request is not part of the script.")
	case step > e2eTurns[turn-1].steps:
		return text(blocks, finalText(turn, e2eTurns[turn-1].steps))
	}
	blocks = append(blocks, fakeupstream.Text(fmt.Sprintf("Reading file %d of batch %d.", step, turn)))
	return fakeupstream.Reply{Content: append(blocks, fakeupstream.ToolUse(sc.tool, sc.input(sc.files.file(turn, step))))}
}

// position returns the turn and the step the next reply makes, (0, 0) when it cannot tell.
func (sc *toolScript) position(b *wireBody) (turn, step int) {
	if b.endsWithToolResults() {
		m := stepOut.FindStringSubmatch(b.lastToolOutput())
		if m == nil {
			return 0, 0
		}
		turn, _ = strconv.Atoi(m[1])
		step, _ = strconv.Atoi(m[2])
		return turn, step + 1
	}
	for _, text := range slices.Backward(b.lastUserTexts()) {
		if m := turnMarker.FindStringSubmatch(text); m != nil {
			turn, _ = strconv.Atoi(m[1])
			return turn, 1
		}
	}
	return 0, 0
}

// trimSession is a finished Codex or OpenCode session of e2eTurns through serve, for
// checkTrimmedSession.
type trimSession struct {
	agent  string // "Codex", "OpenCode", for messages
	format string // of every model call
	model  string // of the agent's requests (not OpenCode's title request)
	sid    string // the CLI's session id, which the proxy must use
	// sidOf returns the session id a model call carries (a header, or prompt_cache_key).
	sidOf  func(r fakeupstream.Recorded, b *wireBody) string
	trimAt int
	sc     *toolScript
	fake   *fakeupstream.Server
	srv    *serveProc // stopped: its databases are closed
	tp     *tap
	out    *outside
	runs   []agentRun
	took   time.Duration
}

// checkTrimmedSession checks what reached the model and what the session database holds:
// every request accepted; each model call on the CLI's session, with the standing
// instruction in its place; no pointer before the first trim and exactly one, sticky, on every
// agent request from then on; a prompt row per turn, a tool_use and a tool_result row per
// step, in context exactly when the last request carries them; trim and usage events and no
// fail-open.
func checkTrimmedSession(t *testing.T, s trimSession) {
	t.Helper()
	recs := s.fake.Requests()
	if rej := s.fake.Rejections(); len(rej) > 0 {
		var b strings.Builder
		for _, r := range rej {
			fmt.Fprintf(&b, "\n%s %s -> %d %s: %s", r.Method, r.Path, r.Status, r.ErrorType, r.Error)
		}
		t.Fatalf("the fake upstream rejected %d of %d requests:%s\n%s", len(rej), len(recs), b.String(), diagnose(s.fake, s.srv))
	}
	sent := s.tp.requests()
	if len(recs) != len(sent) {
		t.Errorf("%s sent %d requests, the upstream received %d", s.agent, len(sent), len(recs))
	}
	var calls, agentCalls []*wireBody // every model call; those offering the tool
	var other []string
	for i, r := range recs {
		f := formatOf(r.Method, r.Path)
		if f == "" {
			other = append(other, r.Method+" "+r.Path)
			continue
		}
		if f != s.format {
			t.Errorf("request %d: %s %s is a %s call, want %s", i+1, r.Method, r.Path, f, s.format)
			continue
		}
		b, err := parseWire(f, r.Body)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if got := s.sidOf(r, b); got != s.sid {
			t.Errorf("request %d: session id %q, want %s's own %q", i+1, got, s.agent, s.sid)
		}
		if seq, _ := strconv.Atoi(r.Header.Get(seqHeader)); seq >= 1 && seq <= len(sent) {
			b.seq, b.sent = seq, len(sent[seq-1].body)
		} else {
			t.Errorf("request %d: %s header %q does not name a request the tap recorded", i+1, seqHeader, r.Header.Get(seqHeader))
		}
		b.received = len(r.Body)
		calls = append(calls, b)
		if b.offers(s.sc.tool) {
			agentCalls = append(agentCalls, b)
			if b.model != s.model {
				t.Errorf("request %d: model %q, want %q", i+1, b.model, s.model)
			}
		}
	}
	if len(other) > 0 {
		t.Logf("requests other than model calls: %q", other)
	}
	if len(agentCalls) == 0 {
		t.Fatalf("no model call offered the %s tool\n%s", s.sc.tool, diagnose(s.fake, s.srv))
	}

	// The standing instruction on every model call; the pointer on every agent request from
	// the first trim on.
	var siErrs []string
	for i, b := range calls {
		if err := b.standingInstruction(); err != nil {
			siErrs = append(siErrs, fmt.Sprintf("model call %d (%d bytes): %v", i+1, b.received, err))
		}
	}
	if n := len(siErrs); n > 0 {
		if n > 3 {
			siErrs = append(siErrs[:3], fmt.Sprintf("and %d more", n-3))
		}
		t.Errorf("%d of %d model calls lack the standing instruction in its place:\n%s", n, len(calls), strings.Join(siErrs, "\n"))
	}
	firstTrim, lastDropped, n := -1, 0, 0
	for i, b := range calls {
		ptr, dropped, count := b.pointer(s.sid)
		if !b.offers(s.sc.tool) {
			if ptr != "" {
				t.Errorf("model call %d (no %s tool: a title request) carries a pointer", i+1, s.sc.tool)
			}
			continue
		}
		n++
		if ptr == "" {
			if firstTrim >= 0 {
				t.Errorf("agent request %d: no pointer for session %s, but agent request %d was trimmed", n, s.sid, firstTrim)
			}
			continue
		}
		if firstTrim < 0 {
			firstTrim = n
		}
		if want := proxy.PointerText(s.sid, dropped); !strings.HasPrefix(ptr, want) {
			t.Errorf("agent request %d: the pointer differs from proxy.PointerText(%q, %d):\n%s", n, s.sid, dropped, ptr)
		}
		if count != 1 {
			t.Errorf("agent request %d: %d pointers, want 1", n, count)
		}
		if dropped < 1 || dropped < lastDropped {
			t.Errorf("agent request %d: the pointer says %d messages dropped, after %d before: the cut is sticky", n, dropped, lastDropped)
		}
		lastDropped = dropped
	}
	last := agentCalls[len(agentCalls)-1]
	big := agentCalls[0]
	for _, b := range agentCalls {
		if b.sent > big.sent {
			big = b
		}
	}
	switch {
	case firstTrim < 0:
		t.Errorf("no request carries a pointer for session %s: the session was never trimmed at CONTEXT_TRIM_AT_TOKENS=%d (largest agent request %d bytes from %s, %d upstream)",
			s.sid, s.trimAt, big.sent, s.agent, big.received)
	case firstTrim == 1:
		t.Errorf("the first agent request was trimmed: CONTEXT_TRIM_AT_TOKENS=%d is below %s's first request (%d bytes); raise it", s.trimAt, s.agent, agentCalls[0].sent)
	case last.received >= last.sent:
		t.Errorf("last request: %d bytes upstream, %d from %s: trimming should have made it smaller", last.received, last.sent, s.agent)
	}
	if firstTrim > 0 {
		for i, turn := range slices.Backward(e2eTurns) {
			if last.pointerWith(s.sid, turn.prompt) {
				t.Logf("last request: the pointer is in turn %d's prompt message", i+1)
				break
			}
		}
	}

	// The session database: a row for every prompt, tool call and tool output; what the last
	// request carries is in context, the rest is not.
	sid, ok := store.SanitizeSID(s.sid)
	if !ok {
		t.Fatalf("%s's session id %q is not usable as a database name", s.agent, s.sid)
	}
	db := openSessionDB(t, s.srv.stateDir, sid)
	rows := queryInt(t, db, `SELECT count(*) FROM messages`)
	outRows := queryInt(t, db, `SELECT count(*) FROM messages WHERE in_context = 0`)
	if rows == 0 {
		t.Fatal("the session database has no rows")
	}
	if outRows == 0 {
		t.Error("no row has in_context = 0: nothing was trimmed")
	}
	inCtx := func(q string, args ...any) (n int, inContext bool, names []string) {
		r, err := db.Query(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer r.Close()
		for r.Next() {
			var in int
			var name sql.NullString
			if err := r.Scan(&in, &name); err != nil {
				t.Fatal(err)
			}
			n++
			inContext = in == 1
			names = append(names, name.String)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return n, inContext, names
	}
	// The agent's thread is the one of its tool calls; OpenCode's title request, which quotes
	// the first prompt, has its own.
	var thread string
	if err := db.QueryRow(`SELECT thread FROM messages WHERE kind = 'tool_use' ORDER BY seq LIMIT 1`).Scan(&thread); err != nil {
		t.Errorf("no tool_use row: %v", err)
	}
	for i, turn := range e2eTurns {
		n, in, _ := inCtx(`SELECT in_context, name FROM messages WHERE role = 'user' AND kind = 'text' AND text = ? AND thread = ?`, turn.prompt, thread)
		if n != 1 {
			t.Errorf("turn %d: %d user text rows of the agent's thread hold the prompt, want 1", i+1, n)
		} else if want := strings.Contains(last.raw, turn.prompt); in != want {
			t.Errorf("turn %d: the prompt's row has in_context = %v, but the last request carries it: %v", i+1, in, want)
		}
		for st := 1; st <= turn.steps; st++ {
			path := s.sc.files.file(i+1, st)
			n, in, names := inCtx(`SELECT in_context, name FROM messages WHERE role = 'assistant' AND kind = 'tool_use' AND instr(text, ?) > 0`, path)
			switch {
			case n != 1:
				t.Errorf("turn %d step %d: %d assistant tool_use rows name %s, want 1", i+1, st, n, path)
			case names[0] != s.sc.tool:
				t.Errorf("turn %d step %d: tool_use row named %q, want %q", i+1, st, names[0], s.sc.tool)
			case in != strings.Contains(last.raw, path):
				t.Errorf("turn %d step %d: the tool_use row has in_context = %v, but the last request carries the call: %v", i+1, st, in, !in)
			}
			mark := stepMarker(i+1, st)
			n, in, names = inCtx(`SELECT in_context, name FROM messages WHERE role = 'tool' AND kind = 'tool_result' AND instr(text, ?) > 0`, mark)
			switch {
			case n != 1:
				t.Errorf("turn %d step %d: %d tool tool_result rows hold %q, want 1", i+1, st, n, mark)
			case names[0] != s.sc.tool:
				t.Errorf("turn %d step %d: tool_result row named %q, want %q", i+1, st, names[0], s.sc.tool)
			case in != strings.Contains(last.raw, mark):
				t.Errorf("turn %d step %d: the tool_result row has in_context = %v, but the last request carries the output: %v", i+1, st, in, !in)
			}
		}
	}

	// Events: trims, a usage event per model call, no fail-open.
	trims := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'trim'`)
	usages := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'usage'`)
	failOpens := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'fail_open'`)
	if trims == 0 {
		t.Error("no trim event")
	}
	if usages != len(calls) {
		t.Errorf("%d usage events for %d model calls", usages, len(calls))
	}
	if failOpens != 0 {
		t.Errorf("%d fail_open events:\n%s", failOpens, s.srv.log)
	}

	// What we measured.
	sentMsgs := -1
	if last.seq > 0 {
		if w, err := parseWire(s.format, sent[last.seq-1].body); err == nil {
			sentMsgs = len(w.msgs)
		}
	}
	t.Logf("%s session %s, model %s: %d runs in %s (%s); %d model calls (%d agent requests), first trimmed agent request #%d",
		s.agent, s.sid, s.model, len(s.runs), s.took.Round(time.Millisecond), runTimes(s.runs), len(calls), len(agentCalls), firstTrim)
	t.Logf("first agent request: %d bytes from %s, %d upstream; largest: %d -> %d; last: %d -> %d bytes, %d -> %d messages/items (CONTEXT_TRIM_AT_TOKENS=%d)",
		agentCalls[0].sent, s.agent, agentCalls[0].received, big.sent, big.received, last.sent, last.received, sentMsgs, len(last.msgs), s.trimAt)
	t.Logf("session db: %d rows, %d out of context; %d trim events, %d usage events", rows, outRows, trims, usages)
	t.Logf("requests: %s", s.tp.timeline())
	if tries := s.out.attempts(); len(tries) > 0 {
		t.Logf("outside calls %s tried (refused): %q", s.agent, tries)
	}
	tr, err := db.Query(`SELECT tokens_before, tokens_after, dropped FROM events WHERE kind = 'trim' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for tr.Next() {
		var before, after, dropped sql.NullInt64
		if err := tr.Scan(&before, &after, &dropped); err != nil {
			t.Fatal(err)
		}
		t.Logf("trim: estimate %d -> %d tokens, %d messages dropped", before.Int64, after.Int64, dropped.Int64)
	}
}
