package web

import (
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
)

// Listener is the rest of the one loopback listener's route table (DESIGN.md §5), which
// Handler mounts beside the dashboard so that chi stays in this package: the health check,
// MCP over streamable HTTP at /mcp, and the model-API routes under each of ModelPrefixes
// (proxy.RoutePrefixes; each prefix ends in "/" and takes every path below it). Guard wraps
// every route (the caller's Host check); RefuseBrowsers wraps /mcp and the model routes.
type Listener struct {
	Guard          func(http.Handler) http.Handler
	RefuseBrowsers func(http.Handler) http.Handler
	Healthz        http.HandlerFunc // GET and HEAD /healthz
	MCP            http.Handler
	Models         http.Handler
	ModelPrefixes  []string
}

// Handler returns the listener's whole route table: l's routes and the dashboard (Mount).
// Nothing here wraps the ResponseWriter, so Flush and Unwrap reach the proxy's SSE streams.
func (s *Server) Handler(l Listener) http.Handler {
	r := chi.NewRouter()
	r.Use(l.Guard)
	r.Get("/healthz", l.Healthz)
	r.Head("/healthz", l.Healthz)
	r.With(l.RefuseBrowsers).Handle("/mcp", l.MCP)
	s.Mount(r)
	r.Group(func(r chi.Router) {
		r.Use(l.RefuseBrowsers)
		for _, prefix := range l.ModelPrefixes {
			r.Handle(prefix+"*", l.Models)
		}
	})
	return r
}

// Mount registers the dashboard and the control API on r (DESIGN.md §5, §9). The Host check
// (DNS rebinding) is the caller's: app mounts this inside its checkHost router.
//
// Mount also answers the router's 404 and 405 (chi's own answers, for any path, the model
// routes included): with the security headers and a line that says where to go.
func (s *Server) Mount(r chi.Router) {
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed(r))
	r.Group(func(r chi.Router) {
		r.Use(securityHeaders)
		r.Group(func(r chi.Router) {
			r.Use(s.isolateResources)
			// GET and HEAD: a HEAD is answered as the GET would be, without the body.
			get := func(pattern string, h http.HandlerFunc) {
				r.Get(pattern, h)
				r.Head(pattern, h)
			}
			get("/", s.handle(s.overview))
			get("/ui/live", s.handle(s.live))
			get("/ui/sessions", s.handle(s.sessions))
			get("/ui/sessions/{sid}", s.handle(s.session))
			get("/ui/blobs/{id}", s.handle(s.blob))
			get("/ui/search", s.handle(s.search))
			get("/ui/stats", s.handle(s.recallStats))
			get("/ui/settings", s.handle(s.settings))
			get("/ui/wire", s.handle(s.wire))
			get("/ui/static/*", s.serveStatic)
		})
		r.Group(func(r chi.Router) {
			r.Use(s.checkCSRF)
			r.Post("/ui/agents/{agent}", s.handle(s.setAgent))
			r.Post("/ui/master", s.handle(s.setMaster))
			r.Post("/ui/pause", s.handle(s.setPaused))
			r.Post("/ui/settings", s.handle(s.saveSettings))
			r.Post("/ui/wire/install", s.handle(s.wireAction("install")))
			r.Post("/ui/wire/uninstall", s.handle(s.wireAction("uninstall")))
		})
	})
	r.Group(func(r chi.Router) {
		r.Use(securityHeaders, s.refuseBrowsers, s.requireToken)
		r.Get("/api/status", s.handle(s.apiStatus))
		r.Head("/api/status", s.handle(s.apiStatus))
		r.Get("/api/health", s.handle(s.apiHealth))
		r.Get("/api/agents", s.handle(s.apiAgents))
		r.Head("/api/agents", s.handle(s.apiAgents))
		r.Post("/api/agents/{agent}", s.handle(s.apiSetAgent))
		r.Post("/api/pause", s.handle(s.apiPause))
	})
}

// serveStatic serves assets.Web under /ui/static/. URLs carry ?v=<hash of the files>, so a
// browser may keep them for a day.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		http.NotFound(w, r) // no directory listings
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=86400")
	http.StripPrefix("/ui/static/", http.FileServerFS(s.static)).ServeHTTP(w, r)
}

// notFound answers a path no route serves: JSON under /api/, one line of text elsewhere.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	msg := "smarter-compact: nothing is served at " + truncate(r.URL.Path, 200) + ": the dashboard is at /"
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": msg + "; the control API serves /api/status, /api/agents and /api/pause"})
		return
	}
	plainText(w, http.StatusNotFound, msg)
}

// methodNotAllowed answers a method a path does not take, with the Allow header chi's own
// answer has (routes looked up in rt, the whole route table).
func (s *Server) methodNotAllowed(rt chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if rt.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		for _, m := range allowed {
			w.Header().Add("Allow", m)
		}
		msg := "smarter-compact: " + truncate(r.URL.Path, 200) + " does not take " + truncate(r.Method, 20)
		if len(allowed) > 0 {
			msg += ": it takes " + strings.Join(allowed, ", ")
		}
		if strings.HasPrefix(r.URL.Path, "/ui/") && slices.Contains(allowed, http.MethodPost) {
			msg += " (the dashboard's buttons and forms send it; open the dashboard at /)"
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": msg})
			return
		}
		plainText(w, http.StatusMethodNotAllowed, msg)
	}
}

// plainText answers one line of text.
func plainText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
