package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Security headers of every dashboard and API response (STYLE.md; style anchors row 10).
// The CSP allows nothing inline: htmx, the CSS and the charts come from this origin or are
// markup.
const contentSecurityPolicy = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// uiBodyLimit bounds a dashboard form post (the settings form is a few hundred bytes).
const uiBodyLimit = 64 << 10

// securityHeaders sets CSP, nosniff, the referrer and framing policies, and no-store
// (static files override Cache-Control with their own).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}

// setSecurityHeaders sets the headers securityHeaders adds; the router's 404 and 405
// answers, outside Mount's groups, call it directly.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// checkCSRF guards the state-changing dashboard requests twice: http.CrossOriginProtection
// refuses a browser's cross-site request (Sec-Fetch-Site, else Origin against Host), and the
// CSRF token, which only a page of this origin can read, must come in the X-CSRF-Token header
// (htmx, from hx-headers on <body>) or the csrf form field. The stdlib check lets requests
// without browser headers through as non-browser traffic; the token refuses them too.
func (s *Server) checkCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cop.Check(r); err != nil {
			s.log.Warn("refused a cross-origin request", "method", r.Method, "path", r.URL.Path,
				"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
			s.writeError(w, r, http.StatusForbidden, "cross-origin request refused: change settings from the dashboard itself (http://"+r.Host+"/)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, uiBodyLimit)
		if err := r.ParseForm(); err != nil {
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				s.writeError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is over %d KiB: use the dashboard's own forms", uiBodyLimit>>10))
				return
			}
			s.writeError(w, r, http.StatusBadRequest, "the form could not be read: reload the page and try again")
			return
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		switch {
		case got == "":
			s.writeError(w, r, http.StatusForbidden, "the request carries no CSRF token: use the dashboard's own forms (reload the page)")
			return
		case !equalSecret(got, s.csrf):
			s.writeError(w, r, http.StatusForbidden, "the CSRF token does not match this service (it changes when the service restarts): reload the page and try again")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isolateResources is a fetch-metadata resource isolation policy for the dashboard's pages,
// fragments and static files (GET and HEAD): another site must not embed or fetch them (an
// <img> or <script> pointing at /ui/search could time slow searches to learn what the store
// holds, or make the service read large blobs). A browser says where a request comes from in
// Sec-Fetch-Site: "same-origin" (the dashboard itself) and "none" (typed, a bookmark, the
// tray's Open dashboard) pass, as do requests without it (curl, the tests, old browsers).
// From another site ("cross-site", "same-site": another port or subdomain) only a top-level
// navigation to the overview at / passes (a link to the dashboard); everything else is
// refused with 403.
func (s *Server) isolateResources(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fetchAllowed(r) {
			next.ServeHTTP(w, r)
			return
		}
		level := slog.LevelDebug
		if now := s.now().Unix(); s.lastRefusal.Swap(now) < now-60 {
			level = slog.LevelWarn // at most once a minute: a page can send many
		}
		s.log.Log(r.Context(), level, "refused a cross-site request for a dashboard page", "method", r.Method,
			"path", truncate(r.URL.Path, 200), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"),
			"sec_fetch_mode", r.Header.Get("Sec-Fetch-Mode"), "sec_fetch_dest", r.Header.Get("Sec-Fetch-Dest"))
		s.writeError(w, r, http.StatusForbidden, "cross-site request refused: another site may only link to the dashboard's overview; open the dashboard directly at http://"+r.Host+"/ (type the address, or use the tray's Open dashboard)")
	})
}

// fetchAllowed is isolateResources' rule.
func fetchAllowed(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
		return true
	}
	return r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// refuseBrowsers refuses /api requests from web pages: the tray and the CLI never send an
// Origin header or a Sec-Fetch-Site other than "none"; browsers do (DESIGN.md §5).
func (s *Server) refuseBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site, hasSite := r.Header["Sec-Fetch-Site"]
		_, hasOrigin := r.Header["Origin"]
		if hasOrigin || (hasSite && !(len(site) == 1 && site[0] == "none")) {
			s.writeError(w, r, http.StatusForbidden, "browser requests are refused on /api: it serves the tray and the CLI; use the dashboard at /")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken checks Authorization: Bearer <API token> in constant time.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, got, _ := strings.Cut(auth, " ")
		switch {
		case s.token == "":
			s.writeError(w, r, http.StatusServiceUnavailable, "the control API has no token configured: restart the service (serve creates the api-token file)")
			return
		case auth == "" || !strings.EqualFold(scheme, "Bearer"):
			w.Header().Set("WWW-Authenticate", `Bearer realm="smarter-compact"`)
			s.writeError(w, r, http.StatusUnauthorized, "send Authorization: Bearer <token> with the token from the api-token file in the config directory")
			return
		case !equalSecret(strings.TrimSpace(got), s.token):
			w.Header().Set("WWW-Authenticate", `Bearer realm="smarter-compact", error="invalid_token"`)
			s.writeError(w, r, http.StatusUnauthorized, "the bearer token does not match the api-token file in the config directory")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// equalSecret compares two secrets in constant time; hashing first hides their lengths too.
func equalSecret(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && want != ""
}
