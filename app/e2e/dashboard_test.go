//go:build e2e

package e2e_test

// The browser tests of the dashboard: headless Chromium, driven with chromedp, against the
// real `smarter-compact serve`. TestE2EDashboard (issue 6, "Show") runs on a store seeded
// through the proxy; TestE2EOnboarding (issue 15) on a home with agent configs and no
// sessions yet. savings_test.go reads the overview's savings the same way.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

const (
	// envChromium is the path of Chromium (Debian's `chromium`); unset means `chromium` or
	// `chromium-browser` on PATH.
	envChromium = "SMARTER_COMPACT_E2E_CHROMIUM"
	// envArtifacts is the folder the end-to-end tests save what a person should look at
	// (screenshots) into, each test in a subfolder; unset means a new folder under the system
	// temp dir, kept after the test and named in its log. A relative path is relative to the
	// package folder (app/), so .ci/run passes an absolute one.
	envArtifacts = "SMARTER_COMPACT_E2E_ARTIFACTS"
)

// The seeded session: dashValue is said once, in turn 2's prompt, which the trim drops;
// the search must find it and lead to its row, out of context.
const (
	dashValue   = "KV-7731-ZEBRA"
	dashSID     = "5f0c9a8e-1b2c-4d3e-8f40-7731aa00beef"
	dashOtherID = "0b7e2d44-93a1-4c55-a0de-2f6b1c9e0a17"
	dashModel   = "claude-sonnet-4-6"
	// dashTrimAt is trim_at_tokens in the seeded config.toml: the seeded session crosses it
	// after two or three turns of dashFiller, and turns 1 and 2 stay below it.
	dashTrimAt = 4000
	// dashCompressOver is compress_over_tokens: the 150-line tool output of turn 2 goes over
	// it, so the session has a blob to show.
	dashCompressOver = 400
	dashMaxTurns     = 14
)

// dashComment heads the config.toml serve starts with (dashConfig); it must survive the switch.
const dashComment = "# e2e dashboard test: trims early so the seeded session has trimmed rows."

var dashConfig = fmt.Sprintf("%s\n[context_proxy]\ntrim_at_tokens = %d\ncompress_over_tokens = %d\n",
	dashComment, dashTrimAt, dashCompressOver)

// findChromium returns Chromium from SMARTER_COMPACT_E2E_CHROMIUM, else from PATH. Without
// it the test fails when SMARTER_COMPACT_E2E_REQUIRE=1 and skips otherwise.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%q: %v (install Debian's chromium: apt-get install chromium)", envChromium, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	why := fmt.Sprintf("Chromium is not installed: %s is unset and there is no chromium on PATH. "+
		"Install it (Debian: apt-get install --no-install-recommends chromium) or point %s at it (bash .ci/run does both)",
		envChromium, envChromium)
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s=1 but %s", envRequire, why)
	}
	t.Skipf("skipping: %s; set %s=1 to make this a failure", why, envRequire)
	return ""
}

