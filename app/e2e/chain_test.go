//go:build e2e

package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// chainKey is the API key of the gateway the custom providers point at: the strict fake
// answers 401 to a request without it, as a real gateway does.
const chainKey = "sk-e2e-gateway-key"

// chainHeaders are what the custom providers add to every request, by header name.
var chainHeaders = map[string]string{"X-Gateway-Team": "agents-e2e"}

// TestE2EChainedCredentials: a custom API-key provider (the key in an environment variable,
// a custom header; OpenRouter-style) keeps reaching its gateway with the same credentials
// after `install` chains it through the proxy (issue 15, Deliver 3 and Show). For the real
// Codex and the real OpenCode, the agent first talks to the gateway (the strict fake, which
// requires the key) directly; then `install` wires it, serve runs on the wired port, and
// the same prompt goes through serve: the gateway must see the same key and headers, and the
// session must be in serve's store. `doctor` (the real binary) then finds the agent's
// binaries this version and its base URL answering; `uninstall` gives the agent's config
// file back byte for byte.
func TestE2EChainedCredentials(t *testing.T) {
	codex := codexCLI.find(t)
	opencode := openCodeCLI.find(t)
	codexCLI.logVersion(t, codex)
	openCodeCLI.logVersion(t, opencode)
	bin := buildBinary(t)

	t.Run("codex", func(t *testing.T) {
		c := newChainRig(t, bin)
		codexHome := filepath.Join(c.home, ".codex")
		makeDirs(t, codexHome)
		config := fmt.Sprintf(`model = %q
model_provider = "gateway"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.gateway]
name = "OpenRouter-style gateway"
base_url = %q
wire_api = "responses"
env_key = "GATEWAY_API_KEY"
http_headers = { "X-Gateway-Team" = %q }
env_http_headers = { "X-Gateway-Project" = "GATEWAY_PROJECT" }
query_params = { "gw-tier" = "e2e" }
supports_websockets = false

[analytics]
enabled = false
`, codexModel, c.fake.URL+"/v1", chainHeaders["X-Gateway-Team"])
		file := filepath.Join(codexHome, "config.toml")
		c.write(file, config)
		env := append(c.agentEnv(), "CODEX_HOME="+codexHome, "GATEWAY_API_KEY="+chainKey, "GATEWAY_PROJECT=proj-7")
		args := []string{"exec", "--skip-git-repo-check", "--disable", "plugins", "--disable", "apps", "--json"}
		run := func(prompt string) string {
			t.Helper()
			r := runAgent(t, 3*time.Minute, codex, c.work, env, append(args, prompt)...)
			ev := codexEvents(r.stdout)
			if r.err != nil || len(ev.errors) > 0 || !strings.Contains(strings.Join(ev.messages, "\n"), "E2E-INSTALL-OK") {
				t.Fatalf("codex exec (errors %q):\n%s\n%s", ev.errors, r, diagnose(c.fake, c.srv))
			}
			return ev.thread
		}
		want := map[string]string{"Authorization": "Bearer " + chainKey, "X-Gateway-Team": chainHeaders["X-Gateway-Team"], "X-Gateway-Project": "proj-7"}
		direct := c.calls(func() { run("E2E-CHAIN codex direct") })
		c.check("directly", direct, want, "gw-tier=e2e")

		c.install(env, "codex", "carries provider \"gateway\"'s env_key, http_headers, env_http_headers, query_params")
		var thread string
		proxied := c.calls(func() { thread = run("E2E-CHAIN codex through the proxy") })
		c.check("through the proxy", proxied, want, "gw-tier=e2e")
		c.inStore(thread)
		c.doctor(env, "codex")
		c.uninstall(env, "codex", file, config)
	})

	t.Run("opencode", func(t *testing.T) {
		c := newChainRig(t, bin)
		dir := filepath.Join(c.xdg, "opencode")
		seedOpenCodeConfigDir(t, dir)
		cfg := map[string]any{
			"$schema": "https://opencode.ai/config.json",
			"model":   "anthropic/claude-sonnet-4-5", "autoupdate": false, "share": "disabled",
			"provider": map[string]any{"anthropic": map[string]any{"options": map[string]any{
				"baseURL": c.fake.URL + "/v1", "apiKey": "{env:GATEWAY_API_KEY}", "headers": chainHeaders,
			}}},
		}
		raw, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "opencode.json")
		c.write(file, string(raw)+"\n")
		env := append(c.agentEnv(), "GATEWAY_API_KEY="+chainKey,
			"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1")
		run := func(words ...string) string {
			t.Helper()
			r := runAgent(t, 3*time.Minute, opencode, c.work, env, append([]string{"run", "--format", "json"}, words...)...)
			ev := openCodeEvents(r.stdout)
			if r.err != nil || len(ev.errors) > 0 || !strings.Contains(strings.Join(ev.texts, "\n"), "E2E-INSTALL-OK") {
				t.Fatalf("opencode run (errors %q):\n%s\n%s", ev.errors, r, diagnose(c.fake, c.srv))
			}
			return ev.session
		}
		want := map[string]string{"X-Api-Key": chainKey, "X-Gateway-Team": chainHeaders["X-Gateway-Team"]}
		direct := c.calls(func() { run("E2E-CHAIN", "opencode", "direct") })
		c.check("directly", direct, want, "")

		c.install(env, "opencode", "opencode: wired")
		var sid string
		proxied := c.calls(func() { sid = run("E2E-CHAIN", "opencode", "through", "the", "proxy") })
		c.check("through the proxy", proxied, want, "")
		c.inStore(sid)
		c.doctor(env, "opencode")
		c.uninstall(env, "opencode", file, string(raw)+"\n")
	})
}

