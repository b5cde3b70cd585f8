package app

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
	"github.com/smarter-compact/smarter-compact/web"
)

// statusStore writes one session through the real writer under state: a trim, a fail-open
// and two usage calls within the last day, and a trim two days old.
func statusStore(t *testing.T, state string) {
	t.Helper()
	p := func(n int64) *int64 { return &n }
	now := time.Now()
	storetest.SeedSession(t, storetest.OpenRootAt(t, filepath.Join(state, "context")), storetest.Seed{SID: "sess1", Now: now,
		Rows: []storetest.Row{{Role: "user", Text: "hi"}}, Events: []store.Event{
			{At: now.Add(-time.Hour), Kind: "trim", Version: "proxy:abcdefabcdef", TokensBefore: p(130000), TokensAfter: p(30000), Dropped: p(42)},
			{At: now.Add(-48 * time.Hour), Kind: "trim", Version: "proxy:abcdefabcdef", TokensBefore: p(777777), TokensAfter: p(0), Dropped: p(5)},
			{At: now.Add(-2 * time.Hour), Kind: "fail_open", Version: "proxy:abcdefabcdef", Location: "rewrite.go:77", Error: "*proxy.badBody"},
			{At: now.Add(-time.Hour), Kind: "usage", Version: "proxy:abcdefabcdef", Trimmed: p(2), InputTokens: p(100),
				CacheReadTokens: p(0), CacheCreationTokens: p(6000), OutputTokens: p(10), Breakpoints: p(2), BreakpointAt: "system,m-1"},
			{At: now.Add(-time.Minute), Kind: "usage", Version: "proxy:abcdefabcdef", Trimmed: p(1), InputTokens: p(100),
				CacheReadTokens: p(5800), CacheCreationTokens: p(100), OutputTokens: p(10), Breakpoints: p(2), BreakpointAt: "system,m-1"},
		}})
}

// healthzServer serves the real route table on a loopback port and returns the port.
func healthzServer(t *testing.T) int {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	ts.Config.Handler = routes(port, http.NotFoundHandler(), http.NotFoundHandler(), web.New(web.Options{}), slog.New(slog.DiscardHandler))
	ts.Start()
	t.Cleanup(ts.Close)
	return port
}

