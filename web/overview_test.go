package web

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// seedOverview writes two sessions with events in the last 24 hours and one older trim.
// Expected: 2 trims saving 90,000 tokens, 1 fail-open, 3 requests, hit ratio 58.6 %,
// cache writes 30,000 per request after a new cut and 1,500 on the others.
func seedOverview(t *testing.T, h *harness) (recent time.Time) {
	t.Helper()
	recent = h.now.Add(-time.Minute)
	seedSession(t, h.root, "ses-a", "claude-code", "/home/dev/alpha", textRows(3, "alpha %d"),
		store.Event{At: recent, Kind: "trim", TokensBefore: i64p(100000), TokensAfter: i64p(40000), Dropped: i64p(12)},
		store.Event{At: recent, Kind: "usage", Trimmed: i64p(2), InputTokens: i64p(1000), CacheReadTokens: i64p(0), CacheCreationTokens: i64p(30000), OutputTokens: i64p(200)},
		store.Event{At: recent, Kind: "usage", Trimmed: i64p(1), InputTokens: i64p(500), CacheReadTokens: i64p(40000), CacheCreationTokens: i64p(2000), OutputTokens: i64p(100)},
		store.Event{At: recent, Kind: "fail_open", Location: "proxy/rewrite.go:120", Error: "IndexError"},
	)
	seedSession(t, h.root, "ses-b", "codex", "/home/dev/beta", textRows(2, "beta %d"),
		store.Event{At: recent, Kind: "trim", TokensBefore: i64p(50000), TokensAfter: i64p(20000), Dropped: i64p(5)},
		store.Event{At: recent, Kind: "usage", Trimmed: i64p(0), InputTokens: i64p(100), CacheReadTokens: i64p(9000), CacheCreationTokens: i64p(1000), OutputTokens: i64p(50)},
		store.Event{At: h.now.Add(-48 * time.Hour), Kind: "trim", TokensBefore: i64p(1000000), TokensAfter: i64p(0), Dropped: i64p(1)},
	)
	return recent
}

