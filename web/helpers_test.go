package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// testHost is the Host the tests send, as app's checkHost would let through.
const (
	testHost  = "127.0.0.1:4100"
	testToken = "test-api-token-0123456789"
)

// fakeControl is app's state as web sees it (Control), backed by a struct: it applies the
// effective-trimming rule of the contract so the pages show what app would.
type fakeControl struct {
	mu      sync.Mutex
	st      State
	failSet error             // returned by every setter when set
	invalid map[string]string // SaveSettings answers a SettingsError with these fields
	saved   []map[string]string
	calls   []string
	subs    []chan struct{}
}

func newFakeControl(now time.Time) *fakeControl {
	c := &fakeControl{st: State{
		Version: "v1.2.3-test", Addr: "http://" + testHost, StartedAt: now.Add(-3*time.Hour - 12*time.Minute),
		ConfigPath: "/home/u/.config/smarter-compact/config.toml", StoreDir: "/home/u/.local/share/smarter-compact",
		Master: true, Tray: "headless: no D-Bus session bus", Revision: 7,
		Agents: []AgentSwitch{
			{Agent: "claude-code", Mode: ModeOn, Wiring: WiringWired, WiringDetail: "~/.claude/settings.json", Route: "http://" + testHost + "/claude-code"},
			{Agent: "codex", Mode: ModeFollow, Wiring: WiringNotWired, Route: "http://" + testHost + "/codex"},
			{Agent: "opencode", Mode: ModeOff, Wiring: WiringNotInstalled, Route: "http://" + testHost + "/opencode"},
			{Agent: "unknown", Mode: ModeFollow, Wiring: WiringUnknown, Route: "http://" + testHost + "/v1"},
		},
		Settings: []Setting{
			{Key: "context_proxy.trim_at_tokens", Label: "Trim at", Value: "120000", Default: "120000", Accepts: "an integer of at least 1000", Help: "Trim when the prompt is estimated above this many tokens.", Kind: "int"},
			{Key: "context_proxy.port", Label: "Port", Value: "4100", Saved: "4100", Default: "4100", Accepts: "an integer from 1 to 65535", Help: "The loopback port.", Restart: true, Kind: "int"},
			{Key: "context_proxy.log_level", Label: "Log level", Value: "debug", Default: "info", Accepts: "debug, info, warn or error", Help: "How much the service logs.", Env: "CONTEXT_PROXY_LOG_LEVEL", Kind: "string"},
			{Key: "context_store.ttl_days", Label: "Keep sessions", Value: "30", Default: "30", Accepts: "an integer of at least 1", Help: "Days an idle session is kept.", Kind: "int"},
			{Key: "compaction.keep_thinking", Label: "Keep thinking", Value: "true", Default: "true", Accepts: "true or false", Help: "Keep thinking blocks.", Kind: "bool"},
		},
	}}
	c.recompute()
	return c
}

// recompute applies the effective rule: !paused && (mode == on || mode == follow && master).
func (c *fakeControl) recompute() {
	for i := range c.st.Agents {
		a := &c.st.Agents[i]
		switch {
		case c.st.Paused:
			a.Trimming, a.Why = false, "off: paused"
		case a.Mode == ModeOn:
			a.Trimming, a.Why = true, "on (saved)"
		case a.Mode == ModeOff:
			a.Trimming, a.Why = false, "off (saved)"
		default:
			a.Trimming, a.Why = c.st.Master, "follows the master switch"
		}
	}
}

func (c *fakeControl) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Agents = append([]AgentSwitch(nil), c.st.Agents...)
	st.Settings = append([]Setting(nil), c.st.Settings...)
	return st
}

func (c *fakeControl) change(call string, f func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	if c.failSet != nil {
		return c.failSet
	}
	f()
	c.recompute()
	c.st.Revision++
	for _, ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

func (c *fakeControl) SetAgent(agent string, mode Mode) error {
	return c.change("agent "+agent+"="+string(mode), func() {
		for i := range c.st.Agents {
			if c.st.Agents[i].Agent == agent {
				c.st.Agents[i].Mode = mode
			}
		}
	})
}

func (c *fakeControl) SetMaster(on bool) error {
	return c.change(fmt.Sprintf("master=%v", on), func() { c.st.Master = on })
}

func (c *fakeControl) SetPaused(p bool) error {
	return c.change(fmt.Sprintf("paused=%v", p), func() { c.st.Paused = p })
}

func (c *fakeControl) SaveSettings(values map[string]string) error {
	c.mu.Lock()
	invalid := c.invalid
	c.mu.Unlock()
	if len(invalid) > 0 {
		return &SettingsError{Fields: invalid}
	}
	return c.change("settings", func() {
		c.saved = append(c.saved, values)
		for i := range c.st.Settings {
			s := &c.st.Settings[i]
			if v, ok := values[s.Key]; ok {
				s.Saved = v
				s.Value = v
				if v == "" {
					s.Value = s.Default
				}
			}
		}
	})
}

func (c *fakeControl) Changed(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs = append(c.subs, ch)
	c.mu.Unlock()
	return ch
}

func (c *fakeControl) lastCall() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		return ""
	}
	return c.calls[len(c.calls)-1]
}