func TestStatusCommandJSON(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	statusStore(t, state)
	port := healthzServer(t)
	config := configtest.WriteConfig(t, "[context_proxy]\nenabled = true\n[context_proxy.agents]\nclaude-code = false\n")
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_PROXY_PORT": strconv.Itoa(port)})
	if err := run(t.Context(), []string{"status", "--json", "--config", config}, sys); err != nil {
		t.Fatalf("status --json: %v (stderr %s)", err, stderr)
	}
	var rep struct {
		storetest.StatusJSON
		Config  string        `json:"config"`
		Store   string        `json:"store"`
		Service serviceStatus `json:"service"`
		Agents  []agentStatus `json:"agents"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if rep.Hours != 24 || rep.Sessions != 1 || rep.Trims != 1 || rep.TokensSaved != 100000 || rep.MessagesDropped != 42 ||
		rep.FailOpens != 1 || len(rep.LastErrors) != 1 || rep.LastErrors[0].Location != "rewrite.go:77" || rep.LastErrors[0].Session != "sess1" ||
		rep.Latest["proxy"] != "proxy:abcdefabcdef" || rep.Note == "" ||
		// the healthz server is this test binary, the installed binary too: not stale
		rep.CheckoutProxyVersion == nil || *rep.CheckoutProxyVersion != rep.Service.Build || rep.Service.Restart != "" {
		t.Errorf("summary %+v", rep)
	}
	// 5800 / (5800 + 6100 + 200)
	if rep.Usage.Requests != 2 || rep.Usage.WithCacheCounts != 2 || rep.Usage.HitRatio == nil || *rep.Usage.HitRatio != 0.4793 {
		t.Errorf("usage %+v", rep.Usage)
	}
	if rep.Config != config || rep.Store != filepath.Join(state, "context") {
		t.Errorf("config %q, store %q", rep.Config, rep.Store)
	}
	if !rep.Service.Answering || rep.Service.URL != "http://127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("service %+v, want answering", rep.Service)
	}
	want := []agentStatus{
		{Agent: "claude-code", On: false, Source: "saved"},
		{Agent: "codex", On: true, Source: "follows enabled"},
		{Agent: "opencode", On: true, Source: "follows enabled"},
		{Agent: "unknown", On: true, Source: "follows enabled"},
	}
	if len(rep.Agents) != len(want) {
		t.Fatalf("agents %+v", rep.Agents)
	}
	for i, a := range rep.Agents {
		if a.Agent != want[i].Agent || a.On != want[i].On || a.Source != want[i].Source {
			t.Errorf("agent %d: %+v, want %+v", i, a, want[i])
		}
	}

	// Two days take in the old trim.
	stdout2 := new(syncBuffer)
	sys.stdout = stdout2
	if err := run(t.Context(), []string{"status", "--json", "--hours", "72", "--config", config}, sys); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(stdout2.String()), &rep); err != nil || rep.Trims != 2 || rep.TokensSaved != 877777 {
		t.Errorf("72 h: trims %d, saved %d, %v", rep.Trims, rep.TokensSaved, err)
	}
}

func TestStatusCommandText(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	statusStore(t, state)
	port := freePort(t)
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_PROXY_PORT": strconv.Itoa(port), "CONTEXT_PROXY_ENABLED": "0"})
	if err := run(t.Context(), []string{"status"}, sys); err != nil {
		t.Fatalf("status: %v (stderr %s)", err, stderr)
	}
	summary := stdout.String()
	wantLines := []string{
		"Saved today (estimate): no requests; last 7 days: no requests",
		"Service: not running at http://127.0.0.1:" + strconv.Itoa(port) + ": wired agents cannot reach their model API; start it with 'smarter-compact serve' (or at login: 'smarter-compact service install')",
		"Trimming: off for every agent (claude-code, codex, opencode)",
		"Last 24 hours: 1 trims, 100000 tokens saved (estimated), 1 request sent untrimmed after an error",
		"More: 'smarter-compact status --verbose' (details), 'smarter-compact doctor' (checks the wiring)",
	}
	if got := strings.Split(strings.TrimSuffix(summary, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("summary:\n%s\nwant:\n%s", summary, strings.Join(wantLines, "\n"))
	}

	stdout.Reset()
	if err := run(t.Context(), []string{"status", "--verbose"}, sys); err != nil {
		t.Fatalf("status --verbose: %v (stderr %s)", err, stderr)
	}
	out := stdout.String()
	if !strings.HasPrefix(out, strings.Join(wantLines[:len(wantLines)-1], "\n")+"\n\n") {
		t.Errorf("--verbose does not lead with the summary (without its More line) and a blank line:\n%s", out)
	}
	wantIn(t, "--verbose output", out, []string{
		"Config: none (defaults)",
		"claude-code  off  (CONTEXT_PROXY_ENABLED)",
		"(1 sessions read, 0 skipped)",
		"Trims: 1, estimated tokens saved: 100000, messages dropped: 42",
		"Fail-opens (request sent untrimmed): 1",
		"sess1  rewrite.go:77  *proxy.badBody",
		"Latest writers: proxy:abcdefabcdef",
		"Prompt cache: 2 requests, 2 with cache counts, hit ratio 47.9%",
		"tokens: input 200, cache read 5800, cache creation 6100, output 20",
		"new cut 6000 on 1 requests (avg 6000), other 100 on 1 requests (avg 100)",
		"breakpoints (count → requests): 2 → 2",
		"system,m-1",
		"Proxy version check: the service does not answer",
	})
	wantNoRepeatedLine(t, out)
}

// wantNoRepeatedLine fails the test for each non-blank line out prints more than once.
func wantNoRepeatedLine(t *testing.T, out string) {
	t.Helper()
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if seen[l] {
			t.Errorf("line printed twice: %q in\n%s", l, out)
		}
		seen[l] = true
	}
}

func TestStatusCommandFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--hours", "0"}, "--hours 0: must be an integer from 1 to 720"},
		{[]string{"status", "--hours", "721"}, "--hours 721"},
		{[]string{"status", "now"}, `status: unexpected argument "now"`},
		{[]string{"status", "--verbos"}, `status: flag provided but not defined: -verbos (did you mean "--verbose"?)`},
	} {
		sys, _, _ := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": t.TempDir()})
		err := run(t.Context(), tc.args, sys)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (code %d), want usage error %q", tc.args, err, ExitCode(err), tc.want)
		}
	}
	sys, stdout, _ := testSystem(t, env{})
	if err := run(t.Context(), []string{"status", "-h"}, sys); err != nil || !strings.Contains(stdout.String(), "-json") {
		t.Errorf("status -h: %v\n%s", err, stdout)
	}
}

// status names the memory provider and bank, never the API key.
func TestStatusShowsMemoryWithoutTheKey(t *testing.T) {
	t.Parallel()
	config := configtest.WriteConfig(t, "[memory]\nurl = \"http://127.0.0.1:8888\"\napi_key = \"file-secret\"\n")
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": t.TempDir(), "CONTEXT_PROXY_PORT": "1",
		"SMARTER_COMPACT_MEMORY_API_KEY": "env-secret"})
	if err := run(t.Context(), []string{"status", "--verbose", "--config", config}, sys); err != nil {
		t.Fatalf("status: %v (%s)", err, stderr)
	}
	out := stdout.String()
	if !strings.Contains(out, `Memory: recall on trim: hindsight at http://127.0.0.1:8888, bank "coding-agent::{repo}", 0 mapped prefixes, api key set`) {
		t.Errorf("status lacks the memory line:\n%s", out)
	}
	if strings.Contains(out+stderr.String(), "secret") {
		t.Errorf("status shows the API key:\n%s", out)
	}
}
