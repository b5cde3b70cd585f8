package app

import (
	"encoding/json"
	"sync"

	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
	"github.com/smarter-compact/smarter-compact/store/storetest"
	"github.com/smarter-compact/smarter-compact/web"
)

// stateServer serves the real route table (the dashboard's /api included) over a state on
// the config.toml that text (with PORT replaced by the listener's port) is written to; it
// returns the state, the config's path and a system whose config dir holds the API token.
func stateServer(t *testing.T, text string) (*state, string, system, *syncBuffer) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	path := configtest.WriteConfig(t, strings.ReplaceAll(text, "PORT", strconv.Itoa(port)))
	sys, stdout, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path})
	st, err := newState(stateOptions{Path: path, Explicit: true, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	token, err := installer.EnsureToken(sys.configDir)
	if err != nil {
		t.Fatal(err)
	}
	root := storetest.OpenRoot(t)
	log := slog.New(slog.DiscardHandler)
	dash := web.New(web.Options{Root: root, Control: st, APIToken: token, Log: log})
	ts.Config.Handler = routes(port, http.NotFoundHandler(), http.NotFoundHandler(), dash, log)
	ts.Start()
	t.Cleanup(ts.Close)
	return st, path, sys, stdout
}

func TestOnOffRunningService(t *testing.T) {
	t.Parallel()
	const userText = "# my settings\r\n[context_proxy]\r\nport = PORT # the proxy\r\n\r\n[context_proxy.agents]\r\ncodex = true # keep\r\n\r\n[compaction]\r\nrecall = false\r\n"
	st, path, sys, stdout := stateServer(t, userText)
	port := strconv.Itoa(st.port)

	if err := run(t.Context(), []string{"off", "codex", "claude-code"}, sys); err != nil {
		t.Fatalf("off: %v", err)
	}
	// Applied at once (the API call), not only after the watcher's next poll.
	if st.Enabled(config.AgentCodex) || st.Enabled(config.AgentClaudeCode) || !st.Enabled(config.AgentOpenCode) {
		t.Errorf("switches after off codex claude-code: %s", st.agentsString())
	}
	got, _ := os.ReadFile(path)
	want := strings.ReplaceAll("# my settings\r\n[context_proxy]\r\nport = PORT # the proxy\r\n\r\n[context_proxy.agents]\r\ncodex = false # keep\r\nclaude-code = false\r\n\r\n[compaction]\r\nrecall = false\r\n", "PORT", port)
	if string(got) != want {
		t.Errorf("config after off:\n%q\nwant\n%q", got, want)
	}
	if out := stdout.String(); !strings.Contains(out, "trimming off for claude-code, codex: saved in "+path) ||
		!strings.Contains(out, "running service") || !strings.Contains(out, "codex off (saved)") {
		t.Errorf("stdout %q", out)
	}

	// No agent named: all of them.
	if err := run(t.Context(), []string{"on"}, sys); err != nil {
		t.Fatalf("on: %v", err)
	}
	if st.agentsString() != "claude-code=on codex=on opencode=on unknown=on" {
		t.Errorf("switches after on: %s", st.agentsString())
	}
	cfg, err := config.Load(path, true, env{}.Get)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range config.ConfiguredAgents {
		if !cfg.Agents[a] {
			t.Errorf("%s is off in the saved config", a)
		}
	}
	got, _ = os.ReadFile(path)
	if !strings.Contains(string(got), "[context_proxy.agents]\r\ncodex = true # keep\r\nclaude-code = true\r\nopencode = true\r\n\r\n[compaction]") {
		t.Errorf("config after on:\n%s", got)
	}
}

func TestOnOffToken(t *testing.T) {
	t.Parallel()
	t.Run("no token file", func(t *testing.T) {
		t.Parallel()
		st, _, sys, _ := stateServer(t, "[context_proxy]\nport = PORT\n")
		if err := os.Remove(filepath.Join(sys.configDir, "smarter-compact", "api-token")); err != nil {
			t.Fatal(err)
		}
		err := run(t.Context(), []string{"off", "codex"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "no API token") {
			t.Fatalf("err %v: want the 401 and the missing token named", err)
		}
		// Saved all the same: the watcher applies it within a second.
		st.poll()
		if st.Enabled(config.AgentCodex) {
			t.Error("the saved change did not reach the state through the file")
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		t.Parallel()
		_, _, sys, _ := stateServer(t, "[context_proxy]\nport = PORT\n")
		if err := os.WriteFile(filepath.Join(sys.configDir, "smarter-compact", "api-token"), []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
			t.Fatal(err)
		}
		err := run(t.Context(), []string{"on", "codex"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "does not match") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestOnOffServiceDown(t *testing.T) {
	t.Parallel()
	port := quietPort(t) // nothing listens there now
	sys, stdout, _ := testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(port)})
	if err := run(t.Context(), []string{"off", "opencode"}, sys); err != nil {
		t.Fatalf("off: %v", err)
	}
	path := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the config was not created: %v", err)
	}
	if string(got) != "[context_proxy.agents]\nopencode = false\n" {
		t.Errorf("new config %q", got)
	}
	wantPrivate(t, path)
	if !strings.Contains(stdout.String(), "not running") || !strings.Contains(stdout.String(), "applies when it starts") {
		t.Errorf("stdout %q: want it to say the service is down and the change is saved", stdout)
	}
}

func TestOnOffErrors(t *testing.T) {
	t.Parallel()
	t.Run("unknown agent", func(t *testing.T) {
		t.Parallel()
		sys, _, _ := testSystem(t, env{})
		err := run(t.Context(), []string{"on", "cursor"}, sys)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), `unknown agent "cursor": use claude-code, codex, opencode`) {
			t.Fatalf("err %v", err)
		}
	})
	for _, c := range []struct {
		name, text, port string
		args             []string
		want             string // in the error
	}{
		{"invalid config untouched", "[context_proxy]\nport = 99999\n", "", []string{"off"}, "nothing changed"},
		{"inline table", "[context_proxy]\nagents = { codex = true }\n", "1", []string{"off", "codex"}, "codex = false"}, // the line to write by hand
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := configtest.WriteConfig(t, c.text)
			e := env{"SMARTER_COMPACT_CONFIG": path}
			if c.port != "" {
				e["CONTEXT_PROXY_PORT"] = c.port
			}
			sys, _, _ := testSystem(t, e)
			err := run(t.Context(), c.args, sys)
			if ExitCode(err) != 1 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want exit 1 and %q", err, c.want)
			}
			if got, _ := os.ReadFile(path); string(got) != c.text {
				t.Errorf("config changed: %q", got)
			}
		})
	}
	t.Run("old service without the API", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(ts.Close)
		port := ts.Listener.Addr().(*net.TCPAddr).Port
		sys, _, _ := testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(port)})
		err := run(t.Context(), []string{"on", "codex"}, sys)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), ", but the running service did not take the change") || !strings.HasPrefix(err.Error(), "saved in ") {
			t.Fatalf("err %v", err)
		}
	})
}