// artifactDir returns the folder for the test's screenshots: <SMARTER_COMPACT_E2E_ARTIFACTS>/name,
// or a new folder under the system temp dir that outlives the test.
func artifactDir(t *testing.T, name string) string {
	t.Helper()
	base := os.Getenv(envArtifacts)
	if base == "" {
		tmp, err := os.MkdirTemp("", "smarter-compact-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		base = filepath.Join(tmp, "artifacts")
	}
	abs, err := filepath.Abs(filepath.Join(base, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		t.Fatalf("%s: %v", envArtifacts, err)
	}
	t.Logf("screenshots go to %s", abs)
	return abs
}

// claudeSession plays a Claude Code session against serve's /claude-code route: it keeps the
// history, sends it whole on every request as Claude Code does, and records each body sent.
type claudeSession struct {
	t    *testing.T
	base string // http://127.0.0.1:<port>/claude-code
	sid  string
	msgs []map[string]any
	sent [][]byte
}

var dashTools = []map[string]any{{
	"name":        "Bash",
	"description": "Run a shell command.",
	"input_schema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"command": map[string]any{"type": "string"}},
		"required":   []string{"command"},
	},
}}

// send appends a user message with content (a string or blocks), posts the history and
// appends the model's answer; it returns the answer's content blocks.
func (c *claudeSession) send(content any) []map[string]any {
	c.t.Helper()
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": content})
	body, err := json.Marshal(map[string]any{
		"model":      dashModel,
		"max_tokens": 1024,
		"system":     []map[string]any{{"type": "text", "text": "You are the e2e dashboard test's agent."}},
		"tools":      dashTools,
		"messages":   c.msgs,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sent = append(c.sent, body)
	req, err := http.NewRequest(http.MethodPost, c.base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", "dummy-key")
	req.Header.Set("User-Agent", "claude-cli/"+claudeVersion+" (external, cli)")
	req.Header.Set("X-Claude-Code-Session-Id", c.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("request %d of session %s: %v", len(c.sent), c.sid, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("request %d of session %s: %s: %s", len(c.sent), c.sid, resp.Status, raw)
	}
	var answer struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || len(answer.Content) == 0 {
		c.t.Fatalf("request %d of session %s: answer %q: %v", len(c.sent), c.sid, raw, err)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": answer.Content})
	return answer.Content
}

// dashReply is the fake model of the seeded sessions: a Bash call when the prompt asks for
// LIST-FILES, a short text otherwise.
func dashReply(req *fakeupstream.Request) fakeupstream.Reply {
	switch {
	case req.EndsWithToolResults():
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Listed the files; the key is noted.")}}
	case strings.Contains(req.LastUserText(), "LIST-FILES"):
		return fakeupstream.Reply{Content: []fakeupstream.Block{
			fakeupstream.Text("Listing the data files."),
			fakeupstream.ToolUse("Bash", map[string]any{"command": "ls -l data/"}),
		}}
	}
	return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text(fmt.Sprintf("Noted, after %d messages.", len(req.Messages)))}}
}

// dashListing is turn 2's tool output: 150 lines, over compress_over_tokens.
func dashListing() string {
	var b strings.Builder
	for i := 1; i <= 150; i++ {
		fmt.Fprintf(&b, "-rw-r--r-- 1 dev dev %6d Nov 29 10:%02d data/part-%03d.txt checksum %08x\n", 4096+i*37, i%60, i, i*104729)
	}
	return b.String()
}

// dashFiller is a prompt of about 3000 characters for the later turns.
func dashFiller(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "E2E-DASH %d: keep these notes for later.\n", turn)
	for l := 1; b.Len() < 3000; l++ {
		fmt.Fprintf(&b, "turn %d note %02d: the build of module %d-%02d passed with %d warnings\n", turn, l, turn, l, (turn*31+l*7)%13)
	}
	return b.String()
}

// TestE2EDashboard drives the dashboard in headless Chromium against the real `serve` with
// a store seeded through the proxy: a Claude Code–shaped session trimmed by the seeded
// config.toml. It loads the overview (trims counted), flips claude-code's switch off with the
// htmx form and checks that the next request of the agent reaches the model byte for byte and
// that config.toml says so, searches live for a value only a trimmed row holds and opens its
// row on the session page, and saves screenshots of every page at 1280×800 and 420×800. Any
// Content Security Policy report, console error or uncaught exception fails it; a planted
// inline script at the end proves the browser reports CSP violations to the test.
func TestE2EDashboard(t *testing.T) {
	chromium := findChromium(t)
	shots := artifactDir(t, "dashboard")
	bin := buildBinary(t)

	cfgDir := t.TempDir()
	configPath := filepath.Join(cfgDir, "config.toml")
	if err := os.WriteFile(configPath, []byte(dashConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	fake, srv := serveWithFake(t, bin, dashReply,
		"SMARTER_COMPACT_CONFIG="+configPath) // after the rig's empty one: the last value wins

	// 1. Seed: a session whose turn 2 (the value, a tool call, a long listing) is trimmed.
	s := &claudeSession{t: t, base: srv.url() + "/claude-code", sid: dashSID}
	s.send("E2E-DASH 1: start of the dashboard session.")
	content := s.send("E2E-DASH 2: remember the vault key " + dashValue + ", then LIST-FILES.")
	var toolID string
	for _, b := range content {
		if b["type"] == "tool_use" {
			toolID, _ = b["id"].(string)
		}
	}
	if toolID == "" {
		t.Fatalf("the fake model did not call Bash in turn 2: %v", content)
	}
	s.send([]map[string]any{{"type": "tool_result", "tool_use_id": toolID, "content": dashListing()}})
	pointer := "[smarter-compact: continuing session " + dashSID + "; "
	trimmedAt, turn := 0, 3
	for ; turn <= dashMaxTurns && trimmedAt == 0; turn++ {
		s.send(dashFiller(turn))
		if recs := fake.Requests(); bytes.Contains(recs[len(recs)-1].Body, []byte(pointer)) {
			trimmedAt = len(s.sent)
		}
	}
	if trimmedAt == 0 {
		t.Fatalf("no request of session %s was trimmed after %d requests at trim_at_tokens = %d (last one %d bytes): lower trim_at_tokens or add turns",
			dashSID, len(s.sent), dashTrimAt, len(s.sent[len(s.sent)-1]))
	}
	s.send(dashFiller(turn)) // one more request after the cut
	turn++
	last := fake.Requests()[len(fake.Requests())-1]
	if !bytes.Contains(last.Body, []byte(proxy.StandingInstruction)) || !bytes.Contains(last.Body, []byte(pointer)) {
		t.Fatalf("with claude-code trimming on, the last request lacks the standing instruction or the pointer:\n%.2000s", last.Body)
	}
	other := &claudeSession{t: t, base: srv.url() + "/claude-code", sid: dashOtherID}
	other.send("E2E-DASH other: a short second session for the list.")
	t.Logf("seeded session %s: %d requests, the first trimmed one #%d", dashSID, len(s.sent), trimmedAt)

	valueSeq := waitTrimmedRow(t, srv.stateDir, dashSID, dashValue)
	t.Logf("row seq-%d holds %s and is out of context", valueSeq, dashValue)
	if rej := fake.Rejections(); len(rej) > 0 {
		t.Fatalf("the fake upstream rejected %d requests: %+v", len(rej), rej)
	}

	// The browser.
	b := openBrowser(t, chromium, srv.url(), shots)
	// The window of a headless Chromium has room for its toolbars: the page gets 1280×800
	// only with the viewport set.
	b.do("viewport 1280×800", chromedp.EmulateViewport(1280, 800))

	// 2. Overview: the trims of the last 24 hours.
	b.at("overview")
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="stat-trims"]`)))
	trims := b.text(`[data-testid="stat-trims"]`)
	if n := firstInt(trims); n < 1 {
		b.fail("overview", fmt.Errorf("stat-trims shows %q, want at least 1 trim", trims))
	}
	if got := b.text(`[data-testid="agent-trimming-claude-code"]`); got != "on" {
		b.fail("overview", fmt.Errorf("agent-trimming-claude-code shows %q before the switch, want \"on\"", got))
	}
	b.shot("overview-before-switch")

	// 3. The switch: off through the htmx form, then the agent's next request passes through.
	b.at("overview: switch claude-code off")
	b.do("click claude-code's off button", chromedp.Click(chromedp.CSS(`[data-testid="agent-switch-claude-code"] button[value="off"]`)))
	b.waitJS("agent-trimming-claude-code shows off", 5*time.Second,
		`(document.querySelector('[data-testid="agent-trimming-claude-code"]')?.textContent ?? '').trim() === 'off'`)
	b.shot("overview-after-switch")
	waitConfigAgent(t, configPath, "claude-code", false)
	before := len(fake.Requests())
	s.send(dashFiller(turn))
	recs := fake.Requests()
	if len(recs) != before+1 {
		t.Fatalf("the upstream received %d requests for one sent", len(recs)-before)
	}
	got, sent := recs[len(recs)-1], s.sent[len(s.sent)-1]
	switch {
	case !bytes.Equal(got.Raw, sent):
		t.Errorf("with claude-code switched off, the upstream received %d bytes for the %d sent: the request was not passed through untouched", len(got.Raw), len(sent))
	case bytes.Contains(got.Raw, []byte(proxy.StandingInstruction)), bytes.Contains(got.Raw, []byte(pointer)):
		t.Error("with claude-code switched off, the request carries the standing instruction or the pointer")
	default:
		t.Logf("switched off: request %d (%d bytes) reached the model byte for byte", len(s.sent), len(sent))
	}
	if h := got.Header.Get("X-Claude-Code-Session-Id"); h != dashSID {
		t.Errorf("the passed-through request carries session header %q, want %q", h, dashSID)
	}

	// 4. Search: type the value, wait for the live result, open its row.
	b.at("search")
	b.do("load the search page", chromedp.Navigate(srv.url()+"/ui/search"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="search-input"]`)))
	b.do("type the value", chromedp.Click(chromedp.CSS(`[data-testid="search-input"]`)), chromedp.SendKeys(chromedp.CSS(`[data-testid="search-input"]`), dashValue))
	b.waitJS("a search hit appears", 10*time.Second, `document.querySelector('[data-testid="search-hit"] a[href^="/ui/sessions/"]') !== null`)
	if loc := b.location(); strings.Contains(loc, dashValue) {
		t.Logf("the live search updated the address: %s", loc)
	}
	want := "/ui/sessions/" + dashSID + "#seq-" + strconv.FormatInt(valueSeq, 10)
	links, err := chromedp.Run(b.ctx, chromedp.AttributesAll(chromedp.CSS(`[data-testid="search-hit"] a[href^="/ui/sessions/"]`)))
	if err != nil {
		b.fail("search", err)
	}
	var hrefs []string
	for _, l := range links {
		hrefs = append(hrefs, l["href"])
	}
	found := false
	for _, h := range hrefs {
		found = found || h == want
	}
	if !found {
		b.fail("search", fmt.Errorf("no search hit links to %s; the hits link to %q", want, hrefs))
	}
	b.shot("search-results")
	b.at("session via search")
	b.do("open the hit", chromedp.Click(chromedp.CSS(`[data-testid="search-hit"] a[href="`+want+`"]`)))
	rowSel := fmt.Sprintf(`#seq-%d`, valueSeq)
	b.waitJS("the session page shows the row", 10*time.Second,
		`location.pathname === '/ui/sessions/`+dashSID+`' && document.querySelector('`+rowSel+`') !== null`)
	if loc := b.location(); !strings.HasSuffix(loc, want) {
		t.Errorf("after the click the address is %s, want …%s", loc, want)
	}
	attrs, err := chromedp.Run(b.ctx, chromedp.Attributes(chromedp.CSS(rowSel)))
	if err != nil {
		b.fail("session", err)
	}
	if attrs["data-testid"] != "row" || attrs["data-in-context"] != "false" || !strings.Contains(" "+attrs["class"]+" ", " trimmed ") {
		t.Errorf("row %s: data-testid=%q data-in-context=%q class=%q, want row, false and the class trimmed", rowSel, attrs["data-testid"], attrs["data-in-context"], attrs["class"])
	}
	if txt := b.textContent(rowSel); !strings.Contains(txt, dashValue) {
		t.Errorf("row %s does not show %s: %q", rowSel, dashValue, txt)
	}
	inView, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => {
  const r = document.querySelector('`+rowSel+`').getBoundingClientRect();
  return r.top >= 0 && r.top < window.innerHeight;
})()`))
	if err != nil {
		b.fail("session", err)
	}
	if !inView {
		t.Errorf("the session page did not open scrolled to row %s", rowSel)
	}
	b.viewShot("session-at-hit") // what the window shows: the row the hit named

	// 5. Every page at both widths.
	blob := b.firstAttr("/ui/sessions/"+dashSID, `a[href^="/ui/blobs/"]`, "href")
	if blob == "" {
		t.Errorf("the session page links no blob, though turn 2's listing was compressed (compress_over_tokens = %d)", dashCompressOver)
	}
	pages := []struct{ name, path, ready string }{
		{"overview", "/", `[data-testid="stat-trims"]`},
		{"sessions", "/ui/sessions", `[data-testid="sessions-table"]`},
		{"session", "/ui/sessions/" + dashSID, `[data-testid="usage-table"]`},
		{"search", "/ui/search?q=" + dashValue, `[data-testid="search-hit"]`},
		{"settings", "/ui/settings", `[data-testid="settings-form"]`},
	}
	if blob != "" {
		pages = append(pages, struct{ name, path, ready string }{"blob", blob, `body`})
	}
	for _, w := range []int64{1280, 420} {
		b.do(fmt.Sprintf("viewport %d×800", w), chromedp.EmulateViewport(w, 800))
		for _, p := range pages {
			name := fmt.Sprintf("%s-%d", p.name, w)
			b.at(name)
			b.do("load "+p.path, chromedp.Navigate(srv.url()+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			b.checkNoHorizontalScroll(name)
			b.shot(name)
		}
	}
	b.do("viewport reset", chromedp.EmulateViewport(1280, 800))

	// 6. The console: nothing so far; then a planted violation that must be seen.
	b.checkConsole()
	b.probeCSP()
}

// waitTrimmedRow waits until the session database has the row holding value with
// in_context = 0 (the store writes after the answer) and returns its seq.
func waitTrimmedRow(t *testing.T, stateDir, sid, value string) int64 {
	t.Helper()
	db := openSessionDB(t, stateDir, sid)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var seq, in int64
		err := db.QueryRow(`SELECT seq, in_context FROM messages WHERE instr(text, ?) > 0 ORDER BY seq LIMIT 1`, value).Scan(&seq, &in)
		trims := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'trim'`)
		usages := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'usage'`)
		if err == nil && in == 0 && trims > 0 && usages > 0 {
			t.Logf("session db: %d trim events, %d usage events", trims, usages)
			return seq
		}
		if time.Now().After(deadline) {
			if errors.Is(err, sql.ErrNoRows) {
				t.Fatalf("no row of session %s holds %q", sid, value)
			}
			t.Fatalf("the row holding %q: in_context = %d (err %v); %d trim, %d usage events: want it out of context after a trim", value, in, err, trims, usages)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitConfigAgent waits until config.toml gives [context_proxy.agents] agent = want and
// still has the seeded comment.
func waitConfigAgent(t *testing.T, path, agent string, want bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		agents, err := configAgents(raw)
		v, ok := agents[agent]
		if err == nil && ok && v == want {
			if !strings.Contains(string(raw), dashComment) {
				t.Errorf("config.toml lost its comment on the switch:\n%s", raw)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("config.toml does not say [context_proxy.agents] %s = %v (%v):\n%s", agent, want, err, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var firstIntRe = regexp.MustCompile(`\d[\d,]*`)

// firstInt returns the first integer in s ("1,204 trims" → 1204), -1 when none.
func firstInt(s string) int {
	m := firstIntRe.FindString(s)
	if m == "" {
		return -1
	}
	n, _ := strconv.Atoi(strings.ReplaceAll(m, ",", ""))
	return n
}

// dashBrowser is the tab the test drives, with what it saw on the console.
type dashBrowser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string

	mu      sync.Mutex
	page    string // the step, for console messages
	console []string
}

func (b *dashBrowser) at(page string) {
	b.mu.Lock()
	b.page = page
	b.mu.Unlock()
}

// watchConsole records every console message, exception and browser log entry of the tab.
func (b *dashBrowser) watchConsole() {
	msgs := chromedp.Console(b.ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			line := fmt.Sprintf("[%s] %s", b.page, m)
			if m.Source != "" {
				line += " (source " + m.Source + ")"
			}
			if m.URL != "" {
				line += fmt.Sprintf(" at %s:%d", m.URL, m.Line+1)
			}
			b.console = append(b.console, line)
			b.mu.Unlock()
		}
	}()
}

// problems returns the console lines from index from on that are CSP reports, errors or
// exceptions.
func (b *dashBrowser) problems(from int) (lines []string, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.console[min(from, len(b.console)):] {
		_, rest, _ := strings.Cut(l, "] ")
		if strings.Contains(l, "Content Security Policy") || strings.HasPrefix(rest, "error: ") || strings.HasPrefix(rest, "exception: ") {
			lines = append(lines, l)
		}
	}
	return lines, len(b.console)
}

func (b *dashBrowser) checkConsole() {
	b.t.Helper()
	time.Sleep(300 * time.Millisecond) // let the last page's messages arrive
	bad, total := b.problems(0)
	b.mu.Lock()
	all := strings.Join(b.console, "\n")
	b.mu.Unlock()
	if len(bad) > 0 {
		b.t.Errorf("the browser reported %d CSP violations, console errors or exceptions:\n%s", len(bad), strings.Join(bad, "\n"))
	} else {
		b.t.Logf("console: %d messages, no CSP report, error or exception", total)
	}
	if all != "" {
		b.t.Logf("console messages:\n%s", all)
	}
}

// probeCSP plants an inline script (what the CSP forbids) and checks that the browser
// blocked it and that its report reached the console watch: without that, a clean console
// would prove nothing.
func (b *dashBrowser) probeCSP() {
	b.t.Helper()
	b.at("CSP probe")
	_, from := b.problems(0)
	b.do("load the overview", chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="stat-trims"]`)))
	b.do("plant an inline script", chromedp.Evaluate[chromedp.Void](
		`(() => { const s = document.createElement('script'); s.textContent = 'window.cspProbeRan = true'; document.body.appendChild(s); })()`))
	ran, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.cspProbeRan === true`))
	if err != nil {
		b.t.Fatal(err)
	}
	if ran {
		b.t.Error("an inline script ran on the overview: the Content Security Policy does not forbid inline scripts")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		bad, _ := b.problems(from)
		for _, l := range bad {
			if strings.Contains(l, "Content Security Policy") {
				b.t.Logf("CSP probe: the browser blocked the planted inline script and the test saw it: %s", l)
				return
			}
		}
		if time.Now().After(deadline) {
			b.t.Errorf("the planted inline script produced no Content Security Policy message on the console watch (got %q): the CSP check above is blind", bad)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// do runs actions with a deadline of 20 s; on error it saves a screenshot and the page and
// fails the test.
func (b *dashBrowser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// waitJS waits until the expression is true in the page. It evaluates it every 50 ms from
// here, not with a poll in the page, so it survives a navigation in between (an evaluation
// in a page being replaced fails, and the next one runs in the new page).
func (b *dashBrowser) waitJS(what string, limit time.Duration, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`Boolean(`+expr+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			b.fail(what, fmt.Errorf("not within %s (last evaluation error: %v)", limit, last))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *dashBrowser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(b.textContent(sel))
}

func (b *dashBrowser) textContent(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.fail("read "+sel, err)
	}
	return s
}

func (b *dashBrowser) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.fail("location", err)
	}
	return loc
}

// firstAttr loads path and returns attribute attr of the first element matching sel, "" when
// none matches.
func (b *dashBrowser) firstAttr(path, sel, attr string) string {
	b.t.Helper()
	b.do("load "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-overview"]`)))
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`document.querySelector(%q)?.getAttribute(%q) ?? ''`, sel, attr)))
	if err != nil {
		b.fail("read "+sel, err)
	}
	return v
}

