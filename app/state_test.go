package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store/storetest"
	"github.com/smarter-compact/smarter-compact/web"
)

// testState builds a state over config.toml with text in a fresh directory ("" leaves the
// file missing), under e; it returns the state, the config path and the log.
func testState(t *testing.T, text string, e env) (*state, string, *syncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if text != "" {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sys, _, logs := testSystem(t, e)
	st, err := newState(stateOptions{Path: path, Sys: sys, StoreDir: "/store", Tray: "off (--no-tray)"})
	if err != nil {
		t.Fatal(err)
	}
	return st, path, logs
}

// defaultConfigState opens a state on the config.toml sys's environment names when no flag
// does (config.Path with no --config, as serve finds it) and returns it with that path.
func defaultConfigState(t *testing.T, sys system) (*state, string) {
	t.Helper()
	path, explicit, err := config.Path("", sys.getenv, sys.configDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := newState(stateOptions{Path: path, Explicit: explicit, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	return st, path
}

// readText returns the text of the file at path, failing the test when it cannot be read.
func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func agentOf(t *testing.T, st web.State, agent string) web.AgentSwitch {
	t.Helper()
	return findIn(t, st.Agents, func(a web.AgentSwitch) bool { return a.Agent == agent }, fmt.Sprintf("agent %q", agent))
}

func settingOf(t *testing.T, st web.State, key string) web.Setting {
	t.Helper()
	return findIn(t, st.Settings, func(s web.Setting) bool { return s.Key == key }, fmt.Sprintf("setting %q", key))
}

// findIn returns the first element of list that match accepts; the test ends when none
// does (what names the one looked for).
func findIn[T any](t *testing.T, list []T, match func(T) bool, what string) T {
	t.Helper()
	i := slices.IndexFunc(list, match)
	if i < 0 {
		t.Fatalf("no %s in State", what)
	}
	return list[i]
}

// TestStateTrimmingRule is the effective rule: trimming(agent) = !paused &&
// (CONTEXT_PROXY_ENABLED set ? its value : mode == on || (mode == follow && master)), and
// "unknown" (or a name we do not know) follows the master switch.
func TestStateTrimmingRule(t *testing.T) {
	t.Parallel()
	type want struct {
		on  bool
		why string
	}
	tests := []struct {
		name, file string
		env        env
		want       map[string]want // claude-code, codex, opencode, unknown
	}{
		{"defaults: all follow a master that is on", "", nil, map[string]want{
			"claude-code": {true, "on (follows the master switch)"}, "codex": {true, "on (follows the master switch)"},
			"opencode": {true, "on (follows the master switch)"}, "unknown": {true, "on (follows the master switch)"}}},
		{"saved modes over the master", "[context_proxy]\nenabled = false\n[context_proxy.agents]\ncodex = true\nopencode = false\n", nil, map[string]want{
			"claude-code": {false, "off (follows the master switch)"}, "codex": {true, "on (saved)"},
			"opencode": {false, "off (saved)"}, "unknown": {false, "off (follows the master switch)"}}},
		{"paused wins over every mode", "[context_proxy]\npaused = true\n[context_proxy.agents]\ncodex = true\n", nil, map[string]want{
			"claude-code": {false, "off: paused"}, "codex": {false, "off: paused"}, "opencode": {false, "off: paused"}, "unknown": {false, "off: paused"}}},
		{"CONTEXT_PROXY_ENABLED=0 over saved on", "[context_proxy.agents]\ncodex = true\n", env{"CONTEXT_PROXY_ENABLED": "0"}, map[string]want{
			"claude-code": {false, "off: CONTEXT_PROXY_ENABLED=0 overrides"}, "codex": {false, "off: CONTEXT_PROXY_ENABLED=0 overrides"},
			"opencode": {false, "off: CONTEXT_PROXY_ENABLED=0 overrides"}, "unknown": {false, "off: CONTEXT_PROXY_ENABLED=0 overrides"}}},
		{"CONTEXT_PROXY_ENABLED=true over saved off and the master", "[context_proxy]\nenabled = false\n[context_proxy.agents]\ncodex = false\n", env{"CONTEXT_PROXY_ENABLED": "true"}, map[string]want{
			"claude-code": {true, "on: CONTEXT_PROXY_ENABLED=true overrides"}, "codex": {true, "on: CONTEXT_PROXY_ENABLED=true overrides"},
			"opencode": {true, "on: CONTEXT_PROXY_ENABLED=true overrides"}, "unknown": {true, "on: CONTEXT_PROXY_ENABLED=true overrides"}}},
		{"pause wins over CONTEXT_PROXY_ENABLED=1", "[context_proxy]\npaused = true\n", env{"CONTEXT_PROXY_ENABLED": "1"}, map[string]want{
			"claude-code": {false, "off: paused"}, "codex": {false, "off: paused"}, "opencode": {false, "off: paused"}, "unknown": {false, "off: paused"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, _, _ := testState(t, tt.file, tt.env)
			s := st.State()
			for agent, w := range tt.want {
				if got := st.Enabled(agent); got != w.on {
					t.Errorf("Enabled(%q) = %v, want %v", agent, got, w.on)
				}
				a := agentOf(t, s, agent)
				if a.Trimming != w.on || a.Why != w.why {
					t.Errorf("%s: Trimming %v, Why %q; want %v, %q", agent, a.Trimming, a.Why, w.on, w.why)
				}
			}
			if st.Enabled("cursor") != st.Enabled(config.AgentUnknown) {
				t.Error("an agent name we do not know must follow unknown")
			}
			if agentOf(t, s, config.AgentUnknown).Mode != web.ModeFollow {
				t.Error("unknown's mode must be follow")
			}
			if cfg, err := config.Load(st.path, false, tt.env.Get); err != nil || cfg.Agents["codex"] != tt.want["codex"].on {
				t.Errorf("LoadConfig disagrees with the state: %v, codex %v", err, cfg.Agents["codex"])
			}
		})
	}
}

func TestStateSetAgentKeepsComments(t *testing.T) {
	t.Parallel()
	const text = "# my settings\r\n[context_proxy] # the proxy\r\nport = 4100 # keep this port\r\n\r\n[context_proxy.agents]\r\n# codex is noisy\r\ncodex = true # on for now\r\n\r\n[compaction]\r\nrecall = false\r\n"
	st, path, logs := testState(t, text, nil)
	rev := st.State().Revision

	if err := st.SetAgent(config.AgentCodex, web.ModeOff); err != nil {
		t.Fatal(err)
	}
	if got, want := readText(t, path), strings.Replace(text, "codex = true # on for now", "codex = false # on for now", 1); got != want {
		t.Errorf("after SetAgent(codex, off):\n%q\nwant\n%q", got, want)
	}
	if st.Enabled(config.AgentCodex) || !st.Enabled(config.AgentClaudeCode) {
		t.Errorf("Enabled: codex %v, claude-code %v; want false, true", st.Enabled(config.AgentCodex), st.Enabled(config.AgentClaudeCode))
	}
	s := st.State()
	if s.Revision <= rev || agentOf(t, s, config.AgentCodex).Mode != web.ModeOff {
		t.Errorf("State: revision %d (was %d), codex mode %q", s.Revision, rev, agentOf(t, s, config.AgentCodex).Mode)
	}

	if err := st.SetAgent(config.AgentOpenCode, web.ModeOff); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, path); !strings.Contains(got, "codex = false # on for now\r\nopencode = false\r\n\r\n[compaction]") {
		t.Errorf("opencode was not added after codex:\n%q", got)
	}
	// follow removes the key: the agent follows the master switch again.
	if err := st.SetAgent(config.AgentCodex, web.ModeFollow); err != nil {
		t.Fatal(err)
	}
	if err := st.SetAgent(config.AgentOpenCode, web.ModeFollow); err != nil {
		t.Fatal(err)
	}
	if got, want := readText(t, path), strings.Replace(text, "codex = true # on for now\r\n", "", 1); got != want {
		t.Errorf("after follow:\n%q\nwant\n%q (the comment line keeps the table)", got, want)
	}
	if !st.Enabled(config.AgentCodex) || agentOf(t, st.State(), config.AgentCodex).Mode != web.ModeFollow {
		t.Error("codex should follow the master switch (on) again")
	}
	// Saving the same mode twice changes nothing and bumps nothing.
	rev = st.State().Revision
	if err := st.SetAgent(config.AgentCodex, web.ModeFollow); err != nil {
		t.Fatal(err)
	}
	if st.State().Revision != rev {
		t.Error("a no-op SetAgent bumped the revision")
	}

	for _, tc := range []struct {
		agent string
		mode  web.Mode
		want  string
	}{
		{config.AgentUnknown, web.ModeOn, "follows the master switch"},
		{"cursor", web.ModeOn, `unknown agent "cursor": use claude-code, codex, opencode`},
		{config.AgentCodex, "maybe", `mode "maybe": use on, off or follow`},
	} {
		if err := st.SetAgent(tc.agent, tc.mode); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetAgent(%q, %q) = %v, want %q", tc.agent, tc.mode, err, tc.want)
		}
	}
	if !strings.Contains(logs.String(), "agent switched") {
		t.Errorf("no log line for the switch:\n%s", logs)
	}
}

func TestStateSetPausedAndMaster(t *testing.T) {
	t.Parallel()
	const text = "# top comment\n[context_proxy]\n# the master switch\nenabled = true # all on\n"
	st, path, _ := testState(t, text, nil)
	if err := st.SetPaused(true); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMaster(false); err != nil {
		t.Fatal(err)
	}
	if got, want := readText(t, path), "# top comment\n[context_proxy]\n# the master switch\nenabled = false # all on\npaused = true\n"; got != want {
		t.Errorf("config:\n%q\nwant\n%q", got, want)
	}
	s := st.State()
	if !s.Paused || s.Master || st.Enabled(config.AgentClaudeCode) || agentOf(t, s, config.AgentClaudeCode).Why != "off: paused" {
		t.Errorf("State: paused %v master %v; claude-code %+v", s.Paused, s.Master, agentOf(t, s, config.AgentClaudeCode))
	}
	if err := st.SetPaused(false); err != nil {
		t.Fatal(err)
	}
	if st.Enabled(config.AgentClaudeCode) || agentOf(t, st.State(), config.AgentClaudeCode).Why != "off (follows the master switch)" {
		t.Errorf("after unpause with the master off: %+v", agentOf(t, st.State(), config.AgentClaudeCode))
	}
	if err := st.SetMaster(true); err != nil {
		t.Fatal(err)
	}
	if !st.Enabled(config.AgentClaudeCode) || !st.Enabled("anything") {
		t.Error("master on: every following agent trims")
	}
}

func TestStateCreatesConfig(t *testing.T) {
	t.Parallel()
	sys, _, _ := testSystem(t, env{})
	st, path := defaultConfigState(t, sys)
	if err := st.SetPaused(true); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, path); got != "[context_proxy]\npaused = true\n" {
		t.Errorf("new config %q", got)
	}
	wantPrivate(t, path)
	if st.State().ConfigPath != path {
		t.Errorf("ConfigPath %q, want %q", st.State().ConfigPath, path)
	}
}

func TestStateUnwritableConfig(t *testing.T) {
	t.Parallel()
	t.Run("read-only file", func(t *testing.T) {
		t.Parallel()
		if runtime.GOOS == "windows" {
			t.Skip("chmod 0400 does not make a file read-only on Windows")
		}
		const text = "[context_proxy.agents]\ncodex = true\n"
		st, path, _ := testState(t, text, nil)
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatal(err)
		}
		rev := st.State().Revision
		err := st.SetAgent(config.AgentCodex, web.ModeOff)
		if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "nothing changed") {
			t.Fatalf("SetAgent on a read-only config = %v, want an error saying it is read-only", err)
		}
		err = st.SaveSettings(map[string]string{"context_proxy.trim_at_tokens": "5000"})
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Fatalf("SaveSettings on a read-only config = %v", err)
		}
		if !st.Enabled(config.AgentCodex) || st.State().Revision != rev || readText(t, path) != text {
			t.Error("a refused save applied something")
		}
	})
	t.Run("folder replaced by a file", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "sub")
		sys, _, _ := testSystem(t, env{})
		st, err := newState(stateOptions{Path: filepath.Join(dir, "config.toml"), Sys: sys})
		if err != nil {
			t.Fatal(err)
		}
		// Where the folder should be made is a file now (root writes through modes, so a
		// folder without write permission would not stop this test's user).
		if err := os.WriteFile(dir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		err = st.SetPaused(true)
		if err == nil || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), "nothing changed") {
			t.Fatalf("SetPaused = %v, want an error that says nothing changed", err)
		}
		if st.State().Paused || !st.Enabled(config.AgentCodex) {
			t.Error("a failed save applied the pause")
		}
	})
	t.Run("folder without write permission", func(t *testing.T) {
		t.Parallel()
		if runtime.GOOS == "windows" || os.Geteuid() == 0 {
			t.Skip("needs a Unix user that folder modes stop (root writes through them; TestSaveFailed covers the refusal)")
		}
		st, path, _ := testState(t, "[context_proxy.agents]\ncodex = true\n", nil)
		dir := filepath.Dir(path)
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		if err := st.SetPaused(true); !errors.Is(err, web.ErrRefused) || !strings.Contains(err.Error(), "nothing changed") {
			t.Fatalf("SetPaused in a folder that may not be written = %v, want a refusal that says nothing changed", err)
		}
	})
}

