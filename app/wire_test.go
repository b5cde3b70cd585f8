package app

import (
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/smarter-compact/smarter-compact/store/storetest"
	"github.com/smarter-compact/smarter-compact/web"
)

// wireServer serves the real route table with the dashboard's installer (newWirer) over a
// home that has Claude Code and Codex configs and no OpenCode. It returns the server's base
// URL, the system and the two config files with their bytes.
func wireServer(t *testing.T) (base string, sys system, files map[string]string) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	sys, _, _ = testSystem(t, env{"CONTEXT_PROXY_PORT": strconv.Itoa(port)})
	sys.exe = filepath.Join(t.TempDir(), "bin", "smarter-compact")
	fakeBinary(t, sys.exe, version)
	files = map[string]string{
		filepath.Join(sys.home, ".claude", "settings.json"): "{\n    \"model\": \"opus\",\n    \"theme\": \"dark\"\n}\n",
		filepath.Join(sys.home, ".codex", "config.toml"):    "# my codex\r\nmodel = \"gpt-5\"  # keep\r\n\r\n[tui]\r\nnotifications = true\r\n",
	}
	for path, text := range files {
		writeTestFile(t, path, text)
	}
	st, _ := defaultConfigState(t, sys)
	log := slog.New(slog.DiscardHandler)
	dash := web.New(web.Options{Root: storetest.OpenRoot(t), Control: st, APIToken: "t", Log: log, Wirer: newWirer(st, sys, "")})
	ts.Config.Handler = routes(port, http.NotFoundHandler(), http.NotFoundHandler(), dash, log)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL, sys, files
}

// wirePage GETs /ui/wire (following a redirect) and parses it.
func wirePage(t *testing.T, resp *http.Response) *goquery.Document {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Request.URL, resp.Status)
	}
	d, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func byTestID(d *goquery.Document, id string) *goquery.Selection {
	return d.Find(`[data-testid="` + id + `"]`)
}

// TestWirePageAppliesAndUndoes checks the "Wire my agents" page against the CLI (issue 15,
// Deliver 4): it names each agent's state in words, shows exactly the diff `install
// --dry-run` prints, wires with one POST (CSRF-checked) and undoes with another, after
// which every file is back byte for byte.
func TestWirePageAppliesAndUndoes(t *testing.T) {
	t.Parallel()
	base, sys, files := wireServer(t)
	get := func(path string) *goquery.Document {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		return wirePage(t, resp)
	}

	before := snapshot(t, sys.home, sys.configDir)
	d := get("/ui/wire")
	if after := snapshot(t, sys.home, sys.configDir); !maps.Equal(before, after) {
		t.Errorf("showing the wire page wrote files: %d before, %d after", len(before), len(after))
	}
	for agent, want := range map[string]string{"claude-code": "not wired", "codex": "not wired", "opencode": "not installed"} {
		if got := strings.TrimSpace(byTestID(d, "wire-state-"+agent).Text()); got != want {
			t.Errorf("%s shows %q, want %q", agent, got, want)
		}
	}
	if m := byTestID(d, "wire-meaning-opencode").Text(); !strings.Contains(m, "not installed on this machine") {
		t.Errorf("opencode's line %q does not say it is not installed", m)
	}
	if m := byTestID(d, "wire-meaning-codex").Text(); !strings.Contains(m, "installed but not wired: its requests go straight to its model API") {
		t.Errorf("codex's line %q does not say what not wired means", m)
	}
	if n := byTestID(d, "wire-apply-opencode").Length(); n != 0 {
		t.Error("a not-installed agent has a Wire button")
	}

	// The page's diff is the CLI's: every line of each agent's diff is in `install --dry-run`.
	cli, stdout, _ := sys, new(syncBuffer), new(syncBuffer)
	cli.stdout = stdout
	if err := run(t.Context(), []string{"install", "--dry-run"}, cli); err != nil {
		t.Fatalf("install --dry-run: %v", err)
	}
	// (An HTML parser reads CRLF as LF, so the CLI's CRs are dropped for the comparison.)
	cliDiff := strings.ReplaceAll(stdout.String(), "\r\n", "\n")
	for _, agent := range []string{"claude-code", "codex"} {
		diff := byTestID(d, "wire-diff-"+agent).Text()
		if !strings.Contains(diff, "+++ ") || !strings.Contains(cliDiff, diff) {
			t.Errorf("%s: the page's diff is not the one install --dry-run prints:\n%s\n--- CLI:\n%s", agent, diff, stdout)
		}
	}
	for path, text := range files {
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Fatalf("showing the page changed %s", path)
		}
	}

	csrf, _ := d.Find(`[data-testid="wire-apply-codex"] input[name="csrf"]`).Attr("value")
	post := func(path string, form url.Values) *http.Response {
		resp, err := http.PostForm(base+path, form)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Without the token nothing is written.
	resp := post("/ui/wire/install", url.Values{"agent": {"all"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("install without the CSRF token: %s, want 403", resp.Status)
	}
	for path, text := range files {
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Fatalf("a POST without the CSRF token changed %s", path)
		}
	}

	// Wire all: the report is on the page, the agents read as wired.
	d = wirePage(t, post("/ui/wire/install", url.Values{"agent": {"all"}, "csrf": {csrf}}))
	report := byTestID(d, "wire-report").Text()
	if !strings.Contains(report, "claude-code: wired") || !strings.Contains(report, "codex: wired") {
		t.Errorf("report after Wire all:\n%s", report)
	}
	for path, text := range files {
		got, _ := os.ReadFile(path)
		if string(got) == text || !strings.Contains(string(got), "127.0.0.1:") {
			t.Errorf("%s was not wired:\n%s", path, got)
		}
	}
	for _, agent := range []string{"claude-code", "codex"} {
		if got := strings.TrimSpace(byTestID(d, "wire-state-"+agent).Text()); got != "wired" {
			t.Errorf("%s shows %q after Wire all, want wired (%s)", agent, got, byTestID(d, "wire-agent-"+agent).Text())
		}
		if byTestID(d, "wire-undo-"+agent).Length() != 1 || byTestID(d, "wire-apply-"+agent).Length() != 0 {
			t.Errorf("%s: after wiring, want an Undo button and no Wire button", agent)
		}
	}

	// Undo, one agent at a time: each file is back byte for byte.
	for _, agent := range []string{"codex", "claude-code"} {
		d = wirePage(t, post("/ui/wire/uninstall", url.Values{"agent": {agent}, "csrf": {csrf}}))
		if r := byTestID(d, "wire-report").Text(); !strings.Contains(r, "Undone: "+agent) {
			t.Errorf("report after undo %s:\n%s", agent, r)
		}
	}
	for path, text := range files {
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Errorf("%s after undo:\n%q\nwant\n%q", path, got, text)
		}
	}
	if got := strings.TrimSpace(byTestID(d, "wire-state-codex").Text()); got != "not wired" {
		t.Errorf("codex shows %q after undo, want not wired", got)
	}
	if resp := post("/ui/wire/install", url.Values{"agent": {"cursor"}, "csrf": {csrf}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("install of an unknown agent: %s, want 400", resp.Status)
	}
}