// chainRig is one agent's world: a temporary HOME, the gateway (the strict fake requiring
// chainKey), the port install wires and serve (once started) listens on, serve's config and
// store, and the refusing stand-in for the internet.
type chainRig struct {
	t                    *testing.T
	bin, home, xdg, work string
	config, stateDir     string
	port                 int
	fake                 *fakeupstream.Server
	srv                  *serveProc
	out                  *outside
}

func newChainRig(t *testing.T, bin string) *chainRig {
	root := t.TempDir()
	c := &chainRig{t: t, bin: bin, home: filepath.Join(root, "home"), work: filepath.Join(root, "work"),
		config: filepath.Join(root, "smarter-compact.toml"), stateDir: filepath.Join(root, "state"), port: freePort(t)}
	c.xdg = filepath.Join(c.home, ".config")
	makeDirs(t, c.work, c.xdg)
	c.fake = fakeupstream.Start(t, fakeupstream.Options{Reply: installReply, APIKey: chainKey})
	c.out = startOutside(t)
	t.Cleanup(func() {
		if t.Failed() && c.srv == nil {
			t.Logf("%s", diagnose(c.fake, &serveProc{log: &syncBuffer{}}))
		}
	})
	return c
}

func (c *chainRig) write(path, text string) {
	c.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// agentEnv is the agents' environment and smarter-compact's (install, doctor, the hooks and
// MCP servers): HOME, XDG_CONFIG_HOME, serve's config, port and store, no base URL of ours.
func (c *chainRig) agentEnv() []string {
	return append([]string{"HOME=" + c.home, "XDG_CONFIG_HOME=" + c.xdg, "SMARTER_COMPACT_CONFIG=" + c.config,
		"CONTEXT_PROXY_PORT=" + strconv.Itoa(c.port), "SMARTER_COMPACT_STATE_DIR=" + c.stateDir}, c.out.env()...)
}

// calls returns the model calls the gateway received while f ran.
func (c *chainRig) calls(f func()) []fakeupstream.Recorded {
	n := len(c.fake.Requests())
	f()
	return modelCalls(c.fake.Requests()[n:])
}

// check fails unless every call of recs was accepted and carries want's headers (and query,
// when not "").
func (c *chainRig) check(how string, recs []fakeupstream.Recorded, want map[string]string, query string) {
	c.t.Helper()
	if len(recs) == 0 {
		c.t.Fatalf("%s: no model call reached the gateway", how)
	}
	for _, r := range recs {
		if r.Status != http.StatusOK {
			c.t.Errorf("%s: %s %s answered %d %s: %s", how, r.Method, r.Path, r.Status, r.ErrorType, r.Error)
		}
		for k, v := range want {
			if got := r.Header.Get(k); got != v {
				c.t.Errorf("%s: %s %s: %s = %q, want %q", how, r.Method, r.Path, k, got, v)
			}
		}
		if query != "" && !strings.Contains(r.Path, "?"+query) && !strings.Contains(r.Path, "&"+query) {
			c.t.Errorf("%s: %s %s lacks the query parameter %s", how, r.Method, r.Path, query)
		}
	}
	c.t.Logf("%s: %d model calls, each with %v", how, len(recs), want)
}

// install runs `smarter-compact install --agents agent`, which must copy the binary to the
// stable per-user path and print say, then starts serve on the wired port with the config
// install wrote its chained upstream into.
func (c *chainRig) install(env []string, agent, say string) {
	c.t.Helper()
	r := runBin(c.t, c.bin, c.work, env, "install", "--agents", agent)
	c.t.Logf("install:\n%s", r.stdout)
	stable := filepath.Join(c.home, ".local", "bin", "smarter-compact")
	if r.err != nil || !strings.Contains(r.stdout, agent+": wired") || !strings.Contains(r.stdout, say) ||
		!strings.Contains(r.stdout, "binary: copied "+c.bin+" to "+stable) {
		c.t.Fatalf("install --agents %s:\n%s", agent, r)
	}
	if b, err := os.ReadFile(c.config); err != nil || !strings.Contains(string(b), "[upstream.agents."+agent+"]") {
		c.t.Fatalf("install chained no upstream for %s into %s (%v):\n%s", agent, c.config, err, b)
	}
	c.srv = startServeOn(c.t, c.bin, c.port, append([]string{"HOME=" + c.home, "SMARTER_COMPACT_CONFIG=" + c.config,
		"SMARTER_COMPACT_STATE_DIR=" + c.stateDir}, c.out.env()...))
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("%s", diagnose(c.fake, c.srv))
		}
	})
}