// overflow is what checkNoHorizontalScroll measures.
type overflow struct {
	ScrollWidth int      `json:"scrollWidth"`
	Width       int      `json:"width"`
	Over        []string `json:"over"`
	Boxes       []string `json:"boxes"`
}

// checkNoHorizontalScroll fails when the page is wider than the window, naming the widest
// elements that stick out (those inside a scrolling or clipping box do not count). It logs
// the boxes whose content is wider than they are (scrolled or clipped sideways), for a
// person reading the screenshots: content there is hidden until scrolled.
func (b *dashBrowser) checkNoHorizontalScroll(page string) {
	b.t.Helper()
	o, err := chromedp.Run(b.ctx, chromedp.Evaluate[overflow](`(() => {
  const vw = document.documentElement.clientWidth;
  const over = [];
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.getAttribute('data-testid') ? '[data-testid=' + el.getAttribute('data-testid') + ']' : '') +
    (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  if (document.documentElement.scrollWidth > vw + 1) {
    for (const el of document.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.right <= vw + 1) continue;
      let p = el.parentElement, clipped = false, parentOver = false;
      for (; p && p !== document.body; p = p.parentElement) {
        const ox = getComputedStyle(p).overflowX;
        if (ox !== 'visible') { clipped = true; break; }
      }
      const pr = el.parentElement && el.parentElement !== document.body ? el.parentElement.getBoundingClientRect() : null;
      parentOver = pr !== null && pr.right > vw + 1;
      if (!clipped && !parentOver) over.push(name(el) + ' (right edge at ' + Math.round(r.right) + 'px)');
    }
  }
  const boxes = [];
  for (const el of document.body.querySelectorAll('*')) {
    const ox = getComputedStyle(el).overflowX;
    if (ox !== 'visible' && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
      boxes.push(name(el) + ' (' + ox + ': ' + el.scrollWidth + 'px of content in ' + el.clientWidth + 'px)');
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, width: vw, over: over.slice(0, 8), boxes: boxes.slice(0, 8)};
})()`))
	if err != nil {
		b.fail(page, err)
	}
	if o.ScrollWidth > o.Width+1 {
		b.t.Errorf("%s: the page is %dpx wide in a %dpx window (it scrolls sideways); sticking out: %s",
			page, o.ScrollWidth, o.Width, strings.Join(o.Over, ", "))
	}
	if len(o.Boxes) > 0 {
		b.t.Logf("%s: content wider than its box, hidden until scrolled sideways: %s", page, strings.Join(o.Boxes, "; "))
	}
}