// TestSaveFailed: a save the file system denies or that hits a read-only file system is a
// refusal (the dashboard's 409 with the message), any other failure is not; each keeps the
// cause for errors.Is and says nothing changed.
func TestSaveFailed(t *testing.T) {
	t.Parallel()
	// errno → whether saveFailed makes it a refusal
	for errno, refusal := range map[syscall.Errno]bool{syscall.EACCES: true, syscall.EPERM: true, syscall.EROFS: true, syscall.ENOSPC: false} {
		cause := &fs.PathError{Op: "rename", Path: "config.toml.tmp", Err: errno}
		t.Run(errno.Error(), func(t *testing.T) {
			err := saveFailed("config.toml", cause)
			if got := errors.Is(err, web.ErrRefused); got != refusal {
				t.Errorf("saveFailed(%v) is a refusal: %v, want %v", cause, got, refusal)
			}
			if !errors.Is(err, cause) || !strings.Contains(err.Error(), "nothing changed") {
				t.Errorf("saveFailed(%v) = %v, want the cause wrapped and \"nothing changed\"", cause, err)
			}
		})
	}
}

func TestStateEnvLock(t *testing.T) {
	t.Parallel()
	st, path, _ := testState(t, "[context_proxy.agents]\ncodex = true\n", env{"CONTEXT_PROXY_ENABLED": "0"})
	s := st.State()
	if s.EnvLock != "CONTEXT_PROXY_ENABLED=0" || st.Enabled(config.AgentCodex) {
		t.Fatalf("EnvLock %q, codex %v; want the lock and codex off", s.EnvLock, st.Enabled(config.AgentCodex))
	}
	for name, err := range map[string]error{
		"SetAgent":  st.SetAgent(config.AgentCodex, web.ModeOn),
		"SetMaster": st.SetMaster(true),
	} {
		if err == nil || !strings.Contains(err.Error(), "CONTEXT_PROXY_ENABLED=0 is set in the service's environment") {
			t.Errorf("%s under the lock = %v, want an error naming the variable", name, err)
		}
	}
	if got := readText(t, path); got != "[context_proxy.agents]\ncodex = true\n" {
		t.Errorf("a refused switch wrote the file: %q", got)
	}
	// Pause still works: it wins over the variable.
	if err := st.SetPaused(true); err != nil {
		t.Fatal(err)
	}
	if !st.State().Paused || agentOf(t, st.State(), config.AgentCodex).Why != "off: paused" {
		t.Errorf("pause under the lock: %+v", agentOf(t, st.State(), config.AgentCodex))
	}
}

