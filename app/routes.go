package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
)

// routes is the route table of the one loopback listener (DESIGN.md §5). models serves the
// model-API routes (the proxy), recall the MCP tools over streamable HTTP, and /api the
// control API of the CLI and the tray on the runtime toggles. Nothing here wraps the
// ResponseWriter, so Flush and Unwrap reach the proxy's SSE streams untouched.
func routes(port int, models, recall http.Handler, tg *toggles, log *slog.Logger) http.Handler {
	r := chi.NewRouter()
	r.Use(checkHost(port, log))
	r.Get("/healthz", healthz)
	r.With(refuseBrowsers).Handle("/mcp", recall)
	r.Group(func(r chi.Router) {
		r.Use(refuseBrowsers)
		api := controlAPI{toggles: tg, log: log}
		r.Get("/api/agents", api.handle(api.agents))
		r.Post("/api/agents/{agent}", api.handle(api.setAgent))
	})
	r.Group(func(r chi.Router) {
		r.Use(refuseBrowsers)
		r.Handle("/claude-code/*", models)
		r.Handle("/codex/*", models)
		r.Handle("/opencode/*", models)
		r.Handle("/v1/*", models)
		r.Handle("/backend-api/codex/*", models)
	})
	return r
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// checkHost refuses a request whose Host header is not a loopback name with our port:
// 127.0.0.1:PORT, localhost:PORT or [::1]:PORT. Binding to loopback is not enough: a web page
// on a domain that resolves to 127.0.0.1 (DNS rebinding) reaches the listener with its own
// Host (STYLE.md "What not to do"; syncthing's localhostMiddleware, caddy's checkHost).
func checkHost(port int, log *slog.Logger) func(http.Handler) http.Handler {
	want := strconv.Itoa(port)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !loopbackHost(r.Host, want) {
				log.Warn("refused request with a foreign Host header", "host", r.Host, "path", r.URL.Path)
				http.Error(w, fmt.Sprintf("smarter-compact: Host %q is not allowed (DNS rebinding protection): use http://127.0.0.1:%d", r.Host, port), http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// loopbackHost reports whether hostport names this machine's loopback with port. A Host
// without a port means 80.
func loopbackHost(hostport, port string) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
	}
	if p != port {
		return false
	}
	switch strings.ToLower(host) {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}

// refuseBrowsers refuses browser requests on the model-API, MCP and control API routes:
// agents and the CLI never send an Origin header or a Sec-Fetch-Site other than "none"; web
// pages do (DESIGN.md §5). Without this, a page the user visits could write into the context
// store, send requests upstream through the proxy, call the recall tools or flip a toggle.
func refuseBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site, hasSite := r.Header["Sec-Fetch-Site"]
		_, hasOrigin := r.Header["Origin"]
		if hasOrigin || (hasSite && !(len(site) == 1 && site[0] == "none")) {
			http.Error(w, "smarter-compact: browser requests are refused on model-API, MCP and control API routes: point a coding agent or the CLI here, not a web page", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// apiBodyLimit bounds a control API request body; {"enabled":true} is 16 bytes.
const apiBodyLimit = 4 << 10

// controlAPI is the JSON control API under /api (DESIGN.md §5): the CLI's `on` and `off` and
// the tray flip the runtime toggles here. It is as guarded as the model routes (Host check,
// browsers refused) and takes JSON bodies only, so a cross-site form cannot post one.
type controlAPI struct {
	toggles *toggles
	log     *slog.Logger
}

// apiError is an error with the status and the message a client may see.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// handle adapts an API handler that returns an error: an *apiError goes to the client as
// {"error": msg} with its status; any other error is logged and answered 500.
func (a controlAPI) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) {
			a.log.Error("control API", "path", r.URL.Path, "err", err)
			ae = &apiError{http.StatusInternalServerError, "smarter-compact: internal error (see the service log)"}
		}
		writeAPIJSON(w, ae.status, map[string]string{"error": ae.msg})
	}
}

// agentState is one agent's toggle, the answer of POST /api/agents/{agent}.
type agentState struct {
	Agent   string `json:"agent"`
	Enabled bool   `json:"enabled"`
}

// agents answers GET /api/agents: every agent's toggle, in display order, unknown last.
func (a controlAPI) agents(w http.ResponseWriter, _ *http.Request) error {
	var out struct {
		Agents []agentState `json:"agents"`
	}
	for _, agent := range append(slices.Clone(configuredAgents), agentUnknown) {
		out.Agents = append(out.Agents, agentState{agent, a.toggles.Enabled(agent)})
	}
	writeAPIJSON(w, http.StatusOK, out)
	return nil
}

// setAgent answers POST /api/agents/{agent} with {"enabled": bool}: it sets the toggle (the
// next request of that agent follows it) and returns the new state. It changes nothing on
// disk: `smarter-compact on|off` saves config.toml itself.
func (a controlAPI) setAgent(w http.ResponseWriter, r *http.Request) error {
	agent := chi.URLParam(r, "agent")
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &apiError{http.StatusUnsupportedMediaType, `smarter-compact: send Content-Type: application/json and {"enabled": true|false}`}
	}
	var body struct {
		Enabled *bool `json:"enabled"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, apiBodyLimit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Enabled == nil || dec.More() {
		return &apiError{http.StatusBadRequest, `smarter-compact: the body must be {"enabled": true|false}`}
	}
	if err := a.toggles.Set(agent, *body.Enabled); err != nil {
		return &apiError{http.StatusNotFound, "smarter-compact: " + err.Error()}
	}
	a.log.Info("trimming switched", "agent", agent, "enabled", *body.Enabled)
	writeAPIJSON(w, http.StatusOK, agentState{agent, a.toggles.Enabled(agent)})
	return nil
}

func writeAPIJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = writeJSONLine(w, v)
}