// inStore fails unless serve stored session sid: the proxied calls went through serve.
func (c *chainRig) inStore(sid string) {
	c.t.Helper()
	sessions := filepath.Join(c.stateDir, "context", "sessions")
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(filepath.Join(sessions, sid+".db")); return err == nil }) {
		c.t.Errorf("serve has no session database for %q: the calls did not go through serve", sid)
	}
}

// doctor runs the real `doctor --json` against the live serve: agent's checks must all be
// ok, one of them naming the stable binary as this version.
func (c *chainRig) doctor(env []string, agent string) {
	c.t.Helper()
	r := runBin(c.t, c.bin, c.work, env, "doctor", "--json")
	var rep struct {
		Checks []struct{ Name, Status, Message, Fix string } `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		c.t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	binaryOK := false
	for _, ch := range rep.Checks {
		if ch.Name != agent && !strings.HasPrefix(ch.Name, agent+" (") {
			continue
		}
		c.t.Logf("doctor: %s %s: %s", ch.Status, ch.Name, ch.Message)
		if ch.Status != "ok" {
			c.t.Errorf("doctor %s: %s: %s → %s", ch.Name, ch.Status, ch.Message, ch.Fix)
		}
		binaryOK = binaryOK || strings.Contains(ch.Message, filepath.Join(c.home, ".local", "bin", "smarter-compact")+": this version")
	}
	if !binaryOK {
		c.t.Errorf("doctor did not find %s's binary this version:\n%s", agent, r.stdout)
	}
}

// uninstall runs `smarter-compact uninstall --agents agent` with serve stopped: the agent's
// config file must be text again, byte for byte, and serve's config as before install.
func (c *chainRig) uninstall(env []string, agent, file, text string) {
	c.t.Helper()
	if err := c.srv.stop(); err != nil {
		c.t.Fatalf("%v\n%s", err, c.srv.log)
	}
	r := runBin(c.t, c.bin, c.work, env, "uninstall", "--agents", agent)
	c.t.Logf("uninstall:\n%s", r.stdout)
	if r.err != nil {
		c.t.Fatalf("uninstall:\n%s", r)
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, []byte(text)) {
		c.t.Errorf("%s after uninstall:\n%s\nbefore install:\n%s", file, b, text)
	}
	if _, err := os.Stat(c.config); err == nil {
		b, _ := os.ReadFile(c.config)
		c.t.Errorf("uninstall left %s, which install created:\n%s", c.config, b)
	}
}

// startServeOn runs `serve --no-tray` on port (the one install wired) with env, returns once
// /healthz answers and stops it when the test ends (unless stopped before).
func startServeOn(t *testing.T, bin string, port int, env []string) *serveProc {
	t.Helper()
	p := &serveProc{port: port, stateDir: "", log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", "--no-tray")
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "CONTEXT_PROXY_PORT=" + strconv.Itoa(port)}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	if err := p.waitHealthy(15 * time.Second); err != nil {
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("serve on port %d: %v", port, err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("serve: %v\n%s", err, p.log)
		}
	})
	return p
}