func TestStateSaveSettings(t *testing.T) {
	t.Parallel()
	const text = "# tuned by hand\n[context_proxy]\ntrim_at_tokens = 90000 # big models\n\n[context_store]\nttl_days = 7 # a week\n"
	st, path, _ := testState(t, text, env{"CONTEXT_COMPRESS_OVER_TOKENS": "1000"})

	t.Run("env-overridden key refused when changed", func(t *testing.T) {
		err := st.SaveSettings(map[string]string{"context_proxy.compress_over_tokens": "2000"})
		var se *web.SettingsError
		if !errors.As(err, &se) || !strings.Contains(se.Fields["context_proxy.compress_over_tokens"], "CONTEXT_COMPRESS_OVER_TOKENS=1000 is set") {
			t.Fatalf("err %v, want a field error naming the variable", err)
		}
		if readText(t, path) != text {
			t.Error("a refused save wrote the file")
		}
	})
	t.Run("valid values", func(t *testing.T) {
		rev := st.State().Revision
		err := st.SaveSettings(map[string]string{
			"context_proxy.trim_at_tokens":   "50000",
			"context_proxy.trim_to_fraction": "0.4",
			"context_store.ttl_days":         "",
			"context_store.embedding_model":  `nomic "embed"`,
			"upstream.anthropic":             "https://gw.example/anthropic/",
			"context_proxy.port":             "4200",
			// set by the environment; the form posts the value it shows: ignored
			"context_proxy.compress_over_tokens": "1000",
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "# tuned by hand\n[context_proxy]\ntrim_at_tokens = 50000 # big models\nport = 4200\ntrim_to_fraction = 0.4\n\n[context_store]\nembedding_model = \"nomic \\\"embed\\\"\"\n\n[upstream]\nanthropic = \"https://gw.example/anthropic/\"\n"
		if got := readText(t, path); got != want {
			t.Errorf("config:\n%s\nwant\n%s", got, want)
		}
		s := st.State()
		if s.Revision <= rev {
			t.Error("revision not bumped")
		}
		cfg := st.config()
		if cfg.Proxy.TrimAtTokens != 50000 || cfg.Proxy.TrimToFraction != 0.4 || cfg.TTLDays != 30 || cfg.Proxy.Upstreams["anthropic"] != "https://gw.example/anthropic" {
			t.Errorf("in effect: %+v", cfg)
		}
		for _, c := range []struct{ key, value, saved, def string }{
			{"context_proxy.trim_at_tokens", "50000", "50000", ""},
			{"context_proxy.trim_to_fraction", "0.4", "0.4", "0.3"},
			{"context_store.ttl_days", "30", "", "30"},
			{"context_proxy.port", "4100", "4200", "4100"},             // needs a restart: the running value
			{"context_store.embedding_model", "", `nomic "embed"`, ""}, // needs a restart
			{"upstream.anthropic", "https://gw.example/anthropic", "https://gw.example/anthropic/", "https://api.anthropic.com"},
			{"context_proxy.compress_over_tokens", "1000", "", "4000"},
		} {
			got := settingOf(t, s, c.key)
			if got.Value != c.value || got.Saved != c.saved || got.Default != c.def {
				t.Errorf("%s: value %q saved %q default %q; want %q %q %q", c.key, got.Value, got.Saved, got.Default, c.value, c.saved, c.def)
			}
		}
		if p := settingOf(t, s, "context_proxy.port"); !p.Restart || p.Kind != "int" {
			t.Errorf("port: %+v, want restart and int", p)
		}
		if p := settingOf(t, s, "context_proxy.trim_at_tokens"); p.Restart || p.Accepts != "an integer of at least 1" {
			t.Errorf("trim_at_tokens: %+v", p)
		}
		if p := settingOf(t, s, "context_proxy.compress_over_tokens"); p.Env != "CONTEXT_COMPRESS_OVER_TOKENS" {
			t.Errorf("compress_over_tokens Env %q", p.Env)
		}
	})
	t.Run("invalid values: field errors, nothing saved", func(t *testing.T) {
		before := readText(t, path)
		rev := st.State().Revision
		err := st.SaveSettings(map[string]string{
			"context_proxy.trim_at_tokens":       "0",
			"context_proxy.chars_per_token":      "lots",
			"context_proxy.standing_instruction": "yes",
			"context_proxy.trim_to_fraction":     "1.5",
			"upstream.openai":                    "ftp://x",
			"context_proxy.nope":                 "1",
		})
		var se *web.SettingsError
		if !errors.As(err, &se) {
			t.Fatalf("err %v, want a *web.SettingsError", err)
		}
		for key, want := range map[string]string{
			"context_proxy.chars_per_token":      "[context_proxy] chars_per_token = lots: must be a number greater than 0",
			"context_proxy.standing_instruction": "must be true or false",
			"context_proxy.nope":                 "not a setting here",
		} {
			if !strings.Contains(se.Fields[key], want) {
				t.Errorf("Fields[%s] = %q, want %q", key, se.Fields[key], want)
			}
		}
		if readText(t, path) != before || st.State().Revision != rev {
			t.Error("an invalid save changed something")
		}
		// Type errors come first, like the CLI's; with the types right, the resolver's
		// range checks speak, with the CLI's messages.
		err = st.SaveSettings(map[string]string{
			"context_proxy.trim_at_tokens":   "0",
			"context_proxy.trim_to_fraction": "1.5",
			"upstream.openai":                "ftp://x",
		})
		if !errors.As(err, &se) {
			t.Fatalf("err %v, want a *web.SettingsError", err)
		}
		for key, want := range map[string]string{
			"context_proxy.trim_at_tokens":   "[context_proxy] trim_at_tokens = 0: must be an integer of at least 1",
			"context_proxy.trim_to_fraction": "[context_proxy] trim_to_fraction = 1.5: must be a number between 0 and 1, both excluded",
			"upstream.openai":                `[upstream] openai = "ftp://x": must be an absolute http or https URL`,
		} {
			if se.Fields[key] != want {
				t.Errorf("Fields[%s] = %q, want %q", key, se.Fields[key], want)
			}
		}
		if _, cliErr := load(t, "[context_proxy]\ntrim_at_tokens = 0\n", nil); cliErr == nil || !strings.Contains(cliErr.Error(), se.Fields["context_proxy.trim_at_tokens"]) {
			t.Errorf("the CLI's message %v does not contain the form's %q", cliErr, se.Fields["context_proxy.trim_at_tokens"])
		}
		if readText(t, path) != before || st.State().Revision != rev {
			t.Error("an invalid save changed something")
		}
	})
}

// waitFor polls cond every 20 ms for up to 5 s of the synctest bubble's clock it runs in (a
// hand edit shows within configPoll plus configSettle).
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within 5 s", what)
	return 0
}

// In a synctest bubble: the watcher's ticker, its settle and waitFor's polls run on the
// bubble's clock, so the test takes no real time for them.
func TestStateWatchesHandEdits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testStateWatchesHandEdits)
}

