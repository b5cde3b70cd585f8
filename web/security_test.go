package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/smarter-compact/smarter-compact/assets"
)

// checkSecurityHeaders fails unless the answer carries the contract's headers.
func checkSecurityHeaders(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
		"X-Frame-Options":         "DENY",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

// TestSecurity is the middleware table (STYLE.md; safeweb/http_test.go style): every
// state-changing request without the same origin and the CSRF token is refused, every /api
// request without the bearer token or from a browser is refused, and the allowed requests
// next to them pass, so a refusal for the wrong reason would show.
func TestSecurity(t *testing.T) {
	h := newHarness(t)
	good := "csrf=" + h.srv.csrf + "&paused=true"
	form := "application/x-www-form-urlencoded"
	bearer := "Bearer " + testToken
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		want                     int
		msg                      string // in the answer
		skip                     string
	}{
		{name: "foreign Host", skip: "the Host check (DNS rebinding) is app's checkHost around Mount: app/routes_test.go TestRoutesHostCheck covers /, /ui and /api"},

		{"same-origin form post with the token", "POST", "/ui/pause", good, http.Header{"Content-Type": {form}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://" + testHost}}, 303, "", ""},
		{"htmx post with the token header", "POST", "/ui/pause", "paused=false", http.Header{"Content-Type": {form}, "Sec-Fetch-Site": {"same-origin"}, "X-Csrf-Token": {h.srv.csrf}, "Hx-Request": {"true"}}, 200, "", ""},
		{"cross-site post (Sec-Fetch-Site)", "POST", "/ui/pause", good, http.Header{"Content-Type": {form}, "Sec-Fetch-Site": {"cross-site"}}, 403, "cross-origin request refused", ""},
		{"same-site post (another port or subdomain)", "POST", "/ui/agents/codex", "csrf=" + h.srv.csrf + "&mode=on", http.Header{"Content-Type": {form}, "Sec-Fetch-Site": {"same-site"}}, 403, "cross-origin request refused", ""},
		{"Origin mismatch, no Sec-Fetch-Site", "POST", "/ui/master", "csrf=" + h.srv.csrf + "&enabled=false", http.Header{"Content-Type": {form}, "Origin": {"http://evil.example"}}, 403, "cross-origin request refused", ""},
		{"Origin of another port", "POST", "/ui/settings", "csrf=" + h.srv.csrf, http.Header{"Content-Type": {form}, "Origin": {"http://127.0.0.1:9999"}}, 403, "cross-origin request refused", ""},
		{"missing CSRF token, same origin", "POST", "/ui/pause", "paused=true", http.Header{"Content-Type": {form}, "Sec-Fetch-Site": {"same-origin"}}, 403, "carries no CSRF token", ""},
		{"missing CSRF token, no browser headers", "POST", "/ui/agents/codex", "mode=off", http.Header{"Content-Type": {form}}, 403, "carries no CSRF token", ""},
		{"missing CSRF token on settings", "POST", "/ui/settings", "context_proxy.port=1", http.Header{"Content-Type": {form}}, 403, "carries no CSRF token", ""},
		{"missing CSRF token on master", "POST", "/ui/master", "enabled=false", http.Header{"Content-Type": {form}}, 403, "carries no CSRF token", ""},
		{"CSRF token in the query string only", "POST", "/ui/pause?csrf=" + h.srv.csrf, "paused=true", http.Header{"Content-Type": {form}}, 403, "carries no CSRF token", ""},
		{"wrong CSRF token", "POST", "/ui/pause", "csrf=" + strings.Repeat("0", 64) + "&paused=true", http.Header{"Content-Type": {form}, "Sec-Fetch-Site": {"same-origin"}}, 403, "does not match", ""},
		{"wrong CSRF header", "POST", "/ui/pause", "paused=true", http.Header{"Content-Type": {form}, "X-Csrf-Token": {"x"}}, 403, "does not match", ""},
		{"GET on a state-changing route", "GET", "/ui/pause?paused=true", "", nil, 405, "/ui/pause does not take GET: it takes POST", ""},
		{"no such page", "GET", "/ui/nowhere", "", nil, 404, "the dashboard is at /", ""},
		{"no such API route", "GET", "/api/nowhere", "", http.Header{"Authorization": {bearer}}, 404, `"error":"smarter-compact: nothing is served at /api/nowhere`, ""},
		{"POST on a page", "POST", "/ui/sessions", "", nil, 405, "it takes GET", ""},

		{"api with the token", "GET", "/api/agents", "", http.Header{"Authorization": {bearer}}, 200, `"agents"`, ""},
		{"api, user-typed navigation (Sec-Fetch-Site none)", "GET", "/api/status", "", http.Header{"Authorization": {bearer}, "Sec-Fetch-Site": {"none"}}, 200, `"version"`, ""},
		{"api without bearer", "GET", "/api/status", "", nil, 401, "Authorization: Bearer", ""},
		{"api post without bearer", "POST", "/api/pause", `{"paused":true}`, http.Header{"Content-Type": {"application/json"}}, 401, "Authorization: Bearer", ""},
		{"api wrong bearer", "GET", "/api/agents", "", http.Header{"Authorization": {"Bearer nope"}}, 401, "does not match", ""},
		{"api token as Basic", "GET", "/api/agents", "", http.Header{"Authorization": {"Basic " + testToken}}, 401, "Authorization: Bearer", ""},
		{"api from a page (Origin)", "POST", "/api/pause", `{"paused":true}`, http.Header{"Authorization": {bearer}, "Content-Type": {"application/json"}, "Origin": {"http://" + testHost}}, 403, "browser requests are refused", ""},
		{"api from a page (Sec-Fetch-Site same-origin)", "GET", "/api/status", "", http.Header{"Authorization": {bearer}, "Sec-Fetch-Site": {"same-origin"}}, 403, "browser requests are refused", ""},
		{"api cross-site", "POST", "/api/agents/codex", `{"mode":"off"}`, http.Header{"Authorization": {bearer}, "Content-Type": {"application/json"}, "Sec-Fetch-Site": {"cross-site"}}, 403, "browser requests are refused", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip != "" {
				t.Skip(tt.skip)
			}
			before := h.ctl.State().Revision
			w := h.do(tt.method, tt.path, tt.body, tt.header)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d; body %.300q", w.Code, tt.want, w.Body)
			}
			checkSecurityHeaders(t, w) // the router's own 404 and 405 answers too
			if w.Code == http.StatusMethodNotAllowed && len(w.Header().Values("Allow")) == 0 {
				t.Error("405 without an Allow header")
			}
			if tt.msg != "" && !strings.Contains(w.Body.String(), tt.msg) {
				t.Errorf("answer %.400q does not say %q", w.Body, tt.msg)
			}
			if changed := h.ctl.State().Revision != before; w.Code >= 400 && changed {
				t.Error("a refused request changed the state")
			}
			if w.Code == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer (%q)", w.Header().Get("WWW-Authenticate"))
			}
		})
	}

	// A server without a token refuses the API rather than opening it.
	open := New(Options{Root: h.root, Control: h.ctl, Log: slog.New(slog.DiscardHandler)})
	r := chi.NewRouter()
	open.Mount(r)
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		req := httptest.NewRequest("GET", "http://"+testHost+"/api/status", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("no token configured, Authorization %q: status %d, want 503", auth, w.Code)
		}
	}
	if equalSecret("", "") {
		t.Error("equalSecret accepts an empty secret")
	}
}