func TestOverview(t *testing.T) {
	h := newHarness(t)
	recent := seedOverview(t, h)
	w := h.get("/")
	d := doc(t, w, http.StatusOK)

	for _, nav := range []string{"nav-overview", "nav-sessions", "nav-search", "nav-settings"} {
		one(t, d, nav)
	}
	if cur, _ := one(t, d, "nav-overview").Attr("aria-current"); cur != "page" {
		t.Errorf("overview nav aria-current %q, want page", cur)
	}
	if got := w.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}

	// Switches: one form per settable agent, three buttons, the saved mode marked.
	for agent, mode := range map[string]string{"claude-code": "on", "codex": "follow", "opencode": "off"} {
		form := one(t, d, "agent-switch-"+agent)
		if m, _ := form.Attr("method"); m != "post" {
			t.Errorf("%s form method %q", agent, m)
		}
		if a, _ := form.Attr("action"); a != "/ui/agents/"+agent {
			t.Errorf("%s form action %q", agent, a)
		}
		if v, _ := form.Find(`input[name="csrf"]`).Attr("value"); v != h.srv.csrf {
			t.Errorf("%s form csrf %q, want the server's token", agent, v)
		}
		var values []string
		form.Find(`button[name="mode"]`).Each(func(_ int, b *goquery.Selection) {
			v, _ := b.Attr("value")
			values = append(values, v)
			pressed, _ := b.Attr("aria-pressed")
			if (v == mode) != (pressed == "true") || (v == mode) != b.HasClass("current") {
				t.Errorf("%s button %s: aria-pressed %q class %q, saved mode %s", agent, v, pressed, b.AttrOr("class", ""), mode)
			}
		})
		if strings.Join(values, ",") != "on,off,follow" {
			t.Errorf("%s buttons %v, want on,off,follow", agent, values)
		}
	}
	if d.Find(testID("agent-switch-unknown")).Length() != 0 {
		t.Error("unknown has a switch form; it always follows the master")
	}
	for agent, want := range map[string]string{"claude-code": "on", "codex": "on", "opencode": "off", "unknown": "on"} {
		if got := text(one(t, d, "agent-trimming-"+agent)); got != want {
			t.Errorf("agent-trimming-%s %q, want %q", agent, got, want)
		}
	}
	if got := text(one(t, d, "agent-wiring-codex")); got != "not wired" {
		t.Errorf("agent-wiring-codex %q", got)
	}
	one(t, d, "master-toggle")
	if b := one(t, d, "pause-toggle").Find(`button[name="paused"]`); b.AttrOr("value", "") != "true" || text(b) != "Pause all" {
		t.Errorf("pause button %s", outer(b))
	}
	if got := text(one(t, d, "service-version")); got != "v1.2.3-test" {
		t.Errorf("version %q", got)
	}
	if got := text(one(t, d, "service-uptime")); got != "3h 12m" {
		t.Errorf("uptime %q, want 3h 12m", got)
	}
	if got := text(one(t, d, "service-tray")); !strings.HasPrefix(got, "headless") {
		t.Errorf("tray %q", got)
	}

	// The last 24 hours, from store.Status.
	for id, want := range map[string]string{
		"stat-trims": "2", "stat-tokens-saved": "90,000", "stat-fail-opens": "1", "stat-requests": "3",
		"stat-hit-ratio": "58.6 %", "stat-cache-newcut": "30,000", "stat-cache-other": "1,500",
	} {
		if got := text(one(t, d, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	fails := one(t, d, "fail-open-list").Find(testID("fail-open"))
	if fails.Length() != 1 || !strings.Contains(text(fails), "IndexError") || !strings.Contains(text(fails), "proxy/rewrite.go:120") {
		t.Errorf("fail-open list: %s", outer(fails))
	}
	if href, _ := fails.Find("a").Attr("href"); href != "/ui/sessions/ses-a" {
		t.Errorf("fail-open session link %q", href)
	}

	// The daily chart: an inline SVG, 14 bars, each value as text and in its <title>.
	svg := one(t, d, "chart-daily-saved")
	if goquery.NodeName(svg) != "svg" {
		t.Fatalf("chart-daily-saved is <%s>, want an inline <svg>", goquery.NodeName(svg))
	}
	if svg.Find("title").First().Text() == "" {
		t.Error("chart has no <title>")
	}
	bars := svg.Find(testID("bar"))
	if bars.Length() != dailyDays {
		t.Fatalf("%d bars, want %d", bars.Length(), dailyDays)
	}
	found := 0
	for _, c := range []struct {
		at   time.Time
		want string
	}{{recent, "90,000 tokens saved"}, {h.now.Add(-48 * time.Hour), "1,000,000 tokens saved"}} {
		date := c.at.UTC().Format("2006-01-02")
		bars.Each(func(_ int, b *goquery.Selection) {
			if title := b.Find("title").Text(); strings.HasPrefix(title, date) {
				found++
				if !strings.Contains(title, c.want) {
					t.Errorf("bar %s title %q, want %q", date, title, c.want)
				}
				if v := text(b.Find("text.value")); v == "0" || v == "" {
					t.Errorf("bar %s value text %q", date, v)
				}
			}
		})
	}
	if found != 2 {
		t.Errorf("found %d of the 2 days with trims among the bars", found)
	}
}

func TestOverviewBanners(t *testing.T) {
	h := newHarness(t)
	h.ctl.st.Paused = true
	h.ctl.st.EnvLock = "CONTEXT_PROXY_ENABLED=0"
	h.ctl.st.ConfigError = "config.toml:3: trim_at_tokens must be an integer"
	h.ctl.recompute()
	d := doc(t, h.get("/"), http.StatusOK)
	one(t, d, "paused-banner")
	if !strings.Contains(text(one(t, d, "env-lock")), "CONTEXT_PROXY_ENABLED=0") {
		t.Error("env lock not named")
	}
	if !strings.Contains(text(one(t, d, "config-error")), "trim_at_tokens must be an integer") {
		t.Error("config error not shown")
	}
	if d.Find(testID("proxy-stale")).Length() != 0 {
		t.Error("proxy_stale banner without a stale build")
	}
	h.ctl.st.ProxyStale, h.ctl.st.Build, h.ctl.st.InstalledBuild, h.ctl.st.RestartCommand = true, "proxy:aaaaaaaaaaaa", "proxy:bbbbbbbbbbbb", "smarter-compact service stop && smarter-compact service start"
	h.ctl.recompute()
	d = doc(t, h.get("/"), http.StatusOK)
	if got := text(one(t, d, "proxy-stale")); !strings.Contains(got, "proxy:aaaaaaaaaaaa") || !strings.Contains(got, "proxy:bbbbbbbbbbbb") ||
		!strings.Contains(got, "smarter-compact service stop && smarter-compact service start") {
		t.Errorf("proxy_stale banner %q", got)
	}
	if got := text(one(t, d, "agent-trimming-claude-code")); got != "off" {
		t.Errorf("paused claude-code trimming %q, want off", got)
	}
	if b := one(t, d, "pause-toggle").Find(`button[name="paused"]`); b.AttrOr("value", "") != "false" {
		t.Errorf("paused: button %s, want Resume (paused=false)", outer(b))
	}
	// No sessions at all: zeros, an empty fail-open list, a chart of zero bars.
	if got := text(one(t, d, "stat-trims")); got != "0" {
		t.Errorf("stat-trims %q on an empty store", got)
	}
	if got := text(one(t, d, "stat-hit-ratio")); got != "–" {
		t.Errorf("stat-hit-ratio %q without requests, want –", got)
	}
}

// TestLive checks the 1 s poll: 204 while nothing changed, the fragment after a switch or a
// new event, and the fragment alone (no page around it).
func TestLive(t *testing.T) {
	h := newHarness(t)
	seedOverview(t, h)
	d := doc(t, h.get("/"), http.StatusOK)
	live := one(t, d, "live")
	poll, _ := live.Attr("hx-get")
	if !strings.HasPrefix(poll, "/ui/live?rev=7&data=") {
		t.Fatalf("poll URL %q", poll)
	}
	if trig, _ := live.Attr("hx-trigger"); trig != "every 1s" {
		t.Errorf("hx-trigger %q", trig)
	}
	if rev, _ := live.Attr("data-revision"); rev != "7" {
		t.Errorf("data-revision %q", rev)
	}
	if w := h.htmx(poll); w.Code != http.StatusNoContent || w.Body.Len() != 0 {
		t.Fatalf("unchanged poll: status %d body %q, want 204 and nothing", w.Code, w.Body)
	}
	if w := h.htmx("/ui/live?rev=7"); w.Code != http.StatusNoContent {
		t.Errorf("rev only, unchanged: status %d, want 204", w.Code)
	}

	// A change of state: the fragment, with the new revision.
	if err := h.ctl.SetAgent("codex", ModeOff); err != nil {
		t.Fatal(err)
	}
	fd := doc(t, h.htmx(poll), http.StatusOK)
	if fd.Find("header.top").Length() != 0 || fd.Find(testID("nav-overview")).Length() != 0 {
		t.Error("the live answer carries the page shell, want the fragment only")
	}
	live = one(t, fd, "live")
	if rev, _ := live.Attr("data-revision"); rev != "8" {
		t.Errorf("revision after a switch %q, want 8", rev)
	}
	if got := text(one(t, fd, "agent-trimming-codex")); got != "off" {
		t.Errorf("codex after switching off: %q", got)
	}
	poll, _ = live.Attr("hx-get")
	if w := h.htmx(poll); w.Code != http.StatusNoContent {
		t.Fatalf("poll right after: %d, want 204", w.Code)
	}

	// New data in the store: the fragment, with the new number.
	if err := storetest.Session(t, h.root, "ses-b").AddEvent(store.Event{At: h.now.Add(-time.Minute), Kind: "fail_open", Location: "proxy/x.go:1", Error: "ValueError"}); err != nil {
		t.Fatal(err)
	}
	w := h.htmx(poll)
	fd = doc(t, w, http.StatusOK)
	if got := text(one(t, fd, "stat-fail-opens")); got != "2" {
		t.Errorf("fail-opens after a new one: %q, want 2", got)
	}
}

func TestSwitches(t *testing.T) {
	h := newHarness(t)
	csrf := url.Values{"csrf": {h.srv.csrf}}
	with := func(k, v string) url.Values {
		f := url.Values{"csrf": csrf["csrf"]}
		f.Set(k, v)
		return f
	}

	// Without JavaScript: the form posts, the answer redirects to the overview.
	w := h.post("/ui/agents/codex", with("mode", "off"), nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("form post: %d Location %q, want 303 to /", w.Code, w.Header().Get("Location"))
	}
	if got := h.ctl.lastCall(); got != "agent codex=off" {
		t.Errorf("control got %q", got)
	}

	// htmx: the token in the header, the live fragment back.
	hx := http.Header{"Hx-Request": {"true"}, "X-Csrf-Token": {h.srv.csrf}}
	d := doc(t, h.post("/ui/agents/opencode", url.Values{"mode": {"follow"}}, hx), http.StatusOK)
	one(t, d, "live")
	if b := one(t, d, "agent-switch-opencode").Find(`button.current`); b.AttrOr("value", "") != "follow" {
		t.Errorf("current opencode button %s, want follow", outer(b))
	}

	d = doc(t, h.post("/ui/master", url.Values{"enabled": {"false"}}, hx), http.StatusOK)
	if got := text(one(t, d, "agent-trimming-opencode")); got != "off" {
		t.Errorf("opencode follows a master that is off: trimming %q", got)
	}
	if b := one(t, d, "master-toggle").Find("button.current"); b.AttrOr("value", "") != "false" {
		t.Errorf("master current button %s", outer(b))
	}
	if w := h.post("/ui/pause", with("paused", "true"), nil); w.Code != http.StatusSeeOther {
		t.Errorf("pause: %d", w.Code)
	}
	if !h.ctl.State().Paused {
		t.Error("pause did not reach Control")
	}

	// Bad input, and a Control that fails: status and a message that says what to do.
	for _, c := range []struct {
		name, path string
		form       url.Values
		code       int
		msg        string
	}{
		{"bad mode", "/ui/agents/codex", with("mode", "maybe"), 400, "mode must be on, off or follow"},
		{"unknown agent", "/ui/agents/cursor", with("mode", "on"), 404, "unknown agent"},
		{"the unknown agent", "/ui/agents/unknown", with("mode", "on"), 400, "follows the master switch"},
		{"bad paused", "/ui/pause", with("paused", "yes"), 400, "paused must be true or false"},
		{"bad enabled", "/ui/master", url.Values{"csrf": csrf["csrf"]}, 400, "enabled must be true or false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := doc(t, h.post(c.path, c.form, nil), c.code)
			if msg := text(one(t, d, "error")); !strings.Contains(msg, c.msg) {
				t.Errorf("message %q, want %q", msg, c.msg)
			}
		})
	}
	h.ctl.failSet = errors.New("config.toml is not writable: check its permissions")
	w = h.post("/ui/agents/codex", url.Values{"mode": {"on"}}, hx)
	d = doc(t, w, http.StatusInternalServerError)
	if w.Header().Get("HX-Retarget") != "#flash" {
		t.Errorf("htmx error HX-Retarget %q, want #flash", w.Header().Get("HX-Retarget"))
	}
	if msg := text(one(t, d, "error")); !strings.Contains(msg, "not writable: check its permissions") {
		t.Errorf("control error message %q", msg)
	}
	if d.Find(testID("nav-overview")).Length() != 0 {
		t.Error("htmx error answer is a whole page, want a fragment")
	}
}

// TestControlRefusals: a setter's refusal (web.Refuse: the environment overrides the switch,
// config.toml does not load, is read-only) is the user's to resolve: 409 with the setter's
// message on the dashboard and /api, logged at debug level only; any other setter error stays
// a 500, logged as an error.
func TestControlRefusals(t *testing.T) {
	h := newHarness(t)
	var logs strings.Builder
	var mu sync.Mutex
	h.srv.log = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const msg = "CONTEXT_PROXY_ENABLED=0 is set in the service's environment and overrides every agent switch: unset it"
	h.ctl.failSet = Refuse(errors.New(msg))
	hx := http.Header{"Hx-Request": {"true"}, "X-Csrf-Token": {h.srv.csrf}}

	d := doc(t, h.post("/ui/agents/codex", url.Values{"mode": {"on"}}, hx), http.StatusConflict)
	if got := text(one(t, d, "error")); !strings.Contains(got, msg) || strings.Count(got, "smarter-compact:") != 1 {
		t.Errorf("dashboard message %q", got)
	}
	d = doc(t, h.post("/ui/master", url.Values{"csrf": {h.srv.csrf}, "enabled": {"false"}}, nil), http.StatusConflict)
	if got := text(one(t, d, "error")); !strings.Contains(got, msg) {
		t.Errorf("master message %q", got)
	}
	for _, c := range []struct{ path, body string }{{"/api/agents/codex", `{"mode":"off"}`}, {"/api/pause", `{"paused":true}`}} {
		w := h.api("POST", c.path, c.body)
		e := decode[struct{ Error string }](t, w.Body.Bytes())
		if w.Code != http.StatusConflict || !strings.Contains(e.Error, msg) || strings.Count(e.Error, "smarter-compact:") != 1 {
			t.Errorf("POST %s: %d %q, want 409 with the message once", c.path, w.Code, e.Error)
		}
	}
	d = doc(t, h.post("/ui/settings", url.Values{"csrf": {h.srv.csrf}, "context_store.ttl_days": {"9"}}, nil), http.StatusConflict)
	if got := text(one(t, d, "error")); !strings.Contains(got, msg) {
		t.Errorf("settings message %q", got)
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	if strings.Contains(got, "level=ERROR") || strings.Contains(got, "level=WARN") {
		t.Errorf("a refusal was logged as a failure of the service:\n%s", got)
	}

	// Anything else is the service's failure: 500 and an error in the log.
	h.ctl.failSet = errors.New("disk on fire")
	if w := h.api("POST", "/api/pause", `{"paused":true}`); w.Code != http.StatusInternalServerError {
		t.Errorf("a plain error: %d, want 500", w.Code)
	}
	mu.Lock()
	got = logs.String()
	mu.Unlock()
	if !strings.Contains(got, "level=ERROR") {
		t.Errorf("a plain setter error was not logged as an error:\n%s", got)
	}
	if !errors.Is(Refuse(errors.New("x")), ErrRefused) || Refuse(nil) != nil || Refuse(errors.New("x")).Error() != "x" {
		t.Error("Refuse")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