func testStateWatchesHandEdits(t *testing.T) {
	const text = "[context_proxy.agents]\ncodex = true\n"
	st, path, logs := testState(t, text, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changed := st.Changed(ctx)
	go st.run(ctx)

	rev := st.State().Revision
	if err := os.WriteFile(path, []byte("[context_proxy.agents]\ncodex = false # by hand\n[context_proxy]\ntrim_at_tokens = 7000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the hand edit", func() bool { return !st.Enabled(config.AgentCodex) })
	t.Logf("hand edit picked up after %s", took.Round(time.Millisecond))
	if took > 1500*time.Millisecond {
		t.Logf("slower than the 1 s poll plus margin: a loaded machine?")
	}
	s := st.State()
	if s.Revision <= rev || agentOf(t, s, config.AgentCodex).Mode != web.ModeOff || st.config().Proxy.TrimAtTokens != 7000 {
		t.Errorf("after the edit: revision %d (was %d), codex %+v, trim_at %d", s.Revision, rev, agentOf(t, s, config.AgentCodex), st.config().Proxy.TrimAtTokens)
	}
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Error("Changed did not fire for the hand edit")
	}

	// An invalid edit keeps the running state and is reported once.
	rev = st.State().Revision
	if err := os.WriteFile(path, []byte("[context_proxy.agents]\ncodex = true\n[context_proxy]\nport = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the invalid edit reported", func() bool { return st.State().ConfigError != "" })
	s = st.State()
	if st.Enabled(config.AgentCodex) || !strings.Contains(s.ConfigError, "[context_proxy] port = 0: must be an integer from 1 to 65535") || s.Revision <= rev {
		t.Errorf("after an invalid edit: codex %v (want the old off), ConfigError %q", st.Enabled(config.AgentCodex), s.ConfigError)
	}
	time.Sleep(2500 * time.Millisecond) // two more polls (the bubble's clock): the same error is not logged again
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Errorf("the invalid edit was logged %d times, want once:\n%s", n, logs)
	}
	// A setter refuses to build on the broken file, and says why (a refusal: 409).
	if err := st.SetMaster(false); err == nil || !strings.Contains(err.Error(), "fix it by hand first") || !errors.Is(err, web.ErrRefused) {
		t.Errorf("SetMaster on a broken file = %v", err)
	}

	// Fixed: the error goes, the edit applies.
	if err := os.WriteFile(path, []byte("[context_proxy.agents]\ncodex = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fix", func() bool { return st.State().ConfigError == "" && st.Enabled(config.AgentCodex) })
	if st.config().Proxy.TrimAtTokens != 0 {
		t.Errorf("trim_at_tokens %d after its key went, want 0", st.config().Proxy.TrimAtTokens)
	}
	// The file removed: the running settings stay, and the state says so.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removal", func() bool { return strings.Contains(st.State().ConfigError, "config.toml was removed") })
	if agentOf(t, st.State(), config.AgentCodex).Mode != web.ModeOn {
		t.Error("removing config.toml changed the running switches")
	}
}

func TestStateChanged(t *testing.T) {
	t.Parallel()
	st, _, _ := testState(t, "", nil)
	ctx, cancel := context.WithCancel(t.Context())
	a, b := st.Changed(ctx), st.Changed(ctx)
	select {
	case <-a:
		t.Fatal("Changed fired before any change")
	default:
	}
	// Three changes without a reader: the sender does not block, and they arrive as one.
	st.SetTray("running")
	if err := st.SetPaused(true); err != nil {
		t.Fatal(err)
	}
	if err := st.SetAgent(config.AgentCodex, web.ModeOff); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("Changed did not fire")
		}
		select {
		case <-ch:
			t.Fatal("three changes in a row should coalesce into one")
		default:
		}
	}
	if st.State().Tray != "running" {
		t.Errorf("Tray %q", st.State().Tray)
	}
	st.SetTray("running") // no change: no signal
	select {
	case <-a:
		t.Fatal("SetTray with the same status signalled a change")
	default:
	}
	cancel()
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case _, ok := <-ch:
			if ok {
				// a signal may have been pending; the close follows
				if _, ok := <-ch; ok {
					t.Fatal("channel not closed after ctx ended")
				}
			}
		case <-time.After(time.Second):
			t.Fatal("channel not closed after ctx ended")
		}
	}
	// Changes after the subscribers left do not panic (no send on a closed channel).
	if err := st.SetPaused(false); err != nil {
		t.Fatal(err)
	}
	done, stop := context.WithCancel(t.Context())
	stop()
	if _, ok := <-st.Changed(done); ok {
		t.Error("Changed on an ended ctx must return a closed channel")
	}
}