// harness is a Server over a real store in a temp dir, mounted on a chi router.
type harness struct {
	t    testing.TB
	root *store.Root
	ctl  *fakeControl
	srv  *Server
	h    http.Handler
	now  time.Time
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	root := storetest.OpenRoot(t)
	now := time.Now().UTC().Truncate(time.Second)
	ctl := newFakeControl(now)
	srv := New(Options{Root: root, Control: ctl, APIToken: testToken, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	r := chi.NewRouter()
	srv.Mount(r)
	return &harness{t: t, root: root, ctl: ctl, srv: srv, h: r, now: now}
}

// do serves one request; header may be nil.
func (h *harness) do(method, target string, body string, header http.Header) *httptest.ResponseRecorder {
	h.t.Helper()
	req := httptest.NewRequest(method, "http://"+testHost+target, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, req)
	return w
}

func (h *harness) get(target string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do("GET", target, "", nil)
}

// htmx sends a GET as htmx does.
func (h *harness) htmx(target string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do("GET", target, "", http.Header{"Hx-Request": {"true"}, "Sec-Fetch-Site": {"same-origin"}})
}

// post sends a same-origin form post the way the page's form does: csrf in the form.
func (h *harness) post(target string, form url.Values, header http.Header) *httptest.ResponseRecorder {
	h.t.Helper()
	hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://" + testHost}}
	for k, v := range header {
		hdr[k] = v
	}
	return h.do("POST", target, form.Encode(), hdr)
}

// api sends an /api request with the bearer token, as the CLI does.
func (h *harness) api(method, target, body string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do(method, target, body, http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"}})
}

// doc parses an HTML answer, failing on a status other than want.
func doc(t testing.TB, w *httptest.ResponseRecorder, want int) *goquery.Document {
	t.Helper()
	if w.Code != want {
		t.Fatalf("status %d, want %d; body:\n%.2000s", w.Code, want, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want text/html", ct)
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	checkCSPClean(t, d)
	return d
}

// checkCSPClean fails on markup the CSP would refuse: inline scripts, style elements or
// attributes, inline event handlers, hx-on.
func checkCSPClean(t testing.TB, d *goquery.Document) {
	t.Helper()
	d.Find("script").Each(func(_ int, s *goquery.Selection) {
		if src, _ := s.Attr("src"); src == "" || strings.TrimSpace(s.Text()) != "" {
			t.Errorf("inline script: %s", outer(s))
		}
	})
	if n := d.Find("style").Length(); n > 0 {
		t.Errorf("%d <style> elements", n)
	}
	d.Find("*").Each(func(_ int, s *goquery.Selection) {
		for _, a := range s.Nodes[0].Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") || strings.HasPrefix(a.Key, "hx-on") {
				t.Errorf("attribute %s not allowed under the CSP: %s", a.Key, outer(s))
			}
			if (a.Key == "href" || a.Key == "src" || a.Key == "action" || a.Key == "hx-get" || a.Key == "hx-post") &&
				(strings.Contains(a.Val, "://") && !strings.HasPrefix(a.Val, "http://"+testHost)) {
				t.Errorf("%s points off this origin: %q", a.Key, a.Val)
			}
		}
	})
}

func outer(s *goquery.Selection) string {
	h, _ := goquery.OuterHtml(s)
	if len(h) > 300 {
		h = h[:300] + "…"
	}
	return h
}

// testID selects by data-testid.
func testID(id string) string { return `[data-testid="` + id + `"]` }

// one returns the single element with data-testid id, failing when there is not exactly one.
func one(t testing.TB, d *goquery.Document, id string) *goquery.Selection {
	t.Helper()
	s := d.Find(testID(id))
	if s.Length() != 1 {
		t.Fatalf("%d elements with data-testid=%q, want 1", s.Length(), id)
	}
	return s
}

func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

func i64p(n int64) *int64 { return &n }

// rowSpec is one message row of a seeded session.
type rowSpec struct {
	role, kind, name, text string
	in                     bool
	cutAt                  int // index (from 0) of the row whose fingerprint cut this one; -1 none
	blob                   bool
}

// seedSession writes rows (in one chain: one thread) and events to sid, and registers it
// with agent and cwd when agent is not "".
func seedSession(t testing.TB, root *store.Root, sid, agent, cwd string, rows []rowSpec, events ...store.Event) []store.RowWrite {
	t.Helper()
	seed := storetest.Seed{SID: sid, Events: events}
	if agent != "" {
		seed.Agent, seed.Cwd = agent, cwd
	}
	for _, r := range rows {
		seed.Rows = append(seed.Rows, storetest.Row{Role: r.role, Kind: r.kind, Name: r.name, Text: r.text, Trimmed: !r.in, Blob: r.blob, CutBy: r.cutAt + 1})
	}
	return storetest.SeedSession(t, root, seed)
}

// textRows makes n alternating user/assistant text rows, all in context.
func textRows(n int, format string) []rowSpec {
	var rows []rowSpec
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		rows = append(rows, rowSpec{role: role, kind: "text", text: fmt.Sprintf(format, i+1), in: true, cutAt: -1})
	}
	return rows
}
