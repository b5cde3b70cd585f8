package web

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// CheckHost refuses a request whose Host header is not a loopback name with our port:
// 127.0.0.1:PORT, localhost:PORT or [::1]:PORT. Binding to loopback is not enough: a web page
// on a domain that resolves to 127.0.0.1 (DNS rebinding) reaches the listener with its own
// Host (STYLE.md "What not to do"; syncthing's localhostMiddleware, caddy's checkHost).
func CheckHost(port int, log *slog.Logger) func(http.Handler) http.Handler {
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

// RefuseBrowsers refuses browser requests on the model-API and MCP routes:
// agents and the CLI never send an Origin header or a Sec-Fetch-Site other than "none"; web
// pages do (DESIGN.md §5). Without this, a page the user visits could write into the context
// store, send requests upstream through the proxy or call the recall tools. (/api has its own
// check, in middleware.go.)
func RefuseBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site, hasSite := r.Header["Sec-Fetch-Site"]
		_, hasOrigin := r.Header["Origin"]
		if hasOrigin || (hasSite && !(len(site) == 1 && site[0] == "none")) {
			http.Error(w, "smarter-compact: browser requests are refused on model-API and MCP routes: point a coding agent here, not a web page", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