// TestStateConcurrent is meaningful under -race: the proxy reads while the dashboard writes.
func TestStateConcurrent(t *testing.T) {
	t.Parallel()
	st, _, _ := testState(t, "", nil)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for j := range 30 {
				switch i % 3 {
				case 0:
					mode := web.ModeOff
					if j%2 == 0 {
						mode = web.ModeOn
					}
					if err := st.SetAgent(config.AgentCodex, mode); err != nil {
						t.Error(err)
					}
				case 1:
					_ = st.State()
				default:
					for range 100 {
						_ = st.Enabled(config.AgentCodex)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := st.SetAgent(config.AgentCodex, web.ModeOff); err != nil || st.Enabled(config.AgentCodex) {
		t.Fatalf("final SetAgent(codex, off) = %v, Enabled = %v", err, st.Enabled(config.AgentCodex))
	}
}

func TestStateWiring(t *testing.T) {
	t.Parallel()
	st, _, _ := testState(t, "", nil)
	for _, agent := range config.ConfiguredAgents {
		if w := agentOf(t, st.State(), agent); w.Wiring != web.WiringNotInstalled || !strings.Contains(w.WiringDetail, "not installed") {
			t.Errorf("%s in an empty home: %q (%s), want not installed", agent, w.Wiring, w.WiringDetail)
		}
	}
	// Codex's home exists: installed, not wired; then wired to our port.
	codexHome := filepath.Join(st.sys.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	st.refreshWiring()
	if w := agentOf(t, st.State(), config.AgentCodex); w.Wiring != web.WiringNotWired {
		t.Errorf("codex with ~/.codex: %q (%s), want not wired", w.Wiring, w.WiringDetail)
	}
	rev := st.State().Revision
	cfg := fmt.Sprintf("model_provider = %q\n[model_providers.%s]\nbase_url = \"http://127.0.0.1:%d/codex\"\n", serviceName, serviceName, st.port)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	st.refreshWiring()
	s := st.State()
	if w := agentOf(t, s, config.AgentCodex); w.Wiring != web.WiringWired || !strings.Contains(w.WiringDetail, "config.toml") {
		t.Errorf("codex wired: %q (%s)", w.Wiring, w.WiringDetail)
	}
	if s.Revision <= rev {
		t.Error("a wiring change did not bump the revision")
	}
	if u := agentOf(t, s, config.AgentUnknown); u.Wiring != "" || u.Route != fmt.Sprintf("http://127.0.0.1:%d", st.port) {
		t.Errorf("unknown: %+v", u)
	}
	if r := agentOf(t, s, config.AgentCodex).Route; r != fmt.Sprintf("http://127.0.0.1:%d/codex", st.port) {
		t.Errorf("codex route %q", r)
	}
	// Broken JSON: unknown, with the reason.
	claude := filepath.Join(st.sys.home, ".claude")
	if err := os.MkdirAll(claude, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(claude, "settings.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	st.refreshWiring()
	if w := agentOf(t, st.State(), config.AgentClaudeCode); w.Wiring != web.WiringUnknown || !strings.Contains(w.WiringDetail, "cannot read") {
		t.Errorf("claude-code with broken settings.json: %q (%s)", w.Wiring, w.WiringDetail)
	}
}

// stateSession plays a Claude Code session against the proxy: the whole history on every
// request, a tool call per user turn, and a long tool output.
type stateSession struct {
	t    *testing.T
	url  string
	sid  string
	msgs []map[string]any
}

// stateReply is the fake model: a Bash call for a user turn, a short text after its output.
func stateReply(req *fakeupstream.Request) fakeupstream.Reply {
	if req.EndsWithToolResults() {
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Read it; moving on.")}}
	}
	return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.ToolUse("Bash", map[string]any{"command": "cat out.log"})}}
}

// send posts the history and appends the model's answer; it returns the answer's blocks.
func (c *stateSession) send() []any {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model": "claude-opus-5-5", "max_tokens": 1024, "messages": c.msgs,
		"metadata": map[string]any{"user_id": fmt.Sprintf(`{"device_id":"d","account_uuid":"","session_id":%q}`, c.sid)},
		"system":   []any{map[string]any{"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."}},
		"tools": []any{map[string]any{"name": "Bash", "description": "Run a command", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
	})
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header = fakeupstream.ClaudeCodeHeader(c.sid, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var answer struct {
		Content []any `json:"content"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &answer) != nil {
		c.t.Fatalf("request %d: status %d: %s", len(c.msgs), resp.StatusCode, b)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": answer.Content})
	return answer.Content
}

// turn is one user turn: the tool call, then its output (25 lines) and the model's reply.
func (c *stateSession) turn(n int) {
	c.t.Helper()
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": fmt.Sprintf("TURN %d: read the next output file with a tool.", n)})
	var id any
	for _, blk := range c.send() {
		if m, ok := blk.(map[string]any); ok && m["type"] == "tool_use" {
			id = m["id"]
		}
	}
	if id == nil {
		c.t.Fatalf("turn %d: no tool call", n)
	}
	var out strings.Builder
	for i := range 25 {
		fmt.Fprintf(&out, "TURN-OUT t=%d line=%d: worker finished job %d in %d ms, all checks green\n", n, i, n*100+i, (n*7+i*13)%997)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "content": out.String()}}})
	c.send()
}

// TestStateSettingsReachTheProxy saves trim_at_tokens through the state and sees a live
// proxy (over the strict fake upstream) start trimming the same session at the new threshold.
func TestStateSettingsReachTheProxy(t *testing.T) {
	t.Parallel()
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: stateReply, APIKey: "dummy-key"})
	text := fmt.Sprintf("[context_proxy]\ntrim_at_tokens = 10000000 # never\n\n[upstream]\nanthropic = %q\n", fake.URL)
	st, _, logs := testState(t, text, nil)
	root := storetest.OpenRoot(t)
	px := proxy.New(st.config().Proxy, st, root, slog.New(slog.NewTextHandler(logs, nil)))
	defer px.Close()
	st.attach(px, nil)
	srv := httptest.NewServer(px)
	defer srv.Close()

	c := &stateSession{t: t, url: srv.URL + "/claude-code/v1/messages", sid: "state-settings"}
	pointers := func() int {
		n := 0
		for _, r := range fake.Requests() {
			if strings.Contains(string(r.Body), "[smarter-compact: continuing session state-settings") {
				n++
			}
		}
		return n
	}
	for n := range 6 {
		c.turn(n)
	}
	if n := pointers(); n != 0 {
		t.Fatalf("%d requests carried a pointer at trim_at_tokens = 10000000", n)
	}
	if err := st.SaveSettings(map[string]string{"context_proxy.trim_at_tokens": "3000"}); err != nil {
		t.Fatal(err)
	}
	c.turn(6)
	if pointers() == 0 {
		t.Fatalf("no request carried a pointer after trim_at_tokens = 3000 was saved: the proxy did not get the setting\n%s", logs)
	}
	if rej := fake.Rejections(); len(rej) > 0 {
		t.Errorf("the fake rejected %d requests; first: %s", len(rej), rej[0].Error)
	}
}

// writeReplace replaces path with text the way editors and scripts do (a temporary file,
// then a rename) and gives it mtime.
func writeReplace(t *testing.T, path, text string, mtime time.Time) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestStateSeesWriterRightAfterSave: another program that replaces config.toml right after
// a save, with a file of the same size in the same clock tick (the same mtime, as the file
// system's timestamp granularity makes it), is picked up: the watcher compares content, not
// size and mtime, so the service never keeps that file as its own save.
func TestStateSeesWriterRightAfterSave(t *testing.T) {
	t.Parallel()
	st, path, _ := testState(t, "[context_proxy.agents]\ncodex = true \n", nil)
	st.settle = 5 * time.Millisecond
	for i := range 20 {
		if err := st.SetAgent(config.AgentCodex, web.ModeOff); err != nil { // writes "codex = false"
			t.Fatal(err)
		}
		ours := readText(t, path)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		theirs := strings.Replace(ours, "codex = false\n", "codex = true \n", 1)
		if len(theirs) != len(ours) || theirs == ours {
			t.Fatalf("the other writer's file must differ with the same size: %q", theirs)
		}
		writeReplace(t, path, theirs, fi.ModTime())
		st.poll()
		if !st.Enabled(config.AgentCodex) || agentOf(t, st.State(), config.AgentCodex).Mode != web.ModeOn {
			t.Fatalf("round %d: the file says codex = true, the service kept its own save (codex %v)", i, st.Enabled(config.AgentCodex))
		}
	}
}

// TestStatePauseWithBrokenConfig: pause all is the way out, so it works while config.toml
// has an unrelated invalid value: the paused line alone is saved, the pause alone applied,
// the other settings stay as they run, and the config error stays shown. When the file is
// not even TOML, the pause applies to this run and the error says it is not saved.
func TestStatePauseWithBrokenConfig(t *testing.T) {
	t.Parallel()
	st, path, _ := testState(t, "[context_proxy]\ntrim_at_tokens = 7000 # mine\n[context_proxy.agents]\ncodex = false\n", nil)
	st.settle = 0
	broken := "[context_proxy]\ntrim_at_tokens = 7000 # mine\nport = 0\n[context_proxy.agents]\ncodex = true\n"
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	st.poll()
	if !strings.Contains(st.State().ConfigError, "port = 0") {
		t.Fatalf("ConfigError %q", st.State().ConfigError)
	}
	if err := st.SetPaused(true); err != nil {
		t.Fatalf("SetPaused with an unrelated invalid key = %v, want it to work", err)
	}
	if got, want := readText(t, path), strings.Replace(broken, "port = 0\n", "port = 0\npaused = true\n", 1); got != want {
		t.Errorf("config after pause:\n%q\nwant only the paused line added:\n%q", got, want)
	}
	s := st.State()
	for _, a := range slices.Concat(config.ConfiguredAgents, []string{config.AgentUnknown}) {
		if st.Enabled(a) {
			t.Errorf("%s trims while paused", a)
		}
	}
	if !s.Paused || !strings.Contains(s.ConfigError, "port = 0") || agentOf(t, s, config.AgentCodex).Mode != web.ModeOff || st.config().Proxy.TrimAtTokens != 7000 {
		t.Errorf("after pause: paused %v, ConfigError %q, codex %q (the running off), trim_at %d", s.Paused, s.ConfigError, agentOf(t, s, config.AgentCodex).Mode, st.config().Proxy.TrimAtTokens)
	}
	st.poll() // the file as saved: no reload, the error stays
	if !st.State().Paused || !strings.Contains(st.State().ConfigError, "port = 0") {
		t.Error("the next poll lost the pause or the error")
	}
	if err := st.SetPaused(false); err != nil {
		t.Fatal(err)
	}
	if !st.Enabled(config.AgentClaudeCode) || st.Enabled(config.AgentCodex) {
		t.Errorf("after resume: %s", st.agentsString())
	}

	// Not TOML at all: the line cannot be edited, the pause applies to this run.
	const notTOML = "[context_proxy\ncodex = true\n"
	if err := os.WriteFile(path, []byte(notTOML), 0o600); err != nil {
		t.Fatal(err)
	}
	st.poll()
	if err := st.SetPaused(true); err != nil {
		t.Fatalf("SetPaused on a file that is not TOML = %v", err)
	}
	if readText(t, path) != notTOML {
		t.Error("the file that is not TOML was changed")
	}
	if s := st.State(); !s.Paused || st.Enabled(config.AgentClaudeCode) || !strings.Contains(s.ConfigError, "pause is applied to this run only and not saved") {
		t.Errorf("paused %v, ConfigError %q", s.Paused, s.ConfigError)
	}
}

// TestStateConfigRemovedOrHalfWritten: a config.toml that is removed keeps the running
// settings (and says so) instead of applying the defaults; one caught half-written (written
// in place) is applied only once it stays the same.
//
// In a synctest bubble: the poll's settle and the write "a moment later" are on the bubble's
// clock, so the poll has read the empty file before the text is written, every run.
func TestStateConfigRemovedOrHalfWritten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testStateConfigRemovedOrHalfWritten)
}

func testStateConfigRemovedOrHalfWritten(t *testing.T) {
	const text = "[context_proxy]\ntrim_at_tokens = 7000\n[context_proxy.agents]\ncodex = false\n"
	st, path, logs := testState(t, text, nil)
	st.settle = 0
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	st.poll()
	st.poll()
	s := st.State()
	if st.Enabled(config.AgentCodex) || st.config().Proxy.TrimAtTokens != 7000 {
		t.Errorf("the removal applied the defaults: %s, trim_at %d", st.agentsString(), st.config().Proxy.TrimAtTokens)
	}
	if want := "config.toml was removed (" + path + "): the running settings stay until it is back or the service restarts"; s.ConfigError != want {
		t.Errorf("ConfigError %q, want %q", s.ConfigError, want)
	}
	if n := strings.Count(logs.String(), "config.toml was removed"); n != 1 {
		t.Errorf("the removal was logged %d times, want once", n)
	}
	// Back as it was: the notice goes, nothing else changes.
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	st.poll()
	if st.State().ConfigError != "" || st.Enabled(config.AgentCodex) {
		t.Errorf("after the file came back: ConfigError %q, %s", st.State().ConfigError, st.agentsString())
	}

	// Written in place: empty first (which would resolve to the defaults), the text a
	// moment later. The poll that saw it empty applies nothing.
	st.settle = 300 * time.Millisecond
	rev := st.State().Revision
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { st.poll(); close(done) }()
	time.Sleep(100 * time.Millisecond)
	if _, err := f.WriteString(strings.Replace(text, "7000", "8000", 1)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-done
	if st.config().Proxy.TrimAtTokens != 7000 || st.Enabled(config.AgentCodex) || st.State().Revision != rev {
		t.Fatalf("a half-written file was applied: trim_at %d, %s", st.config().Proxy.TrimAtTokens, st.agentsString())
	}
	st.poll()
	if st.config().Proxy.TrimAtTokens != 8000 || st.Enabled(config.AgentCodex) {
		t.Errorf("the finished file was not applied: trim_at %d, %s", st.config().Proxy.TrimAtTokens, st.agentsString())
	}
}

// TestStateRefusals: the setters' refusals are web.ErrRefused (the dashboard and /api answer
// 409 with the message), a failure of the service is not.
func TestStateRefusals(t *testing.T) {
	t.Parallel()
	locked, _, _ := testState(t, "", env{"CONTEXT_PROXY_ENABLED": "0"})
	if err := locked.SetAgent(config.AgentCodex, web.ModeOn); !errors.Is(err, web.ErrRefused) {
		t.Errorf("env lock: %v is not a refusal", err)
	}
	if runtime.GOOS != "windows" {
		ro, path, _ := testState(t, "[context_proxy.agents]\ncodex = true\n", nil)
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"SetAgent": ro.SetAgent(config.AgentCodex, web.ModeOff), "SetPaused": ro.SetPaused(true),
			"SaveSettings": ro.SaveSettings(map[string]string{"context_store.ttl_days": "3"}),
		} {
			if !errors.Is(err, web.ErrRefused) || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("%s on a read-only file: %v, want a refusal saying read-only", name, err)
			}
		}
	}
	bad, path, _ := testState(t, "[context_proxy.agents]\ncodex = true\n", nil)
	bad.settle = 0
	if err := os.WriteFile(path, []byte("[context_proxy]\nport = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad.poll()
	if err := bad.SaveSettings(map[string]string{"context_store.ttl_days": "3"}); !errors.Is(err, web.ErrRefused) {
		t.Errorf("SaveSettings on an invalid file: %v, want a refusal", err)
	}
	if err := bad.SetMaster(false); !errors.Is(err, web.ErrRefused) {
		t.Errorf("SetMaster on an invalid file: %v, want a refusal", err)
	}
}