// shot saves a full-page PNG of the tab as <name>.png.
func (b *dashBrowser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// viewShot saves a PNG of what the window shows as <name>.png.
func (b *dashBrowser) viewShot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// fail saves a screenshot and the HTML of the page as failed-<step>.png/.html and fails the test.
func (b *dashBrowser) fail(step string, err error) {
	b.t.Helper()
	name := "failed-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(step))
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if buf, e := chromedp.Run(ctx, chromedp.FullScreenshot(100)); e == nil {
		os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644)
	}
	if html, e := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); e == nil {
		os.WriteFile(filepath.Join(b.shots, name+".html"), []byte(html), 0o644)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	b.mu.Lock()
	console := strings.Join(b.console, "\n")
	b.mu.Unlock()
	b.t.Fatalf("%s: %v\n(page %s; screenshot and HTML saved as %s.*)\nconsole:\n%s", step, err, loc, filepath.Join(b.shots, name), console)
}

// Onboarding (issue 15, Deliver 4 and "Show"), with a home that has Claude Code and Codex
// configs: the empty overview says what to do next; "Wire my agents" shows the diff `install
// --dry-run` prints, applies it with one click and undoes it with another, after which every
// file is back byte for byte; the sessions list names a session by its project and first
// prompt. Screenshots at 1280 and 420 pixels of the empty overview, the wire page and a
// session page.