// TestOnOffLetsTheServiceSave: while the service answers, `on` and `off` only call its API:
// the service is the one writer of its config.toml, so a change made at the same moment from
// the dashboard or the tray is not lost between the CLI's read and its write. The fake
// service here answers as the real one and writes nothing: the file must stay as it was.
func TestOnOffLetsTheServiceSave(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	var path string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Mode web.Mode }
		_ = json.NewDecoder(r.Body).Decode(&body)
		agent := strings.TrimPrefix(r.URL.Path, "/api/agents/")
		mu.Lock()
		calls = append(calls, agent+"="+string(body.Mode))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"agent": agent, "mode": body.Mode, "trimming": body.Mode == web.ModeOn,
			"why": string(body.Mode) + " (saved)", "enabled": body.Mode == web.ModeOn, "configPath": path})
	}))
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	const text = "[context_proxy]\nport = PORT\n"
	path = configtest.WriteConfig(t, strings.ReplaceAll(text, "PORT", strconv.Itoa(port)))
	before := readText(t, path)
	sys, stdout, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path})
	if err := run(t.Context(), []string{"off", "codex", "opencode"}, sys); err != nil {
		t.Fatalf("off: %v", err)
	}
	if got := readText(t, path); got != before {
		t.Errorf("the CLI wrote config.toml while the service answered:\n%q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(calls, " ") != "codex=off opencode=off" {
		t.Errorf("API calls %q", calls)
	}
	if out := stdout.String(); !strings.Contains(out, "trimming off for codex, opencode: saved in "+path+" by the running service at "+ts.URL) {
		t.Errorf("stdout %q", out)
	}
}