// routesHarness is a harness with something behind every page and fragment route: the long
// session ses-long (seedLong) and a blob, whose id it returns.
func routesHarness(t *testing.T) (*harness, string) {
	t.Helper()
	h := newHarness(t)
	seedLong(t, h, "ses-long")
	id, err := h.root.WriteBlob("blob text")
	if err != nil {
		t.Fatal(err)
	}
	return h, id
}

// TestPagesSecurityHeaders checks every page and fragment route for the headers.
func TestPagesSecurityHeaders(t *testing.T) {
	h, id := routesHarness(t)
	for _, path := range []string{"/", "/ui/live?rev=0", "/ui/sessions", "/ui/sessions/ses-long", "/ui/blobs/" + id,
		"/ui/search?q=long", "/ui/settings", "/ui/sessions/missing"} {
		w := h.get(path)
		if w.Code >= 500 {
			t.Errorf("%s: %d", path, w.Code)
		}
		checkSecurityHeaders(t, w)
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", path, got)
		}
	}
}

func TestStatic(t *testing.T) {
	h := newHarness(t)
	want, err := io.ReadAll(must(assets.Web().Open("htmx.min.js")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, ctype string }{
		{"htmx.min.js", "javascript"}, {"app.css", "text/css"}, {"favicon.svg", "image/svg+xml"}, {"htmx-LICENSE.txt", "text/plain"},
	} {
		w := h.get("/ui/static/" + c.name + "?v=" + h.srv.assetV)
		if w.Code != 200 || !strings.Contains(w.Header().Get("Content-Type"), c.ctype) {
			t.Errorf("%s: %d %q", c.name, w.Code, w.Header().Get("Content-Type"))
		}
		checkSecurityHeaders(t, w)
		if c.name == "htmx.min.js" && w.Body.String() != string(want) {
			t.Error("htmx.min.js differs from the embedded file")
		}
	}
	if !strings.Contains(h.get("/ui/static/htmx.min.js").Body.String(), `version:"2.0.11"`) {
		t.Error("the vendored htmx is not 2.0.11")
	}
	if w := h.get("/ui/static/"); w.Code != 404 {
		t.Errorf("directory listing: %d", w.Code)
	}
	if w := h.get("/ui/static/nothing.js"); w.Code != 404 {
		t.Errorf("missing file: %d", w.Code)
	}
	// The page references the files with the version query that changes with them.
	d := doc(t, h.get("/ui/settings"), 200)
	if src := d.Find("script").AttrOr("src", ""); src != "/ui/static/htmx.min.js?v="+h.srv.assetV {
		t.Errorf("script src %q", src)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestResourceIsolation is the fetch-metadata table of the dashboard's GETs: another site
// may link to the overview (a top-level navigation to /) and nothing else; it cannot embed a
// page, a fragment, a search or a static file (an <img src=".../ui/search?pattern=…"> timing
// slow searches), nor navigate a frame to it. Requests without browser headers, typed or
// bookmarked ones (none) and the dashboard's own (same-origin) pass.
func TestResourceIsolation(t *testing.T) {
	h, id := routesHarness(t)
	hdr := func(site, mode, dest string) http.Header {
		return http.Header{"Sec-Fetch-Site": {site}, "Sec-Fetch-Mode": {mode}, "Sec-Fetch-Dest": {dest}}
	}
	paths := []string{"/", "/ui/live?rev=0", "/ui/sessions", "/ui/sessions/ses-long", "/ui/blobs/" + id,
		"/ui/search?pattern=a.*b", "/ui/settings", "/ui/static/app.css"}
	tests := []struct {
		name   string
		method string
		paths  []string // nil: every path
		header http.Header
		allow  bool
	}{
		{"no browser headers (curl, the tests)", "GET", nil, nil, true},
		{"typed or bookmarked (none)", "GET", nil, hdr("none", "navigate", "document"), true},
		{"the dashboard itself (same-origin)", "GET", nil, hdr("same-origin", "cors", "empty"), true},
		{"the dashboard's own image (same-origin)", "GET", nil, hdr("same-origin", "no-cors", "image"), true},
		{"cross-site <img>", "GET", nil, hdr("cross-site", "no-cors", "image"), false},
		{"cross-site <script>", "GET", nil, hdr("cross-site", "no-cors", "script"), false},
		{"cross-site fetch", "GET", nil, hdr("cross-site", "cors", "empty"), false},
		{"cross-site HEAD", "HEAD", nil, hdr("cross-site", "no-cors", "image"), false},
		{"same-site <img> (another port)", "GET", nil, hdr("same-site", "no-cors", "image"), false},
		{"cross-site iframe", "GET", nil, hdr("cross-site", "navigate", "iframe"), false},
		{"cross-site link to the overview", "GET", []string{"/", "/?from=elsewhere"}, hdr("cross-site", "navigate", "document"), true},
		{"same-site link to the overview", "GET", []string{"/"}, hdr("same-site", "navigate", "document"), true},
		{"cross-site link deeper in", "GET", []string{"/ui/search?pattern=a.*b", "/ui/sessions/ses-long", "/ui/settings", "/ui/blobs/" + id}, hdr("cross-site", "navigate", "document"), false},
		{"same-site link deeper in", "GET", []string{"/ui/sessions"}, hdr("same-site", "navigate", "document"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := tt.paths
			if ps == nil {
				ps = paths
			}
			for _, p := range ps {
				w := h.do(tt.method, p, "", tt.header)
				switch {
				case tt.allow && w.Code == http.StatusForbidden:
					t.Errorf("%s %s: refused (%.200q)", tt.method, p, w.Body)
				case tt.allow && w.Code >= 400:
					t.Errorf("%s %s: %d", tt.method, p, w.Code)
				case !tt.allow && w.Code != http.StatusForbidden:
					t.Errorf("%s %s: %d, want 403", tt.method, p, w.Code)
				case !tt.allow && tt.method == "GET" && !strings.Contains(w.Body.String(), "open the dashboard directly at http://"+testHost+"/"):
					t.Errorf("%s %s: the refusal does not say what to do: %.300q", tt.method, p, w.Body)
				}
				checkSecurityHeaders(t, w)
			}
		})
	}
}

// TestHead: a HEAD is answered where a GET is (curl -I, uptime checks), not 405.
func TestHead(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/", "/ui/sessions", "/ui/settings", "/ui/static/app.css"} {
		if w := h.do("HEAD", p, "", nil); w.Code != http.StatusOK {
			t.Errorf("HEAD %s: %d", p, w.Code)
		}
	}
	if w := h.do("HEAD", "/api/status", "", http.Header{"Authorization": {"Bearer " + testToken}}); w.Code != http.StatusOK {
		t.Errorf("HEAD /api/status: %d", w.Code)
	}
	w := h.do("PUT", "/", "", nil)
	if w.Code != http.StatusMethodNotAllowed || !slices.Contains(w.Header().Values("Allow"), "HEAD") {
		t.Errorf("PUT /: %d, Allow %q; want 405 listing HEAD", w.Code, w.Header().Values("Allow"))
	}
}

// TestBodyLimits: a form or an /api body over its limit is 413, not a misleading 400 or 403.
func TestBodyLimits(t *testing.T) {
	h := newHarness(t)
	big := "csrf=" + h.srv.csrf + "&context_store.ttl_days=" + strings.Repeat("9", uiBodyLimit)
	w := h.do("POST", "/ui/settings", big, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}})
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "over 64 KiB") {
		t.Errorf("oversized form: %d %.300q", w.Code, w.Body)
	}
	w = h.api("POST", "/api/pause", `{"paused":true,"x":"`+strings.Repeat("x", apiBodyLimit)+`"}`)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized API body: %d %s", w.Code, w.Body)
	}
	if len(h.ctl.calls) != 0 {
		t.Errorf("an oversized request reached Control: %v", h.ctl.calls)
	}
}