const (
	onboardSID     = "3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	onboardProject = "shop-frontend"
	onboardPrompt  = "E2E-ONBOARD: fix the flaky checkout test"
)

func TestE2EOnboarding(t *testing.T) {
	chromium := findChromium(t)
	shots := artifactDir(t, "onboarding")
	bin := buildBinary(t)
	fake, srv := serveWithFake(t, bin, dashReply)
	home := filepath.Join(filepath.Dir(srv.stateDir), "home")
	files := map[string]string{
		filepath.Join(home, ".claude", "settings.json"): "{\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}\n",
		filepath.Join(home, ".codex", "config.toml"):    "# my codex settings\nmodel = \"gpt-5\" # keep this comment\n\n[tui]\nnotifications = true\n",
	}
	for path, text := range files {
		makeDirs(t, filepath.Dir(path))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(when string) {
		t.Helper()
		for path, text := range files {
			if got, _ := os.ReadFile(path); string(got) != text {
				t.Errorf("%s: %s is not byte for byte what it was:\n%q\nwant\n%q", when, path, got, text)
			}
		}
	}

	// What the CLI would apply, with serve's environment.
	dry := exec.Command(bin, "install", "--dry-run")
	dry.Env = srv.cmd.Env
	out, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("install --dry-run: %v\n%s", err, out)
	}
	cliDiff := string(out)

	b := openBrowser(t, chromium, srv.url(), shots)
	// shots saves the page at 1280 and at 420 pixels wide; at 420 nothing may stick out.
	both := func(name string) {
		t.Helper()
		b.do("viewport 1280", chromedp.EmulateViewport(1280, 800))
		b.shot(name + "-1280")
		b.do("viewport 420", chromedp.EmulateViewport(420, 800))
		b.checkNoHorizontalScroll(name + " at 420")
		b.shot(name + "-420")
		b.do("viewport 1280", chromedp.EmulateViewport(1280, 800))
	}
	b.do("viewport 1280×800", chromedp.EmulateViewport(1280, 800))

	// 1. The empty overview says what to do next, and links the wire page.
	b.at("empty overview")
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="first-steps"]`)))
	// The service reads the agents' files again every 10 s (the configs were written after
	// it started); the overview's 1 s poll shows the change.
	b.waitJS("the first step names the agents to wire", 20*time.Second,
		`(document.querySelector('[data-testid="first-step-wire"]')?.textContent ?? '').replace(/\s+/g, ' ').includes('Installed but not wired: claude-code, codex')`)
	both("overview-empty")

	// 2. The wire page: each agent's state in words, the CLI's diff.
	b.at("wire page")
	b.do("open Wire my agents", chromedp.Click(chromedp.CSS(`[data-testid="first-step-wire-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="wire-agent-claude-code"]`)))
	for agent, want := range map[string]string{"claude-code": "not wired", "codex": "not wired", "opencode": "not installed"} {
		if got := b.text(`[data-testid="wire-state-` + agent + `"]`); got != want {
			b.fail("wire page", fmt.Errorf("%s shows %q, want %q", agent, got, want))
		}
	}
	for _, agent := range []string{"claude-code", "codex"} {
		diff := b.textContent(`[data-testid="wire-diff-` + agent + `"]`)
		if !strings.Contains(diff, "+++ ") || !strings.Contains(cliDiff, diff) {
			b.fail("wire page", fmt.Errorf("%s: the page's diff is not the one install --dry-run prints:\n%s\n--- CLI:\n%s", agent, diff, cliDiff))
		}
	}
	unchanged("after showing the wire page")
	both("wire")

	// 3. Wire all, one click: the files point at serve, the page says wired.
	b.at("wire all")
	b.do("click Wire all", chromedp.Click(chromedp.CSS(`[data-testid="wire-all"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="wire-report"]`)))
	if r := b.text(`[data-testid="wire-report"]`); !strings.Contains(r, "claude-code: wired") || !strings.Contains(r, "codex: wired") {
		b.fail("wire all", fmt.Errorf("report %q", r))
	}
	for path, text := range files {
		if got, _ := os.ReadFile(path); string(got) == text || !strings.Contains(string(got), srv.url()) {
			b.fail("wire all", fmt.Errorf("%s does not point at %s after Wire all:\n%s", path, srv.url(), got))
		}
	}
	for _, agent := range []string{"claude-code", "codex"} {
		if got := b.text(`[data-testid="wire-state-` + agent + `"]`); got != "wired" {
			b.fail("wire all", fmt.Errorf("%s shows %q after Wire all, want wired", agent, got))
		}
	}
	both("wire-after-wiring")

	// 4. Undo each: every file back byte for byte.
	for _, agent := range []string{"codex", "claude-code"} {
		b.at("undo " + agent)
		b.do("click Undo for "+agent, chromedp.Click(chromedp.CSS(`[data-testid="wire-undo-`+agent+`"] button`)))
		// The page before the click has a report too: wait for the new one.
		b.waitJS("the report of undo "+agent, 10*time.Second,
			`(document.querySelector('[data-testid="wire-report"]')?.textContent ?? '').includes('Undone: `+agent+` no longer wired')`)
	}
	unchanged("after Undo")

	// 5. A session, registered by the hook as Claude Code's SessionStart does: listed by
	// its project and first prompt; its page.
	hook := exec.Command(bin, "hook", "session-start")
	hook.Env = srv.cmd.Env
	hook.Stdin = strings.NewReader(fmt.Sprintf(`{"session_id":%q,"cwd":%q,"hook_event_name":"SessionStart","source":"startup"}`,
		onboardSID, filepath.Join(home, "src", onboardProject)))
	if out, err := hook.CombinedOutput(); err != nil {
		t.Fatalf("hook session-start: %v\n%s", err, out)
	}
	s := &claudeSession{t: t, base: srv.url() + "/claude-code", sid: onboardSID}
	s.send([]map[string]any{
		{"type": "text", "text": "<system-reminder>context the agent adds</system-reminder>"},
		{"type": "text", "text": onboardPrompt},
	})
	s.send("E2E-ONBOARD 2: and run it twice.")
	b.at("sessions")
	row := `[data-testid="session-row"][data-session="` + onboardSID + `"]`
	ok := waitFor(10*time.Second, func() bool {
		b.do("load the sessions", chromedp.Navigate(srv.url()+"/ui/sessions"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="sessions-table"]`)))
		n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+row+`').length`))
		return err == nil && n == 1
	})
	if !ok {
		b.fail("sessions", fmt.Errorf("no row for session %s", onboardSID))
	}
	if got := b.text(row + ` [data-testid="session-project"]`); got != onboardProject {
		b.fail("sessions", fmt.Errorf("project %q, want %q", got, onboardProject))
	}
	if got := b.text(row + ` [data-testid="session-prompt"]`); got != onboardPrompt {
		b.fail("sessions", fmt.Errorf("first prompt %q, want %q", got, onboardPrompt))
	}
	both("sessions")
	b.at("session page")
	b.do("open the session", chromedp.Click(chromedp.CSS(row+` [data-testid="session-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-sessions"]`)))
	if loc := b.location(); !strings.HasSuffix(loc, "/ui/sessions/"+onboardSID) {
		b.fail("session page", fmt.Errorf("the link went to %s", loc))
	}
	both("session")

	// 6. With a session stored, the overview has no first steps.
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="stat-trims"]`)))
	if n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="first-steps"]').length`)); n != 0 {
		b.fail("overview", fmt.Errorf("the first steps are still shown with a session stored"))
	}
	b.checkConsole()
	if rej := fake.Rejections(); len(rej) > 0 {
		t.Fatalf("the fake upstream rejected %d requests: %+v", len(rej), rej)
	}
}