// TestOnOffConcurrentWithDashboard: `on` and a dashboard switch at the same moment both
// land, in the file and in the running state (the reviewer's race: the CLI's read-modify-
// write of config.toml lost the dashboard's change).
func TestOnOffConcurrentWithDashboard(t *testing.T) {
	t.Parallel()
	st, path, sys, _ := stateServer(t, "[context_proxy]\nport = PORT\n")
	for i := range 15 {
		for _, a := range []string{config.AgentClaudeCode, config.AgentOpenCode} {
			if err := st.SetAgent(a, web.ModeOff); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := run(t.Context(), []string{"on", config.AgentOpenCode}, sys); err != nil {
				t.Errorf("on: %v", err)
			}
		})
		wg.Go(func() {
			if err := st.SetAgent(config.AgentClaudeCode, web.ModeOn); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		st.poll()
		cfg, err := config.Load(path, true, env{}.Get)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Enabled(config.AgentClaudeCode) || !st.Enabled(config.AgentOpenCode) || !cfg.Agents[config.AgentClaudeCode] || !cfg.Agents[config.AgentOpenCode] {
			t.Fatalf("round %d: a change was lost: running %s; saved claude-code %v opencode %v", i, st.agentsString(), cfg.Agents[config.AgentClaudeCode], cfg.Agents[config.AgentOpenCode])
		}
	}
}

// TestOnOffFindsServiceOnOtherPort: a service started with --port records its address next
// to the API token; `on` and `off` find it there, though the config's port is another.
func TestOnOffFindsServiceOnOtherPort(t *testing.T) {
	t.Parallel()
	st, path, sys, stdout := stateServer(t, "[context_proxy]\nport = PORT\n")
	// The config now names a port where nothing listens, as with serve --port.
	closed := freePort(t)
	if err := os.WriteFile(path, []byte("[context_proxy]\nport = "+strconv.Itoa(closed)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st.poll()
	base := "http://127.0.0.1:" + strconv.Itoa(st.port)
	remove, err := installer.WriteAddrFile(sys.configDir, base)
	if err != nil {
		t.Fatal(err)
	}
	addrFile, _ := installer.AddrFilePath(sys.configDir)
	if runtime.GOOS != "windows" {
		if fi, err := os.Stat(addrFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("address file: %v, mode %o; want 600", err, fi.Mode().Perm())
		}
	}
	if err := run(t.Context(), []string{"off", "codex"}, sys); err != nil {
		t.Fatalf("off: %v", err)
	}
	if st.Enabled(config.AgentCodex) {
		t.Error("the service on the recorded address did not switch at once")
	}
	if out := stdout.String(); !strings.Contains(out, "by the running service at "+base) {
		t.Errorf("stdout %q: want the service at the recorded address", out)
	}

	// A stale file (the service gone) or one that points off this machine is not used.
	remove()
	if _, err := os.Stat(addrFile); !os.IsNotExist(err) {
		t.Errorf("remove left the address file: %v", err)
	}
	for _, bad := range []string{`{"addr":"http://evil.example:4100"}`, `{"addr":"https://127.0.0.1:4100"}`, `not json`} {
		if err := os.WriteFile(addrFile, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := installer.ReadAddrFile(sys.configDir); got != "" {
			t.Errorf("address file %s read as %q", bad, got)
		}
	}
	if err := os.WriteFile(addrFile, []byte(`{"addr":"http://127.0.0.1:`+strconv.Itoa(freePort(t))+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	seen := len(stdout.String())
	if err := run(t.Context(), []string{"on", "codex"}, sys); err != nil {
		t.Fatalf("on with a stale address: %v", err)
	}
	if out := stdout.String()[seen:]; !strings.Contains(out, "not running") || !strings.Contains(readText(t, path), "codex = true") {
		t.Errorf("stale address: stdout %q, config %q", out, readText(t, path))
	}
}

// TestOnOffRefusedOnce: the service's refusal (here: config.toml is read-only) reaches the
// user once, as the service wrote it, without a second "smarter-compact:" (main adds one).
func TestOnOffRefusedOnce(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("chmod 0400 does not make a file read-only on Windows")
	}
	st, path, sys, _ := stateServer(t, "[context_proxy]\nport = PORT\n")
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"off", "codex"}, sys)
	if err == nil {
		t.Fatal("off on a read-only config succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "409 Conflict") || strings.Count(msg, "read-only") != 1 || strings.Contains(msg, "smarter-compact:") {
		t.Errorf("error %q: want the 409 and the service's message once, without its prefix", msg)
	}
	if !st.Enabled(config.AgentCodex) {
		t.Error("a refused switch applied")
	}
}

// TestFollow checks `follow`: through the running service, then with the service down, the
// agents' keys leave [context_proxy.agents] and the agents follow the master switch.
func TestFollow(t *testing.T) {
	t.Parallel()
	t.Run("running service", func(t *testing.T) {
		t.Parallel()
		st, path, sys, stdout := stateServer(t, "[context_proxy]\nport = PORT\nenabled = false\n\n[context_proxy.agents]\ncodex = true # mine\nopencode = true\n")
		if !st.Enabled(config.AgentCodex) {
			t.Fatal("codex is off before follow: the test's config does not say what it should")
		}
		if err := run(t.Context(), []string{"follow", "codex"}, sys); err != nil {
			t.Fatalf("follow: %v", err)
		}
		if st.Enabled(config.AgentCodex) || !st.Enabled(config.AgentOpenCode) {
			t.Errorf("switches after follow codex: %s; want codex off (master off), opencode on", st.agentsString())
		}
		got, _ := os.ReadFile(path)
		if strings.Contains(string(got), "codex") || !strings.Contains(string(got), "opencode = true") {
			t.Errorf("config after follow codex:\n%s", got)
		}
		if out := stdout.String(); !strings.Contains(out, "codex follow the master switch") || !strings.Contains(out, "by the running service") {
			t.Errorf("stdout %q", out)
		}
	})
	t.Run("service down", func(t *testing.T) {
		t.Parallel()
		port := quietPort(t) // nothing listens there
		path := configtest.WriteConfig(t, "[context_proxy]\nport = "+strconv.Itoa(port)+"\n\n[context_proxy.agents]\nclaude-code = false\ncodex = true\n")
		sys, stdout, _ := testSystem(t, env{"SMARTER_COMPACT_CONFIG": path})
		if err := run(t.Context(), []string{"follow"}, sys); err != nil {
			t.Fatalf("follow: %v", err)
		}
		got, _ := os.ReadFile(path)
		if want := "[context_proxy]\nport = " + strconv.Itoa(port) + "\n"; string(got) != want {
			t.Errorf("config after follow:\n%q\nwant\n%q", got, want)
		}
		if !strings.Contains(stdout.String(), "claude-code, codex, opencode follow the master switch") {
			t.Errorf("stdout %q", stdout)
		}
	})
}
